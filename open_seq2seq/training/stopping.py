"""Stopping on SIGINT and SIGTERM: every worker stops after the same step, and the chief
saves a checkpoint.

SIGTERM is what SLURM, Kubernetes and ``mpiexec`` send before they kill a job; SIGINT is
Ctrl-C. While :func:`handling_signals` is in effect, the first of either signal

* during a training step only *requests* a stop: the training loop passes its vote into the
  next step, the step sums the votes of every replica of every process (with the gradients,
  in the same all-reduce), and when any worker voted, all of them leave the loop after that
  same step — so no worker is left waiting in a collective for one that already quit —
  and the trainer saves a checkpoint and re-raises;
* anywhere else (building, evaluating, saving) raises :class:`TrainingStopped` at once.

A second signal always raises at once. :class:`TrainingStopped` is a ``KeyboardInterrupt``,
so the code that saved on Ctrl-C saves on both; the command line exits with 128 + the
signal's number (130 for SIGINT, 143 for SIGTERM).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator


class TrainingStopped(KeyboardInterrupt):
  """Training stopped on a signal (``signum``) received here or by another worker."""

  def __init__(self, signum: int = signal.SIGTERM, by_peer: bool = False):
    super().__init__(signal.Signals(signum).name)
    self.signum = signum
    self.by_peer = by_peer

  @property
  def exit_status(self) -> int:
    return 128 + int(self.signum)


class _State:
  """What the handler and the loop share (the handler runs in the main thread)."""

  def __init__(self):
    self.deferring = False
    self.requested: int | None = None

  def handle(self, signum: int, frame) -> None:  # pylint: disable=unused-argument
    if self.deferring and self.requested is None:
      self.requested = signum
      return
    self.requested = self.requested or signum
    raise TrainingStopped(signum)


_state = _State()

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def handling_signals() -> Iterator[None]:
  """Installs the SIGINT/SIGTERM handlers for the block (main thread only; elsewhere the
  block runs with the handlers it had)."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  previous = {sig: signal.signal(sig, _state.handle) for sig in SIGNALS}
  _state.requested = None
  try:
    yield
  finally:
    for sig, handler in previous.items():
      signal.signal(sig, handler)
    _state.deferring = False


@contextlib.contextmanager
def deferred() -> Iterator[None]:
  """Within the block a first signal only requests a stop (see :func:`vote`)."""
  previous = _state.deferring
  _state.deferring = True
  try:
    yield
  finally:
    _state.deferring = previous


def vote() -> float:
  """1.0 once this process was asked to stop, else 0.0: the value the step sums."""
  return 1.0 if _state.requested is not None else 0.0


def stop(votes: float) -> None:
  """Raises :class:`TrainingStopped` when the step's summed ``votes`` ask for a stop."""
  if votes > 0:
    requested = _state.requested
    raise TrainingStopped(requested if requested is not None else signal.SIGTERM,
                          by_peer=requested is None)


def stopped_by(error: KeyboardInterrupt) -> str:
  """How a stop is described: by which signal, and whether another worker received it."""
  if isinstance(error, TrainingStopped):
    return f"Stopped by {error.args[0]}" + (" (sent to another worker)" if error.by_peer else "")
  return "Interrupted"


__all__ = ["TrainingStopped", "handling_signals", "deferred", "vote", "stop", "stopped_by",
           "SIGNALS"]
