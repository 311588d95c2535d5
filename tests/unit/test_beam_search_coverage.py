"""Beam search's GNMT coverage penalty: the formula by hand, a winner it changes, exactness."""

import itertools
import math

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.parts.beam_search import (COVERAGE_FLOOR, beam_search, coverage_score,
                                            greedy_decode)

PAD, EOS, A, B = 0, 1, 2, 3
GO = 9  # an input id outside the toy vocabulary


def test_coverage_score_by_hand():
  # Attention of three decoder steps over three source positions, summed per position:
  # [0.5+0.6+0.1, 0.3+0.3+0.1, 0.2+0.1+0.8] = [1.2, 0.7, 1.1] -> log(1) + log(0.7) + log(1).
  history = np.array([[0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8]], np.float32)
  sums = tf.constant(history.sum(0)[None])
  assert coverage_score(sums).numpy()[0] == pytest.approx(math.log(0.7), rel=1e-6)
  # The first two steps only: [1.1, 0.6, 0.3] -> log(0.6) + log(0.3); the padded third
  # position counts for nothing.
  sums = tf.constant(history[:2].sum(0)[None])
  assert coverage_score(sums).numpy()[0] == pytest.approx(math.log(0.6) + math.log(0.3),
                                                          rel=1e-6)
  mask = tf.constant([[True, True, False]])
  assert coverage_score(sums, mask).numpy()[0] == pytest.approx(math.log(0.6), rel=1e-6)
  # A position never attended to costs log(floor), not -inf.
  assert coverage_score(tf.constant([[0.0, 2.0]])).numpy()[0] == pytest.approx(
      math.log(COVERAGE_FLOOR), rel=1e-6)


# A two-position "source": GO attends to position 0, A to position 1. From GO, EOS is likelier
# (0.6) than A (0.4); after A, EOS is almost certain. [EOS] alone leaves position 1 uncovered.
P_EOS_FIRST, P_A_FIRST = 0.6, 0.4


def toy_step(ids, i, states):
  log_p_first = np.log([1e-6, P_EOS_FIRST, P_A_FIRST, 1e-6])
  log_p_after_a = np.log([1e-6, 0.98, 1e-6, 0.02])
  logits = tf.where((ids == A)[:, None], tf.constant(log_p_after_a, tf.float32)[None],
                    tf.constant(log_p_first, tf.float32)[None])
  attention = tf.where((ids == A)[:, None], tf.constant([[0.0, 1.0]]), tf.constant([[1.0, 0.0]]))
  return logits, {"coverage": states["coverage"] + attention}


def log_softmax(x):
  x = np.asarray(x, np.float64)
  return x - np.log(np.exp(x - x.max()).sum()) - x.max()


def run_toy(beta, mask):
  states = {"coverage": tf.zeros([2, 2])}
  mask = tf.repeat(tf.constant(mask), 3, axis=0)
  return beam_search(toy_step, tf.fill([2], GO), 3, 3, 4, 0.0, EOS, states=states,
                     pad_id=PAD, coverage_penalty=beta,
                     coverage_fn=lambda s: coverage_score(s["coverage"], mask))


def test_coverage_penalty_changes_the_winner():
  first = log_softmax(np.log([1e-6, P_EOS_FIRST, P_A_FIRST, 1e-6]))
  after_a = log_softmax(np.log([1e-6, 0.98, 1e-6, 0.02]))
  mask = [[True, True], [True, False]]  # the second example's position 1 is padding
  plain = run_toy(0.0, mask)
  assert plain.ids[:, 0, :1].numpy().tolist() == [[EOS], [EOS]]
  np.testing.assert_allclose(plain.scores[:, 0], first[EOS], rtol=1e-5)

  beta = 0.1
  covered = run_toy(beta, mask)
  # Example 0: [EOS] pays beta * log(floor) for the unattended position, [A, EOS] nothing.
  assert covered.ids[0, 0, :2].numpy().tolist() == [A, EOS]
  np.testing.assert_allclose(covered.scores[0, 0], first[A] + after_a[EOS], rtol=1e-5)
  eos_alone = first[EOS] + beta * math.log(COVERAGE_FLOOR)
  assert np.isclose(covered.scores[0].numpy(), eos_alone, rtol=1e-5).any()
  # Example 1: position 1 is padding, so [EOS] covers everything and still wins.
  assert covered.ids[1, 0, :1].numpy().tolist() == [EOS]
  np.testing.assert_allclose(covered.scores[1, 0], first[EOS], rtol=1e-5)
  for scores in covered.scores.numpy():
    finite = scores[np.isfinite(scores)]
    assert (np.diff(finite) <= 1e-6).all()


