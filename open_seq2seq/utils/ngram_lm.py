"""Word n-gram language models as ARPA files: interpolated modified Kneser-Ney, in Python.

KenLM's own estimator (``lmplz``) is in no package this project can install (the ``kenlm``
wheel holds only the Python module), so :func:`write_arpa` estimates the model here; KenLM
(and the CTC decoder) read the file it writes.
"""

from __future__ import annotations

import collections
import math
from typing import Iterable, Mapping

from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.utils.io import atomic_open
_FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)


def _discounts(adjusted: Mapping[tuple, int]) -> tuple[float, float, float]:
  """Modified Kneser-Ney discounts D1, D2, D3+ from the counts of counts (Chen & Goodman);
  a fixed fallback where a corpus is too small to estimate one (some count of counts 0)."""
  t = collections.Counter(min(c, 4) for c in adjusted.values())
  y = t[1] / (t[1] + 2 * t[2]) if t[1] and t[2] else None
  out = []
  for k in (1, 2, 3):
    d = k - (k + 1) * y * t[k + 1] / t[k] if y is not None and t[k] and t[k + 1] else None
    out.append(d if d is not None and 0 < d < k else _FALLBACK_DISCOUNTS[k - 1])
  return out[0], out[1], out[2]


def write_arpa(sentences: Iterable[str], path: str, order: int = 2) -> list[int]:
  """Writes an interpolated modified Kneser-Ney ``order``-gram ARPA model of ``sentences``.

  What KenLM's ``lmplz`` estimates, in Python (for corpora of up to a few million words):
  lower orders use continuation counts (n-grams starting with <s> keep their counts), three
  discounts per order, unigrams interpolated with the uniform distribution (which is what
  <unk> gets), and each context's back-off weight is its interpolation weight, so P(w | h)
  sums to 1 over the vocabulary for every context. Sentences are whitespace-split words
  (normalize them first). Returns the number of n-grams of each order.
  """
  if order < 2:
    raise ConfigError(f"LM order {order}: KenLM reads models of order 2 or more")
  raw: list[collections.Counter] = [collections.Counter() for _ in range(order + 1)]
  for sentence in sentences:
    words = ["<s>"] + sentence.split() + ["</s>"]
    if len(words) == 2:
      continue
    for n in range(1, order + 1):
      for i in range(len(words) - n + 1):
        raw[n][tuple(words[i:i + n])] += 1
  if not raw[1]:
    raise DataError(f"{path}: no words to build a language model from")
  order = max(n for n in range(1, order + 1) if raw[n])
  del raw[1][("<s>",)]
  adjusted = [collections.Counter() for _ in range(order + 1)]
  adjusted[order] = raw[order]
  for n in range(order - 1, 0, -1):
    for ngram in raw[n + 1]:  # one per distinct left extension: continuation counts
      adjusted[n][ngram[1:]] += 1
    for ngram, count in raw[n].items():
      if ngram[0] == "<s>":
        adjusted[n][ngram] = count
  vocab_size = len(adjusted[1]) + 1  # + <unk>
  probs: list[dict] = [{} for _ in range(order + 1)]
  backoffs: list[dict] = [{} for _ in range(order + 1)]
  for n in range(1, order + 1):
    d = _discounts(adjusted[n])
    by_context: dict[tuple, list] = collections.defaultdict(list)
    for ngram, count in adjusted[n].items():
      by_context[ngram[:-1]].append((ngram, count))
    for context, entries in by_context.items():
      total = sum(c for _, c in entries)
      gamma = sum(d[min(c, 3) - 1] for _, c in entries) / total
      for ngram, count in entries:
        lower = probs[n - 1][ngram[1:]] if n > 1 else 1.0 / vocab_size
        probs[n][ngram] = (count - d[min(count, 3) - 1]) / total + gamma * lower
      backoffs[n - 1][context] = gamma
  probs[1][("<unk>",)] = backoffs[0][()] / vocab_size
  with atomic_open(path) as f:
    f.write("\\data\\\n")
    f.write("".join(f"ngram {n}={len(probs[n]) + (n == 1)}\n" for n in range(1, order + 1)))
    for n in range(1, order + 1):
      f.write(f"\n\\{n}-grams:\n")
      if n == 1:
        f.write(f"-99\t<s>\t{math.log10(backoffs[1][('<s>',)]):.6f}\n")
      for ngram in sorted(probs[n]):
        line = f"{math.log10(probs[n][ngram]):.6f}\t{' '.join(ngram)}"
        if n < order and ngram in backoffs[n]:
          line += f"\t{math.log10(backoffs[n][ngram]):.6f}"
        f.write(line + "\n")
    f.write("\n\\end\\\n")
  return [len(probs[1]) + 1] + [len(probs[n]) for n in range(2, order + 1)]
