"""Data-dependent initialization of weight-normalized layers (Salimans & Kingma 2016): the
layers, the pass, the model's hook and the train step that assigns the values."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import validate_top_level
from open_seq2seq.data.text2text.text2text import ParallelTextDataLayer
from open_seq2seq.decoders.convs2s_decoder import ConvS2SDecoder
from open_seq2seq.distributed.backend import Backend
from open_seq2seq.encoders.convs2s_encoder import ConvS2SEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.losses import BasicSequenceLoss
from open_seq2seq.models.text2text import Text2Text
from open_seq2seq.parts import data_init
from open_seq2seq.parts.convs2s.conv_wn_layer import Conv1DNetworkNormalized, shifted_conv1d
from open_seq2seq.parts.convs2s.ffn_wn_layer import (FeedForwardNetworkNormalized,
                                                     NormalizedLayer)
from open_seq2seq.training.run_params import RUN_PARAMS
from open_seq2seq.training.train_step import TrainStep
from open_seq2seq.utils.params import validate_params
from tests.helpers.text import batch_of, random_tokens

SCALE = 0.1


def _inputs(seed=0, batch=4, time=9, channels=6):
  """Inputs far from zero mean and unit variance, with a padding mask whose padded
  positions hold huge values (they must not reach the statistics)."""
  rng = np.random.default_rng(seed)
  x = (3.0 + 5.0 * rng.standard_normal((batch, time, channels))).astype(np.float32)
  lengths = np.array([time, 5, 2, 7][:batch])
  mask = np.arange(time)[None, :] < lengths[:, None]
  x[~mask] = 1e4
  return tf.constant(x), tf.constant(mask)


def _masked_moments(y, mask):
  real = np.asarray(y)[np.asarray(mask)]
  return real.mean(axis=0), real.std(axis=0)


# data_init.recording(list) below: with one replica, the sum over replicas is the value itself


def _layers():
  return [FeedForwardNetworkNormalized(6, 5, data_init_scale=SCALE),
          Conv1DNetworkNormalized(6, 5, 3, causal=True, activation=None,
                                  data_init_scale=SCALE),
          Conv1DNetworkNormalized(6, 5, 3, causal=False, activation=None,
                                  data_init_scale=SCALE)]


@pytest.mark.parametrize("index", [0, 1, 2], ids=["linear", "causal_conv", "same_conv"])
def test_a_layer_starts_at_zero_mean_and_the_scale_over_real_positions(index):
  layer = _layers()[index]
  layer.build()
  x, mask = _inputs()
  with data_init.recording(list) as init:
    y = layer(x * tf.cast(mask, tf.float32)[..., None] if index else x, padding_mask=mask)
  mean, std = _masked_moments(y, mask)
  np.testing.assert_allclose(mean, 0.0, atol=1e-4)
  np.testing.assert_allclose(std, SCALE, rtol=1e-3)
  # Assigning the recorded values gives the same layer outside the pass.
  gain, bias = init.recorded(layer)
  layer.g.assign(gain)
  layer.b.assign(bias)
  again = layer(x * tf.cast(mask, tf.float32)[..., None] if index else x, padding_mask=mask)
  np.testing.assert_allclose(np.asarray(again)[np.asarray(mask)],
                             np.asarray(y)[np.asarray(mask)], rtol=1e-4, atol=1e-5)


def test_mixed_precision_measures_in_float32():
  layer = Conv1DNetworkNormalized(6, 5, 3, causal=True, data_init_scale=SCALE,
                                  dtype="mixed_bfloat16")  # GLU halves 10 channels
  layer.build()
  x, mask = _inputs()
  x = tf.cast(x * tf.cast(mask, tf.float32)[..., None], tf.bfloat16)
  with data_init.recording(list) as init:
    y = layer(x, padding_mask=mask)
  assert y.dtype == tf.bfloat16 and y.shape[-1] == 5
  gain, bias = init.recorded(layer)
  assert gain.dtype == bias.dtype == tf.float32 and gain.shape == (10,)
  layer.g.assign(gain)
  layer.b.assign(bias)
  before_glu = layer.normalize(
      tf.cast(shifted_conv1d(tf.cast(x, tf.float32), layer.kernel, True), tf.bfloat16))
  mean, std = _masked_moments(tf.cast(before_glu, tf.float32), mask)
  np.testing.assert_allclose(mean, 0.0, atol=0.02 * SCALE)  # bfloat16 keeps ~3 digits
  np.testing.assert_allclose(std, SCALE, rtol=0.02)


def test_moments_are_masked_and_summed_by_replica_sum():
  x, mask = _inputs(seed=3)
  calls = []

  def doubled(values):  # as if a second replica held the same batch
    calls.append(len(values))
    return [2.0 * v for v in values]

  mean, variance = data_init.InitPass(doubled).moments(x, mask)
  expected_mean, expected_std = _masked_moments(x, mask)
  np.testing.assert_allclose(mean, expected_mean, rtol=1e-5)
  np.testing.assert_allclose(np.sqrt(variance), expected_std, rtol=1e-4)
  assert calls == [3]  # sums, squares and count in one reduction


def test_layers_without_data_init_and_calls_outside_a_pass_are_untouched():
  plain = FeedForwardNetworkNormalized(6, 5)
  opted = FeedForwardNetworkNormalized(6, 5, data_init_scale=SCALE)
  x, mask = _inputs()
  before = [plain(x, padding_mask=mask), opted(x, padding_mask=mask)]
  with data_init.recording(list) as init:
    inside = plain(x, padding_mask=mask)
  np.testing.assert_array_equal(inside, before[0])
  assert init.recorded(plain) is None
  assert data_init.active() is None  # the pass ends with its block
  np.testing.assert_array_equal(opted(x, padding_mask=mask), before[1])


def test_a_layer_called_twice_records_once_and_reuses_its_values():
  layer = FeedForwardNetworkNormalized(6, 5, data_init_scale=SCALE)
  x, mask = _inputs()
  other, _ = _inputs(seed=1)
  with data_init.recording(list) as init:
    first = layer(x, padding_mask=mask)
    recorded = init.recorded(layer)
    second = layer(x, padding_mask=mask)
    layer(other, padding_mask=mask)
  assert init.recorded(layer) is recorded
  np.testing.assert_allclose(second, first, rtol=1e-5, atol=1e-5)


def test_data_init_needs_weight_norm():
  with pytest.raises(ValueError, match="weight_norm"):
    NormalizedLayer(4, "batch_norm", data_init_scale=SCALE)
  common = {"src_emb_size": 8, "conv_nchannels_kwidth": [(8, 3)]}
  with pytest.raises(ConfigError, match="weight_norm_init: 'data'.*normalization_type"):
    ConvS2SEncoder({**common, "weight_norm_init": "data", "normalization_type": "layer_norm"},
                   vocab_size=10)
  with pytest.raises(ConfigError, match="weight_norm_init_scale: must be positive"):
    ConvS2SEncoder({**common, "weight_norm_init_scale": 0.0}, vocab_size=10)
  with pytest.raises(ConfigError, match="weight_norm_init"):
    ConvS2SEncoder({**common, "weight_norm_init": "lsuv"}, vocab_size=10)


# ----------------------------------------------------------------------------- the model
VOCAB = ["a", "b", "c", "d", "e", "f", "g"]


def _model(tmp_path, weight_norm_init):
  def write(name, lines):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)

  vocab = write("vocab.txt", VOCAB)
  side = {"conv_nchannels_kwidth": [(16, 3), (24, 2)], "weight_norm_init": weight_norm_init,
          "embedding_dropout_keep_prob": 0.5, "hidden_dropout_keep_prob": 0.5}
  config = {
      "data_layer": ParallelTextDataLayer, "batch_size_per_gpu": 4,
      "data_layer_params": {"src_vocab_file": vocab, "tgt_vocab_file": vocab,
                            "source_file": write("s.txt", ["a b"]),
                            "target_file": write("t.txt", ["b a"])},
      "encoder": ConvS2SEncoder, "decoder": ConvS2SDecoder, "loss": BasicSequenceLoss,
      "encoder_params": {"src_emb_size": 12, "att_layer_num": 2, **side},
      "decoder_params": {"tgt_emb_size": 12, "out_dropout_keep_prob": 0.5, **side},
      "optimizer": "Adam", "optimizer_params": {}, "lr_policy": None,
  }
  return Text2Text(validate_top_level(Text2Text, config), mode="train")


def _batch(seed=0):
  rng = np.random.default_rng(seed)
  vocab = len(VOCAB) + 4
  return {"source_tensors": batch_of(random_tokens(rng, [7, 3, 5, 6], vocab), vocab),
          "target_tensors": batch_of(random_tokens(rng, [4, 6, 2, 5], vocab), vocab)}


def _train_step(model, batch):
  run = validate_params({}, RUN_PARAMS)  # the defaults: Adam, no lr policy
  step = TrainStep(model, run, Backend(), None, None,
                   count_units=lambda b: tf.reduce_sum(b["target_tensors"][1]))
  step.build(batch, is_chief=True)
  return step


def test_every_layer_starts_normalized_on_what_the_layers_below_give_it(tmp_path,
                                                                        monkeypatch):
  # Seeded: with an unlucky draw one channel's variance is small enough for the epsilon to
  # shrink it past the 1 % tolerance (seen once in ~10 unseeded runs).
  keras.utils.set_random_seed(1)
  model = _model(tmp_path, "data")
  batch = _batch()
  step = _train_step(model, batch)
  layers = model.data_init_layers()
  # encoder: 2 linear + 2 conv + 1 projection; decoder: the same + 2 x 2 attention
  # projections + the vocabulary projection
  assert len(layers) == 15
  assert step.initialize_from_data(batch) == 15

  seen = {}
  original = NormalizedLayer.normalize

  def probe(self, y, training=None, padding_mask=None):
    out = original(self, y, training, padding_mask)
    seen[id(self)] = _masked_moments(out, padding_mask)
    return out

  monkeypatch.setattr(NormalizedLayer, "normalize", probe)
  model.forward(batch, training=False)  # the trained path, with the assigned values
  assert set(seen) == {id(layer) for layer in layers}
  for mean, std in seen.values():
    np.testing.assert_allclose(mean, 0.0, atol=1e-4)
    # VARIANCE_EPSILON shrinks the channels of smallest variance a little
    np.testing.assert_allclose(std, SCALE, rtol=1e-2)


def test_without_data_init_nothing_runs(tmp_path):
  model = _model(tmp_path, "norm")
  batch = _batch()
  step = _train_step(model, batch)
  before = [v.numpy() for v in model.variables]
  assert model.data_init_layers() == []
  assert step.initialize_from_data(batch) == 0
  for old, variable in zip(before, model.variables):
    np.testing.assert_array_equal(old, variable.numpy())
