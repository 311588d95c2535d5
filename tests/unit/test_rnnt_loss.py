"""The RNN-Transducer loss (open_seq2seq/losses/transducer_loss.py): equal to the sum over every
alignment, to a plain dynamic programme and to PaddlePaddle's warp-transducer, in loss and
gradient; padding, half precision, graphs of varying shapes, and a few steps of learning."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import open_seq2seq.losses
from open_seq2seq.errors import ConfigError
from open_seq2seq.losses import RNNTLoss, rnnt_loss
from tests.helpers import rnnt_reference as ref


def loss_and_grad(logits, labels, logit_lengths, label_lengths, blank=0, dtype=tf.float64):
  x = tf.cast(tf.constant(logits), dtype)
  with tf.GradientTape() as tape:
    tape.watch(x)
    losses = rnnt_loss(x, labels, logit_lengths, label_lengths, blank=blank)
  grads = tape.gradient(losses, x)
  return losses.numpy(), tf.cast(grads, tf.float64).numpy()


def random_labels(rng, shape, classes, blank):
  """Label ids in [0, classes) other than the blank."""
  ids = rng.integers(0, classes - 1, size=shape)
  return np.where(ids >= blank % classes, ids + 1, ids)


def random_batch(rng, batch, frames, labels, classes, blank, scale=2.0):
  """Logits, labels and lengths; the first utterance fills the batch's lattice, the others
  are shorter in frames and labels; padding is random too."""
  logit_lengths = np.concatenate([[frames], rng.integers(1, frames + 1, size=batch - 1)])
  label_lengths = np.concatenate([[labels], rng.integers(0, labels + 1, size=batch - 1)])
  logits = rng.normal(scale=scale, size=(batch, frames, labels + 1, classes))
  return (logits, random_labels(rng, (batch, labels), classes, blank), logit_lengths,
          label_lengths)


# ----------------------------------------------------------------------------- (a) definition
@pytest.mark.parametrize("frames,labels,classes,blank", [
    (1, 0, 2, 0), (1, 3, 4, 0), (4, 0, 3, 0), (2, 1, 2, -1), (3, 2, 4, 1), (4, 3, 4, 0),
    (4, 3, 4, -1), (4, 2, 3, 2)])
def test_one_utterance_equals_the_sum_over_every_alignment(frames, labels, classes, blank):
  rng = np.random.default_rng(frames * 100 + labels * 10 + classes)
  logits = rng.normal(scale=2.0, size=(frames, labels + 1, classes))
  ids = random_labels(rng, labels, classes, blank)
  blank_id = blank % classes
  expected = ref.enumerated_nll(logits, ids, blank_id)
  expected_grad = ref.numerical_gradient(ref.enumerated_nll, logits, ids, blank_id)
  assert np.isclose(ref.lattice_nll(logits, ids, blank_id), expected, rtol=1e-12)

  loss, grad = loss_and_grad(logits[None], ids[None], [frames], [labels], blank=blank)
  np.testing.assert_allclose(loss, [expected], rtol=1e-12)
  np.testing.assert_allclose(grad[0], expected_grad, atol=1e-8)
  loss32, grad32 = loss_and_grad(logits[None], ids[None], [frames], [labels], blank=blank,
                                 dtype=tf.float32)
  np.testing.assert_allclose(loss32, [expected], rtol=1e-5)
  np.testing.assert_allclose(grad32[0], expected_grad, atol=1e-5)


def test_a_padded_batch_gives_each_utterance_its_own_loss_and_gradient():
  rng = np.random.default_rng(7)
  lengths = [(4, 3), (2, 0), (1, 2), (3, 1), (4, 0)]
  classes = 4
  # the padding holds large garbage, the padded label ids are out of range
  logits = rng.normal(scale=300.0, size=(len(lengths), 4, 4, classes))
  labels = np.full((len(lengths), 3), 99)
  for b, (frames, count) in enumerate(lengths):
    logits[b, :frames, :count + 1] = rng.normal(scale=2.0, size=(frames, count + 1, classes))
    labels[b, :count] = random_labels(rng, count, classes, 0)
  losses, grads = loss_and_grad(logits, labels, [t for t, _ in lengths],
                                [u for _, u in lengths])
  for b, (frames, count) in enumerate(lengths):
    own = logits[b, :frames, :count + 1]
    alone_loss, alone_grad = loss_and_grad(own[None], labels[b:b + 1, :count], [frames],
                                           [count])
    assert np.isclose(losses[b], ref.enumerated_nll(own, labels[b, :count]), rtol=1e-12)
    np.testing.assert_allclose(losses[b], alone_loss[0], rtol=1e-12)
    np.testing.assert_allclose(grads[b, :frames, :count + 1], alone_grad[0], atol=1e-12)
    outside = np.ones(grads.shape[1:3], bool)
    outside[:frames, :count + 1] = False
    assert np.all(grads[b][outside] == 0.0)


def test_larger_random_batches_equal_a_plain_dynamic_programme():
  rng = np.random.default_rng(3)
  for blank in (0, -1):
    logits, labels, logit_lengths, label_lengths = random_batch(rng, 3, 30, 10, 8, blank)
    losses, grads = loss_and_grad(logits, labels, logit_lengths, label_lengths, blank=blank)
    for b in range(3):
      own = logits[b, :logit_lengths[b], :label_lengths[b] + 1]
      ids = labels[b, :label_lengths[b]]
      assert np.isclose(losses[b], ref.lattice_nll(own, ids, blank % 8), rtol=1e-10)
      coordinates = [tuple(rng.integers(0, n) for n in own.shape) for _ in range(40)]
      numerical = ref.numerical_gradient(ref.lattice_nll, own, ids, blank % 8,
                                         coordinates=coordinates)
      for index in coordinates:
        assert abs(grads[b][index] - numerical[index]) < 1e-7, index


def test_the_gradient_follows_any_upstream_weights():
  """Weights of any sign (the gradient's sign-aware path) scale each utterance's gradient."""
  logits, labels, logit_lengths, label_lengths = random_batch(
      np.random.default_rng(9), 3, 5, 3, 5, 0)
  _, grads = loss_and_grad(logits, labels, logit_lengths, label_lengths)
  weights = tf.constant([0.5, -2.0, 0.0], tf.float64)
  x = tf.constant(logits)
  with tf.GradientTape() as tape:
    tape.watch(x)
    weighted = tf.reduce_sum(weights * rnnt_loss(x, labels, logit_lengths, label_lengths))
  np.testing.assert_allclose(tape.gradient(weighted, x).numpy(),
                             grads * weights.numpy()[:, None, None, None], atol=1e-12)


def test_an_utterance_without_frames_costs_infinity_with_a_zero_gradient():
  logits = np.random.default_rng(0).normal(size=(2, 3, 3, 4))
  losses, grads = loss_and_grad(logits, [[1, 2], [3, 1]], [3, 0], [2, 1])
  assert np.isfinite(losses[0]) and losses[1] == np.inf
  assert np.all(np.isfinite(grads)) and np.all(grads[1] == 0.0)


@pytest.mark.parametrize("logit_lengths,label_lengths,labels,message", [
    ([3, 4], [2, 1], [[1, 2], [3, 1]], "logit length exceeds"),
    ([3, 3], [3, 1], [[1, 2], [3, 1]], "label length exceeds"),
    ([3, 3], [2, 1], [[1, 4], [3, 1]], "label id is not a class"),
])
def test_impossible_inputs_raise_one_clear_error(logit_lengths, label_lengths, labels, message):
  logits = tf.zeros([2, 3, 3, 4])
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    rnnt_loss(logits, labels, logit_lengths, label_lengths)
  with pytest.raises(tf.errors.InvalidArgumentError, match="U\\+1"):
    rnnt_loss(tf.zeros([2, 3, 4, 4]), [[1, 2], [3, 1]], [3, 3], [2, 1])


# ------------------------------------------------------------ (b) an independent implementation
def test_loss_and_gradient_equal_warp_transducer_through_paddle():
  if not ref.paddle_available():  # part of the test set-up: fail, never skip
    pytest.fail("PaddlePaddle is not installed: bash scripts/install_test_deps.sh",
                pytrace=False)
  rng = np.random.default_rng(11)
  batches = []
  for blank in (0, -1, 5):
    for _ in range(2):
      logits, labels, logit_lengths, label_lengths = random_batch(
          rng, 3, int(rng.integers(12, 21)), int(rng.integers(4, 9)), 12, blank, scale=3.0)
      batches.append((logits, labels, logit_lengths, label_lengths, blank % 12))
  for batch, (paddle_losses, paddle_grads) in zip(batches, ref.paddle_rnnt(batches)):
    losses, grads = loss_and_grad(*batch, dtype=tf.float32)
    np.testing.assert_allclose(losses, paddle_losses, rtol=1e-4)
    np.testing.assert_allclose(grads, paddle_grads, rtol=1e-4, atol=2e-6)
    losses64, grads64 = loss_and_grad(*batch)
    np.testing.assert_allclose(losses64, paddle_losses, rtol=1e-10)
    np.testing.assert_allclose(grads64, paddle_grads, atol=1e-10)


# ----------------------------------------------------------------------- (c) half precision
@pytest.mark.parametrize("dtype,loss_rtol,rounding,grad_atol", [
    (tf.bfloat16, 2e-3, 2.0 ** -8, 1.5e-2), (tf.float16, 2e-4, 2.0 ** -11, 2e-3)])
def test_half_precision_logits_run_the_recursion_in_float32(dtype, loss_rtol, rounding,
                                                             grad_atol):
  """Tolerances: the loss of bfloat16 logits is within 0.2 % of float32's (float16: 0.02 %);
  the gradient within one rounding (|gradient| <= 1) of float32's on the rounded logits."""
  rng = np.random.default_rng(5)
  logits, labels, logit_lengths, label_lengths = random_batch(rng, 3, 20, 8, 12, 0)
  full_losses, full_grads = loss_and_grad(logits, labels, logit_lengths, label_lengths,
                                          dtype=tf.float32)
  rounded = tf.cast(tf.cast(logits, dtype), tf.float32).numpy()
  rounded_losses, rounded_grads = loss_and_grad(rounded, labels, logit_lengths, label_lengths,
                                                dtype=tf.float32)
  x = tf.cast(logits, dtype)
  with tf.GradientTape() as tape:
    tape.watch(x)
    losses = rnnt_loss(x, labels, logit_lengths, label_lengths)
  grads = tape.gradient(losses, x)
  assert losses.dtype == tf.float32 and grads.dtype == dtype
  # the same float32 arithmetic as on the rounded logits; within rounding of float32's
  np.testing.assert_allclose(losses.numpy(), rounded_losses, rtol=1e-6)
  np.testing.assert_allclose(losses.numpy(), full_losses, rtol=loss_rtol)
  grads = tf.cast(grads, tf.float64).numpy()
  np.testing.assert_allclose(grads, rounded_grads, atol=rounding)
  np.testing.assert_allclose(grads, full_grads, atol=grad_atol)


# --------------------------------------------------------------------------------- (d) graphs
def test_one_graph_serves_every_shape_with_the_eager_results():
  traces = []

  @tf.function(input_signature=[tf.TensorSpec([None, None, None, None], tf.float32),
                                tf.TensorSpec([None, None], tf.int32),
                                tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int32)])
  def graph_loss_and_grad(logits, labels, logit_lengths, label_lengths):
    traces.append(1)
    with tf.GradientTape() as tape:
      tape.watch(logits)
      losses = rnnt_loss(logits, labels, logit_lengths, label_lengths)
    return losses, tape.gradient(losses, logits)

  rng = np.random.default_rng(2)
  # (1, 1, 0, 2): a one-node lattice, whose forward scan was once empty and could not be
  # stacked in a graph of unknown shapes
  for batch, frames, labels, classes in [(2, 5, 3, 6), (3, 9, 1, 6), (1, 4, 0, 3), (4, 7, 5, 9),
                                         (1, 1, 0, 2)]:
    case = random_batch(rng, batch, frames, labels, classes, 0)
    losses, grads = graph_loss_and_grad(*(tf.constant(a, d) for a, d in zip(
        case, (tf.float32, tf.int32, tf.int32, tf.int32))))
    eager_losses, eager_grads = loss_and_grad(*case, dtype=tf.float32)
    np.testing.assert_allclose(losses.numpy(), eager_losses, rtol=1e-6)
    np.testing.assert_allclose(grads.numpy(), eager_grads, atol=1e-6)
    for b in range(batch):
      own = case[0][b, :case[2][b], :case[3][b] + 1]
      assert np.isclose(losses[b], ref.lattice_nll(own, case[1][b, :case[3][b]]), rtol=1e-5)
  assert len(traces) == 1


