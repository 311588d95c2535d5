#!/usr/bin/env python
"""Builds a WikiText-style English LM corpus from novels shipped in Debian's R packages.

Sources (public-domain Project Gutenberg texts; both packages are MIT-licensed):

* ``janeaustenr`` (r-cran-janeaustenr): Jane Austen's six novels, one character vector of
  lines each, in the package's lazy-load database ``data/Rdata.rdb`` (index ``Rdata.rdx``);
* ``tidytext`` (r-cran-tidytext): ``extdata/books.rda``, a data frame of lines (``text``,
  ``title``) of four novels. Its *Pride and Prejudice* is line-for-line janeaustenr's, so it is
  skipped when both sources are read; the three others are *The War of the Worlds*, *Twenty
  Thousand Leagues under the Sea* and *Great Expectations*.

The R files are read without R by the ``rdata`` package. Each book's lines are grouped into
paragraphs (blank lines separate them) and cleaned:

* front matter (title page, epigraphs, editors' notes) before the first chapter heading,
  back matter from an end mark ("THE END", "Finis", "A NOTE ON THE TEXT") on, and headings
  are dropped: "Chapter 1"/"CHAPTER ONE" and any paragraph without a lowercase letter (volume
  and part headings, all-caps chapter titles, "* * *", and also the salutations and
  signatures of letters, which these editions set in capitals);
* bracketed editorial notes and footnotes (paragraphs starting with "[") and inline footnote
  marks such as "[1]" are dropped;
* the underscores that mark italics (``_You_``) are removed and whitespace is collapsed.

Paragraphs are tokenized with ``open_seq2seq.data.lm.tokenizer.tokenize`` and written one per
line, tokens separated by single spaces, to ``wiki.train.tokens``, ``wiki.valid.tokens`` and
``wiki.test.tokens``. The split is per book and deterministic: the last 5 % of a book's
paragraphs go to test, the 5 % before them to valid, the rest to train, so every split holds
every book. No ``<unk>`` replacement and no lowercasing: vocabularies are the data layer's job.

    python scripts/import_austen.py [--out data/austen] [--books janeaustenr,tidytext]

scripts/get_lm_data.sh fetches the packages (without installing R) and runs this script.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import os
import re
import struct
import sys
import warnings
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_tokenizer():
  """open_seq2seq.data.lm.tokenizer, loaded by path: importing the ``open_seq2seq`` package
  loads TensorFlow (many seconds), and the tokenizer needs only ``re``."""
  path = os.path.join(ROOT, "open_seq2seq", "data", "lm", "tokenizer.py")
  spec = importlib.util.spec_from_file_location("_open_seq2seq_lm_tokenizer", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


tokenize = _load_tokenizer().tokenize

SOURCES = ("janeaustenr", "tidytext")
SPLITS = ("train", "valid", "test")
HELD_OUT_FRACTION = 0.05
VOCAB_MIN_COUNT = 3
# Where apt installs R packages, then where get_lm_data.sh unpacks them (dpkg -x).
SYSTEM_R_LIBS = ("/usr/lib/R/site-library", "/usr/local/lib/R/site-library", "/usr/lib/R/library")
DEB_R_LIB = os.path.join("deb", "usr", "lib", "R", "site-library")

# A paragraph that is just "Chapter <number or word>" ("CHAPTER ONE", "Chapter 1", "Chapter I").
_CHAPTER = re.compile(r"chapter\s+[\w-]+\.?", re.IGNORECASE)
# Where a book's text ends; what follows is back matter (Northanger Abbey's editor's note).
_END_MARKS = {"finis", "the end", "a note on the text"}
_FOOTNOTE_MARK = re.compile(r"\[\d+\]")


def _rdata():
  try:
    import rdata  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise SystemExit("error: the Python package rdata is missing; run scripts/get_lm_data.sh "
                     "(or pip install rdata)") from None
  return rdata


def _r_object(data: bytes):
  """A serialized R object (rds stream, possibly gzipped) converted to Python."""
  rdata = _rdata()
  with warnings.catch_warnings():  # "Unknown file type: assumed RDS" for a bare stream
    warnings.simplefilter("ignore", UserWarning)
    return rdata.conversion.convert(rdata.parser.parse_data(data))


def default_r_libs(out: str) -> list[str]:
  """Where to look for the R packages: unpacked next to the output (get_lm_data.sh), in the
  default data folder, then the system's R libraries."""
  return [os.path.join(out, DEB_R_LIB), os.path.join(ROOT, "data", "austen", DEB_R_LIB),
          *SYSTEM_R_LIBS]


def find_package(name: str, r_libs: list[str]) -> str:
  """The folder of installed R package ``name`` in the first of ``r_libs`` that holds it."""
  for lib in r_libs:
    path = os.path.join(lib, name)
    if os.path.isfile(os.path.join(path, "DESCRIPTION")):
      return path
  raise SystemExit(f"error: R package {name} not found in {', '.join(r_libs)}; run "
                   f"scripts/get_lm_data.sh (Debian package r-cran-{name})")


