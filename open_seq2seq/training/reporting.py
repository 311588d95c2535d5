"""What a run tells its user: console lines, progress bars, log files and TensorBoard."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, TextIO

import tensorflow as tf


def log(message: str, stream: TextIO | None = None) -> None:
  """One console line with a timestamp (chief only: callers check)."""
  stream = stream or sys.stdout
  stream.write(f"[{time.strftime('%H:%M:%S')}] {message}\n")
  stream.flush()


class Tee:
  """Writes to a stream and to a log file (``--enable_logs``)."""

  def __init__(self, stream: TextIO, path: str):
    self._stream = stream
    self._file = open(path, "a", encoding="utf-8", buffering=1)

  def write(self, data: str) -> int:
    self._file.write(data)
    return self._stream.write(data)

  def flush(self) -> None:
    self._stream.flush()
    self._file.flush()

  def isatty(self) -> bool:
    return self._stream.isatty()

  def fileno(self) -> int:
    return self._stream.fileno()


def enable_file_logs(logdir: str, argv: list[str]) -> None:
  """Copies stdout/stderr into ``logdir/logs/`` and records the command line."""
  logs = os.path.join(logdir, "logs")
  os.makedirs(logs, exist_ok=True)
  with open(os.path.join(logs, "command.txt"), "a", encoding="utf-8") as f:
    f.write(" ".join(argv) + "\n")
  sys.stdout = Tee(sys.stdout, os.path.join(logs, "stdout.log"))
  sys.stderr = Tee(sys.stderr, os.path.join(logs, "stderr.log"))


class ProgressBar:
  """A text progress bar on stderr for eval and infer (redrawn in place on a terminal)."""

  def __init__(self, label: str, total: int | None, enabled: bool = True):
    self.label = label
    self.total = total
    self.count = 0
    self.enabled = enabled
    self._tty = sys.stderr.isatty()
    self._start = time.time()
    self._last = 0.0

  def update(self, n: int = 1) -> None:
    self.count += n
    now = time.time()
    if self.enabled and (self._tty and now - self._last > 0.2 or not self._tty and
                         now - self._last > 30):
      self._draw(end="\r" if self._tty else "\n")
      self._last = now

  def close(self) -> None:
    if self.enabled:
      self._draw(end="\n")

  def _draw(self, end: str) -> None:
    elapsed = time.time() - self._start
    if self.total:
      done = min(self.count, self.total)
      width = 30
      fill = int(width * done / self.total)
      bar = "#" * fill + "." * (width - fill)
      text = f"{self.label} [{bar}] {done}/{self.total} batches, {elapsed:.1f}s"
    else:
      text = f"{self.label} {self.count} batches, {elapsed:.1f}s"
    sys.stderr.write(text + end)
    sys.stderr.flush()


class Summaries:
  """TensorBoard scalars and a JSONL copy, written by the chief only."""

  def __init__(self, logdir: str | None, subdir: str = ""):
    self._writer = None
    self._jsonl = None
    if logdir is not None:
      self._writer = tf.summary.create_file_writer(os.path.join(logdir, subdir))
      self._jsonl = os.path.join(logdir, "metrics.jsonl")

  def scalars(self, step: int, values: dict[str, float], prefix: str = "") -> None:
    if self._writer is None:
      return
    with self._writer.as_default(step=step):
      for name, value in values.items():
        tf.summary.scalar(prefix + name, value)
    self._writer.flush()
    record = {"step": step, **{prefix + k: float(v) for k, v in values.items()}}
    with open(self._jsonl, "a", encoding="utf-8") as f:
      f.write(json.dumps(record) + "\n")


def format_number(value: Any) -> str:
  if isinstance(value, float):
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
      return f"{value:.3e}"
    return f"{value:.4f}"
  return str(value)
