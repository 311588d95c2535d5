"""Base class of every decoder."""

from __future__ import annotations

from typing import Any

from open_seq2seq.utils.component import LayerComponent


class Decoder(LayerComponent):
  """A decoder turns the encoder's output into logits (training) or predictions (inference).

  :meth:`call` takes ``{"encoder_output": dict, "target_tensors": (ids, lengths)}`` —
  targets absent at inference — and returns a dict with ``"logits"`` (training/eval,
  [batch, time, vocab]) and ``"outputs"`` (predicted ids [batch, time], any mode) and
  ``"final_sequence_lengths"`` where it can.
  """

  def __init__(self, params: dict[str, Any], model: Any = None, name: str = "decoder",
               mode: str = "train"):
    super().__init__(params, model, name, mode)
