"""Two training runs started together into one log directory: one trains, the other refuses
in one line naming it (pid, host, start time); the lock a killed run leaves is taken over by
the next run with a notice. Real processes, bounded in time."""

import contextlib
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.helpers import toy

pytestmark = pytest.mark.slow

DEADLINE = 240  # seconds for the whole test: both processes are killed by then


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return toy.make_toy_data(str(tmp_path_factory.mktemp("toy")), train=64, dev=8, test=8)


def _args(data_dir, logdir, *extra):
  return ([f"--config_file={toy.TOY_CONFIG}", "--mode=train", f"--logdir={logdir}"] +
          toy.TINY_MODEL + toy.data_overrides(data_dir) + toy.split_overrides(data_dir, "train")
          + ["--save_summaries_steps=1", "--save_checkpoint_steps=5", *extra])


class _Run:
  """``run.py ARGS`` started now: a cold process, or (``warm``) a run forked from the warm
  server in a thread (one TensorFlow import less); ``pid`` is known once it holds the lock."""

  def __init__(self, args, out_dir, name, warm=False, lock=None):
    self.name, self.warm, self.lock, self.result = name, warm, lock, None
    if warm:
      self.thread = threading.Thread(target=self._warm, args=(args,), daemon=True)
      self.thread.start()
      return
    self.err_path = os.path.join(out_dir, f"{name}.err")
    with open(self.err_path, "w", encoding="utf-8") as err:
      self.process = subprocess.Popen(  # pylint: disable=consider-using-with
          [sys.executable, os.path.join(toy.ROOT, "run.py"), *args], stdout=subprocess.DEVNULL,
          stderr=err, cwd=toy.ROOT,
          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=toy.ROOT))

  def _warm(self, args):
    self.result = toy.run_cli(args, timeout=DEADLINE)

  @property
  def ended(self) -> bool:
    return not self.thread.is_alive() if self.warm else self.process.poll() is not None

  @property
  def status(self) -> int:
    return self.result.returncode if self.warm else self.process.returncode

  @property
  def stderr(self) -> str:
    return self.result.stderr if self.warm else open(self.err_path, encoding="utf-8").read()

  def pid(self) -> int:
    """The pid of the run (the warm one's as its lock names it)."""
    if not self.warm:
      return self.process.pid
    return json.loads(open(self.lock, encoding="utf-8").read())["pid"]

  def kill(self) -> None:
    """kill -9 (no Python code runs: the lock file stays); waits for the end."""
    if not self.ended:
      with contextlib.suppress(ProcessLookupError, OSError, ValueError):
        os.kill(self.pid(), signal.SIGKILL)
    if self.warm:
      self.thread.join(60)
    else:
      self.process.wait(60)


def _wait_for(condition, deadline, what):
  while not condition():
    assert time.monotonic() < deadline, f"timed out waiting for {what}"
    time.sleep(0.2)


def test_two_runs_into_one_logdir_one_trains_the_other_refuses(data_dir, tmp_path):
  logdir = tmp_path / "run"
  deadline = time.monotonic() + DEADLINE
  args = _args(data_dir, logdir, "--max_steps=100000")
  runs = [_Run(args, str(tmp_path), "cold"),
          _Run(args, str(tmp_path), "warm", warm=True, lock=str(logdir / ".lock"))]
  try:
    _wait_for(lambda: any(r.ended for r in runs), deadline, "one run to refuse")
    refused = next(r for r in runs if r.ended)
    winner = next(r for r in runs if r is not refused)
    assert not winner.ended, "both runs ended"
    _wait_for(lambda: glob.glob(str(logdir / "ckpt-*.index")) or winner.ended, deadline,
              "a checkpoint")
    winner_pid = winner.pid()
  finally:
    for run in runs:
      run.kill()  # the winner: kill -9, its lock stays behind
  lines = [line for line in refused.stderr.splitlines() if line.strip()]
  assert refused.status == 2 and len(lines) == 1, refused.stderr
  assert lines[0].startswith(f"error: {logdir} is in use by another run (pid {winner_pid} on "
                             f"host {socket.gethostname()}, started 20"), lines[0]
  assert "--mode=train): wait for it to end or stop it, or choose another --logdir" in lines[0]
  steps = [json.loads(line)["step"] for line in open(logdir / "metrics.jsonl", encoding="utf-8")
           if line.strip().endswith("}")]
  assert steps and len(steps) == len(set(steps)), steps  # one writer: no step twice

  # The next run takes over the lock the killed one left, with a notice, and resumes.
  newest = max(int(p.rsplit("-", 1)[1][:-len(".index")])
               for p in glob.glob(str(logdir / "ckpt-*.index")))
  again = toy.run_cli(_args(data_dir, logdir, "--continue_learning",
                            f"--max_steps={newest + 1}"),
                      timeout=max(30, deadline - time.monotonic()))
  assert again.returncode == 0, again.stderr[-3000:]
  assert f"notice: took over the lock {logdir}/.lock of a run that is no longer running (pid " \
         f"{winner_pid} on host {socket.gethostname()}" in again.stderr
  assert f"Finished training at step {newest + 1}" in again.stdout
  assert not os.path.exists(logdir / ".lock")
