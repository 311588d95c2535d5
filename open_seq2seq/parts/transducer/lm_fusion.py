"""Transducer beam search fused with a word n-gram language model (shallow fusion), on the
host.

A hypothesis, the label sequence ``y`` of the frames read so far, scores

    ln P_rnnt(y) + alpha * ln P_lm(words, </s>) + beta * #words + unk_score_offset * #unknown

the CTC decoder's word score (:class:`~open_seq2seq.utils.ctc_prefix_search.WordScorer`, the
same ARPA or KenLM binary files): KenLM's log10 probabilities times ln 10, a word entering
the LM when the label starting the next word (a space; a SentencePiece piece starting with
"▁") is appended, the last word and ``</s>`` when the utterance ends; a partial word that no
LM word starts with costs ``unk_score_offset`` at once (ARPA files). ``ln P_rnnt(y)`` sums
the probabilities of the alignments of ``y`` the search merged.

**Time synchronous decoding** (Saon, Tüske & Audhkhasi, ICASSP 2020; ESPnet's
``time_sync_decoding``): icefall's ``modified_beam_search`` with up to ``max_symbols`` labels
on one frame instead of one. Each frame runs in rounds:

1. the joint scores the round's live hypotheses (round 0: the beam) on the frame;
2. the blank moves each to the next frame, into the frame's result, where equal label
   sequences merge (probabilities added: they are alignments of one output);
3. labels extend them on the same frame: of all the extensions of an utterance's live
   hypotheses, the ``beam_width`` best by the fused score that are above the frame result's
   ``beam_width``-th go on (an extension still has to leave the frame by a blank, of
   log-probability <= 0), each through one prediction-network step, as the next round's live
   hypotheses;
4. round ``max_symbols`` extends by the blank alone (the per-frame limit of greedy search).

The frame's result, cut to its ``beam_width`` best, is the next frame's beam. After an
utterance's last frame its result is the beam's best by ``ln P_rnnt`` plus the final word
score (the last word and ``</s>``); every hypothesis read all the frames, so none is
normalized by its length. A beam that holds every hypothesis prunes nothing: the search then
returns the label sequence of best fused score exactly (tests/unit/test_transducer_lm_fusion.py
enumerates them).

Why not the in-graph alignment-length synchronous search of :mod:`.search`? It stops when the
best finished hypothesis is more likely than all live ones together, a bound on
probabilities that a fused score does not keep (a word's beta raises it); a time-synchronous
search ends with the frames. And why on the host? KenLM scores words in C++ on the host; the
expensive part stays in TensorFlow: :class:`HostNetworks` runs one call per round for the
live hypotheses of the whole batch (the joint on round 0, a prediction step and the joint
after), while Python keeps the hypotheses, merges them and asks KenLM (each text's scores
once, cached per batch).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf

from open_seq2seq.utils.ctc_prefix_search import WordScorer

NEG_INF = -math.inf

#: ``predict(ids [N], state) -> (projected prediction output [N, H], state)``; ``joint(
#: projected frames [N, H], projected prediction [N, H]) -> logits [N, V]``
#: (:mod:`open_seq2seq.parts.transducer.search`'s contract).
Predict = Callable[[tf.Tensor, Any], tuple[tf.Tensor, Any]]
Joint = Callable[[tf.Tensor, tf.Tensor], tf.Tensor]


def label_pieces(labels: Sequence[str]) -> tuple[np.ndarray, list[str]]:
  """(whether each label starts a word, its text within the word) of an alphabet, read as
  the CTC decoder reads it: a space separates words (and adds no text); with SentencePiece
  pieces (any label starts with "▁") a piece starting with "▁" starts a word and control
  pieces (``<unk>``, ``<s>``, ``</s>``) add no text."""
  if any(label.startswith("\u2581") for label in labels):
    return (np.array([label.startswith("\u2581") for label in labels], bool),
            ["" if label[:1] + label[-1:] == "<>" else label.replace("\u2581", "")
             for label in labels])
  return np.array([label == " " for label in labels], bool), [label.strip() for label in labels]


def join(words: str, part: str) -> str:
  """The text of complete ``words`` and a partial word."""
  return f"{words} {part}" if words and part else words or part


class TextScorer:
  """The word score of a label sequence's text ``(complete words, partial word)``, and of it
  extended by each class.

  Args:
    words: the word score (:class:`WordScorer`: the LM, alpha, beta, unk_score_offset).
    labels: the text of each class but the blank, which is the last class.
  """

  def __init__(self, words: WordScorer, labels: Sequence[str]):
    starts, pieces = label_pieces(labels)
    self.words, self.blank = words, len(labels)
    self.starts, self.pieces = np.append(starts, False), pieces + [""]
    self._rows: dict[tuple[str, str], np.ndarray] = {}

  def new_batch(self) -> None:
    """Forgets the texts of the last batch (they would only fill memory)."""
    self.words.new_utterance()
    self._rows.clear()

  def extend(self, text: tuple[str, str], label: int) -> tuple[str, str]:
    words, part = text
    if self.starts[label]:
      return join(words, part), self.pieces[label]
    return words, part + self.pieces[label]

  def transcript(self, labels: Sequence[int]) -> str:
    """The text of a label sequence, words separated by single spaces."""
    text = ("", "")
    for label in labels:
      text = self.extend(text, label)
    return join(*text)

  def score(self, text: tuple[str, str]) -> float:
    """The score of the complete words and of the partial word (unknown: unk_score_offset)."""
    return self.words.text(text[0])[0] + self.words.partial(text[1])[0]

  def final(self, text: tuple[str, str]) -> float:
    """The score of a whole hypothesis: its words, the last one included, and ``</s>``."""
    return self.words.final(join(*text))

  def row(self, text: tuple[str, str]) -> np.ndarray:
    """[classes]: :meth:`score` of ``text`` extended by each class (the blank: ``text``)."""
    hit = self._rows.get(text)
    if hit is None:
      words, part = text
      kept = self.words.text(words)[0]
      ended = self.words.text(join(words, part))[0]  # a label starting a word ends ``part``
      partial = self.words.partial
      hit = np.array([ended + partial(piece)[0] if start else kept + partial(part + piece)[0]
                      for start, piece in zip(self.starts, self.pieces)])
      hit[self.blank] = kept + partial(part)[0]
      self._rows[text] = hit
    return hit


class HostNetworks:
  """A transducer's prediction and joint networks for a search on the host: TensorFlow
  functions over flat batches of hypotheses, numpy in and out.

  Args:
    predict, joint: the networks (the module's ``Predict`` / ``Joint``).
    initial_state: ``rows -> state``, the prediction network's zero state.
    blank: the blank's id (the start context).
  """

  def __init__(self, predict: Predict, joint: Joint, initial_state: Callable[[int], Any],
               blank: int):
    zero = initial_state(1)
    predicted, state = predict(tf.fill([1], blank), zero)
    structure = state

    def log_probs(frames, predicted):
      return tf.nn.log_softmax(tf.cast(joint(frames, predicted), tf.float32), axis=-1)

    def step(ids, flat_state, frames):
      predicted, state = predict(ids, tf.nest.pack_sequence_as(structure, flat_state))
      return predicted, tf.nest.flatten(state), log_probs(frames, predicted)

    self._joint = tf.function(log_probs, autograph=False, reduce_retracing=True)
    self._step = tf.function(step, autograph=False, reduce_retracing=True)
    #: (projected prediction [H], flat state rows) of the start context
    self.start = (predicted.numpy()[0], tuple(s.numpy()[0] for s in tf.nest.flatten(state)))

  def joint(self, frames: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """Log-probabilities [N, V] (float64) of frames [N, H] with predictions [N, H]."""
    return self._joint(frames, predicted).numpy().astype(np.float64)

  def step(self, ids: np.ndarray, state: list[np.ndarray], frames: np.ndarray
           ) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """One label per row through the prediction network, then the joint on ``frames``:
    (predictions [N, H], flat state [N, ...] each, log-probabilities [N, V])."""
    predicted, state, log_probs = self._step(ids.astype(np.int32), state, frames)
    return (predicted.numpy(), [s.numpy() for s in state],
            log_probs.numpy().astype(np.float64))


@dataclasses.dataclass
class Hypothesis:
  """A label sequence on the search's current frame."""
  labels: tuple[int, ...]
  text: tuple[str, str]
  log_prob: float  # ln P_rnnt of its merged alignments
  lm: float  # TextScorer.score of its text
  predicted: np.ndarray  # the projected prediction output after its labels
  state: tuple[np.ndarray, ...]  # the prediction network's flat state after them

  @property
  def score(self) -> float:
    return self.log_prob + self.lm


def _merge(found: dict[tuple[int, ...], Hypothesis], hyp: Hypothesis, log_prob: float) -> None:
  """Adds an alignment of ``hyp``'s labels that moved to the next frame."""
  other = found.get(hyp.labels)
  if other is None:
    found[hyp.labels] = dataclasses.replace(hyp, log_prob=log_prob)
  else:
    other.log_prob = float(np.logaddexp(other.log_prob, log_prob))


def _kth_best(found: dict, width: int) -> float:
  if len(found) < width:
    return NEG_INF
  scores = np.array([h.score for h in found.values()])
  return float(np.partition(scores, len(scores) - width)[len(scores) - width])


def _extensions(hyps: list[Hypothesis], log_probs: np.ndarray, scorer: TextScorer,
                width: int, floor: float) -> list[tuple[int, int, float, float]]:
  """(hypothesis, label, ln P_rnnt, text score) of the best label extensions (module doc)."""
  lm = np.stack([scorer.row(h.text) for h in hyps])
  log_prob = np.array([h.log_prob for h in hyps])[:, None] + log_probs
  total = log_prob + lm
  total[:, scorer.blank] = NEG_INF
  flat = total.ravel()
  k = min(width, flat.size)
  best = np.argpartition(-flat, k - 1)[:k]
  best = best[np.argsort(-flat[best], kind="stable")]
  best = best[flat[best] > floor]
  parents, labels = np.divmod(best, total.shape[1])
  return [(i, c, float(log_prob[i, c]), float(lm[i, c]))
          for i, c in zip(parents.tolist(), labels.tolist())]


def fused_beam_search(frames: np.ndarray, lengths: Sequence[int], networks: HostNetworks,
                      scorer: TextScorer, beam_width: int, max_symbols: int
                      ) -> list[tuple[tuple[int, ...], float, float]]:
  """Time synchronous beam search with the fused score (module doc), a batch at once.

  Args:
    frames: [B, T, H] encoder outputs through the joint's encoder projection.
    lengths: valid frames of each row.
    networks: the transducer's networks.
    scorer: the word score of texts (alpha = beta = unk_score_offset = 0: none).
    beam_width: hypotheses kept per utterance and frame.
    max_symbols: labels on one frame at most (>= 1).

  Returns:
    Per utterance, ``(labels, ln P_rnnt, fused score)`` of the best hypothesis (an utterance
    of no frames: no labels, 0, the score of the empty text).
  """
  lengths = [int(n) for n in lengths]
  blank = scorer.blank
  scorer.new_batch()
  empty = ("", "")
  beams = [[Hypothesis((), empty, 0.0, scorer.score(empty), *networks.start)] for _ in lengths]
  for t in range(max(lengths, default=0)):
    active = [b for b, n in enumerate(lengths) if t < n]
    live = {b: beams[b] for b in active}
    moved: dict[int, dict] = {b: {} for b in active}
    log_probs = networks.joint(np.stack([frames[b, t] for b in active for _ in live[b]]),
                               np.stack([h.predicted for b in active for h in live[b]]))
    for round_ in range(max_symbols + 1):
      chosen, row = [], 0  # (utterance, parent, label, ln P_rnnt, text score)
      for b in active:
        hyps, scores = live[b], log_probs[row:row + len(live[b])]
        row += len(hyps)
        for hyp, blank_log_prob in zip(hyps, scores[:, blank].tolist()):
          _merge(moved[b], hyp, hyp.log_prob + blank_log_prob)
        if hyps and round_ < max_symbols:
          chosen += [(b, hyps[i], c, log_prob, lm) for i, c, log_prob, lm in _extensions(
              hyps, scores, scorer, beam_width, _kth_best(moved[b], beam_width))]
      if not chosen:
        break
      predicted, state, log_probs = networks.step(
          np.array([c for _, _, c, _, _ in chosen]),
          [np.stack(rows) for rows in zip(*(parent.state for _, parent, _, _, _ in chosen))],
          np.stack([frames[b, t] for b, *_ in chosen]))
      live = {b: [] for b in active}  # in ``active`` order, as ``chosen`` and its rows
      for i, (b, parent, c, log_prob, lm) in enumerate(chosen):
        live[b].append(Hypothesis(parent.labels + (c,), scorer.extend(parent.text, c),
                                  log_prob, lm, predicted[i], tuple(s[i] for s in state)))
    for b in active:
      beams[b] = sorted(moved[b].values(), key=lambda h: -h.score)[:beam_width]
  results = []
  for beam in beams:
    finals = [h.log_prob + scorer.final(h.text) for h in beam]
    best = int(np.argmax(finals))
    results.append((beam[best].labels, beam[best].log_prob, finals[best]))
  return results


class FusedSearch:
  """A transducer's LM decoding: its networks on the host, the LM and the alphabet; the word
  scorer is made again when the weights change (its caches hold scores).

  Args:
    networks: the transducer's networks.
    lm: a ``kenlm.Model``.
    vocabulary: the LM's words (from an ARPA file), or None (a binary LM).
    labels: the text of each class but the blank (last).
  """

  def __init__(self, networks: HostNetworks, lm: Any, vocabulary: Sequence[str] | None,
               labels: Sequence[str]):
    self.networks, self.lm, self.vocabulary, self.labels = networks, lm, vocabulary, labels
    self.scorer: TextScorer | None = None
    self._weights: tuple | None = None

  def __call__(self, frames: np.ndarray, lengths: Sequence[int], alpha: float, beta: float,
               unk_score_offset: float, beam_width: int, max_symbols: int
               ) -> list[tuple[tuple[int, ...], float, float]]:
    """:func:`fused_beam_search` of a batch with these weights."""
    weights = (float(alpha), float(beta), float(unk_score_offset))
    if weights != self._weights:
      self.scorer = TextScorer(WordScorer(self.lm, self.vocabulary, *weights), self.labels)
      self._weights = weights
    return fused_beam_search(frames, lengths, self.networks, self.scorer, beam_width,
                             max_symbols)

  def transcript(self, labels: Sequence[int]) -> str:
    return self.scorer.transcript(labels)


__all__ = ["label_pieces", "join", "TextScorer", "HostNetworks", "Hypothesis",
           "fused_beam_search", "FusedSearch"]
