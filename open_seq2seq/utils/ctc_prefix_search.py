"""CTC prefix beam search fused with word scores (an n-gram LM, hotwords), in numpy.

A text scores ln P_ctc(text) + its word score (:class:`WordScorer`: alpha * ln P_lm(words,
</s>) + beta * #words + unk_score_offset * #unknown words + hotword_weight * #hotwords; see
:mod:`open_seq2seq.decoders.ctc_beam_search`, which runs the search over batches).

The search is the textbook CTC prefix beam search (TensorFlow's ``ctc_beam_search_decoder``)
with the word score added: a prefix is a symbol string whose probability sums its alignments
(kept apart by whether they end in a blank, so that a repeated symbol needs a blank between),
and each frame every kept prefix is extended by every symbol and the ``beam_width`` best by
ln P_ctc + word score (of the words so far and the partial word) are kept. No symbol and no
prefix inside the beam width is pruned, so without word scores it does as well as a plain
beam search of that width whatever the outputs look like (tests/unit/test_ctc_beam_quality.py
compares it with a textbook one and with TensorFlow's). At the end the prefixes that read as
one text ("a  b", " a b") are summed. Each frame is scored with numpy, [beam, classes] at
once; Python handles the kept and the ``beam_width`` best new prefixes, and each word,
partial word and LM state once.
"""

from __future__ import annotations

import bisect
import itertools
import math
from typing import Any, Sequence

import numpy as np

LN10 = math.log(10.0)
NEG_INF = -math.inf


def _logadd(a: float, b: float) -> float:
  if a < b:
    a, b = b, a
  return a if b == NEG_INF else a + math.log1p(math.exp(b - a))


def _join(words: str, part: str) -> str:
  return f"{words} {part}" if words and part else words or part


class WordScorer:
  """The word score of a text: its score less ln P_ctc.

  Args:
    lm: a ``kenlm.Model`` (log10 probabilities, taken times ln 10) or None.
    vocabulary: the LM's words: a partial word none starts with scores unk_score_offset
      (None: partial words are not checked).
    alpha, beta: weight of ln P_lm, bonus per word (LM only).
    unk_score_offset: score of a word outside the LM (LM only).
    hotwords, hotword_weight: words favoured, the score of each occurrence; a partial word
      that starts one scores its share (length / shortest such hotword's).
  """

  def __init__(self, lm: Any = None, vocabulary: Sequence[str] | None = None,
               alpha: float = 0.0, beta: float = 0.0, unk_score_offset: float = 0.0,
               hotwords: Sequence[str] = (), hotword_weight: float = 0.0):
    self.lm, self.alpha, self.beta, self.unk_score_offset = lm, alpha, beta, unk_score_offset
    self.vocabulary = sorted(vocabulary) if vocabulary and lm is not None else None
    self.hotwords = sorted({w for phrase in hotwords for w in phrase.split()})
    self.hotword_weight = hotword_weight
    self.trivial = lm is None and not self.hotwords  # every score is 0
    self._partials: dict[str, tuple[float, bool]] = {}
    self.new_utterance()

  def new_utterance(self) -> None:
    """Forgets the last utterance's texts (they would only fill memory)."""
    start = None
    if self.lm is not None:
      import kenlm  # pylint: disable=import-outside-toplevel
      start = kenlm.State()
      self.lm.BeginSentenceWrite(start)
    self._texts: dict[str, tuple[float, Any]] = {"": (0.0, start)}

  def text(self, text: str) -> tuple[float, Any]:
    """(score of the words of ``text``, all complete, the LM state after them)."""
    hit = self._texts.get(text)
    if hit is None:
      head, _, word = text.rpartition(" ")
      score, state = self.text(head)
      score += self.hotword_weight * (word in self.hotwords)
      if self.lm is not None:
        import kenlm  # pylint: disable=import-outside-toplevel
        previous, state = state, kenlm.State()
        score += self.alpha * LN10 * self.lm.BaseScore(previous, word, state) + self.beta
        score += self.unk_score_offset * (word not in self.lm)
      hit = self._texts[text] = (score, state)
    return hit

  def final(self, text: str) -> float:
    """Score of a whole hypothesis: its words and ``</s>``."""
    score, state = self.text(text)
    if self.lm is not None:
      import kenlm  # pylint: disable=import-outside-toplevel
      score += self.alpha * LN10 * self.lm.BaseScore(state, "</s>", kenlm.State())
    return score

  def partial(self, part: str) -> tuple[float, bool]:
    """(score of an unfinished word: a hotword's start, or one no LM word starts with;
    whether each continuation of it scores the same: it starts no LM word nor hotword)."""
    hit = self._partials.get(part)
    if hit is None:
      i = bisect.bisect_left(self.hotwords, part)
      hotwords = list(itertools.takewhile(lambda w: w.startswith(part), self.hotwords[i:]))
      known = self.vocabulary is None
      if not known:
        i = bisect.bisect_left(self.vocabulary, part)
        known = i < len(self.vocabulary) and self.vocabulary[i].startswith(part)
      score = 0.0
      if part and hotwords:
        score = self.hotword_weight * len(part) / min(map(len, hotwords))
      elif part and not known:
        score = self.unk_score_offset
      if len(self._partials) > 200_000:
        self._partials.clear()
      hit = self._partials[part] = (score, not hotwords and (
          self.vocabulary is None or bool(part) and not known))
    return hit

  def following(self, part: str) -> set[str] | None:
    """The characters that follow ``part`` in the LM words that start with it (None with
    a hotword starting so, or no vocabulary: ask :meth:`partial`)."""
    if self.vocabulary is None or any(w.startswith(part) for w in self.hotwords):
      return None
    lo, hi = (bisect.bisect_left(self.vocabulary, part + end) for end in ("", "\U0010ffff"))
    return {w[len(part)] for w in self.vocabulary[lo:hi] if len(w) > len(part)}


