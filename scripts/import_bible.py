#!/usr/bin/env python
"""Builds a verse-aligned English-Spanish corpus from two SWORD Bible modules.

Input: the exports of ``mod2imp`` (Debian libsword-utils) of the World English Bible
(``engWEB2015eb``, sword-text-web) and the Reina-Valera 1909 (``spaRV1909eb``,
sword-text-sparv), both public domain. An ``.imp`` export is a sequence of entries, each a
``$$$<key>`` line followed by the entry's OSIS markup::

    $$$Genesis 1:1
    <w lemma="strong:H0430">In</w> the beginning, God<note placement="foot">...</note> ...

Verses are the entries keyed ``Book C:V`` with V >= 1 (``C:0`` / ``0:0`` entries hold book
and chapter introductions). Their markup becomes plain text:

* footnotes (``<note>``), section headings (``<title>`` without ``canonical="true"``) and
  speaker labels (``<speaker>``, Song of Songs) are dropped with their content; a dropped
  note leaves a space between words but none before punctuation;
* canonical titles (Psalm superscriptions, which the Spanish text has in verse 1 as well)
  keep their text; so do words (``<w>``), quotations and added words (``<transChange>``);
* line, line-group, paragraph and division tags become spaces; entities are unescaped and
  whitespace is collapsed.

Pairs are the verses present in both Bibles, in the English module's order, non-empty and at
most ``--max_words`` words on each side; repeated pairs (the same English and Spanish text,
e.g. SWORD's linked verses) are kept once. The split is deterministic: the pairs are
shuffled with ``--seed``, the first ``--test_size`` go to test, the next ``--dev_size`` to
dev, the rest to train, and each split is written in Bible order:
``OUT/{train,dev,test}.{en,es}`` (one verse per line) and ``OUT/{split}.keys`` (its verse
keys). scripts/get_bible_en_es.sh runs ``mod2imp`` and this script.

    python scripts/import_bible.py --en_imp en.imp --es_imp es.imp --out data/bible_en_es
"""

from __future__ import annotations

import argparse
import html
import os
import random
import re
import sys
from typing import Iterable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPLITS = ("train", "dev", "test")
LANGUAGES = ("en", "es")

_VERSE_KEY = re.compile(r"^(.+) (\d+):(\d+)$")
_NOTE = re.compile(r"<note\b[^>]*/>|<note\b.*?</note>", re.S)
_HEADING = re.compile(r"<title\b(?![^>]*canonical=\"true\")[^>]*>.*?</title>", re.S)
_SPEAKER = re.compile(r"<speaker\b[^>]*>.*?</speaker>", re.S)
# Tags that end a line or a block: their removal must not glue the words around them.
_BREAK = re.compile(r"</?(?:l|lb|lg|p|div|chapter|milestone|list|item|title|verse|table|row|"
                    r"cell|head)\b[^>]*>")
_TAG = re.compile(r"<[^>]*>")
_DROPPED = "\x00"  # where a note was, until we know whether a space belongs there
_BEFORE_CLOSING = re.compile(r"\s*" + _DROPPED + r"+\s*(?=[)\]},.;:!?”’»])")
_BESIDE_SPACE = re.compile(_DROPPED + r"+(?=\s|$)|(?:(?<=[\s(\[{“‘«¿¡])|^)" + _DROPPED + "+")


def clean_verse(markup: str) -> str:
  """Plain text of a verse's OSIS markup (see the module docstring)."""
  text = _NOTE.sub(_DROPPED, markup)
  text = _HEADING.sub(" ", text)
  text = _SPEAKER.sub(" ", text)
  text = _BREAK.sub(" ", text)
  text = _TAG.sub("", text)
  text = _BEFORE_CLOSING.sub("", text)
  text = _BESIDE_SPACE.sub("", text)
  text = text.replace(_DROPPED, " ")
  return " ".join(html.unescape(text).split())


