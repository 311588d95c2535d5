"""Every access to Keras or TensorFlow internals, in one place.

Keras 3 keeps a layer's own variables and its bookkeeping in private attributes, and
TensorFlow's checkpoints see a layer's attributes through a private tracking layer. The
toolkit needs both to name checkpoint variables by their place in the model (see
``training/checkpoints.py::named_variables``). Should a Keras release rename them, this module
is the one to change (and ``tests/unit/test_keras_compat.py`` the test that says so).
"""

from __future__ import annotations

from typing import Any, Iterator

import keras
# The mixin keras.layers.RNN looks for to draw a cell's dropout masks once per sequence
# (WeightDropLayerNormBasicLSTMCell's weight drop); Keras 3 exports no public name for it.
from keras.src.layers.rnn.dropout_rnn_cell import DropoutRNNCell  # noqa: F401

#: Attributes of Keras layers / TF trackables that are bookkeeping, not sublayers.
_INTERNAL_ATTRIBUTES = frozenset({
    "_layers", "_trainable_variables", "_non_trainable_variables", "_seed_generators",
    "_tracker", "_inbound_nodes", "_outbound_nodes", "_losses", "_metrics"})
_INTERNAL_PREFIX = "_self_"  # TensorFlow's trackable machinery


def own_variables(layer: Any) -> list:
  """The variables ``layer`` created itself (not those of its sublayers)."""
  return (list(getattr(layer, "_trainable_variables", [])) +
          list(getattr(layer, "_non_trainable_variables", [])))


def attributes(obj: Any) -> Iterator[tuple[str, Any]]:
  """``(name, value)`` of ``obj``'s attributes, Keras/TensorFlow bookkeeping left out,
  sorted by name (so that names derived from them are stable)."""
  for name, value in sorted(vars(obj).items()):
    if name in _INTERNAL_ATTRIBUTES or name.startswith(_INTERNAL_PREFIX):
      continue
    yield name, value


def set_untracked(layer: keras.layers.Layer, name: str, value: Any) -> None:
  """Sets an attribute without Keras tracking it (a layer owned by another component, e.g.
  shared embeddings: tracking it twice would list its variables twice)."""
  object.__setattr__(layer, name, value)
