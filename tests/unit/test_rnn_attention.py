"""Attention mechanisms and the attention decoder cell: scores against numpy, masks, wirings."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.rnns.attention import (AttentionDecoderCell, BahdanauAttention,
                                               LuongAttention, attention_context,
                                               masked_softmax)

RNG = np.random.default_rng(0)


def memory_batch(depth=6, lengths=(4, 2), garbage=0.0):
  """Memory [B, 4, depth] whose padded positions hold ``garbage`` (nonzero: must not matter)."""
  values = RNG.normal(size=(len(lengths), max(lengths), depth)).astype(np.float32)
  for b, n in enumerate(lengths):
    values[b, n:] = garbage
  return tf.constant(values), tf.constant(lengths, tf.int32)


def softmax(x):
  e = np.exp(x - x.max())
  return e / e.sum()


def test_masked_softmax_gives_padding_exactly_zero_weight():
  score = tf.constant([[1.0, 2.0, 50.0], [0.5, -3.0, 1.0]])
  mask = tf.constant([[True, True, False], [True, True, True]])
  weights = masked_softmax(score, mask).numpy()
  assert weights.dtype == np.float32
  assert weights[0, 2] == 0.0
  np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)
  np.testing.assert_allclose(weights[0, :2], softmax(np.array([1.0, 2.0])), rtol=1e-6)


@pytest.mark.parametrize("normalize", [False, True])
def test_bahdanau_scores_match_numpy(normalize):
  mechanism = BahdanauAttention(5, normalize=normalize)
  mechanism.build(memory_depth=6, query_depth=3)
  if normalize:
    assert mechanism.attention_g.numpy() == pytest.approx(np.sqrt(1 / 5))
    mechanism.attention_g.assign(1.7)
    mechanism.attention_b.assign(RNG.normal(size=5).astype(np.float32))
  memory, lengths = memory_batch()
  query = tf.constant(RNG.normal(size=(2, 3)), tf.float32)
  prepared = mechanism.prepare(memory, lengths)
  got = mechanism.alignments(query, prepared).numpy()

  w_mem = mechanism.memory_layer.kernel.numpy()
  w_query = mechanism.query_layer.kernel.numpy()
  v = mechanism.attention_v.numpy()
  b = np.zeros(5)
  if normalize:
    v = 1.7 * v / np.linalg.norm(v)
    b = mechanism.attention_b.numpy()
  for i, n in enumerate([4, 2]):
    keys = memory.numpy()[i, :n] @ w_mem
    score = np.tanh(keys + query.numpy()[i] @ w_query + b) @ v
    np.testing.assert_allclose(got[i, :n], softmax(score), rtol=1e-5, atol=1e-6)
    assert (got[i, n:] == 0).all()


def test_luong_scores_match_numpy_and_scale_multiplies():
  mechanism = LuongAttention(4, scale=True)
  mechanism.build(memory_depth=6, query_depth=4)
  mechanism.attention_g.assign(0.5)
  memory, lengths = memory_batch()
  query = tf.constant(RNG.normal(size=(2, 4)), tf.float32)
  got = mechanism.alignments(query, mechanism.prepare(memory, lengths)).numpy()
  keys = memory.numpy() @ mechanism.memory_layer.kernel.numpy()
  for i, n in enumerate([4, 2]):
    np.testing.assert_allclose(got[i, :n], softmax(0.5 * keys[i, :n] @ query.numpy()[i]),
                               rtol=1e-5)
  with pytest.raises(ConfigError, match="query's size"):
    LuongAttention(4).build(memory_depth=6, query_depth=5)


@pytest.mark.parametrize("mechanism", [BahdanauAttention(5, normalize=True), LuongAttention(3)])
def test_padded_memory_changes_nothing(mechanism):
  mechanism.build(memory_depth=6, query_depth=3)
  memory, lengths = memory_batch(garbage=1e4)
  query = tf.constant(RNG.normal(size=(2, 3)), tf.float32)
  padded = mechanism.prepare(memory, lengths)
  alone = mechanism.prepare(memory[1:, :2], lengths[1:])
  a_pad = mechanism.alignments(query[1:], padded._replace(
      values=padded.values[1:], keys=padded.keys[1:], mask=padded.mask[1:]))
  a_alone = mechanism.alignments(query[1:], alone)
  np.testing.assert_allclose(a_pad[:, :2].numpy(), a_alone.numpy(), rtol=1e-6)
  np.testing.assert_array_equal(a_pad[:, 2:].numpy(), 0.0)
  np.testing.assert_allclose(attention_context(a_pad, padded.values[1:]).numpy(),
                             attention_context(a_alone, alone.values).numpy(), rtol=1e-5,
                             atol=1e-6)  # float32 sums in another order: ~1 ulp of 1.0


def make_cell(wiring, units=(4, 4, 4), input_size=3, depth=5, **kwargs):
  cells = [keras.layers.LSTMCell(n, seed=i) for i, n in enumerate(units)]
  mechanism = BahdanauAttention(6, normalize=True)
  cell = AttentionDecoderCell(cells, mechanism, wiring=wiring, **kwargs)
  cell.build_for(input_size, depth)
  return cell


def run_steps(cell, inputs, memory):
  state = cell.initial_state(tf.shape(inputs)[0], memory)
  outputs = []
  for t in range(inputs.shape[1]):
    output, state, _ = cell.step(inputs[:, t], state, memory)
    outputs.append(output)
  return tf.stack(outputs, 1), state


@pytest.mark.parametrize("wiring", ["gnmt", "gnmt_v2"])
def test_gnmt_wirings_feed_the_right_context_to_upper_layers(wiring):
  """Recomputes two steps by hand: the upper cells read the previous step's context (gnmt)
  or the one the bottom cell's output just computed (gnmt_v2)."""
  cell = make_cell(wiring, residual=True)
  memory_values, lengths = memory_batch(depth=5)
  memory = cell.mechanism.prepare(memory_values, lengths)
  inputs = tf.constant(RNG.normal(size=(2, 2, 3)), tf.float32)
  got, _ = run_steps(cell, inputs, memory)

  states = [[tf.zeros([2, 4]), tf.zeros([2, 4])] for _ in range(3)]
  previous = tf.zeros([2, 5])
  for t in range(2):
    h, states[0] = cell.cells[0](tf.concat([inputs[:, t], previous], -1), states[0])
    context = attention_context(cell.mechanism.alignments(h, memory), memory.values)
    fed = context if wiring == "gnmt_v2" else previous
    for i in (1, 2):
      out, states[i] = cell.cells[i](tf.concat([h, fed], -1), states[i])
      h = out + h if i == 2 else out  # residual from the third layer up
    previous = context
    np.testing.assert_allclose(got[:, t].numpy(), h.numpy(), rtol=1e-5, atol=1e-6)