class PrefixBeamSearch:
  """CTC prefix beam search (see the module docstring).

  Args:
    labels: the text of each class but the blank, which comes last. A space separates
      words; with SentencePiece pieces (any label starts with "▁") a piece starting with "▁"
      begins a word and control pieces (<unk>, <s>, </s>) add no text.
    scorer: a :class:`WordScorer`.
    beam_width: prefixes kept per frame.
    token_min_logp: classes (the blank too) below this log-probability in a frame are not
      tried, unless the frame's most likely (None: every class is tried).
    beam_prune_logp: prefixes this far (natural log) below the best are dropped too (None:
      the ``beam_width`` best are kept).
  """

  def __init__(self, labels: Sequence[str], scorer: WordScorer, beam_width: int = 16,
               token_min_logp: float | None = None, beam_prune_logp: float | None = None):
    labels = list(labels) + [""]  # the blank: no symbol of a text
    is_bpe = any(label.startswith("\u2581") for label in labels)
    self.starts = np.array([label.startswith("\u2581") if is_bpe else label == " "
                            for label in labels], bool)
    self.pieces = [("" if label[:1] + label[-1:] == "<>" else label.replace("\u2581", ""))
                   if is_bpe else label.strip() for label in labels]
    self.characters = all(len(p) <= 1 for p in self.pieces)
    self.scorer, self.beam_width = scorer, max(1, int(beam_width))
    self.token_min_logp, self.beam_prune_logp = token_min_logp, beam_prune_logp
    self.start_scores = np.array([scorer.partial(p)[0] if s else 0.0
                                  for p, s in zip(self.pieces, self.starts)])
    self._rows: dict[str, np.ndarray] = {}

  def _row(self, part: str) -> np.ndarray:
    """Partial-word score of ``part`` continued by each symbol (0 for word starts)."""
    row = self._rows.get(part)
    if row is None:
      score, settled = self.scorer.partial(part)
      following = None if settled or not self.characters else self.scorer.following(part)
      if settled:
        row = np.where(self.starts, 0.0, score)
      elif following is not None:  # characters: a set look-up each
        row = np.array([0.0 if s or not p or p in following else self.scorer.unk_score_offset
                        for p, s in zip(self.pieces, self.starts)])
      else:
        row = np.array([0.0 if s else self.scorer.partial(part + p)[0]
                        for p, s in zip(self.pieces, self.starts)])
      if len(self._rows) > 20_000:
        self._rows.clear()
      self._rows[part] = row
    return row

  def _text_of(self, node: int, tree: tuple[list, list, list]) -> tuple[str, str]:
    """(complete words, partial word) of a node of the prefix tree, made when first needed."""
    parent, label, texts = tree
    chain = []
    while texts[node] is None:
      chain.append(node)
      node = parent[node]
    for node in reversed(chain):
      words, part = texts[parent[node]]
      c = label[node]
      texts[node] = (_join(words, part), self.pieces[c]) if self.starts[c] else (
          words, part + self.pieces[c])
    return texts[node]

  def _text_scores(self, nodes: list[int], tree: tuple, cache: dict) -> np.ndarray:
    """[nodes, classes]: the score of each node's text extended by each symbol."""
    got = []
    for node in nodes:  # (score of the complete words, of them and the partial one, _row)
      hit = cache.get(node)
      if hit is None:
        words, part = self._text_of(node, tree)
        hit = cache[node] = (self.scorer.text(words)[0],
                             self.scorer.text(_join(words, part))[0], self._row(part))
      got.append(hit)
    words, ended, rows = zip(*got)
    return np.where(self.starts, np.array(ended)[:, None] + self.start_scores,
                    np.array(words)[:, None] + np.stack(rows))

  def decode(self, log_probs: np.ndarray, top_n: int = 1) -> list[tuple[str, float, float]]:
    """Best texts of one utterance's [time, classes] log-probabilities: (text, ln P_ctc,
    score), best first."""
    scorer, width = self.scorer, self.beam_width
    scorer.new_utterance()
    blank = len(self.pieces) - 1
    # prefixes form a tree: node n extends node parent[n] by symbol label[n] (the root's
    # "symbol" is the blank); texts: see _text_of
    parent, label, texts, cache = [-1], [blank], [("", "")], {}
    tree = (parent, label, texts)
    # the kept nodes, their last symbols, ln P of their alignments that end in a blank / in
    # their symbol, and the score of their texts (complete and partial words)
    beam, last = np.zeros(1, np.int64), np.full(1, blank)
    blank_p, symbol_p, lm = np.zeros(1), np.full(1, NEG_INF), np.zeros(1)
    counting = np.arange(2 * width + 1)
    for frame in np.asarray(log_probs, np.float64):
      if self.token_min_logp is not None:  # classes not tried are as if impossible
        tried = frame >= self.token_min_logp
        tried[np.argmax(frame)] = True
        frame = np.where(tried, frame, NEG_INF)
      total = np.logaddexp(blank_p, symbol_p)
      extend = total[:, None] + frame  # a new symbol after any alignment, but after
      extend[counting[:len(beam)], last] = blank_p + frame[last]  # itself only after a blank
      extend[:, blank] = NEG_INF
      new_blank, new_symbol = total + frame[blank], symbol_p + frame[last]
      nodes = beam.tolist()
      where = {n: i for i, n in enumerate(nodes)}
      for j, n in enumerate(nodes):  # a kept prefix that extends a kept one: summed
        i = where.get(parent[n])
        if i is not None:
          new_symbol[j] = _logadd(float(new_symbol[j]), float(extend[i, label[n]]))
          extend[i, label[n]] = NEG_INF
      text_scores = 0.0 if scorer.trivial else self._text_scores(nodes, tree, cache)
      scores = (extend + text_scores).ravel()
      best = np.argpartition(-scores, width - 1)[:width] if width < scores.size else \
          np.arange(scores.size)
      best = best[scores[best] > NEG_INF]
      grown, symbols = np.divmod(best, len(frame))
      for i, c in zip(grown.tolist(), symbols.tolist()):  # the new prefixes among the best
        parent.append(nodes[i])
        label.append(c)
        texts.append(None)
      beam = np.concatenate([beam, counting[:len(best)] + (len(parent) - len(best))])
      last = np.concatenate([last, symbols])
      blank_p = np.concatenate([new_blank, np.full(len(best), NEG_INF)])
      symbol_p = np.concatenate([new_symbol, extend[grown, symbols]])
      lm = np.concatenate([lm, np.zeros(len(best)) if scorer.trivial else
                           text_scores[grown, symbols]])
      score = np.logaddexp(blank_p, symbol_p) + lm
      kept = np.argsort(-score, kind="stable")[:width]
      if self.beam_prune_logp is not None:
        kept = kept[score[kept] >= score[kept[0]] + self.beam_prune_logp]
      beam, last, blank_p, symbol_p, lm = (
          beam[kept], last[kept], blank_p[kept], symbol_p[kept], lm[kept])
    found: dict[str, float] = {}  # prefixes that differ only in whitespace are one text
    for n, p in zip(beam.tolist(), np.logaddexp(blank_p, symbol_p).tolist()):
      text = _join(*self._text_of(n, tree))
      found[text] = _logadd(found.get(text, NEG_INF), p)
    ranked = sorted(((t, p, p + scorer.final(t)) for t, p in found.items()),
                    key=lambda beam: -beam[2])
    return ranked[:top_n]
