"""CTC decoding in numpy: greedy, prefix beam search, and shallow fusion with a word n-gram LM.

The beam search scores a prefix by ``log P_ctc + alpha * ln P_lm(words) + beta * #words``
(as DeepSpeech/OpenSeq2Seq's KenLM decoder did): the LM sees a word when a space follows it
and the last word (plus end of sentence) at the end. Language models are ARPA or KenLM
binary files, read by KenLM's Python module when it is installed and otherwise (ARPA only)
by :class:`ArpaLanguageModel`, a small pure-Python back-off model.
"""

from __future__ import annotations

import collections
import math
import os
from typing import Iterable, Sequence

import numpy as np

from open_seq2seq.errors import ConfigError, DataError

_NEG_INF = -float("inf")
_LN10 = math.log(10.0)


# ---------------------------------------------------------------------- language models
class ArpaLanguageModel:
  """Back-off n-gram model read from an ARPA file; :meth:`score` returns log10 P."""

  def __init__(self, path: str):
    self.order = 0
    self.entries: dict[tuple[str, ...], tuple[float, float]] = {}
    section = 0
    with open(path, encoding="utf-8") as f:
      for line_num, line in enumerate(f, 1):
        line = line.strip()
        if not line or line == "\\data\\" or line.startswith("ngram "):
          continue
        if line == "\\end\\":
          break
        if line.startswith("\\") and line.endswith("-grams:"):
          section = int(line[1:line.index("-")])
          self.order = max(self.order, section)
          continue
        if section == 0:
          continue
        parts = line.split()
        if len(parts) < section + 1:
          raise DataError(f"{path}:{line_num}: malformed {section}-gram line")
        words = tuple(parts[1:section + 1])
        backoff = float(parts[section + 1]) if len(parts) > section + 1 else 0.0
        self.entries[words] = (float(parts[0]), backoff)
    if self.order == 0:
      raise DataError(f"{path}: no n-grams found; is this an ARPA file?")

  def _word_logprob(self, context: tuple[str, ...], word: str) -> float:
    if (word,) not in self.entries:
      word = "<unk>"
    backoff = 0.0
    for start in range(len(context) + 1):
      ngram = context[start:] + (word,)
      if ngram in self.entries:
        return self.entries[ngram][0] + backoff
      history = context[start:]
      if history in self.entries:
        backoff += self.entries[history][1]
    return self.entries.get(("<unk>",), (-100.0, 0.0))[0] + backoff

  def score(self, sentence: str, bos: bool = True, eos: bool = True) -> float:
    words = sentence.split() + (["</s>"] if eos else [])
    context: tuple[str, ...] = ("<s>",) if bos else ()
    total = 0.0
    for word in words:
      total += self._word_logprob(context[-(self.order - 1):] if self.order > 1 else (), word)
      context = context + (word,)
    return total


def load_language_model(path: str):
  """KenLM model of ``path`` (ARPA or binary), or the pure-Python ARPA reader."""
  if not os.path.isfile(path):
    raise ConfigError(f"decoder_params/lm_path: {path} does not exist")
  try:
    import kenlm
  except ImportError:
    kenlm = None
  if kenlm is not None:
    return kenlm.Model(path)
  with open(path, "rb") as f:
    if b"\\data\\" not in f.read(4096):
      raise ConfigError(f"decoder_params/lm_path: {path} is not an ARPA file and KenLM's "
                        f"Python module (pip install kenlm) is not installed to read it")
  return ArpaLanguageModel(path)


def write_arpa(sentences: Iterable[str], path: str, discount: float = 0.5) -> None:
  """Writes an interpolated absolute-discounting bigram ARPA model of ``sentences``."""
  unigrams: collections.Counter = collections.Counter()
  bigrams: collections.Counter = collections.Counter()
  for sentence in sentences:
    words = ["<s>"] + sentence.split() + ["</s>"]
    unigrams.update(words[1:])
    bigrams.update(zip(words[:-1], words[1:]))
  vocab = sorted(set(unigrams) | {"<unk>"})
  total = sum(unigrams.values()) + 0.5 * len(vocab)
  p_uni = {w: (unigrams[w] + 0.5) / total for w in vocab}
  history_count: collections.Counter = collections.Counter()
  followers: dict[str, list[str]] = collections.defaultdict(list)
  for (h, w), c in bigrams.items():
    history_count[h] += c
    followers[h].append(w)
  p_bi, backoff = {}, {}
  for h, words in followers.items():
    lam = discount * len(words) / history_count[h]
    for w in words:
      p_bi[(h, w)] = (bigrams[(h, w)] - discount) / history_count[h] + lam * p_uni[w]
    seen = sum(p_bi[(h, w)] for w in words)
    seen_uni = sum(p_uni[w] for w in words)
    backoff[h] = max(1.0 - seen, 1e-12) / max(1.0 - seen_uni, 1e-12)
  lines = ["", "\\data\\", f"ngram 1={len(vocab) + 1}", f"ngram 2={len(p_bi)}", "",
           "\\1-grams:"]
  lines.append(f"-99\t<s>\t{math.log10(backoff.get('<s>', 1.0)):.6f}")
  for w in vocab:
    entry = f"{math.log10(p_uni[w]):.6f}\t{w}"
    if w in backoff:
      entry += f"\t{math.log10(backoff[w]):.6f}"
    lines.append(entry)
  lines += ["", "\\2-grams:"]
  lines += [f"{math.log10(p):.6f}\t{h} {w}" for (h, w), p in sorted(p_bi.items())]
  lines += ["", "\\end\\", ""]
  tmp = path + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    f.write("\n".join(lines))
  os.replace(tmp, path)