def test_standard_wiring_outputs_and_attention_layer():
  memory_values, lengths = memory_batch(depth=5)
  inputs = tf.constant(RNG.normal(size=(2, 3, 3)), tf.float32)
  sizes = {True: 5, False: 4, "both": 9}
  for output_attention, size in sizes.items():
    cell = make_cell("standard", units=(4, 4), output_attention=output_attention)
    assert cell.output_size(5) == size
    got, _ = run_steps(cell, inputs, cell.mechanism.prepare(memory_values, lengths))
    assert got.shape == (2, 3, size)
  cell = make_cell("standard", units=(4,), attention_layer_units=7)
  memory = cell.mechanism.prepare(memory_values, lengths)
  got, state = run_steps(cell, inputs, memory)
  assert got.shape == (2, 3, 7) and state["attention"].shape == (2, 7)
  assert cell.cells[0].kernel.shape == (3 + 7, 16)  # input feeding of the attention


def test_coverage_sums_the_alignments():
  cell = make_cell("gnmt_v2")
  memory_values, lengths = memory_batch(depth=5)
  memory = cell.mechanism.prepare(memory_values, lengths)
  state = cell.initial_state(2, memory)
  total = np.zeros((2, 4), np.float32)
  for t in range(3):
    _, state, weights = cell.step(tf.ones([2, 3]) * t, state, memory)
    total += weights.numpy()
  np.testing.assert_allclose(state["coverage"].numpy(), total, rtol=1e-6)
  np.testing.assert_allclose(total.sum(-1), 3.0, rtol=1e-5)
  assert (total[1, 2:] == 0).all()


