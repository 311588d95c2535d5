"""Sequence and classification losses against hand computations on tiny logits."""

import math

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.losses import (BasicSequenceLoss, CrossEntropyLoss,
                                 PaddedCrossEntropyLossWithSmoothing)

# batch 2, time 3, vocab 4; the second target has length 2 (its last position is padding)
LOGITS = np.array([[[2.0, 0.5, -1.0, 0.0], [0.1, 0.2, 0.3, 0.4], [1.0, -1.0, 3.0, 0.0]],
                   [[0.0, 0.0, 0.0, 5.0], [-2.0, 1.0, 0.5, 0.0], [9.0, 9.0, 9.0, 9.0]]],
                  np.float32)
TARGETS = np.array([[0, 3, 2], [3, 1, 0]], np.int32)
LENGTHS = np.array([3, 2], np.int32)


def _log_softmax(row):
  row = np.asarray(row, np.float64)
  return row - math.log(np.exp(row).sum())


def _inputs(logits=LOGITS, targets=TARGETS, lengths=LENGTHS):
  return {"decoder_output": {"logits": tf.constant(logits)},
          "target_tensors": (tf.constant(targets), tf.constant(lengths))}


def _real_positions():
  return [(b, t) for b in range(2) for t in range(LENGTHS[b])]


# ----------------------------------------------------------------------------- padded CE
def test_padded_cross_entropy_without_smoothing():
  loss_sum, weight = PaddedCrossEntropyLossWithSmoothing({}).compute_loss(_inputs())
  expected = -sum(_log_softmax(LOGITS[b, t])[TARGETS[b, t]] for b, t in _real_positions())
  assert loss_sum.dtype == tf.float32 and weight.dtype == tf.float32
  assert float(weight) == 5.0
  assert float(loss_sum) == pytest.approx(expected, rel=1e-6)


def test_padded_cross_entropy_with_smoothing():
  ls, vocab = 0.1, 4
  loss = PaddedCrossEntropyLossWithSmoothing({"label_smoothing": ls})
  loss_sum, weight = loss.compute_loss(_inputs())
  confidence, low = 1 - ls, ls / (vocab - 1)
  constant = -(confidence * math.log(confidence) + (vocab - 1) * low * math.log(low))
  expected = 0.0
  for b, t in _real_positions():
    target = np.full(vocab, low)
    target[TARGETS[b, t]] = confidence
    expected += -(target * _log_softmax(LOGITS[b, t])).sum() - constant
  assert float(weight) == 5.0
  assert float(loss_sum) == pytest.approx(expected, rel=1e-5)


def test_smoothed_loss_of_the_smoothed_distribution_is_zero():
  ls, vocab = 0.2, 6
  confidence, low = 1 - ls, ls / (vocab - 1)
  gold = [[1, 4]]
  logits = np.log(np.where(np.eye(vocab)[gold] > 0, confidence, low)).astype(np.float32)
  loss = PaddedCrossEntropyLossWithSmoothing({"label_smoothing": ls})
  loss_sum, weight = loss.compute_loss(_inputs(logits, np.array(gold), np.array([2])))
  assert float(weight) == 2.0
  assert float(loss_sum) == pytest.approx(0.0, abs=1e-5)


def test_padded_cross_entropy_pads_to_the_longer_of_logits_and_targets():
  short_targets, lengths = TARGETS[:, :2], np.array([2, 1], np.int32)
  loss_sum, weight = PaddedCrossEntropyLossWithSmoothing({}).compute_loss(
      _inputs(targets=short_targets, lengths=lengths))
  expected = -(_log_softmax(LOGITS[0, 0])[0] + _log_softmax(LOGITS[0, 1])[3]
               + _log_softmax(LOGITS[1, 0])[3])
  assert float(weight) == 3.0
  assert float(loss_sum) == pytest.approx(expected, rel=1e-6)


def test_padded_cross_entropy_half_precision_logits_are_cast():
  loss = PaddedCrossEntropyLossWithSmoothing({"label_smoothing": 0.1})
  full, _ = loss.compute_loss(_inputs())
  half, _ = loss.compute_loss(_inputs(LOGITS.astype(tf.bfloat16.as_numpy_dtype)))
  assert half.dtype == tf.float32
  assert float(half) == pytest.approx(float(full), rel=2e-2)


def test_vocab_size_sources_and_padding_to_eight():
  given = PaddedCrossEntropyLossWithSmoothing({}, vocab_size=4)
  assert given.vocab_size(tf.zeros([1, 1, 4])) == 4
  assert PaddedCrossEntropyLossWithSmoothing({}).vocab_size(tf.zeros([1, 1, 6])) == 6  # logits'
  configured = PaddedCrossEntropyLossWithSmoothing({"tgt_vocab_size": 6}, vocab_size=4)
  assert configured.vocab_size(tf.zeros([1, 1, 6])) == 6  # the config's size wins
  padded = PaddedCrossEntropyLossWithSmoothing({"tgt_vocab_size": 5,
                                                "pad_embeddings_2_eight": True})
  assert padded.vocab_size(tf.zeros([1, 1, 8])) == 8
  with pytest.raises(ConfigError, match="logits have 8 classes but the loss expects 5"):
    PaddedCrossEntropyLossWithSmoothing({"tgt_vocab_size": 5}).vocab_size(tf.zeros([1, 1, 8]))


