"""parts/dropout.py: 16-bit masks, exact expectation, seeded and resumable masks."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.parts.dropout import dropout, dropout_seed_generator, keep_mask, keep_threshold


def test_the_mask_keeps_one_minus_rate_and_elements_are_independent():
  mask = keep_mask([1000, 1001], 0.1, tf.constant([3, 4])).numpy()
  assert mask.shape == (1000, 1001)  # an odd element count uses half of the last word
  assert abs(mask.mean() - 0.9) < 2e-3  # 1M Bernoulli(0.9): std 3e-4
  # the two halves of one 32-bit word are independent draws
  pairs = mask.reshape(-1)[:1000 * 1000].reshape(-1, 2)
  both_dropped = np.mean(~pairs[:, 0] & ~pairs[:, 1])
  assert abs(both_dropped - 0.01) < 1e-3
  # rows and columns are not patterned
  assert np.abs(mask.mean(axis=0) - 0.9).max() < 0.07
  assert np.abs(mask.mean(axis=1) - 0.9).max() < 0.07


@pytest.mark.parametrize("rate", [0.0, 1e-6, 0.1, 0.5, 0.999])
def test_the_threshold_realises_the_rate_to_2_to_the_minus_17(rate):
  assert abs(keep_threshold(rate) / 65536 - rate) <= 2 ** -17 or keep_threshold(rate) == 65535


def test_rates_outside_0_1_are_errors():
  for rate in (-0.1, 1.0):
    with pytest.raises(ValueError, match="dropout rate must be in"):
      keep_threshold(rate)


def test_kept_values_are_scaled_so_that_the_expectation_is_the_input():
  x = tf.fill([4000, 500], 2.0)
  gen = dropout_seed_generator(0.3)
  y = dropout(x, 0.3, True, gen).numpy()
  kept = y != 0
  scale = 65536 / (65536 - keep_threshold(0.3))
  np.testing.assert_allclose(y[kept], 2.0 * scale, rtol=1e-6)
  assert abs(y.mean() - 2.0) < 0.01


def test_no_op_unless_training_with_a_positive_rate():
  x = tf.random.normal([3, 5])
  assert dropout(x, 0.5, False, dropout_seed_generator(0.5)) is x
  assert dropout(x, 0.5, None, dropout_seed_generator(0.5)) is x
  assert dropout(x, 0.0, True, None) is x
  assert dropout_seed_generator(0.0) is None


def test_masks_follow_the_generator_state_and_resume_from_it():
  x = tf.ones([64, 64])
  gen = dropout_seed_generator(0.5)
  saved = gen.state.numpy()
  first, second = dropout(x, 0.5, True, gen), dropout(x, 0.5, True, gen)
  assert not np.array_equal(first.numpy(), second.numpy())  # every call draws a new mask
  gen.state.assign(saved)  # what restoring a checkpoint does
  np.testing.assert_array_equal(dropout(x, 0.5, True, gen).numpy(), first.numpy())
  np.testing.assert_array_equal(dropout(x, 0.5, True, gen).numpy(), second.numpy())


def test_gradient_is_the_mask_times_the_scale_in_float32_and_bfloat16():
  for dtype in (tf.float32, tf.bfloat16):
    x = tf.Variable(tf.ones([50, 40], dtype))
    gen = dropout_seed_generator(0.2)
    saved = gen.state.numpy()
    with tf.GradientTape() as tape:
      y = dropout(x, 0.2, True, gen)
      total = tf.reduce_sum(tf.cast(y, tf.float32))
    grad = tape.gradient(total, x)
    assert y.dtype == dtype
    np.testing.assert_array_equal(tf.cast(grad, tf.float32).numpy(),
                                  tf.cast(y, tf.float32).numpy())  # x is ones: y = mask * scale
    gen.state.assign(saved)


def test_inside_tf_function_each_call_draws_a_new_mask():
  gen = dropout_seed_generator(0.5)
  step = tf.function(lambda x: dropout(x, 0.5, True, gen))
  x = tf.ones([32, 32])
  assert not np.array_equal(step(x).numpy(), step(x).numpy())
  assert isinstance(gen, keras.random.SeedGenerator)
