"""Checkpoints: latest-N, best-by-metric, resume, and initialisation from another run.

Layout of a log directory::

    logdir/ckpt-<step>.index|.data-*   last ``num_checkpoints`` checkpoints (+ ``checkpoint``)
    logdir/best_models/                 the checkpoint with the best eval metric
    logdir/best_models/best.json        {"metric": ..., "value": ..., "step": ...}

TensorFlow writes a checkpoint's data under a temporary name and its index last, and updates
the ``checkpoint`` state file atomically, so a crash never leaves a half-written checkpoint
that would be picked up on resume.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Iterable

import tensorflow as tf

from open_seq2seq.errors import CheckpointError, DivergenceError
from open_seq2seq.utils import keras_compat
from open_seq2seq.utils.io import atomic_write_text

BEST_DIR = "best_models"
BEST_INFO = "best.json"


def latest_checkpoint(logdir: str, best: bool = False) -> str | None:
  directory = os.path.join(logdir, BEST_DIR) if best else logdir
  return tf.train.latest_checkpoint(directory) if os.path.isdir(directory) else None


def checkpoint_for_eval(logdir: str, best: bool) -> str:
  """The checkpoint eval/infer should load, or a one-line error saying what to do."""
  path = latest_checkpoint(logdir, best)
  if path is None:
    what = "best checkpoint (restore_best_checkpoint is set)" if best else "checkpoint"
    raise CheckpointError(
        f"{logdir}: no {what} found; train first (--mode=train or train_eval) or point "
        f"--logdir at a trained run")
  return path


def logdir_holds_run(logdir: str) -> bool:
  """Whether ``logdir`` already has a checkpoint or summaries of an earlier run."""
  if not os.path.isdir(logdir):
    return False
  for name in os.listdir(logdir):
    if name == "checkpoint" or name.startswith("ckpt-") or name.startswith("events.out"):
      return True
    if name in (BEST_DIR, "config.txt"):
      return True
  return False


def variable_keys(root: tf.train.Checkpoint) -> dict[str, Any]:
  """Maps the checkpoint key of every variable reachable from ``root`` to the variable.

  Keys follow TensorFlow's object-graph naming (``model/encoder/.../.ATTRIBUTES/VARIABLE_VALUE``)
  found breadth-first, the way ``tf.train.Checkpoint`` names them.
  """
  view = tf.train.TrackableView(root)
  keys: dict[str, Any] = {}
  seen = {id(root)}
  queue = [("", root)]
  while queue:
    path, obj = queue.pop(0)
    for name, child in view.children(obj).items():
      if id(child) in seen:
        continue
      seen.add(id(child))
      # escaped as TensorFlow escapes names in checkpoint keys ("." -> "..", "/" -> ".S")
      escaped = name.replace(".", "..").replace("/", ".S")
      child_path = f"{path}/{escaped}" if path else escaped
      if isinstance(child, tf.Variable) or _is_keras_variable(child):
        keys[f"{child_path}/.ATTRIBUTES/VARIABLE_VALUE"] = child
      else:
        queue.append((child_path, child))
  return keys


def _is_keras_variable(obj: Any) -> bool:
  import keras  # local: keep this module importable without building Keras state
  return isinstance(obj, keras.Variable)


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
  NaN or an infinity."""
  return [name for name, v in variables.items()
          if tf.as_dtype(v.dtype).is_floating and not bool(tf.reduce_all(tf.math.is_finite(v)))]


def model_checkpoint_object(layers: dict[str, Any]) -> Any:
  """A trackable holding every model variable by its stable name (see named_variables)."""
  module = tf.Module()
  module.weights = named_variables(layers)
  return module


def restore_model_weights(model: Any, path: str) -> tuple[int | None, list[str]]:
  """Loads only the model's weights from ``path`` (eval/infer need no optimizer state).

  Returns:
    (the checkpoint's step — checkpoints are named ckpt-<global step> — or None, the keys of
    variables cast to this run's dtype).
  """
  root = tf.train.Checkpoint(model=model_checkpoint_object(model.named_layers))
  cast = restore_across_dtypes(root, path, expect_partial=True)
  suffix = path.rsplit("-", 1)[-1]
  return (int(suffix) if suffix.isdigit() else None), cast