def parse_imp(lines: Iterable[str]) -> dict[str, str]:
  """``{"Book C:V": plain text}`` of the verses (V >= 1) of a ``mod2imp`` export, in order.

  A key seen twice keeps its first text.
  """
  verses: dict[str, str] = {}
  key: str | None = None
  body: list[str] = []

  def flush() -> None:
    if key is None:
      return
    match = _VERSE_KEY.match(key)
    if match and int(match.group(3)) >= 1 and key not in verses:
      verses[key] = clean_verse(" ".join(body))

  for line in lines:
    line = line.rstrip("\r\n")
    if line.startswith("$$$"):
      flush()
      key, body = line[3:].strip(), []
    elif key is not None:
      body.append(line)
  flush()
  return verses


def align(english: dict[str, str], spanish: dict[str, str], max_words: int = 200
          ) -> list[tuple[str, str, str]]:
  """``(key, english, spanish)`` of the verses in both, in English order, non-empty and at
  most ``max_words`` words on each side."""
  pairs = []
  for key, en in english.items():
    es = spanish.get(key)
    if en and es and len(en.split()) <= max_words and len(es.split()) <= max_words:
      pairs.append((key, en, es))
  return pairs


def deduplicate(pairs: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
  """The pairs with each (english, spanish) text kept once, at its first occurrence."""
  seen: set[tuple[str, str]] = set()
  kept = []
  for key, en, es in pairs:
    if (en, es) not in seen:
      seen.add((en, es))
      kept.append((key, en, es))
  return kept


def split(pairs: list, test_size: int, dev_size: int, seed: int) -> dict[str, list]:
  """Deterministic train/dev/test split; each split keeps the pairs' original order."""
  if test_size < 0 or dev_size < 0 or test_size + dev_size >= len(pairs):
    raise SystemExit(f"error: {len(pairs)} pairs cannot give {test_size} test and {dev_size} "
                     "dev pairs and a non-empty train split")
  order = list(range(len(pairs)))
  random.Random(seed).shuffle(order)
  chosen = {"test": sorted(order[:test_size]),
            "dev": sorted(order[test_size:test_size + dev_size]),
            "train": sorted(order[test_size + dev_size:])}
  return {name: [pairs[i] for i in chosen[name]] for name in SPLITS}


def read_imp(path: str) -> dict[str, str]:
  try:
    with open(path, encoding="utf-8", errors="replace") as f:
      return parse_imp(f)
  except FileNotFoundError:
    raise SystemExit(f"error: {path} does not exist; export the module with mod2imp") from None


def write_lines(path: str, lines: list[str]) -> None:
  """Writes ``lines`` to a temporary file renamed into place (never a half-written file)."""
  tmp = f"{path}.{os.getpid()}.tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    f.writelines(line + "\n" for line in lines)
  os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--en_imp", required=True, help="mod2imp export of engWEB2015eb")
  parser.add_argument("--es_imp", required=True, help="mod2imp export of spaRV1909eb")
  parser.add_argument("--out", default=os.path.join(ROOT, "data", "bible_en_es"))
  parser.add_argument("--test_size", type=int, default=1000)
  parser.add_argument("--dev_size", type=int, default=1000)
  parser.add_argument("--max_words", type=int, default=200,
                      help="drop pairs with a side longer than this many words")
  parser.add_argument("--seed", type=int, default=1, help="seed of the split")
  args = parser.parse_args(argv)
  english, spanish = read_imp(args.en_imp), read_imp(args.es_imp)
  aligned = align(english, spanish, args.max_words)
  pairs = deduplicate(aligned)
  splits = split(pairs, args.test_size, args.dev_size, args.seed)
  os.makedirs(args.out, exist_ok=True)
  for name, chosen in splits.items():
    for i, lang in enumerate(LANGUAGES, start=1):
      write_lines(os.path.join(args.out, f"{name}.{lang}"), [pair[i] for pair in chosen])
    write_lines(os.path.join(args.out, f"{name}.keys"), [pair[0] for pair in chosen])
  print(f"verses: en {len(english)}, es {len(spanish)}, in both and kept {len(aligned)}, "
        f"after dropping repeated pairs {len(pairs)}")
  print(", ".join(f"{name} {len(splits[name])}" for name in SPLITS) + f" pairs -> {args.out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
