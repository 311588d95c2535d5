"""Helpers shared by the speech-synthesis corpus scripts (LJSpeech layout).

A corpus is ``<dir>/wavs/<name>.wav`` (mono 16-bit PCM) plus header-less ``<dir>/<split>.csv``
files with one ``<name>|<raw transcript>|<normalized transcript>`` line per utterance, as
OpenSeq2Seq's Text2SpeechDataLayer reads them. This module holds the text normalizer (numbers
(the package's, from inflect) and symbols to words), the built-in sentence generator of the synthetic corpus, silence
trimming and the atomic writers of WAVs and metadata. Used by make_synthetic_speech.py
(``--tts``) and import_asterisk_sounds.py.
"""

from __future__ import annotations

import os
import random
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from open_seq2seq.utils.io import atomic_open  # noqa: E402

#: Digits read one by one (PINs, extensions, decimals).
ONES = "zero one two three four five six seven eight nine".split()
SYMBOLS = {"*": " star ", "#": " pound ", "@": " at ", "&": " and ", "%": " percent ",
           "+": " plus ", "=": " equals ", "/": " slash "}


def _number(match: re.Match, spell_digits_from: int) -> str:
  # imported here: open_seq2seq.data imports TensorFlow, which the scripts' --help needs not
  # pylint: disable-next=import-outside-toplevel
  from open_seq2seq.data.text2speech.numbers import cardinal, ordinal
  digits, suffix = match.group(1), match.group(2)
  text = digits.replace(",", "")
  if suffix:
    return f" {ordinal(int(text))} "
  whole, _, fraction = text.partition(".")
  if fraction:
    words = cardinal(int(whole)) + " point " + " ".join(ONES[int(d)] for d in fraction)
  elif spell_digits_from and "," not in digits and len(whole) >= spell_digits_from:
    words = " ".join(ONES[int(d)] for d in whole)
  else:
    words = cardinal(int(whole))
  return f" {words} "


def normalize_text(text: str, spell_digits_from: int = 0) -> str:
  """The transcript as a TTS front end reads it: lowercase, numbers and symbols as words.

  Args:
    text: a raw transcript.
    spell_digits_from: integers with at least this many digits are read digit by digit
      (extensions, PINs: "1234" -> "one two three four"); 0 reads every number as a cardinal.

  Returns:
    Lowercase words with the punctuation ``.,?!;:'-`` kept; every other character dropped.
  """
  text = text.lower().replace("|", " ")
  text = re.sub(r"\b((?:[a-z]\.){2,})", lambda m: " " + " ".join(m.group(1).split(".")) + " ",
                text)  # a.m. -> a m
  text = re.sub(r"(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?:(st|nd|rd|th)\b)?",
                lambda m: _number(m, spell_digits_from), text)
  text = re.sub(r"(?<=\w)\.(?=\w)", " dot ", text)  # www.example.org
  for symbol, words in SYMBOLS.items():
    text = text.replace(symbol, words)
  text = re.sub(r"[^a-z'.,?!;:\- ]", " ", text)
  text = re.sub(r"\s+([.,?!;:])", r"\1", " ".join(text.split()))
  return text.strip()


def word_count(text: str) -> int:
  return len(re.findall(r"[a-z']+", text))


def word_key(normalized: str) -> str:
  """The words of a normalized text without punctuation: texts that sound the same."""
  return " ".join(re.findall(r"[a-z']+", normalized))


# The synthetic corpus: short sentences from templates over a built-in vocabulary.
NAMES = "Anna Peter Maria John Lucy Tom Sarah David Emma Oliver".split()
PEOPLE = ("farmer", "teacher", "doctor", "child", "driver", "painter", "baker", "sailor",
          "student", "neighbor", "singer", "captain")
MOODS = ("old", "young", "quiet", "happy", "tired", "clever", "angry", "brave", "busy",
         "careful", "strange", "cheerful")
ADJECTIVES = ("small", "green", "bright", "heavy", "cold", "warm", "empty", "broken", "new",
              "dusty", "tiny", "wooden", "red", "strange")
THINGS = (("box", "boxes"), ("letter", "letters"), ("apple", "apples"), ("chair", "chairs"),
          ("lamp", "lamps"), ("book", "books"), ("key", "keys"), ("basket", "baskets"),
          ("window", "windows"), ("bottle", "bottles"), ("coat", "coats"), ("map", "maps"),
          ("candle", "candles"), ("bicycle", "bicycles"), ("painting", "paintings"),
          ("glass", "glasses"), ("ticket", "tickets"), ("stone", "stones"))
VERBS = (("found", "find"), ("painted", "paint"), ("carried", "carry"), ("opened", "open"),
         ("cleaned", "clean"), ("watched", "watch"), ("sold", "sell"), ("bought", "buy"),
         ("fixed", "fix"), ("moved", "move"), ("lost", "lose"), ("dropped", "drop"),
         ("borrowed", "borrow"), ("hid", "hide"), ("wrapped", "wrap"))
INTRANSITIVE = ("laughed", "waited", "slept", "sang", "smiled", "arrived", "stayed", "worked",
                "danced", "listened", "rested", "shouted")
PLACES = ("the river", "the kitchen", "the old barn", "the station", "the bridge", "the hill",
          "the market", "the garden", "the harbor", "the library", "the window", "the forest")
PREPOSITIONS = ("near", "in", "behind", "at", "under", "on", "beside", "across")
TIMES = ("yesterday", "last night", "this morning", "on Monday", "after lunch", "before dawn",
         "in the spring", "every day", "on Friday", "at noon", "in winter", "tonight")
