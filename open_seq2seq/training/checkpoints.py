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
import shutil
from typing import Any

import tensorflow as tf

from open_seq2seq.errors import CheckpointError, DivergenceError
from open_seq2seq.training.restoring import (UnreadableCheckpoint, load_pretrained,
                                             restore_across_dtypes, variable_keys)
from open_seq2seq.utils import keras_compat
from open_seq2seq.utils.io import atomic_write_text

# load_pretrained and variable_keys live in restoring.py; importing them from here still works.
__all__ = ["CheckpointStore", "UnreadableCheckpoint", "checkpoint_for_eval", "latest_checkpoint",
           "load_pretrained", "logdir_holds_run", "model_checkpoint_object", "named_variables",
           "non_finite", "remove_partial_saves", "restore_across_dtypes",
           "restore_model_weights", "variable_keys"]

BEST_DIR = "best_models"
BEST_INFO = "best.json"


def remove_partial_saves(directory: str) -> list[str]:
  """Deletes the ``ckpt-N_temp/`` folders a kill during a save leaves behind; returns them.

  TensorFlow writes a checkpoint's parts there before merging them into ``ckpt-N.*``; a
  folder left over belongs to a save that never finished (and was never listed)."""
  removed = []
  if os.path.isdir(directory):
    for name in sorted(os.listdir(directory)):
      path = os.path.join(directory, name)
      if name.startswith("ckpt-") and name.endswith("_temp") and os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
  return removed


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
    self.removed_partial_saves: list[str] = []
    if write:
      for directory in (logdir, os.path.join(logdir, BEST_DIR)):
        self.removed_partial_saves += remove_partial_saves(directory)

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

  def restore_latest(self) -> tuple[str | None, list[UnreadableCheckpoint]]:
    """Restores the newest checkpoint that reads; returns it (None: the run has none) and
    the newer ones skipped as unreadable.

    After skipping, the state file lists the restored checkpoint as the newest (the chief
    rewrites it), so that saves and eval go on from there.

    Raises:
      CheckpointError: every checkpoint of the run is unreadable.
    """
    skipped: list[UnreadableCheckpoint] = []
    for path in reversed(self.manager.checkpoints):
      try:
        restore_across_dtypes(self.checkpoint, path)
      except UnreadableCheckpoint as e:
        skipped.append(e)
        continue
      if skipped:
        self._make_newest(path)
      return path, skipped
    if skipped:
      raise CheckpointError(f"no checkpoint of {self.logdir} is readable (the newest: "
                            f"{skipped[0].reason}); train afresh into another --logdir")
    return None, skipped

  def _make_newest(self, path: str) -> None:
    kept = self.manager.checkpoints[:self.manager.checkpoints.index(path) + 1]
    if self.write:  # the state file CheckpointManager reads (a text proto), without the rest
      state = tf.train.get_checkpoint_state(self.logdir)
      stamps = dict(zip(state.all_model_checkpoint_paths, state.all_model_checkpoint_timestamps))
      lines = [f'model_checkpoint_path: "{os.path.basename(path)}"']
      lines += [f'all_model_checkpoint_paths: "{os.path.basename(p)}"' for p in kept]
      lines += [f"all_model_checkpoint_timestamps: {stamps.get(p, os.path.getmtime(p + '.index'))}"
                for p in kept]
      lines.append(f"last_preserved_timestamp: {state.last_preserved_timestamp}")
      atomic_write_text(os.path.join(self.logdir, "checkpoint"), "\n".join(lines) + "\n")
    keep = self.manager._max_to_keep  # pylint: disable=protected-access
    self.manager = tf.train.CheckpointManager(self.checkpoint, self.logdir, max_to_keep=keep,
                                              checkpoint_name="ckpt")

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