class CheckpointStore:
  """Saves and restores the training state of one run.

  Args:
    logdir: run directory.
    objects: trackables to save, e.g. ``{"model": ..., "optimizer": ..., "scaler": ...}``.
    max_to_keep: number of latest checkpoints kept.
    write: False on non-chief workers: they restore but never write.
    guarded: variables (by name) that must be finite for a save to happen: a save with a
      NaN or infinity among them raises :class:`DivergenceError` instead (on every worker,
      so none waits for the others), and the newest checkpoint stays the last good one.
  """

  def __init__(self, logdir: str, objects: dict[str, Any], max_to_keep: int = 5,
               write: bool = True, guarded: dict[str, Any] | None = None):
    self.logdir = logdir
    self.write = write
    self.guarded = guarded or {}
    self.checkpoint = tf.train.Checkpoint(**objects)
    self.manager = tf.train.CheckpointManager(self.checkpoint, logdir, max_to_keep=max_to_keep,
                                              checkpoint_name="ckpt")
    self._best = tf.train.CheckpointManager(self.checkpoint, os.path.join(logdir, BEST_DIR),
                                            max_to_keep=1, checkpoint_name="ckpt")

  def save(self, step: int) -> str | None:
    self._check_finite(step)
    if not self.write:
      return None
    if self.manager.latest_checkpoint and self.manager.latest_checkpoint.endswith(f"-{step}"):
      return self.manager.latest_checkpoint  # already saved at this step
    return self.manager.save(checkpoint_number=step)

  def _check_finite(self, step: int) -> None:
    bad = non_finite(self.guarded)
    if bad:
      raise DivergenceError(
          f"step {step}: {len(bad)} weight variable(s) are not finite ({', '.join(bad[:3])}):"
          f" not saved, the newest checkpoint is still "
          f"{self.manager.latest_checkpoint or 'none'}; lower the learning rate or clip "
          f"gradients (max_grad_norm)")

  def restore(self, path: str, expect_partial: bool = False) -> None:
    restore_across_dtypes(self.checkpoint, path, expect_partial=expect_partial)

  def restore_latest(self) -> str | None:
    path = self.manager.latest_checkpoint
    if path:
      restore_across_dtypes(self.checkpoint, path)
    return path

  # ------------------------------------------------------------------ best checkpoint
  def best_info(self) -> dict | None:
    path = os.path.join(self.logdir, BEST_DIR, BEST_INFO)
    if not os.path.isfile(path):
      return None
    with open(path, encoding="utf-8") as f:
      return json.load(f)

  def maybe_save_best(self, metric: str, value: float, higher_is_better: bool,
                      step: int) -> bool:
    """Saves a copy as the best checkpoint if ``value`` beats the best so far (a NaN or
    infinite value never does)."""
    if not math.isfinite(value):
      return False
    self._check_finite(step)
    best = self.best_info()
    if best is not None and best.get("metric") == metric:
      better = value > best["value"] if higher_is_better else value < best["value"]
      if not better:
        return False
    if self.write:
      self._best.save(checkpoint_number=step)
      atomic_write_text(os.path.join(self.logdir, BEST_DIR, BEST_INFO),
                        json.dumps({"metric": metric, "value": value, "step": step}) + "\n")
    return True


def restore_across_dtypes(root: tf.train.Checkpoint, path: str,
                          expect_partial: bool = False) -> list[str]:
  """Restores ``root`` from ``path`` even if the run that wrote it used another ``dtype``.

  "float32" and "mixed" runs store float32 weights and optimizer state, "float16" runs store
  float16 ones. TensorFlow refuses to restore a variable saved in another dtype, so when any
  variable differs, every variable is read and cast instead (objects that are not variables,
  such as the input pipeline position, then start afresh).

  Args:
    root: the checkpoint object to restore into (its variables already built).
    expect_partial: the checkpoint may hold more than ``root`` (e.g. the optimizer when only
      weights are wanted); every model variable of ``root`` must still be found.

  Returns:
    The keys of the variables that were cast (empty when dtypes matched).

  Raises:
    CheckpointError: when casting and a variable of ``root`` is missing or has another shape.
  """
  reader = tf.train.load_checkpoint(path)
  saved = reader.get_variable_to_dtype_map()
  variables = variable_keys(root)
  cast = sorted(key for key, var in variables.items()
                if key in saved and saved[key] != tf.as_dtype(var.dtype))
  if not cast:
    try:
      status = root.restore(path)
      if expect_partial:
        status.expect_partial().assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.InvalidArgumentError) as e:
      detail = str(e).strip().splitlines()[0][:300]
      raise CheckpointError(f"{path}: does not match this model; it was written by a "
                            f"different model or config ({detail})") from None
    return []
  shapes = reader.get_variable_to_shape_map()
  for key, var in sorted(variables.items()):
    if key not in saved:
      if not key.startswith("model/"):
        continue  # e.g. a loss scaler added on resume: keeps its initial state
      raise CheckpointError(f"{path}: holds no {key}; it was written by a different model")
    if list(shapes[key]) != list(var.shape):
      raise CheckpointError(f"{path}: {key} has shape {shapes[key]}, the model "
                            f"{list(var.shape)}; it was written by a different model")
    var.assign(tf.cast(reader.get_tensor(key), var.dtype))
  return cast


def load_pretrained(root: tf.train.Checkpoint, source: str,
                    skip_patterns: Iterable[str] = ()) -> tuple[list[str], list[str]]:
  """Initialises variables of ``root`` from another run, matching by key and shape.

  Args:
    root: a checkpoint object whose ``model`` holds the variables to initialise.
    source: a run directory (its latest checkpoint is used) or a checkpoint prefix.

  Returns:
    (loaded keys, skipped keys with the reason).
  """
  path = tf.train.latest_checkpoint(source) if os.path.isdir(source) else source
  if not path or not tf.io.gfile.exists(path + ".index"):
    raise CheckpointError(f"load_model: no checkpoint found at {source}")
  reader = tf.train.load_checkpoint(path)
  shapes = reader.get_variable_to_shape_map()
  loaded, skipped = [], []
  for key, var in sorted(variable_keys(root).items()):
    if not key.startswith("model/"):
      continue
    if key not in shapes:
      skipped.append(f"{key} (not in {source})")
      continue
    if list(shapes[key]) != list(var.shape):
      skipped.append(f"{key} (shape {list(var.shape)} != {list(shapes[key])})")
      continue
    value = reader.get_tensor(key)
    var.assign(tf.cast(value, var.dtype))
    loaded.append(key)
  return loaded, skipped
