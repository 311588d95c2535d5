"""The files of a run's checkpoints: which exist, which the run may remove, and saving one.

TensorFlow's ``CheckpointManager`` trusts the ``checkpoint`` state file alone: without it a
run "has no checkpoint" and a fresh start overwrites ``ckpt-20`` and rotates the rest out.
Here the ``ckpt-<step>.index`` files are the truth when the state file is missing or
unreadable, and a run removes (rotates out) only checkpoints of its own line: those it
saved, and those the state file listed up to the one it resumed from. Nothing else in the
directory is ever deleted or overwritten, except the files of a checkpoint that was found
unreadable (its step is saved anew).

The state file keeps TensorFlow's format (``tf.train.latest_checkpoint`` and other tools
read it) and is replaced atomically after each save.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from typing import Any

from open_seq2seq.errors import CheckpointError
from open_seq2seq.utils.io import atomic_write_text

STATE_FILE = "checkpoint"
_NAME = re.compile(r"^ckpt-(\d+)\.index$")
_LINE = re.compile(r"^(model_checkpoint_path|all_model_checkpoint_paths|"
                   r"all_model_checkpoint_timestamps|last_preserved_timestamp): (.+)$")


def step_of(path: str) -> int | None:
  """The step of ``.../ckpt-<step>``, or None."""
  suffix = os.path.basename(path).rsplit("-", 1)[-1]
  return int(suffix) if suffix.isdigit() else None


def files_of(prefix: str) -> list[str]:
  """The files of checkpoint ``prefix`` (its index and data shards) that exist."""
  return sorted(glob.glob(glob.escape(prefix) + ".data-*")) + \
      ([prefix + ".index"] if os.path.exists(prefix + ".index") else [])


def is_complete(prefix: str) -> bool:
  """Whether ``prefix`` has its index and a data file. TensorFlow writes the index last (after
  the data, renamed from the ``_temp`` folder), so both mean the save finished."""
  return os.path.isfile(prefix + ".index") and bool(glob.glob(glob.escape(prefix) + ".data-*"))


def found_on_disk(directory: str) -> list[str]:
  """The complete ``ckpt-<step>`` checkpoints of ``directory``, oldest first."""
  if not os.path.isdir(directory):
    return []
  found = []
  for name in os.listdir(directory):
    match = _NAME.match(name)
    prefix = os.path.join(directory, name[:-len(".index")])
    if match and is_complete(prefix):
      found.append((int(match.group(1)), prefix))
  return [prefix for _, prefix in sorted(found)]


@dataclass
class StateFile:
  """What a directory's ``checkpoint`` file says.

  Attributes:
    status: "ok", "missing" or "unreadable".
    paths: the listed checkpoints (absolute), oldest first; the newest is the latest.
    timestamps: their save times, as listed.
    reason: why it is unreadable.
  """
  directory: str
  status: str
  paths: list[str] = field(default_factory=list)
  timestamps: list[float] = field(default_factory=list)
  reason: str = ""

  @property
  def usable(self) -> bool:
    return self.status == "ok"

  def describe(self) -> str:
    path = os.path.join(self.directory, STATE_FILE)
    return f"{path} is missing" if self.status == "missing" else \
        f"{path} is unreadable ({self.reason})"


def read_state(directory: str) -> StateFile:
  """Reads ``directory/checkpoint``. It is "unreadable" when it does not parse, lists nothing,
  or lists as the latest a checkpoint whose files are gone."""
  path = os.path.join(directory, STATE_FILE)
  try:
    with open(path, encoding="utf-8") as f:
      text = f.read()
  except FileNotFoundError:
    return StateFile(directory, "missing")
  except (OSError, UnicodeDecodeError) as e:
    return StateFile(directory, "unreadable", reason=str(e).splitlines()[0][:100])
  latest, paths, stamps = None, [], []
  for number, line in enumerate(text.splitlines(), 1):
    match = _LINE.match(line.strip())
    if not line.strip():
      continue
    try:
      if not match:
        raise ValueError(f"{line.strip()[:40]!r}")
      key, value = match.groups()
      if key.endswith("path") or key.endswith("paths"):
        name = json.loads(value)
        name = name if os.path.isabs(name) else os.path.join(directory, name)
        if key == "model_checkpoint_path":
          latest = name
        else:
          paths.append(name)
      elif key == "all_model_checkpoint_timestamps":
        stamps.append(float(value))
      else:
        float(value)
    except (ValueError, TypeError) as e:
      return StateFile(directory, "unreadable", reason=f"line {number}: {e}"[:100])
  if latest is None:
    return StateFile(directory, "unreadable", reason="it names no latest checkpoint")
  if latest not in paths:
    paths.append(latest)
  if not is_complete(latest):
    return StateFile(directory, "unreadable",
                     reason=f"it lists {os.path.basename(latest)}, whose files are missing")
  if len(stamps) != len(paths):
    stamps = [os.path.getmtime(latest + ".index")] * len(paths)
  return StateFile(directory, "ok", paths, stamps)


def latest_in(directory: str) -> tuple[str | None, StateFile]:
  """The checkpoint eval and infer read: the state file's latest, else the newest found on
  disk; and the state file (to say when it was not used)."""
  state = read_state(directory)
  if state.usable:
    return state.paths[-1], state
  found = found_on_disk(directory)
  return (found[-1] if found else None), state


def write_state(directory: str, paths: list[str], timestamps: list[float],
                preserved: float) -> None:
  """Replaces ``directory/checkpoint`` (TensorFlow's text format, relative names)."""
  names = [os.path.relpath(p, directory) for p in paths]
  lines = [f"model_checkpoint_path: {json.dumps(names[-1])}"] if names else []
  lines += [f"all_model_checkpoint_paths: {json.dumps(n)}" for n in names]
  lines += [f"all_model_checkpoint_timestamps: {t}" for t in timestamps]
  lines.append(f"last_preserved_timestamp: {preserved}")
  atomic_write_text(os.path.join(directory, STATE_FILE), "\n".join(lines) + "\n")


def remove_partial_saves(directory: str) -> list[str]:
  """Cleans up after saves a kill cut short; returns the folders removed.

  ``ckpt-N_temp/`` holds the parts of a save that never finished (never listed): removed.
  ``ckpt-N_replaced/`` holds a checkpoint of the same step set aside during its save: moved
  back when the new one is incomplete, else removed."""
  removed = []
  if not os.path.isdir(directory):
    return removed
  for name in sorted(os.listdir(directory)):
    path = os.path.join(directory, name)
    if not (name.startswith("ckpt-") and os.path.isdir(path)):
      continue
    if name.endswith("_temp"):
      shutil.rmtree(path, ignore_errors=True)
      removed.append(path)
    elif name.endswith("_replaced"):
      prefix = path[:-len("_replaced")]
      if is_complete(prefix):
        shutil.rmtree(path, ignore_errors=True)
      else:
        remove(prefix)
        _move_back(path, prefix)
      removed.append(path)
  return removed


def remove(prefix: str) -> None:
  """Deletes the files of checkpoint ``prefix`` and the ``_temp`` folder of its save."""
  for path in files_of(prefix):
    os.remove(path)
  shutil.rmtree(prefix + "_temp", ignore_errors=True)


def _move_aside(prefix: str, files: list[str]) -> str:
  aside = prefix + "_replaced"
  shutil.rmtree(aside, ignore_errors=True)
  os.makedirs(aside)
  for path in files:
    os.replace(path, os.path.join(aside, os.path.basename(path)))
  return aside


def _move_back(aside: str, prefix: str) -> None:
  for name in os.listdir(aside):
    os.replace(os.path.join(aside, name), os.path.join(os.path.dirname(prefix), name))
  os.rmdir(aside)


class CheckpointFiles:
  """The checkpoints of one directory and the ones this run may rotate out.

  Args:
    checkpoint: the ``tf.train.Checkpoint`` to save.
    directory: where its ``ckpt-<step>`` files go.
    max_to_keep: checkpoints of the run's own line kept (older ones are deleted).
  """

  def __init__(self, checkpoint: Any, directory: str, max_to_keep: int):
    self.checkpoint = checkpoint
    self.directory = directory
    self.max_to_keep = max_to_keep
    self.state = read_state(directory)
    #: what the run may delete: the checkpoints of its line, oldest first (with save times)
    self.owned: dict[str, float] = {}
    #: checkpoints found unreadable: their step may be saved anew over them
    self.unreadable: set[str] = set()
    self._latest: str | None = None

  @property
  def latest_checkpoint(self) -> str | None:
    """The newest checkpoint: the one this run restored or saved last, else the newest
    listed or (no usable state file) found on disk."""
    if self._latest:
      return self._latest
    candidates = self.candidates()
    return candidates[0] if candidates else None

  @property
  def newest_own(self) -> str | None:
    """The checkpoint this run restored or saved last (None: neither yet)."""
    return self._latest

  def candidates(self) -> list[str]:
    """Checkpoints to resume from, newest first: the listed ones and any complete one on disk
    (one saved just before a kill, before the state file listed it)."""
    listed = [p for p in self.state.paths if is_complete(p)] if self.state.usable else []
    every = set(listed) | set(found_on_disk(self.directory))
    return sorted(every, key=lambda p: (step_of(p) or -1, p), reverse=True)

  def adopt(self, path: str) -> None:
    """After resuming from ``path``: the run's line is the listed checkpoints before it (none
    when the state file was not usable: checkpoints found without it are kept), and ``path``."""
    step = step_of(path) or 0
    if self.state.usable:
      for listed, stamp in zip(self.state.paths, self.state.timestamps):
        if listed != path and (step_of(listed) or 0) < step:
          self.owned[listed] = stamp
    self.owned[path] = os.path.getmtime(path + ".index")
    self._latest = path

  def holds(self, step: int) -> str | None:
    """The checkpoint of ``step`` if this run restored or saved it (its state is in memory)."""
    prefix = os.path.join(self.directory, f"ckpt-{step}")
    return prefix if prefix == self._latest and is_complete(prefix) else None

  def rewrite_state(self) -> None:
    """Lists the run's line (oldest first; the last is the latest)."""
    paths = list(self.owned)
    stamps = [self.owned[p] for p in paths]
    # TensorFlow's CheckpointManager, reading this, may then rotate all of them out, as we do
    write_state(self.directory, paths, stamps, min(stamps, default=time.time()) - 1.0)

  def save(self, step: int) -> str:
    """Writes ``ckpt-<step>``, lists it as the latest and rotates out the oldest of the run's
    line beyond ``max_to_keep``. If writing fails, the files of this save are removed (the
    state file still lists the previous checkpoint) and the error is raised."""
    prefix = os.path.join(self.directory, f"ckpt-{step}")
    existing = files_of(prefix)
    if existing and prefix not in self.unreadable and prefix not in self.owned:
      raise CheckpointError(
          f"{prefix} exists and was not written by this run: is another run training into "
          f"{self.directory}? Not overwritten; stop the other run or choose another --logdir")
    os.makedirs(self.directory, exist_ok=True)
    # A checkpoint of this step that is the run's own (or unreadable) stays whole until the
    # new one is written: moved aside, then deleted, or moved back if the save fails.
    aside = _move_aside(prefix, existing) if existing else None
    try:
      self.checkpoint.save_counter.assign_add(1)
      self.checkpoint.write(prefix)
      self.owned.pop(prefix, None)
      self.owned[prefix] = time.time()
      self.rewrite_state()  # before rotating: a kill while deleting leaves it listed
    except BaseException:
      self.owned.pop(prefix, None)
      try:
        remove(prefix)
        if aside:
          _move_back(aside, prefix)
          if prefix not in self.unreadable:
            self.owned[prefix] = os.path.getmtime(prefix + ".index")
      except OSError:
        pass
      raise
    if aside:
      shutil.rmtree(aside, ignore_errors=True)
    self.unreadable.discard(prefix)
    self._latest = prefix
    rotated = False
    while len(self.owned) > self.max_to_keep:
      oldest = next(iter(self.owned))
      del self.owned[oldest]
      with contextlib.suppress(OSError):  # one that cannot be deleted stays, unlisted
        remove(oldest)
      rotated = True
    if rotated:
      self.rewrite_state()
    return prefix
