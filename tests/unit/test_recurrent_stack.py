"""RecurrentStack: dropout wrappers, residuals, masks, one-step running and carried state."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.rnns.stack import RecurrentStack


def _stack(units=(6, 6), keep_in=1.0, keep_out=1.0, carry=False, residual=False, cell="lstm",
           variational=False):
  def layer(n, i):
    make = keras.layers.LSTMCell if cell == "lstm" else keras.layers.GRUCell
    return keras.layers.RNN(make(n, seed=i), return_sequences=True, return_state=True)
  layers = [layer(n, i) for i, n in enumerate(units)]
  return RecurrentStack(layers, [keep_in] * len(units), [keep_out] * len(units),
                        residual=residual, carry_state=carry, seed=3, variational=variational)


def _inputs(batch=3, time=5, features=6, seed=0):
  return tf.constant(np.random.default_rng(seed).normal(size=(batch, time, features)),
                     tf.float32)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_step_by_step_equals_the_whole_sequence(cell):
  stack = _stack(cell=cell)
  x = _inputs()
  outputs, finals = stack(x, training=False)
  states = stack.zero_states(tf.shape(x)[0])
  for t in range(x.shape[1]):
    out, states = stack.step(x[:, t], states)
    np.testing.assert_allclose(out.numpy(), outputs[:, t].numpy(), atol=1e-5)
  for got, want in zip(states, finals):
    for a, b in zip(got, want):
      np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)


def test_padded_steps_leave_the_final_state_unchanged():
  stack = _stack()
  x = _inputs()
  mask = tf.sequence_mask([5, 3, 1], 5)
  _, finals = stack(x, step_mask=mask, training=False)
  for row, length in enumerate([5, 3, 1]):
    _, short = stack(x[row:row + 1, :length], training=False)
    for a, b in zip(finals[-1], short[-1]):
      np.testing.assert_allclose(a[row].numpy(), b[0].numpy(), atol=1e-5)


def test_dropout_only_in_training_and_variational_masks_are_constant_in_time():
  stack = _stack(keep_in=0.5, keep_out=0.5)
  x = _inputs()
  a, _ = stack(x, training=False)
  b, _ = stack(x, training=False)
  np.testing.assert_array_equal(a.numpy(), b.numpy())
  c, _ = stack(x, training=True)
  assert not np.allclose(a.numpy(), c.numpy())
  variational = _stack(keep_in=0.5, variational=True)
  ones = tf.ones([2, 4, 6])
  dropped = variational._apply_dropout(variational.input_dropouts[0], ones, True).numpy()
  np.testing.assert_array_equal(dropped[:, 0], dropped[:, 3])
  per_step = _stack(keep_in=0.5)
  dropped = per_step._apply_dropout(per_step.input_dropouts[0], tf.ones([8, 6, 6]), True)
  assert not np.array_equal(dropped.numpy()[:, 0], dropped.numpy()[:, 5])


def test_residual_needs_equal_sizes():
  with pytest.raises(ConfigError, match="residual connection needs equal"):
    _stack(units=(6, 4), residual=True)(_inputs(), training=False)
  stack = _stack(residual=True)
  out, _ = stack(_inputs(), training=False)
  assert out.shape == (3, 5, 6)


def test_carried_state_continues_the_stream_in_training_only():
  stack = _stack(carry=True)
  x = _inputs(time=8)
  # one call over 8 steps == two training calls of 4 steps with the state carried
  whole, _ = stack(x, training=False)
  stack(x[:, :4], training=True)
  second, _ = stack(x[:, 4:], training=True)
  np.testing.assert_allclose(second.numpy(), whole[:, 4:].numpy(), atol=1e-5)
  # eval calls neither read nor change it
  fresh, _ = stack(x[:, 4:], training=False)
  assert not np.allclose(fresh.numpy(), whole[:, 4:].numpy(), atol=1e-3)
  third, _ = stack(x[:, :4], training=True)
  continued, _ = stack(tf.concat([x, x[:, :4]], 1), training=False)
  np.testing.assert_allclose(third.numpy(), continued[:, 8:].numpy(), atol=1e-5)


def test_carried_state_restarts_from_zeros_for_another_batch_size_and_is_no_weight():
  stack = _stack(carry=True)
  x = _inputs()
  stack(x, training=True)
  other = _inputs(batch=2, seed=1)
  carried, _ = stack(other, training=True)
  zero, _ = stack(other, training=False)
  np.testing.assert_allclose(carried.numpy(), zero.numpy(), atol=1e-6)
  names = [v.name for v in stack.variables]
  assert not any("carried" in name for name in names)
  assert stack.variables  # the LSTM weights are there


def test_no_gradient_flows_into_the_previous_batch():
  stack = _stack(carry=True)
  x = _inputs()
  stack(x, training=True)
  with tf.GradientTape() as tape:
    out, _ = stack(x, training=True)
    loss = tf.reduce_sum(out)
  grads = tape.gradient(loss, stack.trainable_variables)
  assert all(g is not None for g in grads)


def test_keep_probabilities_are_checked():
  with pytest.raises(ConfigError, match=r"keep probabilities must be in \(0, 1\]"):
    _stack(keep_in=0.0)
