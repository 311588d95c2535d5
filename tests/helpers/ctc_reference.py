"""Exact CTC + word-LM decoding by enumerating every frame path: the reference for tests.

Feasible for a few classes and frames only (classes ** frames paths). Each path collapses
to a text (repeats merged, blanks dropped, whitespace normalized); a text's CTC probability
is the sum over its paths, and it scores

    ln P_ctc(text) + alpha * ln P_lm(words, </s>) + beta * #words
                   + unk_score_offset * (#words the LM does not know)

which is what :class:`open_seq2seq.decoders.ctc_beam_search.CTCBeamSearchDecoder` computes
with a wide enough beam (given ``unk_score_offset=0`` for partial words, which only a beam
search sees).
"""

from __future__ import annotations

import collections
import itertools
import math

import numpy as np

LN10 = math.log(10.0)


def text_probabilities(logits: np.ndarray, labels: list[str]) -> dict[str, float]:
  """{normalized text: ln P_ctc(text)} over all paths; blank = last class."""
  logits = np.asarray(logits, np.float64)
  log_probs = logits - logits.max(-1, keepdims=True)
  log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
  blank = logits.shape[-1] - 1
  totals: dict[str, float] = collections.defaultdict(lambda: -math.inf)
  for path in itertools.product(range(logits.shape[-1]), repeat=len(logits)):
    chars, previous = [], None
    for c in path:
      if c != previous and c != blank:
        chars.append(labels[c])
      previous = c
    text = " ".join("".join(chars).split())
    score = float(sum(log_probs[t, c] for t, c in enumerate(path)))
    totals[text] = np.logaddexp(totals[text], score)
  return dict(totals)


def lm_score(text: str, lm=None, alpha: float = 0.0, beta: float = 0.0,
             unk_score_offset: float = 0.0) -> float:
  """alpha * ln P_lm(text </s> | <s>) + beta * words + unk_score_offset * unknown words."""
  words = text.split()
  score = beta * len(words)
  if lm is not None:
    score += alpha * LN10 * lm.score(text, bos=True, eos=True)
    score += unk_score_offset * sum(w not in lm for w in words)
  return score


def best_texts(logits: np.ndarray, labels: list[str], lm=None, alpha: float = 0.0,
               beta: float = 0.0, unk_score_offset: float = 0.0) -> list[tuple[str, float]]:
  """Every text with its total score, best first."""
  scored = [(text, p + lm_score(text, lm, alpha, beta, unk_score_offset))
            for text, p in text_probabilities(logits, labels).items()]
  return sorted(scored, key=lambda kv: -kv[1])
