"""Encoders and the Speech2Text model: the padding-mask property, lengths, precision."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.encoders.ds2_encoder import DeepSpeech2Encoder
from open_seq2seq.encoders.tdnn_encoder import TDNNEncoder
from open_seq2seq.errors import ConfigError
from tests.helpers.speech import (TINY_TDNN, build_model, padded_features, run_encoder,
                                  speech_config, to_numpy, write_corpus)

LENGTHS = [37, 16, 25]
NUM_FEATURES = 20

DS2_PARAMS = {
    "conv_layers": [{"kernel_size": [5, 7], "stride": [2, 2], "num_channels": 4},
                    {"kernel_size": [3, 5], "stride": [1, 2], "num_channels": 4}],
    "num_rnn_layers": 2, "rnn_cell_dim": 8, "n_hidden": 12,
}


def make_encoder(cls, params):
  return cls(params, mode="eval")  # no model: the base class fills the defaults


def padded_batch(lengths, garbage: bool, seed=0):
  return padded_features(lengths, NUM_FEATURES, garbage, seed)


run = run_encoder


ENCODERS = [
    (TDNNEncoder, TINY_TDNN),
    (TDNNEncoder, {**TINY_TDNN, "normalization": "layer_norm"}),
    (DeepSpeech2Encoder, DS2_PARAMS),
    (DeepSpeech2Encoder, {**DS2_PARAMS, "rnn_type": "cudnn_lstm", "rnn_unidirectional": True,
                          "row_conv": True, "row_conv_width": 4}),
]


@pytest.mark.parametrize("cls,params", ENCODERS)
def test_padding_never_changes_an_utterance(cls, params):
  encoder = make_encoder(cls, params)
  batch_out, batch_len = run(encoder, padded_batch(LENGTHS, garbage=True), LENGTHS)
  reference = padded_batch(LENGTHS, garbage=False)
  for i, n in enumerate(LENGTHS):
    alone, alone_len = run(encoder, reference[i:i + 1, :n], [n])
    assert batch_len[i] == alone_len[0] == (n + 1) // 2  # one stride-2 layer
    np.testing.assert_allclose(batch_out[i, :batch_len[i]], alone[0, :alone_len[0]],
                               atol=1e-4, rtol=1e-4)
    assert np.all(batch_out[i, batch_len[i]:] == 0)


@pytest.mark.parametrize("cls,params", ENCODERS[:1] + ENCODERS[2:3])
def test_batch_norm_training_statistics_ignore_padding(cls, params):
  encoder = make_encoder(cls, params)
  clean, clean_len = run(encoder, padded_batch(LENGTHS, garbage=False), LENGTHS, training=True)
  noisy, _ = run(encoder, padded_batch(LENGTHS, garbage=True), LENGTHS, training=True)
  for i, n in enumerate(clean_len):
    np.testing.assert_allclose(clean[i, :n], noisy[i, :n], atol=1e-4, rtol=1e-4)


def test_valid_padding_lengths():
  params = {"convnet_layers": [{"kernel_size": [5], "stride": [2], "num_channels": 4,
                                "padding": "VALID"},
                               {"kernel_size": [3], "num_channels": 4, "padding": "VALID"}]}
  encoder = make_encoder(TDNNEncoder, params)
  out, lengths = run(encoder, padded_batch([20, 9], False), [20, 9])
  assert lengths.tolist() == [(20 - 5) // 2 + 1 - 2, (9 - 5) // 2 + 1 - 2]
  assert out.shape[1] == lengths[0]


@pytest.mark.parametrize("params,match", [
    ({"convnet_layers": [{"kernel_size": [3], "num_channels": 4, "strides": [1]}]},
     r"convnet_layers/0/strides: unknown parameter.*did you mean 'stride'"),
    ({"convnet_layers": [{"kernel_size": [3], "num_channels": 4, "stride": [2],
                          "residual": True}]}, "residual block cannot have stride"),
    ({"convnet_layers": [{"kernel_size": 3, "num_channels": 4}]}, "kernel_size: expected list"),
    ({"convnet_layers": [{"kernel_size": [3], "num_channels": 4, "type": "conv2d"}]},
     "type"),
])
def test_tdnn_config_errors(params, match):
  with pytest.raises(ConfigError, match=match):
    make_encoder(TDNNEncoder, params)


def test_ds2_config_errors():
  with pytest.raises(ConfigError, match=r"conv_layers/0/kernel_size"):
    make_encoder(DeepSpeech2Encoder, {"conv_layers": [{"kernel_size": [5], "num_channels": 4}]})


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  return write_corpus(str(tmp_path_factory.mktemp("models")),
                      ["one", "two three", "four", "five six", "seven", "eight"],
                      durations=[0.5, 0.9, 0.3, 0.7, 0.4, 0.6])


def eval_pass(model, layer):
  logits, results = {}, []
  for batch in layer.build_dataset():
    out = to_numpy(model.predict(batch))
    batch = to_numpy(batch)
    results += model.evaluate(batch, out)
    for i, l, n in zip(batch["id"], out["logits"], out["src_lengths"]):
      logits[int(i)] = l[:n]
  return logits, model.finalize_evaluation(sorted(results))


def test_eval_logits_and_wer_independent_of_batch_size(corpus):
  model = build_model(speech_config([corpus], data_params={"pad_to": 16}), "eval")
  logits_1, metrics_1 = eval_pass(model, model.make_data_layer(
      {**model.params, "eval_batch_size_per_gpu": 1}, "eval"))
  logits_4, metrics_4 = eval_pass(model, model.make_data_layer(
      {**model.params, "eval_batch_size_per_gpu": 4}, "eval"))
  assert metrics_1 == metrics_4 and set(metrics_1) == {"WER", "CER"}
  for i in logits_1:
    np.testing.assert_allclose(logits_1[i], logits_4[i], atol=1e-4, rtol=1e-4)


def test_mixed_bfloat16_step(corpus):
  model = build_model(speech_config([corpus], dtype="mixed_bfloat16"), "train")
  batch = next(iter(model.data_layer.build_dataset()))
  with tf.GradientTape() as tape:
    loss, weight, out = model.compute_loss(batch, training=True)
  grads = tape.gradient(loss, model.trainable_variables)
  assert out["logits"].dtype == tf.float32 and loss.dtype == tf.float32
  assert model.encoder.compute_dtype == "bfloat16"
  assert np.isfinite(loss.numpy()) and weight.numpy() == 4
  assert all(g is not None and np.isfinite(g.numpy()).all() for g in grads)


def test_training_reduces_ctc_loss(corpus):
  model = build_model(speech_config([corpus], batch_size_per_gpu=6), "train")
  batch = next(iter(model.data_layer.build_dataset()))
  import keras
  optimizer = keras.optimizers.Adam(3e-3)
  losses = []
  for _ in range(15):
    with tf.GradientTape() as tape:
      loss, weight, _ = model.compute_loss(batch, training=True)
      loss = loss / weight
    variables = model.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    losses.append(float(loss))
  assert losses[-1] < 0.7 * losses[0]


def test_drop_block_drops_residual_branch():
  params = {**TINY_TDNN, "drop_block_prob": 0.999, "normalization": None}
  encoder = make_encoder(TDNNEncoder, params)
  x = padded_batch([12], False)
  tf.random.set_seed(0)
  eval_out, _ = run(encoder, x, [12], training=False)
  train_out, _ = run(encoder, x, [12], training=True)
  assert not np.allclose(eval_out, train_out)


def test_sentencepiece_targets_are_not_autoregressive_for_their_own_s_pieces(corpus, tmp_path):
  """A SentencePiece model holds <S>/</S> pieces (the project's special ids 2 and 3) that no
  transcript encodes to: CTC and transducer models on it get no start/end symbols; targets made
  autoregressive get theirs after the pieces."""
  from open_seq2seq.decoders.transducer_decoder import TransducerDecoder
  from open_seq2seq.losses.transducer_loss import RNNTLoss
  from tests.helpers.speech import sentencepiece_stand_in
  override = sentencepiece_stand_in({"data_layer_params": {"vocab_file": "absent.model"}},
                                    str(tmp_path), vocab_size=40)
  spm_model = override[0].split("=", 1)[1]
  ctc = build_model(speech_config([corpus], data_params={"vocab_file": spm_model}), "eval")
  description = ctc.data_layer.description
  assert "<S>" in description.char2idx and description.end_id is None
  assert description.tgt_vocab_size == 41
  transducer = build_model(speech_config(
      [corpus], data_params={"vocab_file": spm_model}, decoder=TransducerDecoder,
      decoder_params={"pred_hidden": 8, "joint_hidden": 8}, loss=RNNTLoss), "train")
  batch = next(iter(transducer.data_layer.build_dataset()))
  loss, weight, _ = transducer.compute_loss(batch, training=True)
  assert np.isfinite(loss.numpy()) and weight.numpy() > 0
  autoregressive = build_model(speech_config(
      [corpus], data_params={"vocab_file": spm_model, "autoregressive": True}), "eval")
  description = autoregressive.data_layer.description
  assert (description.start_id, description.end_id) == (40, 41)


def test_variables_are_created_on_a_short_slice_of_a_long_batch(corpus):
  """A long recording's first pass runs op by op: the variables come from a short slice."""
  from open_seq2seq.models.speech2text import VARIABLES_FRAMES
  model = build_model(speech_config([corpus]), "train")
  batch = next(iter(model.data_layer.build_dataset()))
  features, lengths = batch["source_tensors"]
  long = tf.tile(features, [1, 3 * VARIABLES_FRAMES // features.shape[1] + 1, 1])
  seen = []
  call = model.encoder.call
  model.encoder.call = lambda inputs, **kw: (seen.append(inputs["source_tensors"][0].shape),
                                             call(inputs, **kw))[1]
  long_lengths = tf.fill(tf.shape(lengths), long.shape[1])
  model.create_variables({**batch, "source_tensors": (long, long_lengths)})
  assert seen == [(1, VARIABLES_FRAMES, features.shape[2])]
  model.encoder.call = call
  loss, _, _ = model.compute_loss(batch, training=False)  # every variable was created
  assert np.isfinite(loss.numpy()) and model.trainable_variables
