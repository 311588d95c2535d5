"""The Keras-layer base shared by encoders and decoders."""

from __future__ import annotations

from typing import Any

import keras

from open_seq2seq.utils.params import AnyType, Configurable, Param
from open_seq2seq.utils.precision import dtype_policy


class LayerComponent(Configurable, keras.layers.Layer):
  """A configurable Keras layer whose dtype policy follows the model's ``dtype``.

  ``params`` arrive validated; ``params["dtype"]`` (when set) overrides the model's dtype for
  this component alone, e.g. a float32 decoder under a mixed-precision model.
  """

  PARAMS = {
      "dtype": Param(AnyType, None,
                     "Overrides the model's dtype for this component (None: the model's)."),
  }

  def __init__(self, params: dict[str, Any], model: Any = None, name: str = "component",
               mode: str = "train"):
    self.params = dict(params)
    self.mode = mode
    model_dtype = model.params["dtype"] if model is not None else "float32"
    keras.layers.Layer.__init__(
        self, name=name, dtype=dtype_policy(self.params.get("dtype") or model_dtype))

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    raise NotImplementedError
