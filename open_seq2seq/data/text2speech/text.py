"""Text front end of speech synthesis: cleaners, the CMU Pronouncing Dictionary, and the
encoder that turns a transcript into the symbol ids a Tacotron-style encoder reads.

Ids follow OpenSeq2Seq's text-to-speech data layer: ``0, 1, 2`` are ``<p>`` (pad), ``<s>``
and ``</s>``; the vocabulary file's symbols follow from id 3 in file order; with phonemes
enabled, the 84 ARPAbet symbols (``@AA`` ... ``@ZH``, stress variants included) follow the
characters. Transcripts may spell pronunciations inline in braces: ``{HH AH0 L OW1}``.
"""

from __future__ import annotations

import logging
import random
import re
import unicodedata
from typing import Callable, Sequence

from open_seq2seq.data.text2speech.numbers import expand_numbers
from open_seq2seq.errors import ConfigError, DataError

_log = logging.getLogger(__name__)

_VOWELS = ("AA", "AE", "AH", "AO", "AW", "AY", "EH", "ER", "EY", "IH", "IY", "OW", "OY",
           "UH", "UW")
_CONSONANTS = ("B", "CH", "D", "DH", "F", "G", "HH", "JH", "K", "L", "M", "N", "NG", "P",
               "R", "S", "SH", "T", "TH", "V", "W", "Y", "Z", "ZH")
#: The CMU phoneme set: vowels bare and with stress 0/1/2, and consonants (84 symbols).
ARPABET: tuple[str, ...] = tuple(sorted(
    [v + s for v in _VOWELS for s in ("", "0", "1", "2")] + list(_CONSONANTS)))
_ARPABET_SET = frozenset(ARPABET)

# --- cleaners ------------------------------------------------------------------------------

_ABBREVIATIONS = [(re.compile(rf"\b{short}\."), full) for short, full in [
    ("mrs", "missus"), ("mr", "mister"), ("drs", "doctors"), ("dr", "doctor"),
    ("st", "saint"), ("co", "company"), ("jr", "junior"), ("maj", "major"),
    ("gen", "general"), ("rev", "reverend"), ("lt", "lieutenant"), ("hon", "honorable"),
    ("sgt", "sergeant"), ("capt", "captain"), ("esq", "esquire"), ("ltd", "limited"),
    ("col", "colonel"), ("ft", "fort")]]

# Letters and punctuation NFKD leaves non-ASCII (applied after lowercasing).
_TO_ASCII = str.maketrans({
    "ß": "ss", "æ": "ae", "œ": "oe", "ø": "o", "đ": "d", "ð": "d", "þ": "th", "ł": "l",
    "ı": "i", "‘": "'", "’": "'", "‚": "'", "′": "'", "“": '"', "”": '"', "„": '"',
    "«": '"', "»": '"', "″": '"', "–": "-", "—": "-", "‐": "-", "‑": "-", "−": "-",
    "…": "...", "&": " and "})


def collapse_whitespace(text: str) -> str:
  return " ".join(text.split())


def clean_none(text: str) -> str:
  """Leaves the text as it is."""
  return text


def clean_basic(text: str) -> str:
  """Lowercases and collapses whitespace."""
  return collapse_whitespace(text.lower())


def clean_english(text: str) -> str:
  """English text as a speaker would read it, in lowercase ASCII.

  Accented letters lose their accents (NFKD), typographic quotes and dashes become ASCII,
  numbers, money, ordinals, percents and years become words, common abbreviations
  ("dr.", "st.", ...) are expanded, other non-ASCII characters are dropped and
  whitespace is collapsed. Inline ``{ARPAbet}`` is not protected here:
  :meth:`TextEncoder.encode` cleans only the text around braces.
  """
  text = unicodedata.normalize("NFKD", text)
  text = "".join(c for c in text if not unicodedata.combining(c))
  text = text.lower().translate(_TO_ASCII)
  text = expand_numbers(text)  # before dropping non-ASCII: it reads "£" and "€"
  for pattern, full in _ABBREVIATIONS:
    text = pattern.sub(full, text)
  text = text.encode("ascii", "ignore").decode("ascii")
  return collapse_whitespace(text)


CLEANERS: dict[str, Callable[[str], str]] = {
    "english": clean_english, "basic": clean_basic, "none": clean_none}

# --- CMU Pronouncing Dictionary ------------------------------------------------------------

_ALTERNATE = re.compile(r"\(\d+\)$")
_TRAILING_COMMENT = re.compile(r"\s#.*$")  # cmudict.dict style; "#HASH-MARK" is a word


