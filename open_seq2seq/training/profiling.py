"""TensorFlow's profiler over a range of training steps (``profile_steps``).

``profile_steps: [first, last]`` traces the updates ``first`` to ``last`` (global steps,
both included) on every worker: the chief writes into the run's logdir, worker ``i`` into
``<logdir>/worker-<i>`` (each becomes a run in TensorBoard's Profile tab, which needs the
``tensorboard-plugin-profile`` package). ``scripts/trace_summary.py`` reads the same traces
without TensorBoard and prints where each worker's step time went.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

import tensorflow as tf

from open_seq2seq.training.reporting import log


def trace_dir(logdir: str, worker_index: int) -> str:
  """Where worker ``worker_index`` writes its trace."""
  return logdir if worker_index == 0 else os.path.join(logdir, f"worker-{worker_index}")


class StepProfiler:
  """Starts the profiler before update ``first`` and stops it after update ``last``."""

  def __init__(self, steps: list[int] | None, logdir: str, worker_index: int):
    self.first, self.last = steps if steps else (None, None)
    self.directory = trace_dir(logdir, worker_index)
    self.is_chief = worker_index == 0
    self.running = False
    self.done = False

  def before(self, step: int) -> None:
    """Called before the update that becomes global step ``step`` runs."""
    if self.first is None or self.running or self.done or not self.first <= step <= self.last:
      return
    tf.profiler.experimental.start(self.directory)
    self.running = True

  def after(self, step: int) -> None:
    """Called once global step ``step`` is done."""
    if self.running and step >= self.last:
      self.stop()

  def stop(self) -> None:
    if not self.running:
      return
    tf.profiler.experimental.stop()
    self.running, self.done = False, True
    if self.is_chief:
      log(f"profiled steps {self.first}-{self.last}: TensorBoard's Profile tab, or python "
          f"scripts/trace_summary.py {self.directory}")


@contextlib.contextmanager
def profiled_steps(steps: list[int] | None, logdir: str,
                   worker_index: int) -> Iterator[StepProfiler]:
  """A StepProfiler that is stopped (its trace written) however the loop ends."""
  profiler = StepProfiler(steps, logdir, worker_index)
  try:
    yield profiler
  finally:
    profiler.stop()
