"""A model's variables under stable names: what a checkpoint holds of the model.

Checkpoints name every model variable by its attribute path (``named_variables``), so that
they are complete under Keras 3 (layers in Python lists are not tracked) and ``load_model``
can match variables by name across runs. Saving and resuming whole training states is
checkpoints.py's.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from open_seq2seq.training.restoring import restore_across_dtypes
from open_seq2seq.utils import keras_compat


def named_variables(layers: dict[str, Any]) -> dict[str, Any]:
  """Every variable of ``layers`` (and their sublayers) under a stable, readable name.

  Names follow attribute names (``encoder.encoder_layers.0.self_attention.kernel``), never
  Keras' auto-generated layer names (``dense_3``), which depend on how many layers the
  process built before. Keras 3 layers kept in Python lists are not tracked by
  ``tf.train.Checkpoint``; naming every variable explicitly makes checkpoints complete and
  lets ``load_model`` match variables by name. Dropout random-generator states are included
  so that a resumed run draws the same masks.
  """
  import keras
  named: dict[str, Any] = {}
  seen: set[int] = set()

  def visit(obj: Any, prefix: str) -> None:
    if id(obj) in seen:
      return
    seen.add(id(obj))
    if isinstance(obj, keras.random.SeedGenerator):
      named[f"{prefix}.seed_state"] = obj.state
      seen.add(id(obj.state))  # not again as "unattributed" under an auto-numbered path
      return
    for var in keras_compat.own_variables(obj):
      if id(var) not in seen:
        seen.add(id(var))
        name = var.name.split("/")[-1]
        named[f"{prefix}.{name}" if prefix else name] = var
    for attr, value in keras_compat.attributes(obj):
      visit_value(value, f"{prefix}.{attr.lstrip('_')}" if prefix else attr.lstrip("_"))

  def visit_value(value: Any, name: str) -> None:
    # layers may sit in (nested) lists and dicts, e.g. a TDNN's blocks of layers
    if isinstance(value, (keras.layers.Layer, keras.random.SeedGenerator)):
      visit(value, name)
    elif isinstance(value, (list, tuple)):
      for i, item in enumerate(value):
        visit_value(item, f"{name}.{i}")
    elif isinstance(value, dict):
      for key, item in sorted(value.items(), key=lambda kv: str(kv[0])):
        visit_value(item, f"{name}.{key}")

  for name, layer in layers.items():
    visit(layer, name)
  # Anything not reachable through attributes (e.g. layers kept in a closure) still gets
  # saved, under its Keras path.
  for layer in layers.values():
    for var in layer.variables:
      if id(var) not in seen:
        seen.add(id(var))
        named[f"unattributed.{var.path.replace('/', '.')}"] = var
  return named


def non_finite(variables: dict[str, Any]) -> list[str]:
  """Names of the floating-point variables of ``variables`` (name -> variable) holding a
  NaN or an infinity. One read back from the device when all are finite (every save)."""
  floating = {name: v for name, v in variables.items() if tf.as_dtype(v.dtype).is_floating}
  if not floating:
    return []
  finite = tf.stack([tf.reduce_all(tf.math.is_finite(v)) for v in floating.values()]).numpy()
  return [name for name, ok in zip(floating, finite) if not ok]


def model_checkpoint_object(layers: dict[str, Any]) -> Any:
  """A trackable holding every model variable by its stable name (see named_variables)."""
  module = tf.Module()
  module.weights = named_variables(layers)
  return module


def restore_model_weights(model: Any, path: str, allow_changes: bool = False,
                          count_unused: bool = True) -> tuple[int | None, list[str]]:
  """Loads only the model's weights from ``path`` (eval/infer need no optimizer state).

  ``allow_changes``, ``count_unused``: see restoring.restore_across_dtypes.

  Returns:
    (the checkpoint's step — checkpoints are named ckpt-<global step> — or None, the keys of
    variables cast to this run's dtype).
  """
  root = tf.train.Checkpoint(model=model_checkpoint_object(model.named_layers))
  cast = restore_across_dtypes(root, path, True, allow_changes, count_unused)
  suffix = path.rsplit("-", 1)[-1]
  return (int(suffix) if suffix.isdigit() else None), cast