TEMPLATES = (
    "{S} {Vt} {O}.", "{S} {Vt} {O} {P}.", "{S} {Vi} {P}.", "{T}, {s} {Vi}.",
    "{S} {Vt} {N} {Os} {T}.", "Did {s} {Vb} {o}?", "{S} was {M} {T}.", "Where is {o}?",
    "{S} and {s} {Vi} {P}.", "Please {Vb} {o} {P}.", "{S} {Vt} {o} because it was {A}.",
    "There are {N} {Os} {P}.", "Why did {s} {Vb} {N} {Os}?", "{T}, {s} {Vt} {o}.",
)


def _person(rng: random.Random) -> str:
  if rng.random() < 0.3:
    return rng.choice(NAMES)
  det = rng.choice(("the", "a", "my", "our"))
  adj = rng.choice(MOODS) + " " if rng.random() < 0.5 else ""
  noun = rng.choice(PEOPLE)
  if det == "a" and (adj or noun)[0] in "aeiou":
    det = "an"
  return f"{det} {adj}{noun}"


def _thing(rng: random.Random) -> str:
  det = rng.choice(("the", "a", "her", "his", "that"))
  adj = rng.choice(ADJECTIVES) + " " if rng.random() < 0.5 else ""
  noun = rng.choice(THINGS)[0]
  if det == "a" and (adj or noun)[0] in "aeiou":
    det = "an"
  return f"{det} {adj}{noun}"


def _sentence(rng: random.Random) -> tuple[str, str]:
  number = rng.randint(2, 20)
  verb = rng.choice(VERBS)
  slots = {"S": _person(rng), "s": _person(rng), "Vt": verb[0], "Vb": verb[1],
           "Vi": rng.choice(INTRANSITIVE), "O": _thing(rng), "o": _thing(rng),
           "Os": rng.choice(THINGS)[1], "N": str(number), "A": rng.choice(ADJECTIVES),
           "M": rng.choice(MOODS),
           "P": f"{rng.choice(PREPOSITIONS)} {rng.choice(PLACES)}", "T": rng.choice(TIMES)}
  raw = rng.choice(TEMPLATES).format(**slots)
  raw = raw[0].upper() + raw[1:]
  return raw, normalize_text(raw)


def make_sentences(rng: random.Random, count: int, min_words: int = 3, max_words: int = 10
                   ) -> list[tuple[str, str]]:
  """``count`` distinct ``(raw, normalized)`` sentences of ``min_words``..``max_words`` words.

  Raw sentences are capitalized, punctuated and write numbers as digits; normalized ones are
  what gets synthesized. No two share their words, so any slicing into splits keeps held-out
  sentences out of train.
  """
  sentences, seen, attempts = [], set(), 0
  while len(sentences) < count:
    attempts += 1
    if attempts > 100 * count + 1000:
      raise SystemExit("error: not enough distinct sentences; widen --min_words/--max_words")
    raw, normalized = _sentence(rng)
    if word_key(normalized) not in seen and min_words <= word_count(normalized) <= max_words:
      seen.add(word_key(normalized))
      sentences.append((raw, normalized))
  return sentences


def text_file_sentences(lines: list[str], min_words: int = 3, max_words: int = 10
                        ) -> list[tuple[str, str]]:
  """Distinct ``(raw, normalized)`` pairs of the lines with ``min_words``..``max_words`` words."""
  pairs, seen = [], set()
  for line in lines:
    raw = " ".join(line.replace("|", " ").split())
    normalized = normalize_text(raw)
    key = word_key(normalized)
    if key and key not in seen and min_words <= word_count(normalized) <= max_words:
      seen.add(key)
      pairs.append((raw, normalized))
  return pairs


def trim_silence(signal: np.ndarray, sample_freq: int, threshold_db: float = -40.0,
                 margin_ms: float = 10.0, frame_ms: float = 5.0) -> np.ndarray:
  """Cuts leading and trailing frames quieter than ``threshold_db`` below the loudest frame.

  Frames are ``frame_ms`` long (RMS energy); ``margin_ms`` of audio is kept on each side so
  that soft onsets and releases survive. A silent signal comes back unchanged.
  """
  frame = max(1, int(sample_freq * frame_ms / 1000))
  count = len(signal) // frame
  if count == 0:
    return signal
  frames = signal[:count * frame].astype(np.float64).reshape(count, frame)
  energy = np.sqrt(np.mean(frames ** 2, axis=1))
  if energy.max() <= 0:
    return signal
  loud = np.nonzero(energy >= energy.max() * 10 ** (threshold_db / 20))[0]
  margin = int(sample_freq * margin_ms / 1000)
  start = max(0, loud[0] * frame - margin)
  end = min(len(signal), (loud[-1] + 1) * frame + margin)
  return signal[start:end]


def write_wav(path: str, signal: np.ndarray, sample_freq: int) -> None:
  """Writes mono 16-bit PCM atomically (a crash never leaves a truncated WAV)."""
  import soundfile
  with atomic_open(path, binary=True) as f:
    soundfile.write(f, np.clip(signal, -1.0, 1.0), sample_freq, subtype="PCM_16", format="WAV")


def write_metadata(path: str, rows: list[tuple[str, str, str]]) -> None:
  """Writes ``name|raw|normalized`` lines (no header, no quoting) atomically.

  Raises:
    ValueError: a field holds ``|`` or a line break (the format cannot escape them).
  """
  with atomic_open(path) as f:
    for row in rows:
      if any("|" in field or "\n" in field or "\r" in field for field in row):
        raise ValueError(f"{path}: a field of {row!r} holds '|' or a line break")
      f.write("|".join(row) + "\n")


def read_metadata(path: str) -> list[tuple[str, str, str]]:
  """The ``(name, raw, normalized)`` rows of a metadata file."""
  with open(path, encoding="utf-8") as f:
    return [tuple(line.rstrip("\n").split("|")) for line in f if line.strip()]
