"""Numbers to English words for the speech-synthesis cleaner.

Handles, in this order: percents (``5%``), money (``$3.50``, ``£2``, ``€1,000``), ordinals
(``22nd``), decimals (``3.14``) and integers, where a four-digit integer from 1100 to 2099
is read as a year (``1995`` -> "nineteen ninety five") and a number written with thousands
separators (``1,995``) as a cardinal. Number words come from ``inflect`` (MIT licence);
hyphens and commas it puts inside them are turned into spaces.
"""

from __future__ import annotations

import re
import threading

# inflect keeps per-call state on the engine; the input pipeline may call us from threads.
_local = threading.local()

_INT = r"(?:\d{1,3}(?:,\d{3})+|\d+)"
_PERCENT = re.compile(r"(?<=\d)\s*%")
_MONEY = re.compile(rf"([$£€])\s?({_INT}(?:\.\d+)?)")
_ORDINAL = re.compile(rf"({_INT})(st|nd|rd|th)\b")
_DECIMAL = re.compile(rf"({_INT})\.(\d+)")
_INTEGER = re.compile(_INT)

# symbol: (unit, units, subunit, subunits)
_CURRENCIES = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "€": ("euro", "euros", "cent", "cents"),
}


def _engine():
  """This thread's ``inflect.engine``; inflect is imported on first use (about 2 s)."""
  engine = getattr(_local, "engine", None)
  if engine is None:
    import inflect
    engine = _local.engine = inflect.engine()
  return engine


def _tidy(words: str) -> str:
  return " ".join(words.replace(",", " ").replace("-", " ").split())


def cardinal(n: int) -> str:
  """``1995`` -> "one thousand nine hundred ninety five" (no "and", no hyphens)."""
  return _tidy(_engine().number_to_words(n, andword=""))


def ordinal(n: int) -> str:
  """``22`` -> "twenty second"."""
  engine = _engine()
  return _tidy(engine.ordinal(engine.number_to_words(n, andword="")))


def year(n: int) -> str:
  """A year as spoken: 1995 -> "nineteen ninety five", 1905 -> "nineteen oh five",
  1900 -> "nineteen hundred", 2005 -> "two thousand five", 2010 -> "twenty ten"."""
  if 2000 <= n < 2010:
    return cardinal(n)
  high, low = divmod(n, 100)
  if low == 0:
    return f"{cardinal(high)} hundred"
  if low < 10:
    return f"{cardinal(high)} oh {cardinal(low)}"
  return f"{cardinal(high)} {cardinal(low)}"


def _int(digits: str) -> int:
  return int(digits.replace(",", ""))


def decimal(whole: str, fraction: str) -> str:
  """``("3", "14")`` -> "three point one four" (fraction digits read one by one)."""
  digits = " ".join(cardinal(int(d)) for d in fraction)
  return f"{cardinal(_int(whole))} point {digits}"


def _money(match: re.Match) -> str:
  unit, units, subunit, subunits = _CURRENCIES[match.group(1)]
  whole, _, fraction = match.group(2).partition(".")
  if len(fraction) > 2:  # "$1.005": not a price in units and cents
    return f"{decimal(whole, fraction)} {units}"
  major = _int(whole)
  minor = int(fraction.ljust(2, "0")) if fraction else 0
  parts = []
  if major or not minor:
    parts.append(f"{cardinal(major)} {unit if major == 1 else units}")
  if minor:
    parts.append(f"{cardinal(minor)} {subunit if minor == 1 else subunits}")
  return ", ".join(parts)


def _integer(match: re.Match) -> str:
  digits = match.group(0)
  n = _int(digits)
  if "," not in digits and len(digits) == 4 and 1100 <= n <= 2099:
    return year(n)
  return cardinal(n)


def _sub(pattern: re.Pattern, words, text: str) -> str:
  """``pattern.sub`` that puts a space between the words and an adjacent letter or digit
  ("mp3" -> "mp three") but none before punctuation ("5," -> "five,")."""
  def replace(match: re.Match) -> str:
    out = words(match)
    if match.start() > 0 and text[match.start() - 1].isalnum():
      out = " " + out
    if match.end() < len(text) and text[match.end()].isalnum():
      out += " "
    return out
  return pattern.sub(replace, text)


def expand_numbers(text: str) -> str:
  """Replaces every number in ``text`` by words (see the module docstring)."""
  text = _PERCENT.sub(" percent", text)
  text = _sub(_MONEY, _money, text)
  text = _sub(_ORDINAL, lambda m: ordinal(_int(m.group(1))), text)
  text = _sub(_DECIMAL, lambda m: decimal(m.group(1), m.group(2)), text)
  return _sub(_INTEGER, _integer, text)
