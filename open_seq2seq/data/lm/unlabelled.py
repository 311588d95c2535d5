"""A language-model corpus from a text-classification dataset's own texts, labels dropped.

Transfer from a language model pays when the model has read text like the task's (ULMFiT,
Howard and Ruder 2018, fine-tune the language model on the task's texts first). This writes
the texts of an SST-layout folder (``{train,val,test}.csv``, columns ``sentence,label``) as a
WikiText folder that :class:`~open_seq2seq.data.lm.wkt.WKTDataLayer` reads: one tokenized text
a line, ``wiki.train.tokens`` from ``train.csv`` (optionally followed by another corpus's
training file, e.g. the novels), ``wiki.valid.tokens`` from ``val.csv`` and
``wiki.test.tokens`` from ``test.csv``. The test texts are never in the training file, so a
classifier's test set stays unseen by its language model.

Texts are tokenized as the classification data layers tokenize them
(:func:`~open_seq2seq.data.lm.text_classification.encode_text`), so that every word of the
language model's vocabulary is one the classifier's texts can hit; ``lower`` lower-cases them
(the classifier's lookup retries a word lower-cased).
"""

from __future__ import annotations

import csv
import os
from typing import Iterable

from open_seq2seq.data.lm.tokenizer import tokenize
from open_seq2seq.errors import DataError
from open_seq2seq.utils.io import atomic_open

#: WikiText split file -> the SST csv its texts come from.
SPLIT_SOURCES = {"wiki.train.tokens": "train.csv", "wiki.valid.tokens": "val.csv",
                 "wiki.test.tokens": "test.csv"}


def csv_texts(path: str) -> list[str]:
  """The ``sentence`` column of an SST-layout csv, in file order."""
  try:
    with open(path, encoding="utf-8", newline="") as f:
      reader = csv.DictReader(f)
      if "sentence" not in (reader.fieldnames or ()):
        raise DataError(f"{path}: needs a header line with a sentence column")
      return [row["sentence"] or "" for row in reader]
  except (OSError, UnicodeDecodeError, csv.Error) as e:
    raise DataError(f"{path} cannot be read ({getattr(e, 'strerror', None) or e}); give the "
                    "folder of train.csv, val.csv and test.csv") from None


def token_line(text: str, lower: bool) -> str:
  """One text as a line of space-separated tokens (empty when it has none)."""
  tokens = tokenize(text.replace("<br />", " "))
  return " ".join(t.lower() for t in tokens) if lower else " ".join(tokens)


def _lines(texts: Iterable[str], lower: bool) -> Iterable[str]:
  for text in texts:
    line = token_line(text, lower)
    if line:
      yield line + "\n"


def write_unlabelled_corpus(csv_root: str, out_root: str, extra_train: str | None = None,
                            lower: bool = True) -> dict[str, int]:
  """Writes ``out_root/wiki.{train,valid,test}.tokens`` from ``csv_root``'s texts.

  Args:
    csv_root: folder of ``train.csv``, ``val.csv``, ``test.csv`` (labels are not read).
    out_root: the WikiText folder to write (created if needed).
    extra_train: a file of one tokenized paragraph a line appended to the training split
      (e.g. ``data/austen/wiki.train.tokens``), lower-cased with ``lower``.
    lower: lower-case every token.

  Returns:
    The number of lines written to each file.
  """
  sources = {name: os.path.join(csv_root, source) for name, source in SPLIT_SOURCES.items()}
  texts = {name: csv_texts(path) for name, path in sources.items()}  # all read before writing
  if extra_train is not None and not os.path.isfile(extra_train):
    raise DataError(f"{extra_train}: extra training text not found")
  os.makedirs(out_root, exist_ok=True)
  counts = {}
  for name, split_texts in texts.items():
    written = 0
    with atomic_open(os.path.join(out_root, name)) as f:
      for line in _lines(split_texts, lower):
        f.write(line)
        written += 1
      if name == "wiki.train.tokens" and extra_train is not None:
        with open(extra_train, encoding="utf-8") as extra:
          for raw in extra:
            line = raw.strip()
            if line:
              f.write((line.lower() if lower else line) + "\n")
              written += 1
    if not written:
      raise DataError(f"{sources[name]}: no text with a word")
    counts[name] = written
  return counts


__all__ = ["SPLIT_SOURCES", "csv_texts", "token_line", "write_unlabelled_corpus"]
