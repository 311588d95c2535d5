"""A side of a parallel corpus as flat token ids: tokenizing and assembling, vectorized.

``line_ids`` turns lines into token ids (a SentencePiece model, else a delimiter and a
vocabulary, unknown tokens as UNK_ID); ``assemble`` adds EOS (and ``<S>``) to every line of
the whole corpus at once and gives a ``TokenizedSide``: the ids concatenated and the length
of each line, which becomes a ragged tensor for ``tf.data``.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from open_seq2seq.data.text2text.sentencepiece_model import SentencePieceVocab
from open_seq2seq.data.text2text.vocab import SpecialTextTokens

_EOS = SpecialTextTokens.EOS_ID.value
UNK_ID = SpecialTextTokens.UNK_ID.value
_S = SpecialTextTokens.S_ID.value


def split_tokens(line: str, delimiter: str) -> list[str]:
  """Tokens of a line: split on ``delimiter`` (any whitespace for " ", characters for "")."""
  if delimiter == "":
    return list(line.strip())
  if delimiter.isspace():
    return line.split()
  return [t for t in line.strip().split(delimiter) if t]


class _UnknownToUnk(dict):
  """Token -> id map answering UNK_ID for unknown tokens (fast C-level lookups)."""

  def __missing__(self, token: str) -> int:
    return UNK_ID


class TokenizedSide:
  """One side (source or target) of the corpus, tokenized into flat int32 ids."""

  def __init__(self, values: np.ndarray, lengths: np.ndarray):
    self.values = values
    self.lengths = lengths

  def ragged(self) -> tf.RaggedTensor:
    return tf.RaggedTensor.from_row_lengths(self.values, self.lengths.astype(np.int64))


def line_ids(lines: list[str], model: SentencePieceVocab | None, delimiter: str,
             seq2idx: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
  """A side's lines -> ``(token ids concatenated, tokens per line)``: encoded by the
  side's SentencePiece ``model``, else split by ``delimiter`` and looked up in ``seq2idx``."""
  if model is not None:
    return model.encode(lines)
  token_lists = [split_tokens(line, delimiter) for line in lines]
  lookup = _UnknownToUnk(seq2idx)
  counts = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
  flat_tokens = [t for tokens in token_lists for t in tokens]
  token_ids = np.fromiter(map(lookup.__getitem__, flat_tokens), dtype=np.int32,
                          count=len(flat_tokens))
  return token_ids, counts


def assemble(token_ids: np.ndarray, counts: np.ndarray, start_token: bool) -> TokenizedSide:
  """Flat token ids + tokens per line -> a side with EOS (and, ``start_token``, <S>) added
  to every line, vectorized over the whole corpus."""
  start = 1 if start_token else 0
  lengths = counts + start + 1
  row_starts = np.cumsum(lengths) - lengths
  values = np.full(int(lengths.sum()), _EOS, dtype=np.int32)
  if start:
    values[row_starts] = _S
  # position of each token: its row's start + <S> + its index within the row
  row_of_token = np.repeat(np.arange(len(counts)), counts)
  index_in_row = np.arange(len(token_ids)) - np.repeat(np.cumsum(counts) - counts, counts)
  values[row_starts[row_of_token] + start + index_in_row] = token_ids
  return TokenizedSide(values, lengths.astype(np.int32))
