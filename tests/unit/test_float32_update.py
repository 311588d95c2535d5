"""Pure float16 weights get their optimizer update computed in float32: Adam's epsilon of
1e-9 (0 in float16) and a second moment that underflows no longer make it 0/0."""

import keras
import numpy as np
import tensorflow as tf

from open_seq2seq.training.float32_update import Float32Update
from tests.helpers import linear


def _adam():
  return keras.optimizers.Adam(learning_rate=0.01, epsilon=1e-9)


def test_a_float16_variable_is_updated_through_a_float32_copy():
  variable = keras.Variable(np.array([0.5, -0.25], np.float16), dtype="float16")
  grad = tf.constant([1e-4, -3e-4], tf.float32)  # squared: below float16's smallest value
  update = Float32Update([variable])
  assert len(update.pairs) == 1 and update.targets[0].dtype == "float32"
  optimizer = _adam()
  optimizer.build(update.targets)
  update.apply(optimizer, [grad])
  # Adam's first step moves each weight by lr * sign(g) (float32 state), then rounds
  expected = np.array([0.5 - 0.01, -0.25 + 0.01], np.float32).astype(np.float16)
  np.testing.assert_array_equal(variable.numpy(), expected)
  assert all(v.dtype == "float32" for v in optimizer.variables if v.name != "iteration")

  # the same update made in float16 is 0/0
  plain = keras.Variable(np.array([0.5, -0.25], np.float16), dtype="float16")
  optimizer = _adam()
  optimizer.build([plain])
  optimizer.apply_gradients([(tf.cast(grad, tf.float16), plain)])
  assert not np.isfinite(plain.numpy()).all()


def test_other_variables_are_updated_themselves():
  variable = keras.Variable(np.ones(3, np.float32))
  update = Float32Update([variable])
  assert update.pairs == [] and update.targets == [variable]


def test_a_float16_model_trains_with_adams_tiny_epsilon():
  trainer, step = linear.built(dtype="float16", optimizer="Adam",
                               optimizer_params={"learning_rate": 0.05, "epsilon": 1e-9},
                               loss_scaling="Backoff")
  model = trainer.model
  losses = [float(step()["loss"]) for _ in range(40)]
  assert model.encoder.kernel.dtype == "float16"
  assert all(np.isfinite(losses)) and losses[-1] < 0.2 * losses[0], losses
  assert int(trainer.skipped_steps.numpy()) < 20  # Backoff finds its scale, then updates