def test_residual_needs_equal_sizes():
  with pytest.raises(ConfigError, match="decoder_use_skip_connections"):
    make_cell("standard", units=(4, 4), residual=True)  # the bottom reads [input; attention]
  with pytest.raises(ConfigError, match="decoder_use_skip_connections"):
    make_cell("gnmt", units=(4, 4, 6), residual=True)
  make_cell("gnmt", units=(4, 6, 6), residual=True)  # no residual around the second layer


def test_gnmt_residual_of_a_narrower_layer_adds_the_first_features_of_its_input():
  """A weight-tied GNMT decoder's last layer is narrower than the one below: as GNMT's
  residual function did, it adds the first ``units`` features of the layer below."""
  cell = make_cell("gnmt_v2", units=(4, 4, 3), residual=True)
  memory_values, lengths = memory_batch(depth=5)
  memory = cell.mechanism.prepare(memory_values, lengths)
  inputs = tf.constant(RNG.normal(size=(2, 1, 3)), tf.float32)
  got, _ = run_steps(cell, inputs, memory)
  states = [[tf.zeros([2, n]), tf.zeros([2, n])] for n in (4, 4, 3)]
  h, _ = cell.cells[0](tf.concat([inputs[:, 0], tf.zeros([2, 5])], -1), states[0])
  context = attention_context(cell.mechanism.alignments(h, memory), memory.values)
  h, _ = cell.cells[1](tf.concat([h, context], -1), states[1])
  out, _ = cell.cells[2](tf.concat([h, context], -1), states[2])
  np.testing.assert_allclose(got[:, 0].numpy(), (out + h[:, :3]).numpy(), rtol=1e-5,
                             atol=1e-6)


def test_dropout_is_deterministic_per_seed_and_absent_without():
  cell = make_cell("gnmt", input_keep_prob=0.5, output_keep_prob=0.5)
  memory_values, lengths = memory_batch(depth=5)
  memory = cell.mechanism.prepare(memory_values, lengths)
  x = tf.ones([2, 3])
  state = cell.initial_state(2, memory)
  seed = tf.constant([1, 2], tf.int64)
  a = cell.step(x, state, memory, seed)[0]
  b = cell.step(x, state, memory, seed)[0]
  c = cell.step(x, state, memory, seed + 1)[0]
  plain = cell.step(x, state, memory)[0]
  np.testing.assert_array_equal(a.numpy(), b.numpy())
  assert not np.allclose(a.numpy(), c.numpy())
  assert not np.allclose(a.numpy(), plain.numpy())


def test_mixed_bfloat16_keeps_scores_in_float32():
  policy = "mixed_bfloat16"
  cells = [keras.layers.LSTMCell(4, dtype=policy) for _ in range(2)]
  cell = AttentionDecoderCell(cells, BahdanauAttention(6, normalize=True, dtype=policy),
                              wiring="gnmt_v2", dtype=policy)
  cell.build_for(3, 5)
  assert cell.mechanism.attention_v.dtype == "float32"
  memory_values, lengths = memory_batch(depth=5)
  memory = cell.mechanism.prepare(memory_values, lengths)
  assert memory.values.dtype == tf.bfloat16
  output, state, weights = cell.step(tf.ones([2, 3]), cell.initial_state(2, memory), memory)
  assert output.dtype == tf.bfloat16 and weights.dtype == tf.float32
  assert state["coverage"].dtype == tf.float32
  assert (weights.numpy()[1, 2:] == 0).all()
  np.testing.assert_allclose(weights.numpy().sum(-1), 1.0, rtol=1e-5)