def read_lazyload(prefix: str, names: list[str] | None = None) -> dict[str, object]:
  """Objects of an R lazy-load database (``prefix.rdx`` index + ``prefix.rdb`` blobs).

  Each blob is a 4-byte big-endian length and a zlib stream of a serialized object.
  """
  with open(prefix + ".rdx", "rb") as f:
    index = _r_object(f.read())
  variables = {str(k): v for k, v in index["variables"].items()}
  if not bool(index["compressed"][0]):
    raise SystemExit(f"error: {prefix}.rdb is not zlib-compressed; cannot read it")
  objects = {}
  with open(prefix + ".rdb", "rb") as f:
    rdb = f.read()
  for name in (list(variables) if names is None else [n for n in names if n in variables]):
    offset, length = (int(x) for x in variables[name])
    blob = rdb[offset:offset + length]
    size, = struct.unpack(">I", blob[:4])
    data = zlib.decompress(blob[4:])
    if len(data) != size:
      raise SystemExit(f"error: {prefix}.rdb: {name} is {len(data)} bytes, index says {size}")
    objects[name] = _r_object(data)
  return objects


def slug(title: str) -> str:
  """A book key from a title: lowercase letters only (janeaustenr's naming)."""
  return re.sub(r"[^a-z]", "", title.lower())


def read_janeaustenr(package_dir: str, names: list[str] | None = None) -> dict[str, list[str]]:
  """Austen's novels (all, or ``names``) as ``{key: lines}``; keys are the package's object
  names (emma, mansfieldpark, northangerabbey, persuasion, prideprejudice, sensesensibility)."""
  objects = read_lazyload(os.path.join(package_dir, "data", "Rdata"), names)
  return {name: [str(line) for line in lines] for name, lines in objects.items()}


def read_tidytext(package_dir: str, names: list[str] | None = None) -> dict[str, list[str]]:
  """tidytext's ``extdata/books.rda`` (all books, or ``names``) as ``{slug(title): lines}``
  in file order."""
  path = os.path.join(package_dir, "extdata", "books.rda")
  with open(path, "rb") as f:
    frame = _r_object(f.read())["books"]
  books: dict[str, list[str]] = {}
  for title, text in zip(frame["title"], frame["text"]):
    key = slug(str(title))
    if names is None or key in names:
      books.setdefault(key, []).append("" if not isinstance(text, str) else text)
  return books


READERS = {"janeaustenr": read_janeaustenr, "tidytext": read_tidytext}
#: The books each source holds (janeaustenr 1.0.0, tidytext 0.4.1), for --books.
BOOKS = {
    "janeaustenr": ("emma", "mansfieldpark", "northangerabbey", "persuasion", "prideprejudice",
                    "sensesensibility"),
    "tidytext": ("thewaroftheworlds", "twentythousandleaguesunderthesea", "prideandprejudice",
                 "greatexpectations"),
}


def load_books(selection: list[str], r_libs: list[str]) -> tuple[dict[str, list[str]], list[str]]:
  """``{book: lines}`` of the selected sources and/or book keys (see ``BOOKS``), plus notes
  on what was skipped. A book whose lines equal an earlier one's is skipped (tidytext's copy of
  *Pride and Prejudice*)."""
  known = {book: source for source, books in BOOKS.items() for book in books}
  unknown = [s for s in selection if s not in SOURCES and s not in known]
  if unknown:
    raise SystemExit(f"error: --books: unknown {', '.join(unknown)}; choose sources "
                     f"{', '.join(SOURCES)} or books {', '.join(known)}")
  books: dict[str, list[str]] = {}
  notes = []
  for source in SOURCES:
    if source in selection:
      names = None  # all of it, whatever this version of the package holds
    else:
      names = [s for s in selection if known.get(s) == source]
      if not names:
        continue
    read = READERS[source](find_package(source, r_libs), names)
    for key, lines in read.items():
      duplicate = next((k for k, v in books.items() if v == lines), None)
      if duplicate is not None:
        notes.append(f"skipped {source}'s {key}: same text as {duplicate}")
      elif key in books:
        notes.append(f"skipped {source}'s {key}: a book of that name is already read")
      else:
        books[key] = lines
  return books, notes


def paragraphs(lines: list[str]) -> list[str]:
  """Consecutive non-blank lines joined by spaces; blank lines separate paragraphs."""
  result, current = [], []
  for line in list(lines) + [""]:
    if line.strip():
      current.append(line.strip())
    elif current:
      result.append(" ".join(current))
      current = []
  return result


def is_heading(paragraph: str) -> bool:
  """Chapter/volume/part headings and all-caps titles: no running text."""
  text = paragraph.strip()
  return not any(c.islower() for c in text) or _CHAPTER.fullmatch(text) is not None


def clean_text(paragraph: str) -> str:
  """Italics underscores and footnote marks removed, whitespace collapsed."""
  text = _FOOTNOTE_MARK.sub("", paragraph.replace("_", ""))
  return re.sub(r"\s+", " ", text).strip()


