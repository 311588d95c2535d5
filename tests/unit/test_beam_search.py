"""Beam search and greedy decoding against exhaustive search on hand-built scoring tables."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.parts.beam_search import (beam_search, greedy_decode, length_penalty,
                                            tile_beam)

VOCAB = 4
EOS = 1
GO = 2
PAD = 0


NUM_CODES = (VOCAB + 1) ** 6  # distinct codes for every prefix of up to 5 tokens after GO


def make_tables(seed: int, batch: int, scale: float = 2.0) -> np.ndarray:
  """Random next-token logits [batch, NUM_CODES, VOCAB], one row per prefix code."""
  rng = np.random.default_rng(seed)
  return (rng.standard_normal((batch, NUM_CODES, VOCAB)) * scale).astype(np.float32)


def prefix_code(code: int, token: int) -> int:
  return (code * (VOCAB + 1) + token + 1) % NUM_CODES


def table_step_fn(tables: np.ndarray):
  """Step function whose logits depend on the batch row and the whole prefix.

  The state holds the batch row and a unique code of the prefix, so a wrongly reordered
  state gives wrong logits (and scores that do not match the returned sequences).
  """
  tables = tf.constant(tables)

  def step(ids, i, states):
    code = (states["code"] * (VOCAB + 1) + ids + 1) % NUM_CODES
    logits = tf.gather_nd(tables, tf.stack([states["row"], code], axis=1))
    return logits, {"code": code, "row": states["row"]}

  return step


def initial_states(batch: int) -> dict:
  return {"code": tf.zeros([batch], tf.int32), "row": tf.range(batch, dtype=tf.int32)}


def log_softmax(x: np.ndarray) -> np.ndarray:
  x = x - x.max()
  return x - np.log(np.exp(x).sum())


def sequence_log_prob(table: np.ndarray, seq) -> float:
  code, total = prefix_code(0, GO), 0.0
  for token in seq:
    total += log_softmax(table[code])[token]
    code = prefix_code(code, token)
  return float(total)


def gnmt_score(table: np.ndarray, seq, alpha: float) -> float:
  return sequence_log_prob(table, seq) / ((5.0 + len(seq)) / 6.0) ** alpha


def complete_hypotheses(max_len: int):
  """Every sequence the search may return: ends with EOS, or is max_len long."""
  non_eos = [t for t in range(VOCAB) if t != EOS]
  for n in range(1, max_len + 1):
    for prefix in itertools.product(non_eos, repeat=n - 1):
      yield prefix + (EOS,)
      if n == max_len:
        for last in non_eos:
          yield prefix + (last,)


def exhaustive_best(table: np.ndarray, max_len: int, alpha: float):
  return max(((gnmt_score(table, s, alpha), s) for s in complete_hypotheses(max_len)))


def run_beam(tables, beam_size, decode_length, alpha):
  batch = tables.shape[0]
  return beam_search(table_step_fn(tables), tf.fill([batch], GO), beam_size, decode_length,
                     VOCAB, alpha, EOS, states=initial_states(batch), pad_id=PAD)


def trim(ids_row, length) -> tuple:
  return tuple(int(t) for t in ids_row[:length])


def test_length_penalty_values():
  np.testing.assert_allclose(length_penalty([1, 6], 1.0).numpy(), [1.0, 11.0 / 6.0])
  np.testing.assert_allclose(length_penalty(7, 0.0).numpy(), 1.0)


def test_tile_beam_keeps_beams_of_an_example_adjacent():
  tiled = tile_beam({"a": tf.constant([[1], [2]])}, 3)
  assert tiled["a"].numpy().ravel().tolist() == [1, 1, 1, 2, 2, 2]


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_wide_beam_finds_exhaustive_best(alpha):
  max_len = 4
  tables = make_tables(seed=1, batch=3)
  # 3 non-EOS tokens and 4 steps: 27 alive hypotheses at most, so nothing is pruned.
  result = run_beam(tables, beam_size=27, decode_length=max_len, alpha=alpha)
  ids, scores, lengths = (t.numpy() for t in result)
  assert ids.shape[:2] == (3, 27)
  for b in range(3):
    best_score, best_seq = exhaustive_best(tables[b], max_len, alpha)
    assert trim(ids[b, 0], lengths[b, 0]) == best_seq
    np.testing.assert_allclose(scores[b, 0], best_score, rtol=1e-5)
    # Tokens after a hypothesis' end are padding.
    assert (ids[b, 0, lengths[b, 0]:] == PAD).all()


def test_per_example_decode_lengths():
  tables = make_tables(seed=2, batch=2)
  result = run_beam(tables, beam_size=27, decode_length=tf.constant([2, 4]), alpha=0.6)
  ids, scores, lengths = (t.numpy() for t in result)
  for b, max_len in enumerate([2, 4]):
    best_score, best_seq = exhaustive_best(tables[b], max_len, 0.6)
    assert lengths[b, 0] <= max_len
    assert trim(ids[b, 0], lengths[b, 0]) == best_seq
    np.testing.assert_allclose(scores[b, 0], best_score, rtol=1e-5)


def test_narrow_beam_scores_match_returned_sequences():
  max_len = 4
  tables = make_tables(seed=3, batch=4, scale=1.0)
  ids, scores, lengths = (t.numpy() for t in run_beam(tables, 2, max_len, 0.6))
  for b in range(4):
    assert scores[b, 0] >= scores[b, 1]
    for k in range(2):
      seq = trim(ids[b, k], lengths[b, k])
      assert seq[-1] == EOS or len(seq) == max_len
      assert EOS not in seq[:-1]
      np.testing.assert_allclose(scores[b, k], gnmt_score(tables[b], seq, 0.6), rtol=1e-5)
    assert scores[b, 0] <= exhaustive_best(tables[b], max_len, 0.6)[0] + 1e-5


def test_stops_early_when_no_alive_beam_can_win():
  max_len = 10
  tables = make_tables(seed=4, batch=2, scale=0.1)
  tables[..., EOS] += 20.0  # EOS is almost certain at every step
  ids, scores, lengths = (t.numpy() for t in run_beam(tables, 2, max_len, 0.6))
  assert ids.shape[2] < max_len
  assert lengths[:, 0].tolist() == [1, 1]
  assert ids[:, 0, 0].tolist() == [EOS, EOS]


@pytest.mark.parametrize("min_length", [2, 3])
def test_min_length_keeps_the_end_symbol_out_of_short_hypotheses(min_length):
  max_len = 4
  tables = make_tables(seed=7, batch=2, scale=0.5)
  tables[..., EOS] += 20.0  # without a minimum, every hypothesis would end at once
  result = beam_search(table_step_fn(tables), tf.fill([2], GO), 27, max_len, VOCAB, 0.6, EOS,
                       states=initial_states(2), pad_id=PAD, min_length=min_length)
  ids, scores, lengths = (t.numpy() for t in result)
  for b in range(2):
    # the best of the hypotheses whose end symbol has at least min_length tokens before it
    allowed = [s for s in complete_hypotheses(max_len)
               if s[-1] != EOS or len(s) > min_length]
    best_score, best_seq = max((gnmt_score(tables[b], s, 0.6), s) for s in allowed)
    assert trim(ids[b, 0], lengths[b, 0]) == best_seq
    assert lengths[b, 0] == min_length + 1  # it ends as soon as it may
    np.testing.assert_allclose(scores[b, 0], best_score, rtol=1e-5)
  greedy = greedy_decode(table_step_fn(tables), tf.fill([2], GO), max_len, EOS,
                         states=initial_states(2), pad_id=PAD, min_length=min_length)
  assert greedy.lengths.numpy().tolist() == [min_length + 1] * 2
  assert (greedy.ids.numpy()[:, :min_length] != EOS).all()
  # a decode length below the minimum still bounds the hypotheses
  short = greedy_decode(table_step_fn(tables), tf.fill([2], GO), 1, EOS,
                        states=initial_states(2), pad_id=PAD, min_length=min_length)
  assert short.lengths.numpy().tolist() == [1, 1]


def numpy_greedy(table: np.ndarray, max_len: int):
  seq, code = [], prefix_code(0, GO)
  while len(seq) < max_len:
    token = int(np.argmax(table[code]))
    seq.append(token)
    if token == EOS:
      break
    code = prefix_code(code, token)
  return tuple(seq)


def test_greedy_decode_matches_reference_and_pads():
  tables = make_tables(seed=5, batch=6, scale=1.5)
  decode_length = tf.constant([5, 5, 3, 5, 1, 4])
  result = greedy_decode(table_step_fn(tables), tf.fill([6], GO), decode_length, EOS,
                         states=initial_states(6), pad_id=PAD)
  ids, scores, lengths = (t.numpy() for t in result)
  for b in range(6):
    expected = numpy_greedy(tables[b], int(decode_length[b]))
    assert trim(ids[b], lengths[b]) == expected
    assert (ids[b, lengths[b]:] == PAD).all()
    np.testing.assert_allclose(scores[b], sequence_log_prob(tables[b], expected), rtol=1e-5)


def test_beam_search_inside_tf_function():
  tables = make_tables(seed=6, batch=2)
  step = table_step_fn(tables)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.int32),
                                tf.TensorSpec([None], tf.int32)])
  def decode(initial_ids, decode_length):
    batch = tf.shape(initial_ids)[0]
    beam = beam_search(step, initial_ids, 3, decode_length, VOCAB, 0.6, EOS,
                       states=initial_states(batch))
    greedy = greedy_decode(step, initial_ids, decode_length, EOS,
                           states=initial_states(batch))
    return beam, greedy

  beam, greedy = decode(tf.fill([2], GO), tf.constant([4, 3]))
  eager_beam = run_beam(tables, 3, tf.constant([4, 3]), 0.6)
  np.testing.assert_array_equal(beam.ids.numpy(), eager_beam.ids.numpy())
  np.testing.assert_allclose(beam.scores.numpy(), eager_beam.scores.numpy(), rtol=1e-6)
  for b, max_len in enumerate([4, 3]):
    assert trim(greedy.ids[b].numpy(), greedy.lengths[b]) == numpy_greedy(tables[b], max_len)


def _run_with_stop(tables, alpha, stop, max_len=30, beam_size=3):
  batch = tables.shape[0]
  return beam_search(table_step_fn(tables), tf.fill([batch], GO), beam_size, max_len, VOCAB,
                     alpha, EOS, states=initial_states(batch), pad_id=PAD, stop=stop)


def test_current_length_stop_rule_ends_sooner_with_consistent_scores():
  """With alpha > 0 the exact rule keeps searching while a longer hypothesis could still win
  under the larger penalty of a longer length; 'current' stops once the best alive one does
  not win at its present length: fewer steps, and its scores still match its sequences."""
  tables = make_tables(seed=7, batch=3, scale=1.0)
  tables[..., EOS] += 2.5  # hypotheses finish early, but not at once
  exact = [t.numpy() for t in _run_with_stop(tables, 0.6, "bound")]
  quick = [t.numpy() for t in _run_with_stop(tables, 0.6, "current")]
  assert quick[0].shape[2] < exact[0].shape[2]  # the time axis is the steps run
  ids, scores, lengths = quick
  for b in range(3):
    for k in range(3):
      seq = trim(ids[b, k], lengths[b, k])
      np.testing.assert_allclose(scores[b, k], gnmt_score(tables[b], seq, 0.6), rtol=1e-5)
    assert scores[b, 0] <= exact[1][b, 0] + 1e-5  # never better than the exact search


def test_stop_rules_agree_without_a_length_penalty():
  tables = make_tables(seed=8, batch=2, scale=1.0)
  tables[..., EOS] += 2.0
  exact = [t.numpy() for t in _run_with_stop(tables, 0.0, "bound")]
  quick = [t.numpy() for t in _run_with_stop(tables, 0.0, "current")]
  for a, b in zip(exact, quick):
    np.testing.assert_array_equal(a, b)
  with pytest.raises(ValueError, match="stop must be one of bound, current"):
    _run_with_stop(tables, 0.0, "greedy")


def buffered_table_step_fn(tables: np.ndarray, slots: int):
  """:func:`table_step_fn` keeping the prefix codes in a buffer of ``slots`` rows per step,
  written once per step; the state holds the buffer row of the hypothesis' last code."""
  tables = tf.constant(tables)

  def step(ids, i, states, buffer):
    tf.debugging.assert_equal(tf.shape(buffer)[0], NUM_STEPS * slots,
                              message="the buffer was tiled or reordered")
    previous = tf.where(states["at"] >= 0, tf.gather(buffer, tf.maximum(states["at"], 0)), 0)
    code = (previous * (VOCAB + 1) + ids + 1) % NUM_CODES
    at = i * slots + tf.range(slots)
    buffer = tf.tensor_scatter_nd_update(buffer, at[:, None], code)
    logits = tf.gather_nd(tables, tf.stack([states["row"], code], axis=1))
    return logits, {"at": at, "row": states["row"]}, buffer

  return step