# ---------------------------------------------------------------------- decoding
def log_softmax(logits: np.ndarray) -> np.ndarray:
  logits = logits.astype(np.float64)
  shifted = logits - logits.max(axis=-1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def ctc_greedy_decode(logits: np.ndarray, length: int | None = None,
                      blank: int | None = None) -> list[int]:
  """Best path: argmax per frame, merge repeats, drop blanks (default blank: last class)."""
  blank = logits.shape[-1] - 1 if blank is None else blank
  best = np.argmax(logits[:length], axis=-1)
  out, previous = [], None
  for token in best:
    if token != previous and token != blank:
      out.append(int(token))
    previous = token
  return out


class CTCBeamSearchDecoder:
  """Prefix beam search over one utterance's logits, optionally fused with a word LM.

  Args:
    idx2char: symbol of each non-blank class (spaces separate words for the LM).
    beam_width: prefixes kept per frame.
    lm: object with ``score(sentence, bos, eos) -> log10 P`` (KenLM or ArpaLanguageModel).
    alpha: LM weight; beta: word insertion bonus.
    prune_log_prob: characters less likely than this (natural log) in a frame are skipped.
  """

  def __init__(self, idx2char: dict[int, str], beam_width: int = 16, lm=None,
               alpha: float = 0.5, beta: float = 1.0, prune_log_prob: float = -12.0):
    self.idx2char = idx2char
    self.beam_width = max(1, beam_width)
    self.lm = lm
    self.alpha = alpha
    self.beta = beta
    self.prune = prune_log_prob
    self.space_ids = {i for i, c in idx2char.items() if c == " "}
    self._lm_cache: dict[tuple[str, bool], float] = {}

  def _lm_bonus(self, prefix: tuple[int, ...], final: bool) -> float:
    if self.lm is None:
      return 0.0
    text = "".join(self.idx2char[i] for i in prefix)
    if not final:  # only words followed by a space are complete
      cut = max(text.rfind(" "), 0)
      text = text[:cut]
    key = (text, final)
    if key not in self._lm_cache:
      words = text.split()
      lm_log = self.lm.score(" ".join(words), bos=True, eos=final) * _LN10 if (
          words or final) else 0.0
      self._lm_cache[key] = self.alpha * lm_log + self.beta * len(words)
    return self._lm_cache[key]

  def decode(self, logits: np.ndarray, length: int | None = None) -> list[int]:
    """Ids of the best prefix for ``logits`` [time, classes] (blank = last class)."""
    log_probs = log_softmax(np.asarray(logits[:length]))
    blank = log_probs.shape[-1] - 1
    beams: dict[tuple[int, ...], tuple[float, float]] = {(): (0.0, _NEG_INF)}
    for frame in log_probs:
      candidates = [c for c in np.nonzero(frame > self.prune)[0] if c != blank]
      following: dict[tuple[int, ...], list[float]] = collections.defaultdict(
          lambda: [_NEG_INF, _NEG_INF])
      for prefix, (p_blank, p_char) in beams.items():
        total = np.logaddexp(p_blank, p_char)
        entry = following[prefix]
        entry[0] = np.logaddexp(entry[0], total + frame[blank])
        last = prefix[-1] if prefix else None
        for c in candidates:
          p = frame[c]
          extended = following[prefix + (int(c),)]
          if c == last:  # a repeat extends only across a blank; otherwise it merges
            entry[1] = np.logaddexp(entry[1], p_char + p)
            extended[1] = np.logaddexp(extended[1], p_blank + p)
          else:
            extended[1] = np.logaddexp(extended[1], total + p)
      ranked = sorted(following.items(), key=lambda kv: -(np.logaddexp(*kv[1]) +
                                                          self._lm_bonus(kv[0], False)))
      beams = {k: (v[0], v[1]) for k, v in ranked[:self.beam_width]}
    best = max(beams.items(), key=lambda kv: np.logaddexp(*kv[1]) + self._lm_bonus(kv[0], True))
    return list(best[0])

  def decode_batch(self, logits: np.ndarray, lengths: Sequence[int]) -> list[list[int]]:
    return [self.decode(l, int(n)) for l, n in zip(logits, lengths)]