def test_padded_cross_entropy_params_are_validated():
  with pytest.raises(ConfigError, match="loss_params/label_smothing: unknown parameter.*"
                                        "did you mean 'label_smoothing'"):
    PaddedCrossEntropyLossWithSmoothing({"label_smothing": 0.1})
  with pytest.raises(ConfigError, match="label_smoothing: must be in"):
    PaddedCrossEntropyLossWithSmoothing({"label_smoothing": 1.0})
  PaddedCrossEntropyLossWithSmoothing({"batch_size": 32, "label_smoothing": 0})  # compat keys


def test_padded_cross_entropy_works_in_tf_function_with_unknown_shapes():
  loss = PaddedCrossEntropyLossWithSmoothing({"label_smoothing": 0.1})
  spec = (tf.TensorSpec([None, None, 4], tf.float32), tf.TensorSpec([None, None], tf.int32),
          tf.TensorSpec([None], tf.int32))
  traced = tf.function(lambda x, y, n: loss.compute_loss(
      {"decoder_output": {"logits": x}, "target_tensors": (y, n)}), input_signature=spec)
  eager = loss.compute_loss(_inputs())
  graph = traced(LOGITS, TARGETS, LENGTHS)
  assert float(graph[0]) == pytest.approx(float(eager[0]), rel=1e-6)


# ----------------------------------------------------------------------------- basic
def _per_token(b, t, target):
  return -_log_softmax(LOGITS[b, t])[target]


def test_basic_sequence_loss_defaults_weight_by_sequences():
  loss_sum, weight = BasicSequenceLoss({}).compute_loss(_inputs())
  expected = sum(_per_token(b, t, TARGETS[b, t]) for b, t in _real_positions())
  assert float(loss_sum) == pytest.approx(expected, rel=1e-6)
  assert float(weight) == 2.0  # OpenSeq2Seq: sum / batch_size


def test_basic_sequence_loss_average_across_timestep_weights_by_tokens():
  _, weight = BasicSequenceLoss({"average_across_timestep": True}).compute_loss(_inputs())
  assert float(weight) == 5.0


def test_basic_sequence_loss_offset_target_by_one():
  loss = BasicSequenceLoss({"offset_target_by_one": True, "average_across_timestep": True})
  loss_sum, weight = loss.compute_loss(_inputs())
  # logits at t predict target t + 1; mask = length - 1 over 2 steps
  positions = [(0, 0), (0, 1), (1, 0)]
  expected = sum(_per_token(b, t, TARGETS[b, t + 1]) for b, t in positions)
  assert float(weight) == 3.0
  assert float(loss_sum) == pytest.approx(expected, rel=1e-6)


def test_offset_target_by_one_is_off_for_targets_without_a_start_symbol():
  shifted = BasicSequenceLoss({"offset_target_by_one": True}, targets_start_with_go=False)
  aligned = BasicSequenceLoss({})
  assert [float(x) for x in shifted.compute_loss(_inputs())] == \
      [float(x) for x in aligned.compute_loss(_inputs())]


def test_text2text_announces_the_offset_it_ignores():
  from open_seq2seq import slots
  from open_seq2seq.models import Text2Text
  config = {"loss": BasicSequenceLoss, "loss_params": {"offset_target_by_one": True}}
  assert any(line.startswith("loss_params/offset_target_by_one: ignored:")
             for line in Text2Text.ignored_combinations(config))
  assert Text2Text.ignored_combinations({"loss_params": {}}) == []
  assert any(line.startswith("loss_params/offset_target_by_one: ignored:")
             for line in slots.ignored_settings(Text2Text, config))


def test_basic_sequence_loss_without_mask_counts_every_position():
  loss = BasicSequenceLoss({"do_mask": False, "average_across_timestep": True})
  loss_sum, weight = loss.compute_loss(_inputs())
  expected = sum(_per_token(b, t, TARGETS[b, t]) for b in range(2) for t in range(3))
  assert float(weight) == 6.0
  assert float(loss_sum) == pytest.approx(expected, rel=1e-6)


def test_basic_and_padded_agree_without_smoothing():
  basic, _ = BasicSequenceLoss({}).compute_loss(_inputs())
  padded, _ = PaddedCrossEntropyLossWithSmoothing({}).compute_loss(_inputs())
  assert float(basic) == pytest.approx(float(padded), rel=1e-6)


# ----------------------------------------------------------------------------- classification
def test_cross_entropy_sparse_and_one_hot_labels():
  logits = LOGITS[:, 0]
  labels = np.array([1, 3], np.int64)
  expected = -(_log_softmax(logits[0])[1] + _log_softmax(logits[1])[3])
  sparse = CrossEntropyLoss().compute_loss({"decoder_output": {"logits": tf.constant(logits)},
                                            "target_tensors": (tf.constant(labels),)})
  one_hot = CrossEntropyLoss({}).compute_loss({
      "decoder_output": {"logits": tf.constant(logits)},
      "target_tensors": [tf.constant(np.eye(4, dtype=np.float32)[labels])]})
  for loss_sum, weight in (sparse, one_hot):
    assert float(weight) == 2.0
    assert float(loss_sum) == pytest.approx(expected, rel=1e-6)


def test_cross_entropy_uses_the_last_step_of_sequence_logits():
  labels = np.array([2, 0], np.int32)
  loss_sum, weight = CrossEntropyLoss().compute_loss({
      "decoder_output": {"logits": tf.constant(LOGITS)}, "target_tensors": (labels,)})
  expected = -(_log_softmax(LOGITS[0, 2])[2] + _log_softmax(LOGITS[1, 2])[0])
  assert float(weight) == 2.0
  assert float(loss_sum) == pytest.approx(expected, rel=1e-6)
