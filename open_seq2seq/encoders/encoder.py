"""Base class of every encoder."""

from __future__ import annotations

from typing import Any

from open_seq2seq.utils.component import LayerComponent


class Encoder(LayerComponent):
  """An encoder maps the data layer's source tensors to representations for the decoder.

  Subclasses declare their keys in ``PARAMS`` and implement :meth:`call`, which takes
  ``{"source_tensors": (inputs, lengths)}`` and returns a dict with at least ``"outputs"``
  ([batch, time, dim]) and ``"src_lengths"`` ([batch] int32).
  """

  def __init__(self, params: dict[str, Any], model: Any = None, name: str = "encoder",
               mode: str = "train"):
    super().__init__(params, model, name, mode)
