"""Beam search and greedy decoding on plain TensorFlow ops (usable inside ``tf.function``).

Both searches drive a step function

    symbols_to_logits_fn(ids, i, states) -> (logits, new_states)

where ``ids`` [batch * beam] int32 are the last tokens of every hypothesis (the initial ids
at step 0), ``i`` is the 0-based step (the position of ``ids`` in the sequence) and
``states`` is a nested structure (dicts, lists, tuples) of tensors whose first dimension is
batch * beam, e.g. a Transformer's key/value cache. ``logits`` is [batch * beam, vocab]. A
state may grow along any dimension but its last; ``tf.while_loop`` shape invariants keep
the last dimension static and relax the others.

Tensors that do not change between steps (encoder outputs) are best captured by the step
function's closure after :func:`tile_beam`, rather than passed as states that are gathered
at every step. Tensors the step function updates but that follow no hypothesis (a store of
keys and values that hypotheses index through their states) are ``buffers``: carried
through the loop as they are, neither tiled nor reordered, with the step function

    symbols_to_logits_fn(ids, i, states, buffers) -> (logits, new_states, new_buffers)

Scores follow GNMT: ``log P(Y) / lp(|Y|)`` with ``lp(n) = ((5 + n) / 6) ** alpha`` where
``|Y|`` counts the generated tokens including the end symbol, plus, with a coverage penalty
``beta``, GNMT's coverage term ``beta * sum_j log(min(sum_i a_ij, 1))`` over the source
positions j (attention a_ij of decoder step i), computed by :func:`coverage_score` from the
attention a decoder accumulates in its states.

``banned_ids`` (the translation decoders pass PAD and GO) are never chosen: their
log-probabilities are -inf at every step, so no search (beam, greedy or sampling,
:mod:`open_seq2seq.parts.sampling`) can emit them however the model scores them, and every
score stays the model's log-probability of the tokens chosen.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import tensorflow as tf

#: ``stop`` rules of :func:`beam_search`.
STOP_RULES = ("bound", "current")
#: ``finish`` rules of :func:`beam_search`: which end-symbol extensions become finished.
FINISH_RULES = ("any", "top_k")

_NEG_INF = float("-inf")

StepFn = Callable[..., tuple]
CoverageFn = Callable[[Any], tf.Tensor]
#: Smallest attention sum :func:`coverage_score` takes the log of (a source position never
#: attended to costs log(1e-10) = -23 per unit of beta instead of -inf).
COVERAGE_FLOOR = 1e-10


class DecodeResult(NamedTuple):
  """Output of :func:`beam_search` and :func:`greedy_decode`.

  Attributes:
    ids: int32 [batch, beam, time] (beam search, best first) or [batch, time] (greedy):
      generated tokens without the initial id, ``pad_id`` after each hypothesis' end.
    scores: float32 [batch, beam] length-penalised scores (beam search) or [batch] summed
      log-probabilities (greedy).
    lengths: int32, shaped like ``scores``: generated tokens including the end symbol.
  """

  ids: tf.Tensor
  scores: tf.Tensor
  lengths: tf.Tensor


def length_penalty(length: Any, alpha: Any) -> tf.Tensor:
  """GNMT length penalty ``((5 + length) / 6) ** alpha`` (float32)."""
  return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, tf.cast(alpha, tf.float32))


def coverage_score(attention_sums: Any, mask: Any = None) -> tf.Tensor:
  """GNMT's coverage term ``sum_j log(min(sum_i a_ij, 1))`` (float32, <= 0).

  Args:
    attention_sums: [..., source] attention summed over the decoder steps so far.
    mask: bool [..., source], True at real source positions (None: all real); padded
      positions add nothing.

  Returns:
    [...] float32; sums below :data:`COVERAGE_FLOOR` count as the floor.
  """
  sums = tf.cast(attention_sums, tf.float32)
  terms = tf.math.log(tf.clip_by_value(sums, COVERAGE_FLOOR, 1.0))
  if mask is not None:
    terms = tf.where(tf.cast(mask, tf.bool), terms, 0.0)
  return tf.reduce_sum(terms, axis=-1)


def tile_beam(structure: Any, beam_size: int) -> Any:
  """Repeats every tensor of a nested structure ``beam_size`` times along axis 0.

  [batch, ...] -> [batch * beam_size, ...], the beams of one example being adjacent.
  """
  return tf.nest.map_structure(lambda t: tf.repeat(t, beam_size, axis=0), structure)


def _shape_invariant(t: tf.Tensor) -> tf.TensorShape:
  shape = t.shape
  if shape.rank is None or shape.rank == 0:
    return shape
  return tf.TensorShape([None] * (shape.rank - 1) + [shape[-1]])


def _with_buffers(symbols_to_logits_fn: StepFn, buffers: Any) -> tuple[StepFn, Any]:
  """The step function in its 4-argument form, and the buffers to carry ({} for none)."""
  if buffers is not None:
    return symbols_to_logits_fn, buffers
  return (lambda ids, i, states, buffers: symbols_to_logits_fn(ids, i, states) + (buffers,)), {}


def _decode_lengths(decode_length: Any, batch_size: tf.Tensor) -> tf.Tensor:
  """Scalar or [batch] maximum lengths -> int32 [batch]."""
  decode_length = tf.cast(decode_length, tf.int32)
  return tf.broadcast_to(decode_length, [batch_size])


def _gather_beams(tensor: tf.Tensor, beam_indices: tf.Tensor) -> tf.Tensor:
  return tf.gather(tensor, beam_indices, batch_dims=1)


def _best_alive(alive_seq: tf.Tensor, candidates: tf.Tensor, ends: tf.Tensor, k: int) -> tuple:
  """The best ``k`` extensions that do not finish: (sequences, log-probs, parent beams)."""
  batch_size, vocab = tf.shape(candidates)[0], tf.shape(candidates)[2]
  alive_candidates = tf.reshape(tf.where(ends, _NEG_INF, candidates), [batch_size, -1])
  log_probs, flat_index = tf.math.top_k(alive_candidates, k)
  beam_index, token = flat_index // vocab, flat_index % vocab
  sequences = tf.concat([_gather_beams(alive_seq, beam_index), token[:, :, None]], 2)
  return sequences, log_probs, beam_index


def _merge_finished(alive_seq: tf.Tensor, candidates: tf.Tensor, ends: tf.Tensor,
                    any_at_limit: tf.Tensor, eos_id: int, finished: tuple, i: tf.Tensor,
                    alpha: Any, pad_id: int, bonus: tf.Tensor | None = None,
                    finish: str = "any") -> tuple:
  """The best ``k`` of the kept finished hypotheses and this step's finishing extensions
  (``ends``; the end symbol's alone unless ``any_at_limit``), by length-penalised score plus
  ``bonus`` [B, K] of the extended (parent) hypothesis (the coverage penalty, or None):
  (sequences, scores, lengths). With ``finish="top_k"`` an end-symbol extension finishes
  only if its log-probability is among the ``k`` best of all the step's extensions."""
  finished_seq, finished_scores, finished_lengths = finished
  batch_size, k, vocab = tf.shape(candidates)[0], finished_scores.shape[1], tf.shape(candidates)[2]
  penalty = length_penalty(i + 1, alpha)
  # the bonus counts before choosing: it reorders the finishing extensions
  bonus = tf.zeros_like(finished_scores) if bonus is None else bonus

  def every_extension():
    penalised = candidates / penalty + bonus[:, :, None]
    return tuple(tf.math.top_k(tf.reshape(tf.where(ends, penalised, _NEG_INF), [batch_size, -1]),
                               k))

  def end_symbol_only():
    # The same choice among the K extensions by the end symbol instead of all K * vocab
    # (the others cannot finish), in the same order: top_k keeps the lower index first.
    scores = candidates[:, :, eos_id] / penalty + bonus
    if finish == "top_k":  # the k-th best extension of the step, ends included
      kth = tf.math.top_k(tf.reshape(candidates, [batch_size, -1]), k).values[:, -1:]
      scores = tf.where(candidates[:, :, eos_id] >= kth, scores, _NEG_INF)
    scores, beam = tf.math.top_k(scores, k)
    return scores, beam * vocab + eos_id

  fin_scores, fin_index = tf.cond(any_at_limit, every_extension, end_symbol_only)
  fin_seq = tf.concat([_gather_beams(alive_seq, fin_index // vocab),
                       (fin_index % vocab)[:, :, None]], 2)
  old_seq = tf.pad(finished_seq, [[0, 0], [0, 0], [0, 1]], constant_values=pad_id)
  all_seq = tf.concat([old_seq, fin_seq], 1)  # [B, 2K, i + 2]
  all_scores = tf.concat([finished_scores, fin_scores], 1)
  all_lengths = tf.concat([finished_lengths, tf.fill(tf.shape(fin_scores), i + 1)], 1)
  scores, keep = tf.math.top_k(all_scores, k)
  return _gather_beams(all_seq, keep), scores, _gather_beams(all_lengths, keep)


def beam_search(symbols_to_logits_fn: StepFn, initial_ids: tf.Tensor, beam_size: int,
                decode_length: Any, vocab_size: int | None, alpha: float, eos_id: int,
                states: Any = None, pad_id: int = 0, coverage_penalty: float = 0.0,
                coverage_fn: CoverageFn | None = None, min_length: int = 0,
                stop: str = "bound", buffers: Any = None,
                banned_ids: Sequence[int] = (), finish: str = "any") -> DecodeResult:
  """Length-penalised beam search keeping alive and finished hypotheses apart.

  At each step every alive hypothesis is extended by every token. Extensions by ``eos_id``
  (and, once an example reaches its ``decode_length``, all extensions) are *finished*:
  they compete for the ``beam_size`` finished slots by penalised score. The best
  ``beam_size`` other extensions stay alive. An example is done when its worst kept
  finished score is at least the best score an alive hypothesis could still reach (its
  log-probability can only fall; its penalty is at most that of the longest allowed
  length; a coverage term is never positive); the loop stops when every example is done
  or has reached its length limit.

  With ``coverage_penalty`` beta > 0, a finishing extension's score gains
  ``beta * coverage_fn(states)`` of the hypothesis it extends, ``states`` being those the
  step function returned for the step that scored the final token (so the attention of
  every step up to and including the end symbol's counts). Alive hypotheses are still
  ranked by log-probability alone, as with the length penalty.

  Args:
    symbols_to_logits_fn: the step function (see the module docstring).
    initial_ids: int [batch] first input ids (GO symbols).
    beam_size: number of hypotheses kept (alive and finished, each).
    decode_length: int scalar or [batch]: most tokens generated per example.
    vocab_size: number of logits per step (None: taken from the logits' static shape).
    alpha: length-penalty exponent (0: plain log-probability).
    eos_id: end symbol.
    states: nested tensors with first dimension batch; tiled to batch * beam here and
      reordered along with the hypotheses.
    pad_id: filler after a hypothesis' end.
    coverage_penalty: GNMT's coverage weight beta (0: none).
    coverage_fn: ``coverage_fn(states) -> [batch * beam]`` float32 coverage term of each
      hypothesis, never positive (the early-stopping bound relies on it), e.g.
      :func:`coverage_score` of the attention sums the decoder keeps in its states;
      required when ``coverage_penalty`` is not 0.
    min_length: no hypothesis ends (by ``eos_id``) before it has this many tokens, unless
      its ``decode_length`` is shorter (OpenNMT-tf's ``minimum_decoding_length``, fairseq's
      ``--min-len``).
    stop: when an example is done, besides its length limit. ``"bound"`` (exact, as
      above): no alive hypothesis can still beat the worst kept finished one, its score
      bounded with the penalty of the longest allowed length, so with ``alpha`` > 0 the
      search runs on for as long as a longer hypothesis might win. ``"current"``: the best
      alive hypothesis, scored with its current length's penalty, does not beat the worst
      kept finished one (the heuristic of fairseq's and OpenNMT-tf's searches, which stop
      once the beam has finished): much shorter searches, and a different result only when
      a hypothesis would overtake the finished ones later.
    buffers: nested tensors carried through the loop as they are (see the module
      docstring); None: the step function takes and returns no buffers.
    banned_ids: ids no hypothesis ever holds (see the module docstring).
    finish: which extensions by ``eos_id`` compete for the finished slots. ``"any"``
      (exact): every one. ``"top_k"``: only those whose log-probability is among the
      step's ``beam_size`` best extensions (as fairseq, OpenNMT-tf and CTranslate2 end a
      hypothesis). An exact search finds the highest-scoring hypothesis, and for a model
      that is not sure where to stop that is often a short one (an unlikely early end
      symbol still outscores a long translation); the peers' rule keeps such ends out.
      Extensions at the length limit finish under both.

  Returns:
    :class:`DecodeResult` with ids [batch, beam, time], best first: the ``n`` first of an
    example are its n best hypotheses, distinct, with their scores.

  Raises:
    ValueError: a negative ``coverage_penalty``, or one without ``coverage_fn``, or an
      unknown ``stop``.
  """
  if stop not in STOP_RULES:
    raise ValueError(f"stop must be one of {', '.join(STOP_RULES)}, got {stop!r}")
  if finish not in FINISH_RULES:
    raise ValueError(f"finish must be one of {', '.join(FINISH_RULES)}, got {finish!r}")
  if coverage_penalty < 0:
    raise ValueError(f"coverage_penalty must be >= 0, got {coverage_penalty}")
  if coverage_penalty and coverage_fn is None:
    raise ValueError("coverage_penalty needs a coverage_fn")
  step_fn, buffers = _with_buffers(symbols_to_logits_fn, buffers)
  initial_ids = tf.cast(initial_ids, tf.int32)
  batch_size = tf.shape(initial_ids)[0]
  k = beam_size
  max_lengths = _decode_lengths(decode_length, batch_size)
  max_steps = tf.reduce_max(max_lengths)
  best_penalty_at_max = length_penalty(max_lengths, alpha)  # [B]
  states = tile_beam(states if states is not None else {}, k)
  batch_offsets = tf.range(batch_size)[:, None] * k  # [B, 1]

  alive_seq = tf.tile(initial_ids[:, None, None], [1, k, 1])  # [B, K, 1]
  # Only the first copy of each example starts alive, so step 0 expands one hypothesis.
  alive_log_probs = tf.tile(tf.constant([[0.0] + [_NEG_INF] * (k - 1)]), [batch_size, 1])
  finished_seq = tf.fill([batch_size, k, 1], pad_id)
  finished_scores = tf.fill([batch_size, k], _NEG_INF)
  finished_lengths = tf.zeros([batch_size, k], tf.int32)

  def body(i, alive_seq, alive_log_probs, finished_seq, finished_scores, finished_lengths,
           states, buffers):
    flat_ids = tf.reshape(alive_seq[:, :, -1], [-1])
    logits, new_states, buffers = step_fn(flat_ids, i, states, buffers)
    logits = tf.cast(logits, tf.float32)
    vocab = vocab_size or logits.shape[-1] or tf.shape(logits)[-1]
    log_probs = ban(tf.nn.log_softmax(tf.reshape(logits, [batch_size, k, vocab])), banned_ids)
    is_eos = tf.equal(tf.range(vocab), eos_id)[None, None, :]
    log_probs = _forbid_early_end(log_probs, is_eos, i, min_length)
    candidates = alive_log_probs[:, :, None] + log_probs  # [B, K, V]
    at_limit = tf.greater_equal(i + 1, max_lengths)  # [B]
    ends = tf.logical_or(is_eos, at_limit[:, None, None])  # [B, 1|K, V] extensions that finish
    new_alive_seq, new_alive_log_probs, beam_index = _best_alive(alive_seq, candidates, ends, k)
    bonus = None
    if coverage_penalty:
      # Of the hypotheses as they were extended, before reordering the states.
      coverage = tf.cast(coverage_fn(new_states), tf.float32)
      bonus = coverage_penalty * tf.reshape(coverage, [batch_size, k])
    flat_beam_index = tf.reshape(beam_index + batch_offsets, [-1])
    new_states = tf.nest.map_structure(lambda s: tf.gather(s, flat_beam_index), new_states)
    finished = _merge_finished(alive_seq, candidates, ends, tf.reduce_any(at_limit), eos_id,
                               (finished_seq, finished_scores, finished_lengths), i, alpha,
                               pad_id, bonus, finish)
    return (i + 1, new_alive_seq, new_alive_log_probs) + finished + (new_states, buffers)

  def cond(i, alive_seq, alive_log_probs, finished_seq, finished_scores, finished_lengths,
           states, buffers):
    if stop == "bound":
      # Best reachable score of an alive hypothesis: its log-prob over the largest penalty
      # it could still get (lp is monotonic in the length, so one of the two ends).
      penalty = tf.maximum(length_penalty(i + 1, alpha), best_penalty_at_max)
    else:  # its score as it stands, at its current length (i tokens, at least 1)
      penalty = length_penalty(tf.maximum(i, 1), alpha)
    best_alive = alive_log_probs[:, 0] / penalty
    done = tf.logical_or(finished_scores[:, -1] >= best_alive, i >= max_lengths)
    return tf.logical_and(i < max_steps, tf.logical_not(tf.reduce_all(done)))

  loop_vars = (tf.constant(0), alive_seq, alive_log_probs, finished_seq, finished_scores,
               finished_lengths, states, buffers)
  invariants = (tf.TensorShape([]), tf.TensorShape([None, k, None]),
                tf.TensorShape([None, k]), tf.TensorShape([None, k, None]),
                tf.TensorShape([None, k]), tf.TensorShape([None, k]),
                *tf.nest.map_structure(_shape_invariant, (states, buffers)))
  _, _, _, finished_seq, finished_scores, finished_lengths, _, _ = tf.while_loop(
      cond, body, loop_vars, shape_invariants=invariants, maximum_iterations=max_steps)
  return DecodeResult(finished_seq[:, :, 1:], finished_scores, finished_lengths)


def ban(log_probs: tf.Tensor, banned_ids: Sequence[int]) -> tf.Tensor:
  """``log_probs`` [..., vocab] with -inf at ``banned_ids`` (ids past the vocabulary are
  ignored)."""
  if not banned_ids:
    return log_probs
  vocab = tf.range(tf.shape(log_probs)[-1])
  banned = tf.reduce_any(tf.equal(vocab[:, None], tf.constant(list(banned_ids), tf.int32)), 1)
  return tf.where(banned, _NEG_INF, log_probs)


def _forbid_early_end(log_probs: tf.Tensor, is_eos: tf.Tensor, step: tf.Tensor,
                      min_length: int) -> tf.Tensor:
  """``log_probs`` with the end symbol impossible while fewer than ``min_length`` tokens
  precede it (``step`` tokens do)."""
  if not min_length:
    return log_probs
  return tf.where(tf.logical_and(is_eos, step < min_length), _NEG_INF, log_probs)


def greedy_decode(symbols_to_logits_fn: StepFn, initial_ids: tf.Tensor, decode_length: Any,
                  eos_id: int, states: Any = None, pad_id: int = 0,
                  min_length: int = 0, buffers: Any = None, banned_ids: Sequence[int] = (),
                  choose: Callable[[tf.Tensor, tf.Tensor], tf.Tensor] | None = None
                  ) -> DecodeResult:
  """Picks the most likely token at every step until ``eos_id`` or ``decode_length``.

  Args: as for :func:`beam_search` (``states`` has first dimension batch), and
    choose: ``choose(log_probs, step) -> int32 [batch]``, the token of each row given the
      float32 [batch, vocab] log-probabilities (-inf where a token is not allowed); None:
      the most likely (a sampler draws instead, :mod:`open_seq2seq.parts.sampling`).

  Returns:
    :class:`DecodeResult` with ids [batch, time] and summed log-probabilities [batch].
  """
  step_fn, buffers = _with_buffers(symbols_to_logits_fn, buffers)
  initial_ids = tf.cast(initial_ids, tf.int32)
  batch_size = tf.shape(initial_ids)[0]
  max_lengths = _decode_lengths(decode_length, batch_size)
  states = states if states is not None else {}

  def body(i, ids, finished, scores, lengths, states, buffers):
    logits, states, buffers = step_fn(ids[:, -1], i, states, buffers)
    log_probs = ban(tf.nn.log_softmax(tf.cast(logits, tf.float32)), banned_ids)
    is_eos = tf.equal(tf.range(tf.shape(log_probs)[-1]), eos_id)[None, :]
    log_probs = _forbid_early_end(log_probs, is_eos, i, min_length)
    if choose is None:
      token = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
    else:
      token = tf.cast(choose(log_probs, i), tf.int32)
    token_log_prob = tf.gather(log_probs, token, batch_dims=1)
    token = tf.where(finished, pad_id, token)
    scores += tf.where(finished, 0.0, token_log_prob)
    lengths += tf.cast(tf.logical_not(finished), tf.int32)
    finished = finished | tf.equal(token, eos_id) | tf.greater_equal(i + 1, max_lengths)
    return (i + 1, tf.concat([ids, token[:, None]], 1), finished, scores, lengths, states,
            buffers)

  def cond(i, ids, finished, scores, lengths, states, buffers):
    return tf.logical_not(tf.reduce_all(finished))

  loop_vars = (tf.constant(0), initial_ids[:, None], tf.zeros([batch_size], tf.bool),
               tf.zeros([batch_size]), tf.zeros([batch_size], tf.int32), states, buffers)
  invariants = (tf.TensorShape([]), tf.TensorShape([None, None]), tf.TensorShape([None]),
                tf.TensorShape([None]), tf.TensorShape([None]),
                *tf.nest.map_structure(_shape_invariant, (states, buffers)))
  _, ids, _, scores, lengths, _, _ = tf.while_loop(
      cond, body, loop_vars, shape_invariants=invariants,
      maximum_iterations=tf.reduce_max(max_lengths))
  return DecodeResult(ids[:, 1:], scores, lengths)
