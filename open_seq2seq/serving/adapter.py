"""What a model family puts around its network in an exported SavedModel.

A family's model returns a :class:`ServingAdapter` from ``Model.serving_adapter()``: the
raw inputs a user of the exported model gives (text, a waveform, an image), how they become
the batch the model predicts on, and how its predictions become outputs (text, class ids,
spectrograms) — all TensorFlow ops, so the SavedModel needs neither this package nor
Python-side pre- or post-processing.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf


class ServingAdapter(tf.Module):
  """Raw inputs -> model batch, predictions -> outputs, for one serving signature.

  Subclasses set :attr:`inputs` (name -> ``tf.TensorSpec``, batch dimension first) and
  implement :meth:`example_inputs`, :meth:`to_batch` and :meth:`to_outputs`. Lookup tables
  and constants a subclass keeps as attributes are saved with the model.
  """

  #: input name -> (TensorSpec, one-line description)
  inputs: dict[str, tuple[tf.TensorSpec, str]] = {}
  #: output name -> one-line description
  outputs: dict[str, str] = {}
  #: Python packages whose ops the saved graph uses (a loader must import them).
  required_imports: tuple[str, ...] = ()

  def example_inputs(self) -> dict[str, tf.Tensor]:
    """A small valid input: the model's variables are created by predicting on it."""
    raise NotImplementedError

  def to_batch(self, inputs: dict[str, tf.Tensor]) -> dict[str, Any]:
    """The batch ``Model.predict`` takes (``source_tensors`` ...), from the raw inputs."""
    raise NotImplementedError

  def to_outputs(self, inputs: dict[str, tf.Tensor], batch: dict[str, Any],
                 predictions: dict[str, Any]) -> dict[str, tf.Tensor]:
    """The signature's outputs (names as in :attr:`outputs`)."""
    raise NotImplementedError

  def describe(self) -> dict[str, Any]:
    """The signature's inputs and outputs, for the export's metadata file."""
    return {
        "inputs": {name: {"dtype": spec.dtype.name, "shape": spec.shape.as_list(), "doc": doc}
                   for name, (spec, doc) in self.inputs.items()},
        "outputs": dict(self.outputs),
        "required_imports": list(self.required_imports),
    }
