"""CrossEntropyLoss for classification (image labels now, sentiment labels later)."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.losses import CrossEntropyLoss
from open_seq2seq.losses import cross_entropy_loss

LOGITS = np.array([[2.0, 0.5, -1.0], [0.1, 0.2, 3.0], [1.0, 1.0, 1.0], [-2.0, 4.0, 0.0]],
                  np.float32)
LABELS = np.array([0, 2, 1, 0], np.int32)


def expected_sum():
  log_probs = LOGITS - np.log(np.exp(LOGITS).sum(axis=1, keepdims=True))
  return -log_probs[np.arange(4), LABELS].sum()


def loss_of(logits, labels, **params):
  return CrossEntropyLoss(params or None).compute_loss(
      {"decoder_output": {"logits": logits}, "target_tensors": (labels,)})


def test_openseq2seq_import_path_is_the_same_class():
  assert cross_entropy_loss.CrossEntropyLoss is CrossEntropyLoss


def test_sum_over_images_and_their_number():
  loss_sum, weight = loss_of(tf.constant(LOGITS), tf.constant(LABELS))
  assert loss_sum.dtype == tf.float32 and weight.dtype == tf.float32
  assert float(weight) == 4.0
  assert float(loss_sum) == pytest.approx(expected_sum(), rel=1e-6)


def test_half_precision_logits_give_a_float32_loss():
  loss_sum, _ = loss_of(tf.constant(LOGITS, tf.bfloat16), tf.constant(LABELS, tf.int64))
  assert loss_sum.dtype == tf.float32
  assert float(loss_sum) == pytest.approx(expected_sum(), rel=2e-2)


def test_one_hot_labels_as_openseq2seq_fed_them():
  one_hot = np.eye(3, dtype=np.float32)[LABELS]
  loss_sum, weight = loss_of(tf.constant(LOGITS), tf.constant(one_hot))
  assert float(weight) == 4.0
  assert float(loss_sum) == pytest.approx(expected_sum(), rel=1e-6)


def test_gradient_is_softmax_minus_one_hot():
  logits = tf.Variable(LOGITS)
  with tf.GradientTape() as tape:
    loss_sum, _ = loss_of(logits, tf.constant(LABELS))
  grad = tape.gradient(loss_sum, logits).numpy()
  softmax = np.exp(LOGITS) / np.exp(LOGITS).sum(axis=1, keepdims=True)
  np.testing.assert_allclose(grad, softmax - np.eye(3)[LABELS], atol=1e-6)
