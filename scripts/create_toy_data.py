#!/usr/bin/env python
"""Creates the toy sequence-reversal translation task (as OpenSeq2Seq's toy data).

Each source line is 5 to 50 symbols drawn uniformly from ten Greek letters (α..κ), separated
by spaces; its target is the same symbols in reverse order. Files::

    <data_dir>/{train,dev,test}/{source,target}.txt
    <data_dir>/vocab/{source,target}.txt     # "symbol<TAB>count", same for both sides

Usage: python scripts/create_toy_data.py [--data_dir toy_text_data] [--seed 0]
       [--train_size 10000] [--dev_size 1000] [--test_size 2000] [--max_length 50]
The same seed and sizes always give the same files. Files are written to a temporary name
and renamed into place.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import sys

# the package beside scripts/ (the output checks), also without pip install -e
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: The ten symbols of the task: Greek small letters alpha (U+03B1) to kappa (U+03BA).
SYMBOLS = tuple(chr(code) for code in range(0x03B1, 0x03BB))
MIN_LENGTH, MAX_LENGTH = 5, 50
SPLITS = ("train", "dev", "test")


def make_pairs(size: int, rng: random.Random, max_length: int = MAX_LENGTH
               ) -> list[tuple[list[str], list[str]]]:
  """``size`` (source, reversed source) pairs of MIN_LENGTH to ``max_length`` symbols."""
  pairs = []
  for _ in range(size):
    source = [rng.choice(SYMBOLS) for _ in range(rng.randint(MIN_LENGTH, max_length))]
    pairs.append((source, source[::-1]))
  return pairs


def write_atomically(path: str, lines: list[str]) -> None:
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  temporary = f"{path}.tmp{os.getpid()}"
  with open(temporary, "w", encoding="utf-8", newline="\n") as f:
    f.writelines(line + "\n" for line in lines)
  os.replace(temporary, path)


def create_data(data_dir: str = "toy_text_data", train_size: int = 10000,
                dev_size: int = 1000, test_size: int = 2000, seed: int = 0,
                max_length: int = MAX_LENGTH) -> dict[str, int]:
  """Writes the task's files under ``data_dir``; returns the number of pairs per split."""
  rng = random.Random(seed)
  sizes = {"train": train_size, "dev": dev_size, "test": test_size}
  counts: collections.Counter = collections.Counter()
  for split in SPLITS:
    pairs = make_pairs(sizes[split], rng, max_length)
    for source, _ in pairs:
      counts.update(source)
    write_atomically(os.path.join(data_dir, split, "source.txt"),
                     [" ".join(source) for source, _ in pairs])
    write_atomically(os.path.join(data_dir, split, "target.txt"),
                     [" ".join(target) for _, target in pairs])
  # Reversal keeps the symbols, so both sides share one vocabulary.
  vocab = [f"{symbol}\t{counts[symbol]}" for symbol in SYMBOLS]
  for side in ("source", "target"):
    write_atomically(os.path.join(data_dir, "vocab", f"{side}.txt"), vocab)
  return sizes


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data_dir", default="toy_text_data", help="output directory")
  parser.add_argument("--seed", type=int, default=0, help="random seed")
  parser.add_argument("--train_size", type=int, default=10000, help="training pairs")
  parser.add_argument("--dev_size", type=int, default=1000, help="dev (eval) pairs")
  parser.add_argument("--test_size", type=int, default=2000, help="test (infer) pairs")
  parser.add_argument("--max_length", type=int, default=MAX_LENGTH,
                      help=f"longest sequence ({MIN_LENGTH} to {MAX_LENGTH})")
  args = parser.parse_args(argv)
  for name in ("train_size", "dev_size", "test_size"):
    if getattr(args, name) < 1:
      parser.error(f"--{name} must be at least 1 (empty files cannot be read)")
  if not MIN_LENGTH <= args.max_length <= MAX_LENGTH:
    parser.error(f"--max_length must be in [{MIN_LENGTH}, {MAX_LENGTH}]")
  from open_seq2seq.utils.io import exit_if_unwritable  # pylint: disable=import-outside-toplevel
  exit_if_unwritable(args.data_dir, "--data_dir", directory=True)
  sizes = create_data(args.data_dir, args.train_size, args.dev_size, args.test_size, args.seed,
                      args.max_length)
  print(f"wrote {', '.join(f'{n} {s}' for s, n in sizes.items())} pairs to {args.data_dir}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
