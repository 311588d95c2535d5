#!/usr/bin/env python
"""Builds a word n-gram language model (ARPA) for CTC decoding from plain text or transcripts.

    python scripts/build_lm.py --text corpus.txt --order 3 --output lm/3-gram.arpa
    python scripts/build_lm.py --csv data/synthetic_speech/train.csv --output lm/digits.arpa

Each line of ``--text`` files (and the ``transcript`` column of ``--csv`` files, the speech
data layer's format) is one sentence, normalized to the speech alphabet (``--vocab_file``,
OpenSeq2Seq's 28 symbols by default) as the data layer does: lowercased when the alphabet
has no capitals, characters outside the alphabet dropped, whitespace collapsed. The model is
interpolated modified Kneser-Ney, estimated in Python
(:func:`open_seq2seq.utils.ngram_lm.write_arpa`): KenLM's own ``lmplz`` is in no
registry package (the ``kenlm`` wheel holds only the Python module; Debian has no KenLM),
and the ARPA file loads in KenLM, this project's decoder and OpenSeq2Seq's as it is. It suits
corpora of up to a few million words (a 3-gram of the 950k words of
scripts/get_lm_data.sh's Austen novels: 12 s).

``--binary`` converts the ARPA file with KenLM's ``build_binary`` (faster loading, less
memory) when that program is on PATH or given with ``--build_binary``; build it from KenLM's
sources to use it.
"""

from __future__ import annotations

# The open_seq2seq imports (which load TensorFlow) wait until the arguments are known.
# pylint: disable=import-outside-toplevel
import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Iterable, Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
DEFAULT_VOCAB = os.path.join(ROOT, "open_seq2seq", "test_utils", "toy_speech_data", "vocab.txt")


class Normalizer:
  """Maps text to the speech alphabet: lowercase (when the alphabet has no capitals), drop
  characters outside it, collapse whitespace (any whitespace separates words)."""

  def __init__(self, symbols: Iterable[str]):
    self.symbols = set(symbols)
    self.lowercase = not any(c.isupper() for c in self.symbols)

  def __call__(self, text: str) -> str:
    if self.lowercase:
      text = text.lower()
    kept = "".join(c if c in self.symbols else " " if c.isspace() else "" for c in text)
    return " ".join(kept.split())


def read_lines(text_files: list[str], csv_files: list[str]) -> Iterator[str]:
  """Lines of the text files, then the ``transcript`` column of the CSV files."""
  for path in text_files:
    if not os.path.isfile(path):
      raise SystemExit(f"error: --text {path} does not exist")
    with open(path, encoding="utf-8", errors="replace") as f:
      yield from f
  for path in csv_files:
    if not os.path.isfile(path):
      raise SystemExit(f"error: --csv {path} does not exist")
    with open(path, encoding="utf-8", newline="") as f:
      reader = csv.DictReader(f)
      if "transcript" not in (reader.fieldnames or []):
        raise SystemExit(f"error: --csv {path} has no transcript column "
                         f"(header: {','.join(reader.fieldnames or [])})")
      for row in reader:
        yield row["transcript"] or ""


def build_lm(text_files: list[str], output: str, order: int = 3,
             vocab_file: str = DEFAULT_VOCAB, csv_files: list[str] | None = None,
             binary: bool = False, build_binary: str | None = None) -> dict:
  """Writes the model to ``output``; returns statistics (sentences, words, n-gram counts)."""
  from open_seq2seq.data.speech2text.targets import load_char_vocab
  from open_seq2seq.utils.ngram_lm import write_arpa
  if order < 2:
    raise SystemExit(f"error: --order {order}: KenLM reads models of order 2 or more")
  program = None
  if binary:
    program = build_binary or shutil.which("build_binary")
    if not program or not os.path.isfile(program):
      raise SystemExit("error: --binary needs KenLM's build_binary (on PATH or --build_binary)"
                       "; no registry package ships it: build KenLM from source, or use the "
                       "ARPA file, which every decoder here reads")
  normalize = Normalizer(load_char_vocab(vocab_file))
  stats = {"sentences": 0, "words": 0}

  def sentences() -> Iterator[str]:
    for line in read_lines(text_files, csv_files or []):
      sentence = normalize(line)
      if sentence:
        stats["sentences"] += 1
        stats["words"] += sentence.count(" ") + 1
        yield sentence

  if not binary:
    stats["ngrams"] = write_arpa(sentences(), output, order)
    return stats
  os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
  with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(output))) as tmp:
    arpa, partial = os.path.join(tmp, "lm.arpa"), os.path.join(tmp, "lm.binary")
    stats["ngrams"] = write_arpa(sentences(), arpa, order)
    result = subprocess.run([program, arpa, partial], capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
      last = (result.stderr.strip().splitlines() or ["no message"])[-1]
      raise SystemExit(f"error: {program} failed ({last})")
    os.replace(partial, output)
  return stats


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
  parser.add_argument("--text", action="append", default=[],
                      help="plain text, one sentence per line (repeatable)")
  parser.add_argument("--csv", action="append", default=[],
                      help="speech data CSV: its transcript column (repeatable)")
  parser.add_argument("--order", type=int, default=3, help="n-gram order (default 3)")
  parser.add_argument("--output", required=True, help="the ARPA (or --binary) file to write")
  parser.add_argument("--vocab_file", default=DEFAULT_VOCAB,
                      help="the speech alphabet, one symbol per line (default: OpenSeq2Seq's)")
  parser.add_argument("--binary", action="store_true",
                      help="write a KenLM binary file with build_binary")
  parser.add_argument("--build_binary", help="path of KenLM's build_binary program")
  args = parser.parse_args(argv)
  if not args.text and not args.csv:
    parser.error("give at least one --text or --csv file")
  from open_seq2seq.utils.io import exit_if_unwritable  # pylint: disable=import-outside-toplevel
  exit_if_unwritable(args.output, "--output", makes_folders=True)
  start = time.monotonic()
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly(first_op=False)  # the vocabulary's module imports TensorFlow
  from open_seq2seq.errors import OpenSeq2SeqError
  try:
    stats = build_lm(args.text, args.output, args.order, args.vocab_file, args.csv,
                     args.binary, args.build_binary)
  except OpenSeq2SeqError as e:
    raise SystemExit(f"error: {e}") from None
  counts = ", ".join(f"{n}-grams {c}" for n, c in enumerate(stats["ngrams"], 1))
  print(f"wrote {args.output}: {stats['sentences']} sentences, {stats['words']} words, "
        f"{counts} ({time.monotonic() - start:.1f} s)")
  return 0


if __name__ == "__main__":
  sys.exit(main())
