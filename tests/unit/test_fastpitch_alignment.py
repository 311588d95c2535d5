"""FastPitch's learned alignment: MAS against a brute-force search, the forward-sum loss, the
beta-binomial prior, the binarization loss and per-symbol pitch averaging."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.parts.fastpitch.alignment import (average_per_symbol, beta_binomial_log_prior,
                                                    binarization_loss, durations_of,
                                                    forward_sum_loss, monotonic_alignment_search)


def brute_force_path(log_probs: np.ndarray) -> np.ndarray:
  """The best monotonic path of a [T, N] matrix by trying every one (T >= N): symbol index
  per frame, starting at 0, ending at N - 1, each step +0 or +1."""
  frames, symbols = log_probs.shape
  best, best_score = None, -np.inf
  for moves in itertools.combinations(range(1, frames), symbols - 1):
    index = np.zeros(frames, np.int64)
    for t in moves:
      index[t:] += 1
    score = log_probs[np.arange(frames), index].sum()
    if score > best_score:
      best, best_score = index, score
  return best


def padded(matrices: list[np.ndarray], garbage: float = 0.0) -> np.ndarray:
  frames = max(m.shape[0] for m in matrices)
  symbols = max(m.shape[1] for m in matrices)
  out = np.full((len(matrices), frames, symbols), garbage, np.float32)
  for b, m in enumerate(matrices):
    out[b, :m.shape[0], :m.shape[1]] = m
  return out


@pytest.mark.parametrize("seed", range(4))
def test_mas_finds_the_best_monotonic_path_of_every_utterance_in_a_padded_batch(seed):
  r = np.random.default_rng(seed)
  shapes = [(7, 4), (5, 5), (8, 3), (6, 1), (4, 2)]
  matrices = [r.normal(size=shape).astype(np.float32) for shape in shapes]
  # padding holds large values: a search that read them would go there
  batch = padded(matrices, garbage=50.0)
  path = monotonic_alignment_search(tf.constant(batch), tf.constant([n for _, n in shapes]),
                                    tf.constant([t for t, _ in shapes])).numpy()
  assert path.shape == batch.shape and path.dtype == np.float32
  for b, ((frames, symbols), matrix) in enumerate(zip(shapes, matrices)):
    np.testing.assert_array_equal(path[b, :frames].argmax(-1), brute_force_path(matrix))
    np.testing.assert_array_equal(path[b, :frames].sum(-1), 1.0)  # one symbol per frame
    assert not path[b, frames:].any() and not path[b, :, symbols:].any()
    durations = durations_of(tf.constant(path[b:b + 1])).numpy()[0]
    assert durations.sum() == frames
    assert (durations[:symbols] >= 1).all()


def test_mas_durations_sum_to_the_frames_of_longer_random_utterances():
  r = np.random.default_rng(9)
  text, mel = np.array([30, 11, 17]), np.array([120, 40, 17])
  log_probs = r.normal(size=(3, 120, 30)).astype(np.float32)
  durations = durations_of(monotonic_alignment_search(
      tf.constant(log_probs), tf.constant(text), tf.constant(mel))).numpy()
  np.testing.assert_array_equal(durations.sum(1), mel)
  for b in range(3):
    assert (durations[b, :text[b]] >= 1).all() and not durations[b, text[b]:].any()


def test_mas_runs_inside_a_traced_function():
  log_probs = tf.constant(np.random.default_rng(1).normal(size=(2, 9, 4)).astype(np.float32))
  eager = monotonic_alignment_search(log_probs, tf.constant([4, 2]), tf.constant([9, 6]))
  traced = tf.function(monotonic_alignment_search)(log_probs, tf.constant([4, 2]),
                                                   tf.constant([9, 6]))
  np.testing.assert_array_equal(eager.numpy(), traced.numpy())


@pytest.mark.parametrize("scaling", [1.0, 0.3])
def test_beta_binomial_prior_rows_sum_to_one_and_favour_the_diagonal(scaling):
  text, mel = tf.constant([5, 3, 1]), tf.constant([20, 9, 4])
  prior = np.exp(beta_binomial_log_prior(text, mel, 5, 20, scaling).numpy())
  for b, (symbols, frames) in enumerate([(5, 20), (3, 9), (1, 4)]):
    np.testing.assert_allclose(prior[b, :frames].sum(-1), 1.0, atol=1e-5)
    assert not prior[b, :frames, symbols:].any()
    modes = prior[b, :frames, :symbols].argmax(-1)
    assert (np.diff(modes) >= 0).all() and modes[0] == 0 and modes[-1] == symbols - 1


def diagonal_log_probs(frames: int, symbols: int, sharpness: float) -> np.ndarray:
  """Log-softmax rows peaked at symbol t * N / T (sharpness 0: uniform)."""
  target = np.arange(frames) * symbols // frames
  logits = -sharpness * (np.arange(symbols)[None, :] - target[:, None]) ** 2
  return (logits - np.log(np.exp(logits).sum(-1, keepdims=True))).astype(np.float32)


def test_forward_sum_loss_is_finite_and_falls_as_the_alignment_becomes_diagonal():
  text, mel = tf.constant([6, 4]), tf.constant([24, 10])
  losses = []
  for sharpness in (0.0, 0.5, 2.0, 8.0):
    batch = padded([diagonal_log_probs(24, 6, sharpness), diagonal_log_probs(10, 4, sharpness)])
    loss = forward_sum_loss(tf.constant(batch), text, mel).numpy()
    assert np.isfinite(loss).all() and (loss > 0).all()
    losses.append(loss)
  losses = np.array(losses)
  assert (np.diff(losses, axis=0) < 0).all(), losses


def test_forward_sum_loss_ignores_padding_and_drops_unalignable_utterances():
  r = np.random.default_rng(3)
  alone = diagonal_log_probs(10, 4, 1.0)
  batch = padded([alone, r.normal(size=(12, 6))], garbage=30.0)
  batched = forward_sum_loss(tf.constant(batch), tf.constant([4, 6]), tf.constant([10, 12]))
  single = forward_sum_loss(tf.constant(alone[None]), tf.constant([4]), tf.constant([10]))
  np.testing.assert_allclose(batched.numpy()[0], single.numpy()[0], rtol=1e-5)
  short = forward_sum_loss(tf.constant(batch), tf.constant([4, 6]), tf.constant([10, 3]))
  assert short.numpy()[1] == 0.0 and np.isfinite(short.numpy()).all()


def test_forward_sum_loss_has_finite_gradients():
  log_probs = tf.Variable(padded([diagonal_log_probs(9, 3, 0.5), diagonal_log_probs(5, 5, 0.5)]))
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(forward_sum_loss(tf.nn.log_softmax(log_probs), tf.constant([3, 5]),
                                          tf.constant([9, 5])))
  grad = tape.gradient(loss, log_probs).numpy()
  assert np.isfinite(grad).all() and np.abs(grad).sum() > 0


def test_binarization_loss_is_minus_log_soft_on_the_hard_path_per_frame():
  soft = np.array([[[0.5, 0.5], [0.25, 0.75], [0.1, 0.9], [0.3, 0.7]]], np.float32)
  hard = np.array([[[1, 0], [0, 1], [0, 1], [0, 0]]], np.float32)
  loss = binarization_loss(tf.constant(hard), tf.constant(soft), tf.constant([3])).numpy()
  expected = -(np.log(0.5) + np.log(0.75) + np.log(0.9)) / 3
  np.testing.assert_allclose(loss, [expected], rtol=1e-6)


def test_pitch_is_averaged_over_each_symbols_voiced_frames():
  pitch = np.array([[1.0, 0.0, 3.0, 0.0, 0.0, 2.0, 0.0]], np.float32)
  index = [0, 0, 0, 1, 1, 2, 2]  # symbol 1 has only unvoiced frames
  path = np.zeros((1, 7, 4), np.float32)
  path[0, np.arange(7), index] = 1.0
  averaged = average_per_symbol(tf.constant(pitch), tf.constant(path)).numpy()
  np.testing.assert_allclose(averaged, [[2.0, 0.0, 2.0, 0.0]])


def test_forward_sum_of_a_long_utterance_needs_memory_linear_in_its_length():
  """A 60 s prompt of 400 symbols (the Asterisk corpus has one of 71 s): CTC's dense path
  (tf.nn.ctc_loss on dense labels) would keep a symbols x symbols transition per frame,
  6000 x 2 x 801 x 801 floats = 31 GB; the C++ kernel's memory is frames x symbols."""
  r = np.random.default_rng(3)
  log_probs = tf.nn.log_softmax(tf.constant(r.normal(size=(2, 6000, 400)).astype(np.float32)))
  loss = forward_sum_loss(log_probs, tf.constant([400, 250]), tf.constant([6000, 4000])).numpy()
  assert loss.shape == (2,) and np.isfinite(loss).all() and (loss > 0).all()