# ------------------------------------------------------------------------- the Loss class
def test_the_loss_class_sums_utterances_reads_the_decoder_contract_and_masks_infinity():
  rng = np.random.default_rng(4)
  logits = rng.normal(size=(3, 5, 4, 6)).astype(np.float32)
  ids = np.array([[0, 1, 2], [4, 4, 0], [1, 0, 0]])
  frames, counts = np.array([5, 3, 0]), np.array([3, 2, 1])
  inputs = {"decoder_output": {"logits": tf.constant(logits), "src_lengths": frames},
            "target_tensors": (ids, counts)}
  expected = rnnt_loss(logits, ids, frames, counts, blank=5).numpy()  # blank: the last class
  loss_sum, weight = RNNTLoss().compute_loss(inputs)
  assert loss_sum.dtype == tf.float32 and float(weight) == 3.0
  assert np.isclose(float(loss_sum), expected[0] + expected[1], rtol=1e-6)
  kept, _ = RNNTLoss({"mask_nan": False}).compute_loss(inputs)
  assert float(kept) == np.inf
  first_blank, _ = RNNTLoss({"blank": 0}).compute_loss(
      {**inputs, "target_tensors": (ids + 1, counts)})
  np.testing.assert_allclose(float(first_blank), float(rnnt_loss(
      logits, ids + 1, frames, counts)[:2].numpy().sum()), rtol=1e-6)
  with pytest.raises(ConfigError, match="blank_id"):
    RNNTLoss({"blank_id": 0})
  assert open_seq2seq.losses.RNNTLoss is RNNTLoss and callable(open_seq2seq.losses.rnnt_loss)