def test_coverage_ranks_finishing_extensions_of_different_hypotheses():
  """At the length limit every extension of the likelier prefix [A] outranks those of [B] by
  log-probability, but [A] leaves source position 1 unattended: the penalty must act before
  the search keeps its two finished hypotheses, not after."""
  first = np.log([1e-3, 0.05, 0.5, 0.4])  # from GO: A and B alive, EOS unlikely
  uniform = np.log([0.25] * 4)

  def step(ids, i, states):
    logits = tf.where((ids == GO)[:, None], tf.constant(first, tf.float32)[None],
                      tf.constant(uniform, tf.float32)[None])
    attention = tf.where((ids == B)[:, None], tf.constant([[0.0, 1.0]]),
                         tf.constant([[1.0, 0.0]]))
    return logits, {"coverage": states["coverage"] + attention}

  result = beam_search(step, tf.fill([1], GO), 2, 2, 4, 0.0, EOS,
                       states={"coverage": tf.zeros([1, 2])}, coverage_penalty=0.1,
                       coverage_fn=lambda s: coverage_score(s["coverage"]))
  log_p = log_softmax(first)
  assert int(result.ids[0, 0, 0]) == B
  np.testing.assert_allclose(result.scores[0, 0], log_p[B] + math.log(0.25), rtol=1e-5)


def test_coverage_penalty_needs_a_function_and_a_sign():
  step_args = (toy_step, tf.fill([1], GO), 2, 3, 4, 0.0, EOS)
  with pytest.raises(ValueError, match="coverage_fn"):
    beam_search(*step_args, states={"coverage": tf.zeros([1, 2])}, coverage_penalty=0.5)
  with pytest.raises(ValueError, match=">= 0"):
    beam_search(*step_args, states={"coverage": tf.zeros([1, 2])}, coverage_penalty=-1.0,
                coverage_fn=lambda s: coverage_score(s["coverage"]))


# ---------------------------------------------------------------------------- exactness
VOCAB, SOURCE, MAX_LEN = 3, 3, 4  # tokens 0 and 2 are words here, 1 is EOS
NUM_CODES = (VOCAB + 1) ** (MAX_LEN + 1)


def tables(seed):
  rng = np.random.default_rng(seed)
  logits = (rng.standard_normal((NUM_CODES, VOCAB)) * 2).astype(np.float32)
  attention = rng.standard_normal((NUM_CODES, SOURCE)).astype(np.float32) * 3
  attention = np.exp(attention) / np.exp(attention).sum(-1, keepdims=True)
  return logits, attention.astype(np.float32)


def next_code(code, token):
  return (code * (VOCAB + 1) + token + 1) % NUM_CODES


def table_step(logits_table, attention_table):
  logits_table, attention_table = tf.constant(logits_table), tf.constant(attention_table)

  def step(ids, i, states):
    code = (states["code"] * (VOCAB + 1) + ids + 1) % NUM_CODES
    return tf.gather(logits_table, code), {
        "code": code, "coverage": states["coverage"] + tf.gather(attention_table, code)}
  return step


def exhaustive(logits_table, attention_table, alpha, beta):
  best = (-np.inf, None)
  words = [t for t in range(VOCAB) if t != EOS]
  for n in range(1, MAX_LEN + 1):
    endings = [(EOS,)] + ([(w,) for w in words] if n == MAX_LEN else [])
    for prefix in itertools.product(words, repeat=n - 1):
      for ending in endings:
        seq = prefix + ending
        code, log_p, coverage = next_code(0, 2), 0.0, np.zeros(SOURCE)
        for token in seq:
          log_p += log_softmax(logits_table[code])[token]
          coverage += attention_table[code]
          code = next_code(code, token)
        cp = np.log(np.clip(coverage, COVERAGE_FLOOR, 1.0)).sum()
        score = log_p / ((5.0 + n) / 6.0) ** alpha + beta * cp
        best = max(best, (score, seq))
  return best


@pytest.mark.parametrize("seed", [0, 1, 3])
def test_wide_beam_with_coverage_finds_the_exhaustive_optimum(seed):
  """With as many beams as alive prefixes, only a wrong early stop could miss the optimum."""
  logits_table, attention_table = tables(seed)
  alpha, beta = 0.6, 0.4
  states = {"code": tf.zeros([1], tf.int32), "coverage": tf.zeros([1, SOURCE])}
  result = beam_search(table_step(logits_table, attention_table), tf.constant([2]),
                       (VOCAB - 1) ** (MAX_LEN - 1), MAX_LEN, VOCAB, alpha, EOS,
                       states=states, coverage_penalty=beta,
                       coverage_fn=lambda s: coverage_score(s["coverage"]))
  score, seq = exhaustive(logits_table, attention_table, alpha, beta)
  n = int(result.lengths[0, 0])
  assert tuple(result.ids[0, 0, :n].numpy().tolist()) == seq
  np.testing.assert_allclose(result.scores[0, 0], score, rtol=1e-4)


def test_greedy_ignores_states_coverage():
  result = greedy_decode(toy_step, tf.fill([1], GO), 3, EOS,
                         states={"coverage": tf.zeros([1, 2])})
  assert result.ids[0, :1].numpy().tolist() == [EOS]
