"""BasicSampledSequenceLoss, FakeDecoder and the classifier metrics of the LM family."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.decoders import FakeDecoder
from open_seq2seq.losses import BasicSampledSequenceLoss, BasicSequenceLoss
from open_seq2seq.models.lstm_lm import class_report

RNG = np.random.default_rng(0)


def _sampled_output(batch=3, time=4, units=5, vocab=50, num_sampled=10):
  return {"hidden": tf.constant(RNG.normal(size=(batch, time, units)), tf.float32),
          "softmax_weights": tf.Variable(RNG.normal(size=(vocab, units)), dtype=tf.float32),
          "softmax_bias": tf.Variable(np.zeros(vocab), dtype=tf.float32),
          "num_sampled": num_sampled}


def _targets(batch=3, time=4, vocab=50, lengths=(4, 2, 3)):
  return (tf.constant(RNG.integers(0, vocab, size=(batch, time)), tf.int32),
          tf.constant(lengths, tf.int32))


def test_with_logits_it_is_the_basic_sequence_loss():
  logits = tf.constant(RNG.normal(size=(3, 4, 50)), tf.float32)
  targets = _targets()
  for params in ({}, {"average_across_timestep": True}, {"do_mask": False}):
    want = BasicSequenceLoss(params).compute_loss({"decoder_output": {"logits": logits},
                                                   "target_tensors": targets})
    got = BasicSampledSequenceLoss(params).compute_loss({"decoder_output": {"logits": logits},
                                                         "target_tensors": targets})
    np.testing.assert_allclose([g.numpy() for g in got], [w.numpy() for w in want], rtol=1e-6)


def test_sampled_softmax_masks_weighs_and_trains_the_output_weights():
  output = _sampled_output()
  targets = _targets()
  loss = BasicSampledSequenceLoss({"average_across_timestep": True})
  with tf.GradientTape() as tape:
    total, weight = loss.compute_loss({"decoder_output": output, "target_tensors": targets})
  assert weight.numpy() == 9.0  # 4 + 2 + 3 real target words
  assert np.isfinite(total.numpy()) and total.numpy() > 0
  grads = tape.gradient(total, [output["softmax_weights"], output["softmax_bias"]])
  assert all(g is not None for g in grads)
  per_sequence = BasicSampledSequenceLoss({}).compute_loss({"decoder_output": output,
                                                            "target_tensors": targets})
  assert per_sequence[1].numpy() == 3.0
  # masked positions contribute nothing: change a padded target, same loss (same samples)
  tf.random.set_seed(1)
  a = loss.compute_loss({"decoder_output": output, "target_tensors": targets})[0]
  ids = targets[0].numpy()
  ids[1, 3] = (ids[1, 3] + 1) % 50
  tf.random.set_seed(1)
  b = loss.compute_loss({"decoder_output": output,
                         "target_tensors": (tf.constant(ids), targets[1])})[0]
  np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def test_sampled_loss_is_close_to_the_full_softmax_with_many_samples():
  # With (almost) every word sampled the estimate approaches the exact cross entropy.
  output = _sampled_output(vocab=40, num_sampled=39)
  targets = _targets(vocab=40, lengths=(4, 4, 4))
  logits = tf.matmul(output["hidden"], output["softmax_weights"], transpose_b=True)
  exact = BasicSequenceLoss({}).compute_loss({"decoder_output": {"logits": logits},
                                              "target_tensors": targets})[0].numpy()
  sampled = np.mean([BasicSampledSequenceLoss({}).compute_loss(
      {"decoder_output": output, "target_tensors": targets})[0].numpy() for _ in range(5)])
  assert abs(sampled - exact) / exact < 0.35


def test_fake_decoder_passes_the_encoder_output_through():
  decoder = FakeDecoder({})
  encoder_output = {"logits": tf.ones([2, 3]), "outputs": tf.zeros([2], tf.int32)}
  out = decoder({"encoder_output": encoder_output})
  assert set(out) == {"logits", "outputs"}
  assert not decoder.weights


def test_class_report():
  labels = np.array([0, 0, 1, 1, 1])
  preds = np.array([0, 1, 1, 1, 0])
  m = class_report(labels, preds, ["negative", "positive"])
  assert m["accuracy"] == pytest.approx(0.6)
  assert m["precision_positive"] == pytest.approx(2 / 3)
  assert m["recall_positive"] == pytest.approx(2 / 3)
  assert m["precision_negative"] == pytest.approx(0.5)
  assert m["recall_negative"] == pytest.approx(0.5)
  assert m["f1_negative"] == pytest.approx(0.5)
  assert m["macro_f1"] == pytest.approx((0.5 + 2 / 3) / 2)
  never = class_report(np.array([0, 0]), np.array([0, 0]), ["a", "b"])
  assert never["precision_b"] == 0.0 and never["f1_b"] == 0.0 and never["accuracy"] == 1.0
