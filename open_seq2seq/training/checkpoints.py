"""Checkpoints: latest-N, best-by-metric, resume, and initialisation from another run.

Layout of a log directory::

    logdir/ckpt-<step>.index|.data-*   last ``num_checkpoints`` checkpoints (+ ``checkpoint``)
    logdir/best_models/                 the checkpoint with the best eval metric
    logdir/best_models/best.json        {"metric": ..., "value": ..., "step": ...}

TensorFlow writes a checkpoint's data under a temporary name and its index last, and the
``checkpoint`` state file is replaced atomically after it, so a crash never leaves a
half-written checkpoint that would be picked up on resume. Which checkpoints exist, and which
a run may delete, is checkpoint_files.py's: the ``ckpt-<step>`` files count when the state
file is missing or unreadable, and nothing outside the run's own line is deleted.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

import tensorflow as tf

from open_seq2seq.errors import CheckpointError, DivergenceError, write_failure
from open_seq2seq.training import checkpoint_files
from open_seq2seq.training.checkpoint_files import remove_partial_saves
from open_seq2seq.training.model_variables import (model_checkpoint_object, named_variables,
                                                   non_finite, restore_model_weights)
from open_seq2seq.training.restoring import (UnreadableCheckpoint, load_pretrained,
                                             restore_across_dtypes, variable_keys)
from open_seq2seq.training.reporting import log
from open_seq2seq.utils.io import atomic_write_text

# load_pretrained and variable_keys live in restoring.py, named_variables and the other
# model-variable helpers in model_variables.py; importing them from here still works.
__all__ = ["CheckpointStore", "UnreadableCheckpoint", "checkpoint_for_eval", "latest_checkpoint",
           "load_pretrained", "logdir_holds_run", "model_checkpoint_object", "named_variables",
           "non_finite", "remove_partial_saves", "restore_across_dtypes",
           "restore_model_weights", "variable_keys"]

BEST_DIR = "best_models"
BEST_INFO = "best.json"


def latest_checkpoint(logdir: str, best: bool = False) -> str | None:
  """The checkpoint eval reads: the state file's latest, else (no usable state file) the
  newest ``ckpt-<step>`` found from its files; None when there is none."""
  return checkpoint_files.latest_in(os.path.join(logdir, BEST_DIR) if best else logdir)[0]


def checkpoint_for_eval(logdir: str, best: bool, announce: bool = True) -> str:
  """The checkpoint eval/infer should load, or a one-line error saying what to do.

  Without a usable ``checkpoint`` state file the newest checkpoint is found from its files,
  and (``announce``: the chief) a notice line says so."""
  path, state = checkpoint_files.latest_in(os.path.join(logdir, BEST_DIR) if best else logdir)
  if path is None:
    what = "best checkpoint (restore_best_checkpoint is set)" if best else "checkpoint"
    unreadable = f" ({state.describe()})" if state.status == "unreadable" else ""
    raise CheckpointError(
        f"{logdir}: no {what} found{unreadable}; train first (--mode=train or train_eval) or "
        f"point --logdir at a trained run")
  if not state.usable and announce:
    log(f"notice: {state.describe()}: using {path}, the newest checkpoint found from its files")
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


def set_aside(logdir: str, names: list[str], label: str) -> str:
  """Moves ``names`` of ``logdir`` into a new folder ``logdir/<label>-<time>/``; returns it.
  What a run must not use or delete, it keeps there (nothing is deleted)."""
  stamp = time.strftime("%Y%m%d-%H%M%S")
  target, n = os.path.join(logdir, f"{label}-{stamp}"), 1
  while os.path.exists(target):
    n += 1
    target = os.path.join(logdir, f"{label}-{stamp}-{n}")
  os.makedirs(target)
  for name in names:
    os.replace(os.path.join(logdir, name), os.path.join(target, name))
  return target


class CheckpointStore:
  """Saves and restores the training state of one run.

  Its first write (a save, or resuming) *claims* the directory: leftovers of saves a kill cut
  short are cleaned up and, in a run that did not resume (``--no_dir_check``), the
  checkpoints of an earlier run are moved into ``earlier_run-<time>/``: a run deletes or
  overwrites only checkpoints of its own line (see checkpoint_files.py).

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
    self.manager = checkpoint_files.CheckpointFiles(self.checkpoint, logdir, max_to_keep)
    self._best = checkpoint_files.CheckpointFiles(self.checkpoint,
                                                  os.path.join(logdir, BEST_DIR), 1)
    #: folders of saves a kill cut short, cleaned up when the run claimed the directory
    self.removed_partial_saves: list[str] = []
    self._resumed = self._cleaned = self._claimed = False

  def _clean_up(self) -> None:
    """Before the run resumes or first writes (chief only): leftovers of saves cut short."""
    if self._cleaned or not self.write:
      return
    self._cleaned = True
    for directory in (self.logdir, os.path.join(self.logdir, BEST_DIR)):
      self.removed_partial_saves += checkpoint_files.remove_partial_saves(directory)
    if self.removed_partial_saves:
      log(f"removed {len(self.removed_partial_saves)} folder(s) of a save that a kill cut "
          f"short: {', '.join(self.removed_partial_saves)}")

  def _claim(self) -> None:
    """Before the run's first write (chief only)."""
    if self._claimed or not self.write:
      return
    self._claimed = True
    self._clean_up()
    if self._resumed or not os.path.isdir(self.logdir):
      return
    best = os.path.join(self.logdir, BEST_DIR)
    earlier = sorted(n for n in os.listdir(self.logdir)
                     if n == checkpoint_files.STATE_FILE or n.startswith("ckpt-") or
                     n == BEST_DIR and os.path.isdir(best) and os.listdir(best))
    if earlier:
      target = set_aside(self.logdir, earlier, "earlier_run")
      log(f"notice: training from scratch: moved the earlier run's checkpoints to {target} "
          f"(nothing deleted)")
      keep = self.manager.max_to_keep
      self.manager = checkpoint_files.CheckpointFiles(self.checkpoint, self.logdir, keep)
      self._best = checkpoint_files.CheckpointFiles(self.checkpoint,
                                                    os.path.join(self.logdir, BEST_DIR), 1)

  def save(self, step: int) -> str | None:
    self._check_finite(step)
    if not self.write:
      return None
    held = self.manager.holds(step)
    if held:
      return held  # already saved (or resumed from) at this step
    self._claim()
    return self._write(self.manager, step, f"checkpoint of step {step}")

  def _write(self, files: checkpoint_files.CheckpointFiles, step: int, what: str) -> str:
    """A save through ``files``; a disk full, a size limit or a permission is one line."""
    newest = self.manager.newest_own or "none"
    try:
      return files.save(step)
    except (OSError, tf.errors.OpError) as e:
      error = write_failure(e, what=f"could not write the {what} in {files.directory}",
                            kept=f"the newest checkpoint is still {newest}")
      if error is None:
        raise
      raise error from None

  def _check_finite(self, step: int) -> None:
    bad = non_finite(self.guarded)
    if bad:
      raise DivergenceError(
          f"step {step}: {len(bad)} weight variable(s) are not finite ({', '.join(bad[:3])}):"
          f" not saved, the newest checkpoint is still "
          f"{self.manager.newest_own or 'none'}; lower the learning rate or clip "
          f"gradients (max_grad_norm)")

  def restore(self, path: str, expect_partial: bool = False) -> None:
    """Restores checkpoint ``path``; one of this logdir becomes the run's line, as on resume."""
    restore_across_dtypes(self.checkpoint, path, expect_partial=expect_partial)
    if os.path.dirname(os.path.abspath(path)) == os.path.abspath(self.logdir):
      self._resumed = True
      self.manager.adopt(path)

  def restore_latest(self, allow_changes: bool = False
                     ) -> tuple[str | None, list[UnreadableCheckpoint]]:
    """Restores the newest checkpoint that reads; returns it (None: the run has none) and
    the newer ones skipped as unreadable.

    Checkpoints come from the state file and from the ``ckpt-<step>`` files themselves (all
    of them when the state file is missing or unreadable, which the chief then says). The
    chief rewrites the state file to list the restored checkpoint as the newest, so that
    saves and eval go on from there.

    Raises:
      CheckpointError: every checkpoint of the run is unreadable.
      ModelMismatch: its model variables are not the model's (unless ``allow_changes``).
    """
    self._clean_up()  # e.g. a checkpoint set aside by a save cut short is put back
    skipped: list[UnreadableCheckpoint] = []
    candidates = self.manager.candidates()
    for path in candidates:
      try:
        restore_across_dtypes(self.checkpoint, path, allow_changes=allow_changes)
      except UnreadableCheckpoint as e:
        skipped.append(e)
        self.manager.unreadable.add(path)
        continue
      self._resumed = True
      state = self.manager.state
      self.manager.adopt(path)
      if self.write:
        if not state.usable:
          names = ", ".join(os.path.basename(p) for p in reversed(candidates))
          log(f"notice: {state.describe()}: found checkpoints from their files ({names}); "
              f"resuming from the newest that reads, {os.path.basename(path)}")
        self._claim()
        if skipped or not state.usable or state.paths[-1] != path:
          self._rewrite_state()
        self._check_best()
      return path, skipped
    if skipped:
      raise CheckpointError(f"no checkpoint of {self.logdir} is readable (the newest: "
                            f"{skipped[0].reason}); train afresh into another --logdir")
    return None, skipped

  def _rewrite_state(self) -> None:
    try:
      self.manager.rewrite_state()
    except OSError as e:
      raise write_failure(e, what=f"could not write the checkpoint state file of "
                          f"{self.logdir}") or e from None

  # ------------------------------------------------------------------ best checkpoint
  def _check_best(self) -> None:
    """On resume (chief): best_models/ must be this run's, with a readable best.json and state
    file; else it is moved aside, with a warning, and the best is chosen afresh."""
    directory = os.path.join(self.logdir, BEST_DIR)
    if not os.path.isdir(directory) or not os.listdir(directory):
      return
    info, problem = self._read_best()
    state = self._best.state
    if problem is None and not state.usable:
      problem = state.describe()
    if problem is None and info is None:
      problem = f"{directory} holds no {BEST_INFO}"
    if problem is None and checkpoint_files.step_of(state.paths[-1]) != info.get("step"):
      problem = (f"{BEST_INFO} names step {info.get('step')}, but the best checkpoint is "
                 f"{os.path.basename(state.paths[-1])}")
    if problem is None:
      self._best.adopt(state.paths[-1])
      return
    target = set_aside(self.logdir, [BEST_DIR], "unreadable_best_models")
    log(f"warning: {problem}: moved {BEST_DIR}/ to {target} (nothing deleted); the best "
        f"checkpoint is chosen afresh from the next eval")
    self._best = checkpoint_files.CheckpointFiles(self.checkpoint, directory, 1)

  def _read_best(self) -> tuple[dict | None, str | None]:
    """(``best.json``'s record or None, why it is unreadable or None)."""
    path = os.path.join(self.logdir, BEST_DIR, BEST_INFO)
    if not os.path.isfile(path):
      return None, None
    try:
      with open(path, encoding="utf-8") as f:
        info = json.load(f)
      if not isinstance(info, dict) or "metric" not in info or "value" not in info:
        raise ValueError('not a {"metric": ..., "value": ...} record')
      float(info["value"])
    except (OSError, ValueError, TypeError) as e:
      reason = str(e).strip().splitlines()[0][:100] if str(e).strip() else type(e).__name__
      return None, f"{path} is unreadable ({reason})"
    return info, None

  def best_info(self) -> dict | None:
    """``best_models/best.json`` ({"metric", "value", "step"}), or None when there is none."""
    info, problem = self._read_best()
    if problem:
      raise CheckpointError(f"{problem}: it records which checkpoint is the best; move "
                            f"{os.path.join(self.logdir, BEST_DIR)}/ away to choose the best "
                            f"afresh")
    return info

  def maybe_save_best(self, metric: str, value: float, higher_is_better: bool,
                      step: int) -> bool:
    """Saves a copy as the best checkpoint if ``value`` beats the best so far (a NaN or
    infinite value never does)."""
    if not math.isfinite(value):
      return False
    self._check_finite(step)
    self._claim()
    best = self.best_info()
    if best is not None and best.get("metric") == metric:
      better = value > best["value"] if higher_is_better else value < best["value"]
      if not better:
        return False
    if self.write:
      path = os.path.join(self.logdir, BEST_DIR, BEST_INFO)
      self._write(self._best, step, f"best checkpoint of step {step}")
      try:
        atomic_write_text(path, json.dumps({"metric": metric, "value": value,
                                            "step": step}) + "\n")
      except OSError as e:
        raise write_failure(e, what=f"could not write {path}") or e from None
    return True
