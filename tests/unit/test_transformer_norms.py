"""Transformer norm_params: the three norms against numpy, batch norm's padding-free statistics
and moving averages, mixed precision, and the config's checks."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import validate_top_level
from open_seq2seq.decoders import TransformerDecoder
from open_seq2seq.encoders import TransformerEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.models.model import Model
from open_seq2seq.parts.transformer import normalization
from open_seq2seq.parts.transformer.normalization import (NORM_FIELDS, LayerNormL1,
                                                          LayerNormL2, MaskedBatchNorm,
                                                          make_norm, masked_moments)
from tests.helpers import linear

GO, EOS, PAD = 2, 3, 0
SIZES = dict(hidden_size=16, num_heads=2, filter_size=32)
NO_DROPOUT = dict(attention_dropout=0.0, relu_dropout=0.0, layer_postprocess_dropout=0.0)
BN = {"type": "batch_norm", "momentum": 0.9, "epsilon": 1e-3}
# OpenSeq2Seq's transformer-bn.py norm_params, with the TF 1 regularizer renamed.
TRANSFORMER_BN = {"type": "batch_norm", "momentum": 0.95, "epsilon": 0.00001,
                  "center_scale": False, "regularizer": keras.regularizers.L2(0.0005)}


def built(norm_params, channels=6, dtype="float32"):
  layer = make_norm(norm_params, dtype=dtype)
  layer.build((None, channels))
  return layer


def random_affine(layer, rng):
  """Non-trivial gamma/beta, so the reference checks their use."""
  layer.gamma.assign(rng.normal(1.0, 0.3, layer.gamma.shape).astype(np.float32))
  layer.beta.assign(rng.normal(0.0, 0.3, layer.beta.shape).astype(np.float32))
  return layer.gamma.numpy().astype(np.float64), layer.beta.numpy().astype(np.float64)


def lengths_mask(lengths, width):
  return np.arange(width)[None, :] < np.asarray(lengths)[:, None]


# ----------------------------------------------------------------------------- numpy references
def test_layernorm_l2_matches_numpy():
  rng = np.random.default_rng(0)
  layer = built({})
  assert isinstance(layer, LayerNormL2) and layer.epsilon == 1e-6
  gamma, beta = random_affine(layer, rng)
  x = rng.normal(2.0, 3.0, (3, 5, 6))
  mean = x.mean(-1, keepdims=True)
  want = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-6) * gamma + beta
  np.testing.assert_allclose(layer(tf.constant(x, tf.float32)).numpy(), want, atol=1e-5)
  # It is Keras' layer norm itself: the default config's numbers do not change.
  keras_norm = keras.layers.LayerNormalization(epsilon=1e-6)
  keras_norm.build((None, 6))
  keras_norm.set_weights(layer.get_weights())
  x = tf.constant(x, tf.float32)
  np.testing.assert_array_equal(layer(x).numpy(), keras_norm(x).numpy())


def test_layernorm_l1_matches_numpy():
  rng = np.random.default_rng(1)
  layer = built({"type": "layernorm_L1", "epsilon": 1e-3})
  assert isinstance(layer, LayerNormL1)
  gamma, beta = random_affine(layer, rng)
  x = rng.normal(-1.0, 2.0, (2, 4, 6))
  centered = x - x.mean(-1, keepdims=True)
  want = centered / (np.abs(centered).mean(-1, keepdims=True) + 1e-3) * gamma + beta
  np.testing.assert_allclose(layer(tf.constant(x, tf.float32)).numpy(), want, atol=1e-5)
  # the L1 deviation, not the standard deviation
  assert np.abs(want - (centered / centered.std(-1, keepdims=True) * gamma + beta)).max() > 0.05


def test_batch_norm_matches_numpy_in_training_and_inference():
  rng = np.random.default_rng(2)
  layer = built(BN)
  assert isinstance(layer, MaskedBatchNorm)
  gamma, beta = random_affine(layer, rng)
  x = rng.normal(3.0, 2.0, (3, 5, 6))
  mask = lengths_mask([5, 2, 3], 5)
  real = x[mask]  # [positions, channels]
  mean, var = real.mean(0), real.var(0)
  out = layer(tf.constant(x, tf.float32), padding_mask=tf.constant(mask), training=True)
  want = (x - mean) / np.sqrt(var + 1e-3) * gamma + beta
  np.testing.assert_allclose(out.numpy(), want, atol=1e-4)
  # moving statistics: m <- 0.9 m + 0.1 batch value, from mean 0 / variance 1
  np.testing.assert_allclose(layer.moving_mean.numpy(), 0.1 * mean, rtol=1e-5)
  np.testing.assert_allclose(layer.moving_variance.numpy(), 0.9 + 0.1 * var, rtol=1e-5)
  # inference uses them and leaves them alone
  moving_mean, moving_var = layer.moving_mean.numpy(), layer.moving_variance.numpy()
  out = layer(tf.constant(x, tf.float32), training=False)
  want = (x - moving_mean) / np.sqrt(moving_var + 1e-3) * gamma + beta
  np.testing.assert_allclose(out.numpy(), want, atol=1e-4)
  np.testing.assert_array_equal(layer.moving_mean.numpy(), moving_mean)


def test_masked_statistics_equal_those_of_the_real_positions():
  rng = np.random.default_rng(3)
  x = rng.normal(0.0, 1.0, (2, 6, 4))
  x[0, 3:] += 50.0  # padding with values far from the real ones
  mask = lengths_mask([3, 6], 6)
  mean, var = masked_moments(tf.constant(x, tf.float32), tf.constant(mask))
  np.testing.assert_allclose(mean.numpy(), x[mask].mean(0), atol=1e-5)
  np.testing.assert_allclose(var.numpy(), x[mask].var(0), atol=1e-4)
  unmasked, _ = masked_moments(tf.constant(x, tf.float32), None)
  assert np.abs(unmasked.numpy() - x[mask].mean(0)).min() > 1.0  # the padding would count


def test_center_scale_and_regularizer():
  plain = built(TRANSFORMER_BN)
  assert [v.path.split("/")[-1] for v in plain.variables] == ["moving_mean", "moving_variance"]
  assert plain.trainable_variables == [] and plain.losses == []
  # TF 1's l2_regularizer(scale) spelling: scale * sum(w ** 2) / 2 over gamma and beta.
  regularized = built({"type": "batch_norm", "regularizer": keras.regularizers.L2,
                       "regularizer_params": {"scale": 0.5}}, channels=6)
  regularized.beta.assign(np.full(6, 2.0, np.float32))
  np.testing.assert_allclose(float(tf.add_n(regularized.losses)), 0.25 * (6 * 1.0 + 6 * 4.0))


# ----------------------------------------------------------------------------- in the stacks
def build(norm_params, placement="pre", dtype="float32"):
  params = {**SIZES, **NO_DROPOUT, "norm_params": norm_params, "norm_placement": placement}
  tf.random.set_seed(3)
  encoder = TransformerEncoder({"encoder_layers": 2, **params}, vocab_size=13, dtype=dtype)
  decoder = TransformerDecoder({"num_hidden_layers": 2, **params}, vocab_size=11, dtype=dtype)
  return encoder, decoder


def padded(rows, extra=0):
  width = max(len(r) for r in rows) + extra
  ids = np.full((len(rows), width), PAD, np.int32)
  for i, r in enumerate(rows):
    ids[i, :len(r)] = r
  return tf.constant(ids), tf.constant([len(r) for r in rows], tf.int32)


def forward(encoder, decoder, src, tgt, training):
  enc = encoder({"source_tensors": src}, training=training)
  dec = decoder({"encoder_output": enc, "target_tensors": tgt}, training=training)
  return enc["outputs"].numpy(), dec["logits"].numpy()


@pytest.mark.parametrize("placement", ["pre", "post"])
def test_batch_norm_stack_ignores_padding(placement):
  encoder, decoder = build(BN, placement)
  norms = [layer for layer in encoder._flatten_layers() if isinstance(layer, MaskedBatchNorm)]
  assert len(norms) == 2 * 2 + (placement == "pre")
  src_rows = [[5, 6, 7, EOS], [8, 9, 10, 11, 12, 4, EOS]]
  tgt_rows = [[4, 5, EOS], [6, 7, 8, 9, EOS]]
  src_len, tgt_len = [4, 7], [3, 5]
  src_mask, tgt_mask = lengths_mask(src_len, 7), lengths_mask(tgt_len, 5)
  for training in (True, False):
    enc_a, dec_a = forward(encoder, decoder, padded(src_rows), padded(tgt_rows), training)
    enc_b, dec_b = forward(encoder, decoder, padded(src_rows, 4), padded(tgt_rows, 3),
                           training)
    np.testing.assert_allclose(enc_b[:, :7][src_mask], enc_a[src_mask], atol=1e-5)
    np.testing.assert_allclose(dec_b[:, :5][tgt_mask], dec_a[tgt_mask], atol=1e-5)
  # In eval the moving statistics make an example independent of the rest of its batch.
  enc_one, dec_one = forward(encoder, decoder, padded(src_rows[:1]), padded(tgt_rows[:1]),
                             False)
  np.testing.assert_allclose(enc_a[0, :4], enc_one[0], atol=1e-5)
  np.testing.assert_allclose(dec_a[0, :3], dec_one[0], atol=1e-5)
  # ... while in training the batch statistics do depend on it (the test can fail).
  enc_one, _ = forward(encoder, decoder, padded(src_rows[:1]), padded(tgt_rows[:1]), True)
  enc_two, _ = forward(encoder, decoder, padded(src_rows), padded(tgt_rows), True)
  assert np.abs(enc_two[0, :4] - enc_one[0]).max() > 1e-3


@pytest.mark.parametrize("norm_params", [BN, {"type": "layernorm_L1"}, TRANSFORMER_BN])
def test_every_norm_decodes(norm_params):
  encoder, decoder = build(norm_params)
  decoder.params.update({"beam_size": 2, "extra_decode_length": 2})
  src = padded([[5, 6, EOS], [7, 8, 9, 10, EOS]])
  forward(encoder, decoder, src, padded([[4, EOS], [5, 6, EOS]]), True)  # moves statistics
  out = decoder({"encoder_output": encoder({"source_tensors": src})})
  assert out["outputs"].shape[0] == 2 and np.isfinite(out["scores"].numpy()).all()
  # and the causal mask still holds with moving statistics
  a = forward(encoder, decoder, src, padded([[4, 5, 6, EOS], [4, 5, 6, EOS]]), False)[1]
  b = forward(encoder, decoder, src, padded([[4, 5, 9, EOS], [4, 5, 9, EOS]]), False)[1]
  np.testing.assert_allclose(a[:, :3], b[:, :3], atol=1e-5)


def test_default_norm_params_keep_variable_paths():
  encoder, decoder = build({})
  paths = {v.path for v in encoder.variables + decoder.variables}
  assert "transformer_encoder/layer_0/self_attention_wrapper/layer_norm/gamma" in paths
  assert "transformer_encoder/output_normalization/beta" in paths
  assert "transformer_decoder/layer_1/encdec_attention_wrapper/layer_norm/gamma" in paths
  bn_encoder, _ = build(BN)
  assert "transformer_encoder/layer_0/ffn_wrapper/batch_norm/moving_mean" in {
      v.path for v in bn_encoder.variables}


# ----------------------------------------------------------------------------- training step
class NormEncoder(linear.AffineEncoder):
  """The linear test model with a batch norm in front of its affine map."""

  def build(self, input_shape=None):
    super().build(input_shape)
    self.norm = make_norm({"type": "batch_norm", "momentum": 0.75}, dtype=self.dtype_policy)
    self.norm.build((None, 2))

  def call(self, input_dict, training=None):
    x, lengths = input_dict["source_tensors"]
    x = self.norm(tf.cast(x, self.compute_dtype), training=training)
    return super().call({"source_tensors": (x, lengths)}, training=training)


def test_train_step_updates_moving_statistics():
  trainer, step = linear.built(encoder=NormEncoder)
  model = trainer.model
  norm = model.encoder.norm
  np.testing.assert_array_equal(norm.moving_mean.numpy(), [0.0, 0.0])
  step()
  # one traced update over the four rows of X: m = 0.25 * mean, v = 0.75 + 0.25 * var
  np.testing.assert_allclose(norm.moving_mean.numpy(), 0.25 * linear.X.mean(0), rtol=1e-6)
  np.testing.assert_allclose(norm.moving_variance.numpy(), 0.75 + 0.25 * linear.X.var(0),
                             rtol=1e-6)
  step()
  np.testing.assert_allclose(norm.moving_mean.numpy(), 0.4375 * linear.X.mean(0), rtol=1e-6)
  # not trained by the optimizer, but in the model's variables (so in its checkpoints)
  assert not any(v is norm.moving_mean for v in trainer.step.variables)
  assert any(v is norm.moving_mean for v in model.variables)


# ----------------------------------------------------------------------------- precision
@pytest.mark.parametrize("norm_params", [{}, {"type": "layernorm_L1"}, BN])
def test_mixed_bfloat16_keeps_float32_statistics(norm_params):
  rng = np.random.default_rng(4)
  layer = built(norm_params, dtype="mixed_bfloat16")
  assert all(v.dtype == "float32" for v in layer.variables)
  # large offset: bfloat16 sums of these values would be off by far more than float32's
  x = tf.cast(tf.constant(rng.normal(100.0, 1.0, (4, 16, 6)), tf.float32), tf.bfloat16)
  out = layer(x, training=True)
  assert out.dtype == tf.bfloat16
  x64 = tf.cast(x, tf.float64).numpy()
  if isinstance(layer, MaskedBatchNorm):
    np.testing.assert_allclose(layer.moving_mean.numpy(), 0.1 * x64.mean((0, 1)), rtol=1e-6)
    np.testing.assert_allclose(layer.moving_variance.numpy(), 0.9 + 0.1 * x64.var((0, 1)),
                               rtol=1e-5)
    return
  centered = x64 - x64.mean(-1, keepdims=True)
  scale = (np.abs(centered).mean(-1, keepdims=True) + 1e-6 if isinstance(layer, LayerNormL1)
           else np.sqrt((centered ** 2).mean(-1, keepdims=True) + 1e-6))
  np.testing.assert_allclose(tf.cast(out, tf.float32).numpy(), centered / scale, atol=3e-2)


def test_stack_under_mixed_bfloat16():
  encoder, decoder = build(BN, dtype="mixed_bfloat16")
  enc, dec = forward(encoder, decoder, padded([[5, 6, EOS], [7, 8, 9, 10, EOS]]),
                     padded([[4, EOS], [5, 6, EOS]]), True)
  assert np.isfinite(dec).all()
  stats = [v for v in encoder.variables if "moving_" in v.path]
  assert stats and all(v.dtype == "float32" for v in stats)
  assert any(np.abs(v.numpy()).sum() > 0 for v in stats if v.path.endswith("moving_mean"))


# ----------------------------------------------------------------------------- config
def encoder_with(norm_params):
  return TransformerEncoder({"encoder_layers": 1, **SIZES, "norm_params": norm_params},
                            vocab_size=13)


@pytest.mark.parametrize("norm_params, message", [
    ({"type": "group_norm"}, r"^encoder_params/norm_params/type: 'group_norm' is not one of "
                             r"'layernorm_L2', 'layernorm_L1', 'batch_norm'$"),
    ({"type": "batch_norm", "momentun": 0.9},
     r"^encoder_params/norm_params/momentun: unknown parameter of norm_params; did you mean "
     r"'momentum'\?$"),
    ({"type": "batch_norm", "momentum": 1.5},
     r"^encoder_params/norm_params/momentum: must be in \[0, 1\], got 1.5$"),
    ({"type": "layernorm_L1", "epsilon": 0}, r"^encoder_params/norm_params/epsilon: must be "),
    ({"type": "batch_norm", "data_format": "channels_first"},
     r"^encoder_params/norm_params/data_format: 'channels_first' is not one of"),
    ({"type": "batch_norm", "regularizer_params": {"scale": 0.1}},
     r"^encoder_params/norm_params/regularizer_params: given without regularizer"),
    ({"type": "batch_norm", "regularizer": keras.regularizers.L2,
      "regularizer_params": {"scal": 0.1}},
     r"^encoder_params/norm_params/regularizer_params/scal: unknown parameter"),
    ({"type": "batch_norm", "center_scale": "no"},
     r"^encoder_params/norm_params/center_scale: expected bool or None"),
])
def test_config_errors(norm_params, message):
  with pytest.raises(ConfigError, match=message) as error:
    encoder_with(norm_params)
  assert "\n" not in str(error.value)


def test_other_types_keys_are_dropped_with_a_warning(monkeypatch, capsys):
  monkeypatch.setattr(normalization, "_printed", set())
  # OpenSeq2Seq's transformer-nvgrad.py sets momentum with layer norm (it read only epsilon).
  params = {"type": "layernorm_L2", "momentum": 0.95, "epsilon": 1e-5}
  encoder = encoder_with(params)
  encoder_with(params)
  assert encoder.params["norm_params"] == {"type": "layernorm_L2", "epsilon": 1e-5}
  assert encoder.output_normalization.epsilon == 1e-5
  lines = capsys.readouterr().out.splitlines()
  assert lines == ["warning: encoder_params/norm_params/momentum: ignored: only batch_norm "
                   "uses it, type is 'layernorm_L2' (its keys: type, epsilon)"]


def test_transformer_bn_norm_params_port(monkeypatch, capsys):
  monkeypatch.setattr(normalization, "_printed", set())
  encoder = encoder_with(TRANSFORMER_BN)
  assert not [v for v in encoder.variables if v.path.endswith(("gamma", "beta"))]
  out = capsys.readouterr().out
  assert ("warning: encoder_params/norm_params/regularizer: ignored: center_scale is False"
          in out)
  decoder = TransformerDecoder({"num_hidden_layers": 1, **SIZES,
                                "norm_params": {**TRANSFORMER_BN, "center_scale": True}},
                               vocab_size=11)
  # the beta/gamma penalty, as Keras losses: the train step adds them to the loss
  # (tests/unit/test_layer_penalties.py)
  assert decoder.losses
  assert "regularizer" not in capsys.readouterr().out


def test_ignored_parameters_say_why():
  assert NORM_FIELDS["data_format"].ignored.startswith("activations are [batch, time")
  remove_padding = TransformerEncoder.declared_params()["remove_padding"]
  assert remove_padding.ignored.startswith("OpenSeq2Seq's speed-up")
  assert encoder_with({"type": "batch_norm", "data_format": "channels_last"}).params[
      "norm_params"]["data_format"] == "channels_last"


def test_model_validates_norm_params_before_building():
  config = {"data_layer": linear.RowsLayer, "encoder": TransformerEncoder,
            "encoder_params": {"encoder_layers": 1, **SIZES,
                               "norm_params": {"type": "batchnorm"}},
            "decoder": linear.PassDecoder, "loss": linear.HalfSquareLoss,
            "batch_size_per_gpu": 4}
  with pytest.raises(ConfigError, match="^encoder_params/norm_params/type: 'batchnorm'"):
    from open_seq2seq import slots  # pylint: disable=import-outside-toplevel
    slots.validate_slots(validate_top_level(Model, config))
