"""Base class of every encoder."""

from __future__ import annotations

from typing import Any

import keras

from open_seq2seq.utils.params import AnyType, Configurable, Param
from open_seq2seq.utils.precision import dtype_policy


class Encoder(Configurable, keras.layers.Layer):
  """An encoder maps the data layer's source tensors to representations for the decoder.

  Subclasses declare their keys in ``PARAMS`` and implement :meth:`call`, which takes
  ``{"source_tensors": (inputs, lengths)}`` and returns a dict with at least ``"outputs"``
  ([batch, time, dim]) and ``"src_lengths"`` ([batch] int32).
  """

  PARAMS = {
      "dtype": Param(AnyType, None,
                     "Overrides the model's dtype for this component (None: the model's)."),
  }

  def __init__(self, params: dict[str, Any], model: Any = None, name: str = "encoder",
               mode: str = "train"):
    self.params = dict(params)
    self.mode = mode
    model_dtype = model.params["dtype"] if model is not None else "float32"
    keras.layers.Layer.__init__(
        self, name=name, dtype=dtype_policy(self.params.get("dtype") or model_dtype))

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    raise NotImplementedError