NUM_STEPS = 5


@pytest.mark.parametrize("beam_size", [1, 3])
def test_buffers_are_carried_as_they_are(beam_size):
  """A step function whose hypotheses reach their history through an index kept in their
  (reordered) states, in a buffer neither tiled nor reordered, decodes as one whose states
  hold the history itself."""
  tables = make_tables(seed=9, batch=3, scale=1.0)
  slots = 3 * beam_size
  states = {"at": tf.fill([3], -1), "row": tf.range(3)}
  buffer = tf.zeros([NUM_STEPS * slots], tf.int32)
  step = buffered_table_step_fn(tables, slots)
  lengths = tf.constant([5, 3, 4])
  if beam_size == 1:
    got = greedy_decode(step, tf.fill([3], GO), lengths, EOS, states=states, buffers=buffer)
    expected = greedy_decode(table_step_fn(tables), tf.fill([3], GO), lengths, EOS,
                             states=initial_states(3))
  else:
    got = beam_search(step, tf.fill([3], GO), beam_size, lengths, VOCAB, 0.6, EOS,
                      states=states, pad_id=PAD, buffers=buffer)
    expected = run_beam(tables, beam_size, lengths, 0.6)
  for a, b in zip(got, expected):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def _unsure_where_to_stop(ids, i, states):
  """Logits of a model that gives the end symbol 10 % at the first step and 15 % after: an
  immediate end outscores every 3-token hypothesis, yet is never among the 2 best
  extensions of a step."""
  first = np.log([1e-9, 0.10, 0.55, 0.35])
  later = np.log([1e-9, 0.15, 0.425, 0.425])
  row = tf.where(tf.equal(i, 0), tf.constant(first, tf.float32), tf.constant(later, tf.float32))
  return tf.tile(row[None, :], [tf.shape(ids)[0], 1]), states


