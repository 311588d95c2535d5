"""RNN encoders of translation models: shapes, masks, layers, dropout, dtypes, configs."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.encoders.rnn_encoders import (BidirectionalRNNEncoderWithEmbedding,
                                                GNMTLikeEncoderWithEmbedding,
                                                UnidirectionalRNNEncoderWithEmbedding)
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.rnns.weight_drop import WeightDropLayerNormBasicLSTMCell, WeightDropLSTM

ENCODERS = [UnidirectionalRNNEncoderWithEmbedding, BidirectionalRNNEncoderWithEmbedding,
            GNMTLikeEncoderWithEmbedding]
VOCAB = 20


def _params(units=6, layers=2, emb=6, cell=keras.layers.LSTMCell, skip=False, keep_in=1.0,
            keep_out=1.0, **extra):
  cell_params = {"num_units": units}
  if cell is keras.layers.LSTMCell:
    cell_params["forget_bias"] = 1.0
  return {"core_cell": cell, "core_cell_params": cell_params,
          "encoder_layers": layers, "encoder_dp_input_keep_prob": keep_in,
          "encoder_dp_output_keep_prob": keep_out, "encoder_use_skip_connections": skip,
          "src_emb_size": emb, **extra}


def _batch(lengths=(5, 3, 1), time=5, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(3, VOCAB, size=(len(lengths), time))
  for row, length in enumerate(lengths):
    ids[row, length:] = 0
  return tf.constant(ids, tf.int32), tf.constant(lengths, tf.int32)


def _encode(encoder, ids, lengths, training=False):
  return encoder({"source_tensors": (ids, lengths)}, training=training)


def _states(state) -> list[np.ndarray]:
  return [t.numpy() for t in tf.nest.flatten(state)]


@pytest.mark.parametrize("cls, width", [(ENCODERS[0], 6), (ENCODERS[1], 12), (ENCODERS[2], 6)])
def test_output_dict_shapes_and_zero_padding(cls, width):
  encoder = cls(_params(layers=3), vocab_size=VOCAB)
  ids, lengths = _batch()
  out = _encode(encoder, ids, lengths)
  assert out["outputs"].shape == (3, 5, width)
  assert out["outputs"].dtype == tf.float32
  assert out["src_lengths"].dtype == tf.int32
  np.testing.assert_array_equal(out["encoder_input"].numpy(), ids.numpy())
  padded = ~tf.sequence_mask(lengths, 5).numpy()
  assert np.all(out["outputs"].numpy()[padded] == 0)
  assert encoder.enc_emb_w.shape == (VOCAB, 6)
  state = out["state"]
  if cls is BidirectionalRNNEncoderWithEmbedding:
    assert len(state) == 2 and all(len(direction) == 3 for direction in state)
  else:
    assert len(state) == (3 if cls is UnidirectionalRNNEncoderWithEmbedding else 2)
    assert all(len(layer) == 2 and layer[0].shape == (3, 6) for layer in state)  # [h, c]


@pytest.mark.parametrize("cls", ENCODERS)
@pytest.mark.parametrize("cell", [keras.layers.LSTMCell, keras.layers.GRUCell])
def test_padding_never_changes_outputs_or_final_states(cls, cell):
  encoder = cls(_params(layers=3, cell=cell), vocab_size=VOCAB)
  ids, lengths = _batch((5, 3, 2))
  batched = _encode(encoder, ids, lengths)
  for row, length in enumerate([5, 3, 2]):
    alone = _encode(encoder, ids[row:row + 1, :length], lengths[row:row + 1])
    np.testing.assert_allclose(batched["outputs"][row, :length].numpy(),
                               alone["outputs"][0].numpy(), atol=1e-5)
    for got, want in zip(_states(batched["state"]), _states(alone["state"])):
      np.testing.assert_allclose(got[row], want[0], atol=1e-5)


def test_backward_direction_starts_at_each_sequence_end():
  encoder = BidirectionalRNNEncoderWithEmbedding(_params(layers=1), vocab_size=VOCAB)
  ids, lengths = _batch((5, 3))
  out = _encode(encoder, ids, lengths)
  # The backward half at position 0 has read the whole real sequence, right to left.
  layer = encoder.backward.rnn_layers[0]
  row_ids = ids[1, :3][::-1]
  x = tf.gather(encoder.enc_emb_w, row_ids)[None]
  by_hand, h, c = layer(x)
  np.testing.assert_allclose(out["outputs"][1, :3, 6:].numpy(), by_hand[0, ::-1].numpy(),
                             atol=1e-5)
  np.testing.assert_allclose(out["state"][1][0][0][1].numpy(), h[0].numpy(), atol=1e-5)


def test_gru_state_is_h_alone():
  encoder = UnidirectionalRNNEncoderWithEmbedding(_params(cell=keras.layers.GRUCell),
                                                  vocab_size=VOCAB)
  out = _encode(encoder, *_batch())
  assert all(isinstance(s, tf.Tensor) and s.shape == (3, 6) for s in out["state"])
  assert isinstance(encoder.stack.rnn_layers[0], keras.layers.GRU)  # fused layer


def _lstm_weights(encoder, name):
  return [v for v in encoder.weights if f"/{name}/" in v.path]


def _zero_layer(encoder, name):
  for v in _lstm_weights(encoder, name):
    v.assign(tf.zeros_like(v))


@pytest.mark.parametrize("cls, count", [(ENCODERS[0], 1 + 3 * 3), (ENCODERS[1], 1 + 2 * 3 * 3),
                                        (ENCODERS[2], 1 + 4 * 3)])
def test_layer_counts(cls, count):
  encoder = cls(_params(layers=3), vocab_size=VOCAB)
  assert len(encoder.trainable_weights) == count


def test_unidirectional_skip_connection_is_input_plus_layer():
  encoder = UnidirectionalRNNEncoderWithEmbedding(_params(layers=1, skip=True),
                                                  vocab_size=VOCAB)
  _zero_layer(encoder, "layer_0")  # an LSTM with zero weights outputs zeros
  ids, lengths = _batch()
  out = _encode(encoder, ids, lengths)["outputs"].numpy()
  mask = tf.sequence_mask(lengths, 5).numpy()
  embedded = tf.gather(encoder.enc_emb_w, ids).numpy() * mask[:, :, None]
  np.testing.assert_allclose(out, embedded, atol=1e-6)


def test_gnmt_residuals_start_at_the_third_layer():
  ids, lengths = _batch()
  two = GNMTLikeEncoderWithEmbedding(_params(layers=2, skip=True), vocab_size=VOCAB)
  three = GNMTLikeEncoderWithEmbedding(_params(layers=3, skip=True), vocab_size=VOCAB)
  three_plain = GNMTLikeEncoderWithEmbedding(_params(layers=3, skip=False), vocab_size=VOCAB)
  for encoder in (three, three_plain):
    for target, source in zip(encoder.weights, two.weights):  # same first two layers
      target.assign(source)
    _zero_layer(encoder, "layer_2")
  expected = _encode(two, ids, lengths)["outputs"].numpy()
  assert np.abs(expected).max() > 0
  np.testing.assert_allclose(_encode(three, ids, lengths)["outputs"].numpy(), expected,
                             atol=1e-6)
  assert np.all(_encode(three_plain, ids, lengths)["outputs"].numpy() == 0)
  _zero_layer(two, "layer_1")  # the second layer has no residual connection
  assert np.all(_encode(two, ids, lengths)["outputs"].numpy() == 0)


@pytest.mark.parametrize("cls", ENCODERS)
def test_dropout_only_in_training(cls):
  encoder = cls(_params(layers=3, keep_in=0.5, keep_out=0.7), vocab_size=VOCAB)
  ids, lengths = _batch()
  a = _encode(encoder, ids, lengths)["outputs"].numpy()
  b = _encode(encoder, ids, lengths)["outputs"].numpy()
  np.testing.assert_array_equal(a, b)
  c = _encode(encoder, ids, lengths, training=True)["outputs"].numpy()
  assert not np.allclose(a, c)


def test_gnmt_bidirectional_layer_has_no_dropout():
  encoder = GNMTLikeEncoderWithEmbedding(_params(keep_in=0.5, keep_out=0.5), vocab_size=VOCAB)
  for stack in (encoder.bi_forward, encoder.bi_backward):
    assert stack.input_dropouts == [None] and stack.output_dropouts == [None]
  assert encoder.first.input_dropouts[0] is not None


@pytest.mark.parametrize("cls", ENCODERS)
def test_mixed_bfloat16_gives_compute_dtype_outputs(cls):
  encoder = cls(_params(layers=3), vocab_size=VOCAB, dtype="mixed_bfloat16")
  ids, lengths = _batch()
  out = tf.function(lambda i, l: _encode(encoder, i, l, training=True))(ids, lengths)
  assert out["outputs"].dtype == tf.bfloat16
  assert all(t.dtype == tf.bfloat16 for t in tf.nest.flatten(out["state"]))
  assert encoder.enc_emb_w.dtype == "float32"
  assert np.all(np.isfinite(tf.cast(out["outputs"], tf.float32).numpy()))


def test_weight_drop_cell():
  params = _params(layers=2, cell=WeightDropLayerNormBasicLSTMCell)
  params["core_cell_params"] = {"num_units": 6, "forget_bias": 1.0,
                                "recurrent_weight_keep_prob": 0.7}
  encoder = BidirectionalRNNEncoderWithEmbedding(params, vocab_size=VOCAB)
  assert isinstance(encoder.forward.rnn_layers[0], WeightDropLSTM)
  ids, lengths = _batch((5, 2))
  out = _encode(encoder, ids, lengths)
  alone = _encode(encoder, ids[1:, :2], lengths[1:])
  np.testing.assert_allclose(out["outputs"][1, :2].numpy(), alone["outputs"][0].numpy(),
                             atol=1e-5)
  trained = _encode(encoder, ids, lengths, training=True)["outputs"].numpy()
  assert not np.allclose(trained, out["outputs"].numpy())


def test_initializers_and_vocab_size_from_params():
  params = _params(src_vocab_size=11, initializer=keras.initializers.RandomUniform,
                   initializer_params={"minval": -0.01, "maxval": 0.01})
  encoder = GNMTLikeEncoderWithEmbedding(params, vocab_size=VOCAB)
  assert encoder.enc_emb_w.shape == (11, 6)
  kernels = [v for v in encoder.weights if "kernel" in v.path or "embedding" in v.path]
  assert all(np.abs(v.numpy()).max() <= 0.01 for v in kernels)
  model_level = UnidirectionalRNNEncoderWithEmbedding(
      _params(), vocab_size=VOCAB, initializer=keras.initializers.Constant(0.5))
  assert np.all(model_level.enc_emb_w.numpy() == 0.5)


@pytest.mark.parametrize("change, message", [
    ({"encoder_layers": 0}, "encoder_params/encoder_layers: .* at least 1"),
    ({"encoder_dp_input_keep_prob": 1.5}, "encoder_params/encoder_dp_input_keep_prob"),
    ({"encoder_dp_output_keep_prob": 0.0}, "encoder_params/encoder_dp_output_keep_prob"),
    ({"src_emb_size": 4, "encoder_use_skip_connections": True},
     "encoder_params/encoder_use_skip_connections: layer layer_0 gets 4"),
    ({"core_cell": keras.layers.Dense}, "encoder_params/core_cell"),
    ({"core_cell_params": {"num_units": 6, "num_proj": 3}}, "core_cell_params/num_proj"),
    ({"core_cell_params": {"num_units": 6, "bogus": 1}}, "rejected the parameters"),
    ({"encoder_layer": 2}, "did you mean 'encoder_layers'"),
    ({"encoder_layers": "2"}, "encoder_params/encoder_layers: expected int"),
])
def test_bad_params_give_one_line_config_errors(change, message):
  params = {**_params(), **change}
  if change == {"core_cell": keras.layers.Dense}:
    params["core_cell_params"] = {"units": 6}
  with pytest.raises(ConfigError, match=message) as info:
    UnidirectionalRNNEncoderWithEmbedding(params, vocab_size=VOCAB)
  assert "\n" not in str(info.value)


def test_gnmt_needs_two_layers_and_core_cell_is_required():
  with pytest.raises(ConfigError, match="GNMTLikeEncoderWithEmbedding needs at least 2"):
    GNMTLikeEncoderWithEmbedding(_params(layers=1), vocab_size=VOCAB)
  params = _params()
  del params["core_cell"]
  with pytest.raises(ConfigError, match="encoder_params/core_cell: required"):
    BidirectionalRNNEncoderWithEmbedding(params, vocab_size=VOCAB)
  with pytest.raises(ConfigError, match="src_vocab_size: unknown"):
    BidirectionalRNNEncoderWithEmbedding(_params())


# encoder_params of OpenSeq2Seq's example configs, TF 1 names renamed (sizes as written).
PORTED = {
    "nmt-reversal-RR": (BidirectionalRNNEncoderWithEmbedding, {
        "core_cell": keras.layers.LSTMCell,
        "core_cell_params": {"num_units": 128, "forget_bias": 1.0},
        "encoder_layers": 1, "encoder_dp_input_keep_prob": 0.8,
        "encoder_dp_output_keep_prob": 1.0, "encoder_use_skip_connections": False,
        "src_emb_size": 128}),
    "nmt-reversal-RC": (BidirectionalRNNEncoderWithEmbedding, {
        "core_cell": keras.layers.LSTMCell, "core_cell_params": {"num_units": 64},
        "encoder_layers": 2, "encoder_dp_input_keep_prob": 0.8,
        "encoder_dp_output_keep_prob": 1.0, "encoder_use_skip_connections": False,
        "src_emb_size": 128}),
    "en-de-nmt-small": (BidirectionalRNNEncoderWithEmbedding, {
        "initializer": keras.initializers.GlorotUniform, "core_cell": keras.layers.LSTMCell,
        "core_cell_params": {"num_units": 512, "forget_bias": 1.0}, "encoder_layers": 2,
        "encoder_dp_input_keep_prob": 0.8, "encoder_dp_output_keep_prob": 1.0,
        "encoder_use_skip_connections": False, "src_emb_size": 512,
        "use_swap_memory": True}),
    "en-de-gnmt-like-4GPUs": (GNMTLikeEncoderWithEmbedding, {
        "initializer": keras.initializers.RandomUniform,
        "initializer_params": {"minval": -0.1, "maxval": 0.1},
        "core_cell": keras.layers.LSTMCell,
        "core_cell_params": {"num_units": 1024, "forget_bias": 1.0}, "encoder_layers": 7,
        "encoder_dp_input_keep_prob": 0.8, "encoder_dp_output_keep_prob": 1.0,
        "encoder_use_skip_connections": True, "src_emb_size": 1024}),
    "en-de-gnmt-like-weight-tied-2GPUs": (GNMTLikeEncoderWithEmbedding, {
        "initializer": keras.initializers.RandomUniform,
        "initializer_params": {"minval": -0.1, "maxval": 0.1},
        "core_cell": keras.layers.LSTMCell,
        "core_cell_params": {"num_units": 200, "forget_bias": 1.0}, "encoder_layers": 7,
        "encoder_dp_input_keep_prob": 0.8, "encoder_dp_output_keep_prob": 1.0,
        "encoder_use_skip_connections": True, "src_emb_size": 80}),
}


@pytest.mark.parametrize("name", sorted(PORTED))
def test_ported_config_params_validate_and_build_scaled_down(name):
  cls, params = PORTED[name]
  validated = cls.validate_params(params, "encoder_params")
  assert validated["encoder_layers"] == params["encoder_layers"]
  small = dict(params, core_cell_params=dict(params["core_cell_params"]))
  scale = 16 if params["core_cell_params"]["num_units"] >= 512 else 4
  small["core_cell_params"]["num_units"] //= scale
  small["src_emb_size"] //= scale
  encoder = cls(small, vocab_size=VOCAB)
  out = _encode(encoder, *_batch(), training=True)
  width = small["core_cell_params"]["num_units"] * (2 if cls is ENCODERS[1] else 1)
  assert out["outputs"].shape == (3, 5, width)


def test_ignored_keys_say_so():
  declared = GNMTLikeEncoderWithEmbedding.declared_params()
  for key in ("use_swap_memory", "time_major", "proj_size", "num_groups"):
    assert declared[key].ignored
  for key in ("core_cell", "encoder_layers", "encoder_use_skip_connections"):
    assert not declared[key].ignored
