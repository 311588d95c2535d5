"""SentencePiece models as the tokenizer and vocabulary of a text data layer.

A SentencePiece model (``.model`` file, from ``scripts/build_sentencepiece.py`` or any other
trainer) turns raw text into pieces such as ``▁In ▁the ▁begin ning``. This module maps the
model's ids onto the token-id contract of :class:`~open_seq2seq.data.text2text.vocab.
SpecialTextTokens` (PAD 0, UNK 1, <S> 2, EOS 3, pieces from 4):

* a model trained with :data:`SPECIAL_TOKEN_OPTIONS` (what ``build_sentencepiece.py`` does)
  already has these ids and token names, so its ids are used as they are (:attr:`aligned`);
* any other model (e.g. SentencePiece's defaults: ``<unk>`` 0, ``<s>`` 1, ``</s>`` 2, no
  padding) is remapped: its unknown/start/end/padding pieces take ids 1/2/3/0 and every
  other piece an id from 4 in the model's order.

The vocabulary file of a model (:func:`vocab_file_tokens`) lists the pieces of ids 4.. in id
order, one per line, so that :func:`~open_seq2seq.data.text2text.vocab.load_vocab` reads
it back with the same ids as the model.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import sentencepiece

from open_seq2seq.data.text2text.vocab import (NUM_SPECIAL_TOKENS, SpecialTextTokens,
                                               invert_vocab, special_vocab)
from open_seq2seq.errors import DataError

__all__ = ["SPECIAL_TOKEN_OPTIONS", "SentencePieceVocab", "vocab_file_tokens"]

_PAD = SpecialTextTokens.PAD_ID.value
_UNK = SpecialTextTokens.UNK_ID.value
_S = SpecialTextTokens.S_ID.value
_EOS = SpecialTextTokens.EOS_ID.value
_SPECIAL_TEXT = {idx: text for text, idx in special_vocab().items()}

#: SentencePiece trainer options giving a model this project's special ids and token names.
SPECIAL_TOKEN_OPTIONS = {
    "pad_id": _PAD, "unk_id": _UNK, "bos_id": _S, "eos_id": _EOS,
    "pad_piece": _SPECIAL_TEXT[_PAD], "unk_piece": _SPECIAL_TEXT[_UNK],
    "bos_piece": _SPECIAL_TEXT[_S], "eos_piece": _SPECIAL_TEXT[_EOS],
}


class SentencePieceVocab:
  """A SentencePiece model with its ids mapped to this project's ids.

  Args:
    path: the ``.model`` file.
    what: the config key that named it, for error messages.

  Attributes:
    processor: the ``sentencepiece.SentencePieceProcessor``.
    seq2idx: token -> id, special tokens included (named ``<PAD> <UNK> <S> </S>``).
    aligned: the model's ids are this project's ids (no remapping needed).
    proto: the serialized model (what an exported graph tokenizes with).

  Raises:
    DataError: if the file is missing or not a SentencePiece model, or if one of its
      ordinary pieces is spelled like a special token or contains whitespace.
  """

  def __init__(self, path: str, what: str = "sentencepiece_model"):
    self.path = path
    self.processor = sentencepiece.SentencePieceProcessor()
    try:
      with open(path, "rb") as f:
        proto = f.read()
    except FileNotFoundError:
      raise DataError(f"{what} {path} does not exist; check data_layer_params/{what} or "
                      "build the model with scripts/build_sentencepiece.py") from None
    except OSError as e:
      raise DataError(f"{what} {path} cannot be read ({e.strerror}); check the path and "
                      "its permissions") from None
    self.proto = proto
    try:
      self.processor.LoadFromSerializedProto(proto)
    except (RuntimeError, OSError, TypeError):
      raise DataError(f"{what} {path} is not a SentencePiece model; give the .model file "
                      "written by the SentencePiece trainer") from None

    sp = self.processor
    size = sp.get_piece_size()
    specials = {sp.pad_id(): _PAD, sp.unk_id(): _UNK, sp.bos_id(): _S, sp.eos_id(): _EOS}
    specials.pop(-1, None)  # a disabled special (SentencePiece's default: no padding piece)
    to_ours = np.empty(size, dtype=np.int32)
    seq2idx = special_vocab()
    for piece_id in range(size):
      if piece_id in specials:
        to_ours[piece_id] = specials[piece_id]
        continue
      piece = sp.id_to_piece(piece_id)
      if piece in seq2idx:
        raise DataError(f"{what} {path}: piece {piece_id} {piece!r} is spelled like a special "
                        "token of this project's vocabularies; retrain the model without it")
      if not piece or any(ch.isspace() for ch in piece):
        raise DataError(f"{what} {path}: piece {piece_id} {piece!r} is empty or holds "
                        "whitespace, so it cannot be written to a vocabulary file; retrain "
                        "the model with whitespace normalization")
      to_ours[piece_id] = len(seq2idx)
      seq2idx[piece] = len(seq2idx)
    self.seq2idx = seq2idx
    self._to_ours = to_ours
    self._to_model = np.full(len(seq2idx), sp.unk_id(), dtype=np.int64)
    self._to_model[to_ours] = np.arange(size)
    self.aligned = bool(np.array_equal(to_ours, np.arange(size)))

  def restrict_to(self, seq2idx: dict[str, int], path: str) -> "SentencePieceVocab":
    """Gives this model the ids of a vocabulary file (``seq2idx`` as ``load_vocab`` reads
    it, special tokens included) and returns it.

    The file may list any of the model's pieces in any order: all of them (the model's own
    vocabulary file), or a subset, such as the pieces one side of a corpus uses under a
    joint model, so that side's embedding and output layer only hold those. The model's
    pieces missing from the file read as ``<UNK>``.

    Raises:
      DataError: if the file holds a token that is not one of the model's pieces.
    """
    strangers = [token for token in seq2idx if token not in self.seq2idx]
    if strangers:
      raise DataError(
          f"vocabulary file {path}: {strangers[0]!r} is not a piece of SentencePiece model "
          f"{self.path} ({len(strangers)} such tokens); the file must list the model's pieces "
          "(write it with scripts/build_sentencepiece.py --vocab_file or --side_vocab)")
    tokens = invert_vocab(self.seq2idx)
    to_ours = np.array([seq2idx.get(tokens[int(i)], _UNK) for i in self._to_ours],
                       dtype=np.int32)
    to_model = np.full(max(seq2idx.values()) + 1, self.processor.unk_id(), dtype=np.int64)
    known = to_ours != _UNK
    to_model[to_ours[known]] = np.flatnonzero(known)
    self.seq2idx = dict(seq2idx)
    self._to_ours = to_ours
    self._to_model = to_model
    self.aligned = bool(np.array_equal(to_ours, np.arange(len(to_ours))))
    return self

  @property
  def model_to_ids(self) -> np.ndarray:
    """This project's id of each of the model's ids (int32, indexed by the model's id)."""
    return self._to_ours.copy()

  def __len__(self) -> int:
    return len(self.seq2idx)

  def encode(self, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Raw text lines -> ``(ids, counts)``: the lines' ids concatenated (int32, no EOS)
    and the number of ids of each line (int64); a blank line has none."""
    encoded = self.processor.encode(list(lines), out_type=int)
    counts = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    flat = np.fromiter((i for ids in encoded for i in ids), dtype=np.int64,
                       count=int(counts.sum()))
    return self._to_ours[flat], counts

  def pieces(self, lines: Sequence[str]) -> list[list[str]]:
    """Raw text lines -> their pieces (what an encoded corpus file holds)."""
    return self.processor.encode(list(lines), out_type=str)

  def decode(self, ids: Sequence[int]) -> str:
    """This project's ids -> text, as SentencePiece detokenizes (special ids are skipped)."""
    size = len(self._to_model)
    kept = [int(i) for i in ids if NUM_SPECIAL_TOKENS <= int(i) < size or int(i) == _UNK]
    return self.processor.decode([int(self._to_model[i]) for i in kept])


def vocab_file_tokens(vocab: SentencePieceVocab) -> list[str]:
  """The lines of ``vocab``'s vocabulary file: the tokens of ids 4.. in id order."""
  tokens = sorted(vocab.seq2idx, key=vocab.seq2idx.__getitem__)
  return tokens[NUM_SPECIAL_TOKENS:]