@pytest.mark.parametrize("stop", ["bound", "current"])
def test_top_k_finish_keeps_unlikely_ends_out_where_the_exact_search_takes_them(stop):
  """finish="any" returns the highest-scoring hypothesis, the immediate end (0.10 against
  0.55 * 0.425 * 0.425 = 0.099); finish="top_k" (fairseq / OpenNMT-tf / CTranslate2) never
  lets that end in, because at no step is the end symbol among the 2 best extensions."""
  go = tf.fill([1], GO)
  exact = beam_search(_unsure_where_to_stop, go, 2, 3, VOCAB, 0.0, EOS, stop=stop)
  assert exact.lengths.numpy()[0, 0] == 1 and exact.ids.numpy()[0, 0, 0] == EOS
  np.testing.assert_allclose(exact.scores.numpy()[0, 0], np.log(0.10), rtol=1e-5)
  peers = beam_search(_unsure_where_to_stop, go, 2, 3, VOCAB, 0.0, EOS, stop=stop,
                      finish="top_k")
  ids, lengths = peers.ids.numpy()[0], peers.lengths.numpy()[0]
  assert lengths.tolist() == [3, 3] and EOS not in ids[:, :3]
  np.testing.assert_allclose(peers.scores.numpy()[0, 0], np.log(0.55 * 0.425 * 0.425),
                             rtol=1e-5)
  # an end among the step's 2 best extensions still finishes: a wider beam takes it
  wide = beam_search(_unsure_where_to_stop, go, 3, 3, VOCAB, 0.0, EOS, stop=stop,
                     finish="top_k")
  assert wide.lengths.numpy()[0, 0] == 1
  with pytest.raises(ValueError, match="finish must be one of any, top_k"):
    beam_search(_unsure_where_to_stop, go, 2, 3, VOCAB, 0.0, EOS, finish="best")


@pytest.mark.parametrize("seed", [3, 5])
def test_top_k_finish_scores_match_their_sequences_and_never_beat_the_exact_best(seed):
  max_len = 4
  tables = make_tables(seed=seed, batch=3, scale=1.0)
  result = beam_search(table_step_fn(tables), tf.fill([3], GO), 2, max_len, VOCAB, 0.6, EOS,
                       states=initial_states(3), pad_id=PAD, finish="top_k")
  ids, scores, lengths = (t.numpy() for t in result)
  for b in range(3):
    for k in range(2):
      seq = trim(ids[b, k], lengths[b, k])
      assert seq[-1] == EOS or len(seq) == max_len
      np.testing.assert_allclose(scores[b, k], gnmt_score(tables[b], seq, 0.6), rtol=1e-5)
    assert scores[b, 0] <= exhaustive_best(tables[b], max_len, 0.6)[0] + 1e-5