def clean_book(lines: list[str]) -> list[str]:
  """The cleaned running-text paragraphs of a book (see the module docstring)."""
  paras = paragraphs(lines)
  first = next((i for i, p in enumerate(paras) if _CHAPTER.fullmatch(p.strip())), None)
  if first is not None:  # no chapter heading at all: keep everything
    paras = paras[first:]
  kept = []
  for p in paras:
    if p.strip().lower().rstrip(".") in _END_MARKS:
      break
    if is_heading(p) or p.lstrip().startswith("["):
      continue
    text = clean_text(p)
    if text:
      kept.append(text)
  return kept


def split_sizes(n: int, fraction: float = HELD_OUT_FRACTION) -> tuple[int, int, int]:
  """(train, valid, test) sizes of ``n`` paragraphs; valid and test get ``fraction`` each
  (at least one each when there are 3 or more paragraphs)."""
  held = int(round(n * fraction))
  if held == 0 and n >= 3:
    held = 1
  return n - 2 * held, held, held


def split_book(items: list, fraction: float = HELD_OUT_FRACTION) -> dict[str, list]:
  """The book's items in order: train, then valid, then the last ``fraction`` as test."""
  n_train, n_valid, _ = split_sizes(len(items), fraction)
  return {"train": items[:n_train], "valid": items[n_train:n_train + n_valid],
          "test": items[n_train + n_valid:]}


def build_corpus(books: dict[str, list[str]], fraction: float = HELD_OUT_FRACTION
                 ) -> tuple[dict[str, list[list[str]]], dict[str, dict[str, tuple[int, int]]]]:
  """Tokenized paragraphs per split (books in order) and per-book (paragraphs, tokens)."""
  splits: dict[str, list[list[str]]] = {s: [] for s in SPLITS}
  stats: dict[str, dict[str, tuple[int, int]]] = {}
  for book, lines in books.items():
    tokenized = [t for t in (tokenize(p) for p in clean_book(lines)) if t]
    stats[book] = {}
    for split, part in split_book(tokenized, fraction).items():
      splits[split].extend(part)
      stats[book][split] = (len(part), sum(len(t) for t in part))
  return splits, stats


def write_atomic(path: str, text: str) -> None:
  tmp = path + ".tmp"
  with open(tmp, "w", encoding="utf-8", newline="\n") as f:
    f.write(text)
  os.replace(tmp, path)


def write_corpus(out: str, splits: dict[str, list[list[str]]]) -> list[str]:
  """Writes ``wiki.{split}.tokens`` (one paragraph a line); returns the paths."""
  os.makedirs(out, exist_ok=True)
  paths = []
  for split in SPLITS:
    path = os.path.join(out, f"wiki.{split}.tokens")
    write_atomic(path, "".join(" ".join(tokens) + "\n" for tokens in splits[split]))
    paths.append(path)
  return paths


def vocab_size(paragraphs_tokens: list[list[str]], min_count: int = VOCAB_MIN_COUNT) -> int:
  counts = collections.Counter(t for tokens in paragraphs_tokens for t in tokens)
  return sum(1 for c in counts.values() if c >= min_count)


def summary(stats: dict[str, dict[str, tuple[int, int]]], splits: dict[str, list[list[str]]]
            ) -> str:
  """A table of paragraphs and tokens per book and split, totals and the train vocabulary."""
  header = f"{'book':<34}" + "".join(f"{s + ' par':>11}{s + ' tok':>12}" for s in SPLITS)
  rows = [header, "-" * len(header)]
  for book, per_split in list(stats.items()) + [("total", {
      s: (sum(st[s][0] for st in stats.values()), sum(st[s][1] for st in stats.values()))
      for s in SPLITS})]:
    rows.append(f"{book:<34}" + "".join(f"{per_split[s][0]:>11,}{per_split[s][1]:>12,}"
                                        for s in SPLITS))
  words = {s: sum(1 for t in splits[s] for w in t if any(c.isalnum() for c in w)) for s in SPLITS}
  rows.append("words (tokens with a letter or digit): "
              + ", ".join(f"{s} {words[s]:,}" for s in SPLITS))
  rows.append(f"train vocabulary (count >= {VOCAB_MIN_COUNT}): {vocab_size(splits['train']):,}")
  return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--out", default=os.path.join(ROOT, "data", "austen"),
                      help="output folder of wiki.{train,valid,test}.tokens")
  parser.add_argument("--books", default=",".join(SOURCES),
                      help="comma-separated sources (janeaustenr, tidytext) and/or book keys "
                           "(emma, persuasion, greatexpectations, ...)")
  parser.add_argument("--r_lib", action="append", default=None,
                      help="R library folder to look for the packages in (repeatable); default: "
                           "OUT/deb/..., data/austen/deb/... and the system R libraries")
  args = parser.parse_args(argv)
  selection = [b.strip() for b in args.books.split(",") if b.strip()]
  if not selection:
    raise SystemExit("error: --books is empty; give e.g. --books=janeaustenr")
  r_libs = args.r_lib or default_r_libs(args.out)
  books, notes = load_books(selection, r_libs)
  splits, stats = build_corpus(books)
  paths = write_corpus(args.out, splits)
  for note in notes:
    print(note)
  print(summary(stats, splits))
  print("wrote " + ", ".join(paths))
  return 0


if __name__ == "__main__":
  sys.exit(main())