class CMUDict:
  """A CMU Pronouncing Dictionary read from ``path``.

  Lines are ``WORD  PH1 PH2 ...``; alternates are ``WORD(1) ...`` (only the first
  pronunciation of a word is kept); lines starting with ``;;;`` are comments. The file may
  be UTF-8 or Latin-1 (cmudict-0.7b).

  Args:
    path: the dictionary file.

  Raises:
    DataError: the file is missing, unreadable, empty, or a line is malformed.
  """

  def __init__(self, path: str):
    self.path = path
    try:
      with open(path, "rb") as f:
        raw = f.read()
    except OSError as e:
      raise DataError(f"cmudict {path}: cannot read it ({e.strerror or e}); point "
                      f"cmudict_path at a CMU Pronouncing Dictionary file") from None
    try:
      text = raw.decode("utf-8")
    except UnicodeDecodeError:
      text = raw.decode("latin-1")
    self._entries: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
      if line.startswith(";;;"):
        continue
      parts = _TRAILING_COMMENT.sub("", line).split()
      if not parts:
        continue
      bad = [p for p in parts[1:] if p not in _ARPABET_SET]
      if len(parts) < 2 or bad:
        what = f"unknown phoneme {bad[0]!r}" if bad else "no phonemes"
        raise DataError(f"cmudict {path}:{number}: {what}; lines must read "
                        f"'WORD  PH1 PH2 ...' with ARPAbet phonemes such as AH0 or HH")
      word = _ALTERNATE.sub("", parts[0]).upper()
      self._entries.setdefault(word, " ".join(parts[1:]))
    if not self._entries:
      raise DataError(f"cmudict {path}: no entries; is it a CMU Pronouncing Dictionary?")

  def __len__(self) -> int:
    return len(self._entries)

  def __contains__(self, word: str) -> bool:
    return word.upper() in self._entries

  def lookup(self, word: str) -> str | None:
    """The first pronunciation of ``word`` (any case), phonemes space-separated, or None."""
    return self._entries.get(word.upper())


# --- encoder -------------------------------------------------------------------------------

_BRACES = re.compile(r"\{([^{}]*)\}")
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")  # letters, with inner apostrophes ("don't")


def load_tts_vocab(path: str) -> list[str]:
  """Reads a character vocabulary: the first character of each non-empty line is a symbol
  (a line holding one space is the space symbol), as OpenSeq2Seq read ``vocab_tts.txt``."""
  try:
    with open(path, encoding="utf-8") as f:
      lines = f.read().splitlines()
  except (OSError, UnicodeDecodeError) as e:
    raise DataError(f"vocab_file {path}: cannot read it ({e}); point vocab_file at a "
                    f"UTF-8 file with one symbol per line") from None
  symbols: list[str] = []
  for line in lines:
    if not line:
      continue
    if line[0] in symbols:
      raise DataError(f"vocab_file {path}: symbol {line[0]!r} appears twice; keep one line "
                      f"per symbol")
    symbols.append(line[0])
  if not symbols:
    raise DataError(f"vocab_file {path}: vocabulary is empty; write one symbol per line")
  return symbols


