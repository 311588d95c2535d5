"""n-best beam search, sampling (temperature, top-k, top-p) and banned ids on hand-built
scoring tables: n-best against exhaustive search, samples against the distributions they
are drawn from."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.parts import sampling
from open_seq2seq.parts.beam_search import beam_search, greedy_decode
from tests.unit.test_beam_search import (EOS, GO, PAD, VOCAB, complete_hypotheses, gnmt_score,
                                         initial_states, make_tables, sequence_log_prob,
                                         table_step_fn, trim)


def ranked(table, max_len, alpha):
  """Every complete hypothesis, best first: [(score, sequence), ...]."""
  return sorted(((gnmt_score(table, s, alpha), s) for s in complete_hypotheses(max_len)),
                reverse=True)


def sample(tables, num_samples, max_len, seeds=(1, 2), **filters):
  batch = tables.shape[0]
  return sampling.sample_decode(table_step_fn(tables), tf.fill([batch], GO), max_len, EOS,
                                tf.constant(seeds[:batch], tf.uint32), num_samples,
                                states=initial_states(batch), pad_id=PAD, **filters)


# ----------------------------------------------------------------------------- n-best
@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_n_best_of_a_wide_beam_are_the_exhaustive_n_best(alpha):
  max_len, n = 4, 6
  tables = make_tables(seed=11, batch=2)
  result = beam_search(table_step_fn(tables), tf.fill([2], GO), 27, max_len, VOCAB, alpha, EOS,
                       states=initial_states(2), pad_id=PAD)
  ids, scores, lengths = (t.numpy() for t in result)
  for b in range(2):
    expected = ranked(tables[b], max_len, alpha)[:n]
    got = [trim(ids[b, k], lengths[b, k]) for k in range(n)]
    assert got == [s for _, s in expected]
    assert len(set(got)) == n  # distinct
    assert (np.diff(scores[b, :n]) <= 0).all()  # best first
    np.testing.assert_allclose(scores[b, :n], [score for score, _ in expected], rtol=1e-5)


def test_n_best_of_a_narrow_beam_are_distinct_and_scored_by_the_model():
  max_len, k = 5, 4
  tables = make_tables(seed=12, batch=3, scale=1.0)
  result = beam_search(table_step_fn(tables), tf.fill([3], GO), k, max_len, VOCAB, 0.6, EOS,
                       states=initial_states(3), pad_id=PAD, stop="current")
  ids, scores, lengths = (t.numpy() for t in result)
  for b in range(3):
    hypotheses = [trim(ids[b, j], lengths[b, j]) for j in range(k)]
    assert len(set(hypotheses)) == k
    assert (np.diff(scores[b]) <= 0).all()
    for j, seq in enumerate(hypotheses):
      np.testing.assert_allclose(scores[b, j], gnmt_score(tables[b], seq, 0.6), rtol=1e-5)


# ----------------------------------------------------------------------------- PAD and GO
def test_no_search_emits_a_banned_id_the_model_prefers():
  tables = make_tables(seed=13, batch=2)
  tables[..., PAD] += 30.0
  tables[..., GO] += 30.0  # the model all but always says PAD or GO
  banned = dict(banned_ids=(PAD, GO))
  step, go = table_step_fn(tables), tf.fill([2], GO)
  searched = [beam_search(step, go, 3, 5, VOCAB, 0.6, EOS, states=initial_states(2),
                          pad_id=PAD, **banned),
              greedy_decode(step, go, 5, EOS, states=initial_states(2), pad_id=PAD, **banned),
              sample(tables, 8, 5, **banned)]
  for result in searched:
    ids, lengths = result.ids.numpy(), result.lengths.numpy()
    ids, lengths = ids.reshape(-1, ids.shape[-1]), lengths.reshape(-1)
    for row, n in zip(ids, lengths):
      assert n >= 1 and not set(row[:n].tolist()) & {PAD, GO}
  # without the ban, the model's favourites win
  plain = greedy_decode(step, go, 5, EOS, states=initial_states(2), pad_id=PAD)
  assert set(plain.ids.numpy()[:, 0].tolist()) <= {PAD, GO}
  # the scores stay the model's log-probabilities of the tokens chosen
  greedy = searched[1]
  for b in range(2):
    seq = trim(greedy.ids.numpy()[b], greedy.lengths.numpy()[b])
    np.testing.assert_allclose(greedy.scores.numpy()[b], sequence_log_prob(tables[b], seq),
                               rtol=1e-5)


# ----------------------------------------------------------------------------- sampling
def test_top_k_one_and_a_vanishing_temperature_are_greedy():
  tables = make_tables(seed=14, batch=2)
  greedy = greedy_decode(table_step_fn(tables), tf.fill([2], GO), 5, EOS,
                         states=initial_states(2), pad_id=PAD)
  for filters in ({"topk": 1}, {"temperature": 1e-6}, {"topk": 1, "topp": 0.3}):
    drawn = sample(tables, 3, 5, **filters)
    for j in range(3):
      np.testing.assert_array_equal(drawn.ids.numpy()[:, j], greedy.ids.numpy())
      np.testing.assert_allclose(drawn.scores.numpy()[:, j], greedy.scores.numpy(), rtol=1e-6)


def test_samples_are_scored_by_the_model_and_sorted():
  tables = make_tables(seed=15, batch=2, scale=0.5)
  drawn = sample(tables, 6, 5, temperature=1.5, topk=3)
  ids, scores, lengths = (t.numpy() for t in drawn)
  for b in range(2):
    assert (np.diff(scores[b]) <= 0).all()
    for j in range(6):
      seq = trim(ids[b, j], lengths[b, j])
      assert seq[-1] == EOS or len(seq) == 5
      assert (ids[b, j, lengths[b, j]:] == PAD).all()
      np.testing.assert_allclose(scores[b, j], sequence_log_prob(tables[b], seq), rtol=1e-5)


PROBS = np.array([0.0, 0.0, 0.0, 0.4, 0.25, 0.15, 0.1, 0.06, 0.04])  # PAD, EOS, GO never


def fixed_step(ids, i, states):
  """The same next-token distribution (PROBS) at every step, whatever the prefix."""
  logits = tf.constant(np.log(np.maximum(PROBS, 1e-30)), tf.float32)
  return tf.tile(logits[None], [tf.shape(ids)[0], 1]), states


def frequencies(filters, steps=2, per_example=1500, seeds=(7, 8)):
  """Token frequencies at each step [steps, vocab], and the tokens [rows, steps]."""
  result = sampling.sample_decode(fixed_step, tf.fill([len(seeds)], 2), steps, 1,
                                  tf.constant(seeds, tf.uint32), per_example, **filters)
  tokens = result.ids.numpy().reshape(-1, steps)
  counts = np.stack([np.bincount(tokens[:, t], minlength=len(PROBS)) for t in range(steps)])
  return counts / len(tokens), tokens


@pytest.mark.parametrize("filters, expected", [
    ({}, PROBS),
    ({"temperature": 2.0}, np.sqrt(PROBS) / np.sqrt(PROBS).sum()),
    ({"topk": 2}, np.r_[PROBS[:5], [0.0] * 4] / 0.65),
    # nucleus of 0.7: 0.4 + 0.25 < 0.7, so 0.15 is in it too, and nothing after
    ({"topp": 0.7}, np.r_[PROBS[:6], [0.0] * 3] / 0.8),
    # top-p after top-k, renormalised: (0.4 + 0.25) / 0.9 reaches 0.7 (0.4 + 0.25 does not)
    ({"topk": 4, "topp": 0.7}, np.r_[PROBS[:5], [0.0] * 4] / 0.65),
])
def test_samples_follow_the_filtered_distribution(filters, expected):
  freq, tokens = frequencies(filters)
  for t in range(freq.shape[0]):
    assert freq[t][expected == 0].sum() == 0  # nothing outside the kept set, ever
    np.testing.assert_allclose(freq[t], expected, atol=0.03)  # 3000 draws: sd <= 0.009
  # the steps are independent: the joint frequency of the two most likely tokens
  both = np.mean((tokens[:, 0] == 3) & (tokens[:, 1] == 3))
  assert abs(both - expected[3] ** 2) < 0.03


def test_samples_are_a_function_of_the_seed_only():
  tables = make_tables(seed=16, batch=2)
  first, again = sample(tables, 4, 5, seeds=(3, 4)), sample(tables, 4, 5, seeds=(3, 4))
  np.testing.assert_array_equal(first.ids.numpy(), again.ids.numpy())
  # the same example decoded alone (another batch) draws the same samples
  alone = sample(tables[1:], 4, 5, seeds=(4,))
  np.testing.assert_array_equal(alone.ids.numpy()[0], first.ids.numpy()[1])
  other = sample(tables, 4, 5, seeds=(5, 6))
  assert not np.array_equal(other.ids.numpy(), first.ids.numpy())
  # inside a tf.function: the same draws
  traced = tf.function(lambda: sample(tables, 4, 5, seeds=(3, 4)).ids)()
  np.testing.assert_array_equal(traced.numpy(), first.ids.numpy())


def test_example_seeds_follow_the_source_not_its_padding_or_row():
  ids = tf.constant([[4, 5, 3, 0], [7, 7, 7, 3], [4, 5, 3, 0]])
  seeds = sampling.example_seeds(9, 3, ids, tf.constant([3, 4, 3])).numpy()
  assert seeds[0] == seeds[2] != seeds[1]
  padded = sampling.example_seeds(9, 1, tf.constant([[4, 5, 3, 0, 0, 0]]), tf.constant([3]))
  assert padded.numpy()[0] == seeds[0]
  assert sampling.example_seeds(10, 3, ids, tf.constant([3, 4, 3])).numpy()[0] != seeds[0]
  rows = sampling.example_seeds(9, 3).numpy()
  assert len(set(rows.tolist())) == 3


def test_uniform_noise_is_uniform_and_uncorrelated():
  u = sampling.uniform_noise(tf.cast(tf.range(4000), tf.uint32), tf.constant(3), 64).numpy()
  assert 0.0 < u.min() and u.max() < 1.0
  assert abs(u.mean() - 0.5) < 0.005 and abs(u.std() - np.sqrt(1 / 12)) < 0.005
  assert np.abs(np.corrcoef(u.T)[np.triu_indices(64, 1)]).max() < 0.08  # tokens apart
  step4 = sampling.uniform_noise(tf.cast(tf.range(4000), tf.uint32), tf.constant(4), 64).numpy()
  assert abs(np.corrcoef(u.ravel(), step4.ravel())[0, 1]) < 0.01  # steps apart


def test_a_temperature_must_be_positive():
  with pytest.raises(ValueError, match="temperature"):
    sample(make_tables(seed=1, batch=1), 1, 3, temperature=0.0)