# ----------------------------------------------------------------------------- (e) learning
def test_free_logits_learn_the_labels_and_greedy_decoding_reads_them_back():
  """Adam on free joint outputs for 100 steps: the loss falls near 0 and the greedy
  transducer search emits each utterance's labels (one with a repeated label)."""
  targets = [[0, 1, 2], [1, 1]]
  frames, blank = [6, 4], 3
  ids = np.array([[0, 1, 2], [1, 1, 0]])
  logits = tf.Variable(tf.random.stateless_normal([2, 6, 4, 4], seed=[1, 2]))
  loss = RNNTLoss()  # blank: the last of the 4 classes
  optimizer = keras.optimizers.Adam(0.1)
  inputs = {"decoder_output": {"logits": logits, "src_lengths": frames},
            "target_tensors": (ids, [3, 2])}

  @tf.function
  def step():
    with tf.GradientTape() as tape:
      total, weight = loss.compute_loss(inputs)
      mean = total / weight
    optimizer.apply_gradients([(tape.gradient(mean, logits), logits)])
    return mean

  first = float(step())
  for _ in range(99):
    last = float(step())
  assert first > 2.0 and last < 0.1, (first, last)
  scores = logits.numpy()
  for b, expected in enumerate(targets):
    emitted, t, u = [], 0, 0
    while t < frames[b] and len(emitted) < 10:
      best = int(np.argmax(scores[b, t, u]))
      if best == blank or u == scores.shape[2] - 1:
        t += 1
      else:
        emitted.append(best)
        u += 1
    assert emitted == expected
