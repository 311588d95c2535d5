"""Transcript <-> target ids: a character vocabulary or a SentencePiece model.

CTC needs one extra class, the blank. As in OpenSeq2Seq, the blank is the *last* class:
symbols take ids ``0..n-1`` and ``tgt_vocab_size = n + 1``. (CTC targets need neither start
nor end symbols.)

Attention decoders (``autoregressive``, OpenSeq2Seq's data-layer switch) need both instead:
``<S>`` takes id ``n`` and ``</S>`` id ``n + 1``, ``tgt_vocab_size = n + 2``, and every target
ends with ``</S>`` (the start symbol is fed by the decoder, never part of a target). A joint
CTC-attention model's CTC branch then has ``n + 1`` classes, its blank at id ``n``.
"""

from __future__ import annotations

import os
from typing import Sequence

from open_seq2seq.errors import ConfigError, DataError


def load_char_vocab(path: str) -> list[str]:
  """Reads a character vocabulary: the first character of each line is a symbol.

  A line holding a single space is the space symbol; empty lines are skipped, and lines of
  more than one character that start with ``#`` are comments (a lone ``#`` is a symbol).
  """
  if not os.path.isfile(path):
    raise ConfigError(f"data_layer_params/vocab_file: {path} does not exist")
  symbols: list[str] = []
  with open(path, encoding="utf-8") as f:
    for line in f:
      line = line.rstrip("\n").rstrip("\r")
      if not line or (len(line) > 1 and line.startswith("#")):
        continue
      if line[0] in symbols:
        raise DataError(f"{path}: symbol {line[0]!r} appears twice; keep one line per symbol")
      symbols.append(line[0])
  if not symbols:
    raise DataError(f"{path}: vocabulary is empty; write one character per line")
  return symbols


class TargetEncoder:
  """Maps transcripts to CTC target ids and back.

  Args:
    vocab_file: a character vocabulary (one symbol per line) or, with ``bpe`` (or a
      ``.model`` file), a SentencePiece model.
    bpe: read ``vocab_file`` as a SentencePiece model.
    autoregressive: add ``<S>``/``</S>`` after the symbols and end every target with
      ``</S>`` (module doc).
  """

  #: Names of the start and end symbols in ``idx2char``/``char2idx`` (OpenSeq2Seq's).
  START, END = "<S>", "</S>"

  def __init__(self, vocab_file: str, bpe: bool = False, autoregressive: bool = False):
    self.bpe = bpe or vocab_file.endswith(".model")
    self.autoregressive = autoregressive
    if self.bpe:
      if not os.path.isfile(vocab_file):
        raise ConfigError(f"data_layer_params/vocab_file: {vocab_file} does not exist")
      import sentencepiece as spm
      self.sp = spm.SentencePieceProcessor()
      try:
        self.sp.Load(vocab_file)
      except (OSError, RuntimeError) as e:
        raise DataError(f"{vocab_file}: not a SentencePiece model ({e})") from None
      self.num_symbols = len(self.sp)
      self.idx2char = {i: self.sp.IdToPiece(i) for i in range(self.num_symbols)}
      self.char2idx = {p: i for i, p in self.idx2char.items()}
      self._lowercase = False
    else:
      symbols = load_char_vocab(vocab_file)
      self.char2idx = {c: i for i, c in enumerate(symbols)}
      self.idx2char = dict(enumerate(symbols))
      self.num_symbols = len(symbols)
      # LibriSpeech-style vocabularies are lowercase; transcripts may not be.
      self._lowercase = not any(c.isupper() for c in symbols)
    if autoregressive:
      # after the symbols, so a CTC branch's blank (id n) never collides with a symbol
      for i, name in ((self.num_symbols, self.START), (self.num_symbols + 1, self.END)):
        self.idx2char[i] = name
        self.char2idx[name] = i

  @property
  def blank_id(self) -> int:
    return self.num_symbols

  @property
  def start_id(self) -> int | None:
    """Id of ``<S>`` (autoregressive targets only)."""
    return self.num_symbols if self.autoregressive else None

  @property
  def end_id(self) -> int | None:
    """Id of ``</S>``, the last id of every autoregressive target."""
    return self.num_symbols + 1 if self.autoregressive else None

  @property
  def vocab_size(self) -> int:
    """Number of CTC classes including the blank, or, autoregressive, of symbols + 2."""
    return self.num_symbols + (2 if self.autoregressive else 1)

  def normalize(self, transcript: str) -> str:
    transcript = " ".join(transcript.split())
    return transcript.lower() if self._lowercase else transcript

  def encode(self, transcript: str, where: str = "") -> list[int]:
    """Ids of ``transcript``; ``where`` names the source line in the error message."""
    text = self.normalize(transcript)
    end = [self.end_id] if self.autoregressive else []
    if self.bpe:
      return list(self.sp.EncodeAsIds(text)) + end
    try:
      return [self.char2idx[c] for c in text] + end
    except KeyError as e:
      raise DataError(f"{where or 'transcript'}: character {e.args[0]!r} is not in the "
                      f"vocabulary; add it to vocab_file or clean the transcript") from None

  def decode(self, ids: Sequence[int]) -> str:
    """Text of ids (blanks, start symbols and out-of-range ids are skipped; autoregressive
    ids end at the first ``</S>``)."""
    ids = [int(i) for i in ids]
    if self.autoregressive and self.end_id in ids:
      ids = ids[:ids.index(self.end_id)]
    ids = [i for i in ids if 0 <= i < self.num_symbols]
    if self.bpe:
      return self.sp.DecodeIds(ids)
    return "".join(self.idx2char[i] for i in ids)