class TextEncoder:
  """Maps transcripts to symbol ids and back.

  ``encode`` cleans the text, turns inline ``{ARPAbet}`` into phoneme ids and, with a
  dictionary, each word found in it into its phonemes (other words, digits left by the
  cleaner, punctuation and spaces stay characters). Characters missing from the vocabulary
  are dropped, with one warning per symbol.

  Args:
    vocab_file: character vocabulary, one symbol per line (ids from 3 in file order).
    cleaner: name of the cleaner in :data:`CLEANERS` ("english", "basic" or "none").
    cmudict_path: a CMU Pronouncing Dictionary file; enables phonemes.
    arpabet_prob: probability that a dictionary word is spelled with phonemes rather than
      characters (below 1 mixes both representations during training).
    arpabet: add the phoneme symbols without a dictionary, for inline ``{ARPAbet}`` only.
    seed: seed of the generator that draws ``arpabet_prob``.

  Raises:
    ConfigError: unknown cleaner or ``arpabet_prob`` outside [0, 1].
    DataError: unreadable or malformed vocabulary or dictionary.
  """

  PAD, BOS, EOS = "<p>", "<s>", "</s>"
  pad_id, bos_id, eos_id = 0, 1, 2

  def __init__(self, vocab_file: str, cleaner: str = "english",
               cmudict_path: str | None = None, arpabet_prob: float = 1.0,
               arpabet: bool = False, seed: int | None = None):
    if cleaner not in CLEANERS:
      raise ConfigError(f"text cleaner {cleaner!r} is unknown; use one of "
                        f"{', '.join(sorted(CLEANERS))}")
    if not 0.0 <= arpabet_prob <= 1.0:
      raise ConfigError(f"arpabet_prob {arpabet_prob} must lie between 0 and 1")
    self.vocab_file = vocab_file
    self.cleaner = cleaner
    self._clean = CLEANERS[cleaner]
    self.arpabet_prob = arpabet_prob
    self._rng = random.Random(seed)
    self.cmudict = CMUDict(cmudict_path) if cmudict_path else None
    self.arpabet = arpabet or self.cmudict is not None

    chars = load_tts_vocab(vocab_file)
    phonemes = ["@" + p for p in ARPABET] if self.arpabet else []
    self._symbols = (self.PAD, self.BOS, self.EOS, *chars, *phonemes)
    self._first_phoneme = 3 + len(chars)
    self._char_ids = {c: 3 + i for i, c in enumerate(chars)}
    self._phoneme_ids = {p: self._first_phoneme + i for i, p in enumerate(ARPABET)}
    self._warned: set[str] = set()

  @property
  def symbols(self) -> tuple[str, ...]:
    """Every symbol; the index is the id."""
    return self._symbols

  @property
  def vocab_size(self) -> int:
    return len(self._symbols)


  def encode(self, text: str, where: str = "") -> list[int]:
    """Ids of ``text`` (no ``<s>``/``</s>``; the data layer adds them).

    Args:
      text: the transcript; ``{...}`` holds ARPAbet phonemes.
      where: names the source (file and line) in error and warning messages.

    Raises:
      DataError: unbalanced braces, an unknown phoneme, or inline ARPAbet while phonemes
        are disabled.
    """
    where = where or "text"
    parts = _BRACES.split(text)  # even indices: text, odd: the inside of braces
    ids: list[int] = []
    for i, part in enumerate(parts):
      if i % 2:
        ids.extend(self._encode_phonemes(part, where))
        continue
      if "{" in part or "}" in part:
        raise DataError(f"{where}: unbalanced brace in {text!r}; write inline ARPAbet as "
                        f"{{HH AH0 L OW1}}")
      cleaned = self._clean_part(part, first=i == 0, last=i == len(parts) - 1)
      ids.extend(self._encode_text(cleaned, where))
    return ids

  def decode(self, ids: Sequence[int]) -> str:
    """Text of ``ids``: phonemes in braces, pad/start/end and out-of-range ids skipped."""
    out: list[str] = []
    phonemes: list[str] = []
    for i in ids:
      i = int(i)
      if not 3 <= i < len(self._symbols):
        continue
      if i >= self._first_phoneme:
        phonemes.append(self._symbols[i][1:])
        continue
      if phonemes:
        out.append("{" + " ".join(phonemes) + "}")
        phonemes = []
      out.append(self._symbols[i])
    if phonemes:
      out.append("{" + " ".join(phonemes) + "}")
    return "".join(out)

  def _clean_part(self, part: str, first: bool, last: bool) -> str:
    cleaned = self._clean(part)
    if self._clean is clean_none:
      return cleaned
    # Cleaners strip the ends; keep one space between text and an adjacent {phonemes}.
    lead = not first and part[:1].isspace()
    trail = not last and part[-1:].isspace()
    if not cleaned:
      return " " if lead or trail else ""
    return (" " if lead else "") + cleaned + (" " if trail else "")

  def _encode_phonemes(self, inside: str, where: str) -> list[int]:
    if not self.arpabet:
      raise DataError(f"{where}: inline ARPAbet {{{inside}}} needs phoneme symbols; set "
                      f"cmudict_path (or arpabet) or remove the braces")
    ids = []
    for phoneme in inside.upper().split():
      if phoneme not in self._phoneme_ids:
        raise DataError(f"{where}: unknown ARPAbet phoneme {phoneme!r} in {{{inside}}}; "
                        f"use CMU phonemes such as AH0, HH, NG")
      ids.append(self._phoneme_ids[phoneme])
    return ids

  def _encode_text(self, text: str, where: str) -> list[int]:
    if self.cmudict is None or self.arpabet_prob == 0.0:
      return self._encode_chars(text, where)
    ids: list[int] = []
    start = 0
    for match in _WORD.finditer(text):
      use = self.arpabet_prob >= 1.0 or self._rng.random() < self.arpabet_prob
      pronunciation = self.cmudict.lookup(match.group()) if use else None
      if pronunciation is None:
        continue
      ids.extend(self._encode_chars(text[start:match.start()], where))
      ids.extend(self._phoneme_ids[p] for p in pronunciation.split())
      start = match.end()
    ids.extend(self._encode_chars(text[start:], where))
    return ids

  def _encode_chars(self, text: str, where: str) -> list[int]:
    ids = []
    for c in text:
      i = self._char_ids.get(c)
      if i is not None:
        ids.append(i)
      elif c not in self._warned:
        self._warned.add(c)
        _log.warning("%s: symbol %r is not in vocab_file %s; dropping it (warned once per "
                     "symbol)", where, c, self.vocab_file)
    return ids
