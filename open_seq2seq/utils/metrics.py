"""Evaluation metrics on plain text: corpus BLEU, word and character error rates."""

from __future__ import annotations

from typing import Hashable, Sequence

import sacrebleu


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str], tokenize: str = "13a",
                lowercase: bool = False) -> float:
  """Corpus BLEU (0-100) of detokenized hypotheses against one reference each, by sacrebleu.

  Args:
    hypotheses: system outputs, one string per example.
    references: reference translations in the same order.
    tokenize: sacrebleu tokenizer ('13a' as in WMT, 'intl', 'char', 'none', 'zh', ...).
    lowercase: case-insensitive BLEU.
  """
  if len(hypotheses) != len(references):
    raise ValueError(f"corpus_bleu: {len(hypotheses)} hypotheses but "
                     f"{len(references)} references")
  if not hypotheses:
    return 0.0
  return float(sacrebleu.corpus_bleu(list(hypotheses), [list(references)],
                                     tokenize=tokenize, lowercase=lowercase).score)


def edit_distance(reference: Sequence[Hashable], hypothesis: Sequence[Hashable]) -> int:
  """Levenshtein distance: substitutions + deletions + insertions turning one into the other."""
  if len(reference) < len(hypothesis):
    reference, hypothesis = hypothesis, reference  # distance is symmetric; keep the row short
  previous = list(range(len(hypothesis) + 1))
  for i, ref_unit in enumerate(reference, start=1):
    current = [i]
    for j, hyp_unit in enumerate(hypothesis, start=1):
      current.append(min(previous[j] + 1,  # deletion
                         current[j - 1] + 1,  # insertion
                         previous[j - 1] + (ref_unit != hyp_unit)))  # substitution or match
    previous = current
  return previous[-1]


def _error_rate(references: Sequence[Sequence[Hashable]],
                hypotheses: Sequence[Sequence[Hashable]], name: str) -> float:
  if len(references) != len(hypotheses):
    raise ValueError(f"{name}: {len(references)} references but {len(hypotheses)} hypotheses")
  edits = sum(edit_distance(r, h) for r, h in zip(references, hypotheses))
  total = sum(len(r) for r in references)
  # all-empty references: every hypothesis unit is an error, counted against one unit
  return edits / max(total, 1)


def word_error_rate(references: Sequence[str], hypotheses: Sequence[str]) -> float:
  """Corpus WER as a fraction: total word edits / total reference words."""
  return _error_rate([r.split() for r in references], [h.split() for h in hypotheses],
                     "word_error_rate")


def char_error_rate(references: Sequence[str], hypotheses: Sequence[str]) -> float:
  """Corpus CER as a fraction: total character edits / total reference characters.

  Runs of whitespace count as one space character; leading/trailing whitespace is ignored.
  """
  return _error_rate([" ".join(r.split()) for r in references],
                     [" ".join(h.split()) for h in hypotheses], "char_error_rate")
