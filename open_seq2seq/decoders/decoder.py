"""Base class of every decoder."""

from __future__ import annotations

from typing import Any

import keras

from open_seq2seq.utils.params import AnyType, Configurable, Param
from open_seq2seq.utils.precision import dtype_policy


class Decoder(Configurable, keras.layers.Layer):
  """A decoder turns the encoder's output into logits (training) or predictions (inference).

  :meth:`call` takes ``{"encoder_output": dict, "target_tensors": (ids, lengths)}`` —
  targets absent at inference — and returns a dict with ``"logits"`` (training/eval,
  [batch, time, vocab]) and ``"outputs"`` (predicted ids [batch, time], any mode) and
  ``"final_sequence_lengths"`` where it can.
  """

  PARAMS = {
      "dtype": Param(AnyType, None,
                     "Overrides the model's dtype for this component (None: the model's)."),
  }

  def __init__(self, params: dict[str, Any], model: Any = None, name: str = "decoder",
               mode: str = "train"):
    self.params = dict(params)
    self.mode = mode
    model_dtype = model.params["dtype"] if model is not None else "float32"
    keras.layers.Layer.__init__(
        self, name=name, dtype=dtype_policy(self.params.get("dtype") or model_dtype))

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    raise NotImplementedError
