"""How a text data layer turns a raw line into ids, as data (for an exported model's graph).

The data layer tokenizes in Python (:mod:`~open_seq2seq.data.text2text.text2text`); an
exported model must do the same inside its graph. :class:`TextTokenization` is everything
that takes — the vocabulary, the delimiter or SentencePiece model, the special ids — so
:mod:`open_seq2seq.serving.text` can rebuild it with TensorFlow ops.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np


@dataclasses.dataclass(frozen=True)
class TextTokenization:
  """One side's tokenization.

  Attributes:
    seq2idx: token -> id (special tokens included; ids of unknown tokens are UNK's).
    delimiter: token separator (" ": any whitespace; "": characters); unused with a
      SentencePiece model.
    sentencepiece_model: the serialized SentencePiece model, or None.
    sentencepiece_ids: this project's id of each SentencePiece id (with a model).
    start_token: ``<S>`` is prepended to the ids (EOS is always appended).
  """

  seq2idx: Mapping[str, int]
  delimiter: str = " "
  sentencepiece_model: bytes | None = None
  sentencepiece_ids: np.ndarray | None = None
  start_token: bool = False
