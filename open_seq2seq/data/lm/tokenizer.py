"""Word tokenization of raw English text for the language-model family.

OpenSeq2Seq tokenized with NLTK's ``word_tokenize``, which needs model data downloaded at run
time; this is a small Penn-Treebank-style tokenizer on regular expressions instead: words,
numbers, each punctuation mark apart, and English contractions split as the Treebank does
(``don't`` -> ``do n't``, ``she's`` -> ``she 's``). Hyphens are tokens of their own, as in
OpenSeq2Seq's WikiText preprocessing (``well-known`` -> ``well - known``).
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"""
    [^\W\d_]+(?=n't\b)          # "do" of "don't" (the Treebank's split)
  | n't\b
  | '(?:s|re|ve|ll|d|m)\b       # clitics: 's 're 've 'll 'd 'm
  | \d+(?:[.,:]\d+)*            # 3.5  1,000  10:30
  | [^\W_]+                     # words (letters and digits; "_" is markup, not a word)
  | \.\.\.|--
  | [^\w\s]                     # any other symbol alone
""", re.VERBOSE | re.IGNORECASE)


def tokenize(text: str) -> list[str]:
  """The words and symbols of ``text`` in order (underscores, used as italics markup in
  plain-text books, are dropped)."""
  return _TOKEN.findall(text)


def detokenize(tokens: list[str]) -> str:
  """Tokens joined back into readable text (spaces before punctuation and clitics removed).

  Only for display: ``tokenize(detokenize(t)) == t`` for tokens this module produced.
  """
  text = " ".join(tokens)
  text = re.sub(r" (n't|'s|'re|'ve|'ll|'d|'m)\b", r"\1", text)
  text = re.sub(r" ([.,;:!?)\]}])", r"\1", text)
  return re.sub(r"([(\[{]) ", r"\1", text)
