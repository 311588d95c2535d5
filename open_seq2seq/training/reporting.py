"""What a run tells its user: console lines, progress bars, log files and TensorBoard.

:class:`StepStats` measures throughput (steps/s and the data layer's own unit per second:
tokens, seconds of audio ...); :class:`Reporter` decides what the chief prints and writes
at each step (loss lines, scalars, samples); :class:`Summaries` writes TensorBoard events
and a JSONL copy of the run-level scalars.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import Any, Callable, Iterator, Sequence, TextIO

import numpy as np
import tensorflow as tf

from open_seq2seq.errors import write_failure
from open_seq2seq.outputs import AudioSample, ImageSample, SampleSummary, TextSample
from open_seq2seq.utils.io import atomic_write_text


def counted(count: int, noun: str, plural: str | None = None) -> str:
  """``count`` and ``noun`` in the number it takes: "1 step", "3 steps", "1 batch"."""
  return f"{count} {noun if count == 1 else plural or noun + 's'}"


def log(message: str, stream: TextIO | None = None) -> None:
  """One console line with a timestamp (chief only: callers check)."""
  stream = stream or sys.stdout
  stream.write(f"[{time.strftime('%H:%M:%S')}] {message}\n")
  stream.flush()


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
      text = f"{self.label} [{bar}] {done}/{counted(self.total, 'batch', 'batches')}, " \
          f"{elapsed:.1f}s"
    else:
      text = f"{self.label} {counted(self.count, 'batch', 'batches')}, {elapsed:.1f}s"
    sys.stderr.write(text + end)
    sys.stderr.flush()


def _record_step(line: str) -> float:
  """The step of one ``metrics.jsonl`` line; infinity for a line a kill cut short."""
  try:
    return json.loads(line)["step"]
  except (ValueError, KeyError, TypeError):
    return float("inf")


@contextlib.contextmanager
def _named_write_failures(what: str) -> Iterator[None]:
  """A full disk, a size limit or a permission met writing ``what``: one line naming it."""
  try:
    yield
  except (OSError, tf.errors.OpError) as e:
    error = write_failure(e, what=f"could not write {what}")
    if error is None:
      raise
    raise error from None


class Summaries:
  """TensorBoard scalars (with a JSONL copy), histograms and samples, written by the chief."""

  def __init__(self, logdir: str | None, subdir: str = ""):
    self._writer = None
    self._jsonl = None
    if logdir is not None:
      self._events = os.path.join(logdir, subdir)
      with _named_write_failures(f"the TensorBoard events of {self._events}"):
        self._writer = tf.summary.create_file_writer(self._events)
      self._jsonl = os.path.join(logdir, "metrics.jsonl")

  def _writing(self) -> contextlib.AbstractContextManager:
    return _named_write_failures(f"the TensorBoard events of {self._events}")

  def scalars(self, step: int, values: dict[str, float], prefix: str = "",
              jsonl: bool = True) -> None:
    """Scalars in TensorBoard, and in ``metrics.jsonl`` unless ``jsonl`` is False."""
    if self._writer is None or not values:
      return
    with self._writing(), self._writer.as_default(step=step):
      for name, value in values.items():
        tf.summary.scalar(prefix + name, value)
      self._writer.flush()
    if not jsonl:
      return
    record = {"step": step, "time": round(time.time(), 3),
              **{prefix + k: float(v) for k, v in values.items()}}
    with _named_write_failures(self._jsonl), open(self._jsonl, "a", encoding="utf-8") as f:
      f.write(json.dumps(record) + "\n")

  def forget_after(self, step: int) -> None:
    """Drops the ``metrics.jsonl`` records of steps after ``step`` (a run resumed from an
    older checkpoint logs those steps again; TensorBoard itself keeps the newest event of a
    step)."""
    if self._jsonl is None or not os.path.exists(self._jsonl):
      return
    with open(self._jsonl, encoding="utf-8") as f:
      lines = f.readlines()
    kept = [line for line in lines if _record_step(line) <= step]
    if len(kept) != len(lines):
      with _named_write_failures(self._jsonl):
        atomic_write_text(self._jsonl, "".join(kept))

  def histograms(self, step: int, values: dict[str, Any], prefix: str = "") -> None:
    """TensorBoard histograms of tensors or arrays (``gradients/<path>`` ...)."""
    if self._writer is None or not values:
      return
    with self._writing(), self._writer.as_default(step=step):
      for name, value in values.items():
        tf.summary.histogram(prefix + name, value)
      self._writer.flush()

  def samples(self, step: int, items: Sequence[SampleSummary], prefix: str = "") -> None:
    """Images, audio clips and text a model made of a sample batch (TensorBoard only)."""
    if self._writer is None or not items:
      return
    with self._writing(), self._writer.as_default(step=step):
      for item in items:
        name = prefix + item.name
        if isinstance(item, ImageSample):
          image = np.asarray(item.image, np.float32)
          image = image[..., None] if image.ndim == 2 else image
          tf.summary.image(name, image[None])
        elif isinstance(item, AudioSample):
          clip = np.asarray(item.samples, np.float32).reshape(1, -1, 1)
          tf.summary.audio(name, clip, item.sample_rate)
        elif isinstance(item, TextSample):
          tf.summary.text(name, item.text)
        else:
          raise TypeError(f"unknown sample summary {type(item).__name__}")
      self._writer.flush()


class StepStats:
  """Throughput of training: a window for the console line, and every step for benchmarks.

  Args:
    unit: name of the data layer's throughput unit ("tokens", "s of audio" ...).
    unit_scale: the unit per counted item (e.g. seconds per feature frame).
  """

  def __init__(self, unit: str = "tokens", unit_scale: float = 1.0):
    self.unit = unit
    self.unit_scale = unit_scale
    self.step_times: list[float] = []
    self.step_units: list[float] = []
    #: name -> [start time, units, steps]: "console" (the loss line), "summaries" (scalars)
    self._windows: dict[str, list[float]] = {}
    self.reset_window()
    self.reset_window("summaries")

  @property
  def summary_key(self) -> str:
    """The scalar name of the throughput: ``tokens_per_s``, ``s_of_audio_per_s`` ..."""
    return "_".join(self.unit.replace("/", " ").split()) + "_per_s"

  def reset_window(self, name: str = "console") -> None:
    self._windows[name] = [time.time(), 0.0, 0]

  def add(self, seconds: float, counted: int) -> None:
    units = counted * self.unit_scale
    self.step_times.append(seconds)
    self.step_units.append(units)
    for window in self._windows.values():
      window[1] += units
      window[2] += 1

  def window(self, name: str = "console") -> tuple[float, float]:
    """(seconds per step, units per second) since the last :meth:`reset_window` of ``name``."""
    start, units, steps = self._windows[name]
    elapsed = max(time.time() - start, 1e-9)
    return elapsed / max(steps, 1), units / elapsed

  def benchmark(self, warmup: int) -> dict[str, Any]:
    """Median step time and units/s over the steps after ``warmup``."""
    start = min(warmup, max(len(self.step_times) - 1, 0))
    times = np.array(self.step_times[start:])
    units = np.array(self.step_units[start:])
    return {"median_step_time": float(np.median(times)) if len(times) else float("nan"),
            "units_per_s": float(np.median(units / times)) if len(times) else float("nan"),
            "unit": self.unit, "steps_measured": int(len(times))}


def every(period: int | None, step: int) -> bool:
  """Whether something due every ``period`` steps is due at ``step`` (None/0: never)."""
  return bool(period) and step % period == 0


class Reporter:
  """What the chief prints and writes after each training step; other workers stay quiet.

  Args:
    params: the run's config (print_loss_steps, save_summaries_steps, print_samples_steps,
      summaries).
    summaries: the TensorBoard/JSONL writer.
    stats: throughput of the run.
    is_chief: only the chief reports.
    steps_per_epoch: to print the epoch.
    has_loss_scale: whether ``loss_scale`` is a real scale worth a summary.
  """

  def __init__(self, params: dict, summaries: Summaries, stats: StepStats, is_chief: bool,
               steps_per_epoch: int, has_loss_scale: bool):
    self.params = params
    self.summaries = summaries
    self.stats = stats
    self.is_chief = is_chief
    self.steps_per_epoch = max(steps_per_epoch, 1)
    self.has_loss_scale = has_loss_scale

  def log(self, message: str) -> None:
    if self.is_chief:
      log(message)

  def step(self, step: int, values: dict[str, Any],
           samples: Callable[[], tuple[list[str], list[SampleSummary]]] | None = None,
           variable_summaries: Any = None) -> None:
    """Scalars, the console loss line and samples when they are due at ``step``.

    Args:
      variable_summaries: the step's per-variable summaries (a ``VariableSummaries`` from
        :mod:`open_seq2seq.training.step_summaries`), or None; read only when due.
    """
    if not self.is_chief:
      return
    params = self.params
    if every(params["save_summaries_steps"], step):
      scalars = {"loss": float(values["loss"])}
      for name in params["summaries"]:
        if name in values and (name != "loss_scale" or self.has_loss_scale):
          scalars[name] = float(values[name])
      # the other update groups' (a model trained by several optimizers)
      scalars.update({name: float(value) for name, value in values.items()
                      if name.startswith("loss/") or (name.startswith("learning_rate/")
                                                      and "learning_rate" in scalars)})
      if "global_clipped_gradient_norm" in values and "global_gradient_norm" in scalars:
        scalars["global_clipped_gradient_norm"] = float(values["global_clipped_gradient_norm"])
      # throughput since the last summaries (for curves; the console line has its own window)
      seconds, rate = self.stats.window("summaries")
      self.stats.reset_window("summaries")
      scalars.update({"step_time": seconds, self.stats.summary_key: rate})
      self.summaries.scalars(step, scalars, prefix="train/")
      if variable_summaries is not None:
        # One tag per variable: TensorBoard only, under OpenSeq2Seq's top-level names.
        self.summaries.scalars(step, variable_summaries.scalars(), jsonl=False)
        self.summaries.histograms(step, variable_summaries.histograms())
    if every(params["print_loss_steps"], step):
      seconds, rate = self.stats.window()
      others = ", ".join(f"{name[5:]} {format_number(float(value))}"
                         for name, value in values.items() if name.startswith("loss/"))
      log(f"step {step:>6} | epoch {step / self.steps_per_epoch:6.2f} | "
          f"loss {format_number(float(values['loss']))}"
          f"{f' ({others})' if others else ''} | "
          f"lr {format_number(float(values['learning_rate']))} | "
          f"{seconds:.3f} s/step | {rate:,.0f} {self.stats.unit}/s")
      self.stats.reset_window()
    if samples is not None and every(params["print_samples_steps"], step):
      lines, items = samples()
      for line in lines:
        log(line)
      self.summaries.samples(step, items, prefix="train_samples/")


def format_metric(value: Any) -> str:
  """A metric on the console: a count (an integer: ``eval_tokens``) as one, any other value
  as :func:`format_number` writes a float."""
  if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
    return str(int(value))
  return format_number(float(value))


def format_number(value: Any) -> str:
  if isinstance(value, float):
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
      return f"{value:.3e}"
    return f"{value:.4f}"
  return str(value)
