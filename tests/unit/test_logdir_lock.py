"""The logdir lock: one training run per log directory. A second run refuses in one line
naming the holder; a lock left by a killed run is taken over with a notice; the lock goes
away on every exit path that runs Python (errors, SIGTERM). Real processes, no TensorFlow."""

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from open_seq2seq.errors import CheckpointError
from open_seq2seq.training import logdir_lock
from open_seq2seq.training.logdir_lock import LOCK_FILE, LogdirLock

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT = 30


def _python(code, **kwargs):
  """A Python process running ``code`` (the package importable, no TensorFlow)."""
  return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT), text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def _holding(logdir):
  """A process that takes the lock, says so and holds it until its stdin closes."""
  process = _python(f"""
      import sys
      from open_seq2seq.training.logdir_lock import LogdirLock
      with LogdirLock({str(logdir)!r}, "train"):
        print("locked", flush=True)
        sys.stdin.read()
      """, stdin=subprocess.PIPE)
  assert process.stdout.readline().strip() == "locked", process.stderr.read()
  return process


def test_a_second_run_refuses_naming_the_holder_until_it_ends(tmp_path):
  process = _holding(tmp_path)
  try:
    with pytest.raises(CheckpointError) as refused:
      LogdirLock(str(tmp_path)).acquire()
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path} is in use by another run (pid {process.pid} on host "
                              f"{socket.gethostname()}, started 20")
    assert "--mode=train): wait for it to end or stop it, or choose another --logdir" in message
    assert logdir_lock.holder(str(tmp_path))["pid"] == process.pid
  finally:
    process.stdin.close()
    process.wait(TIMEOUT)
  assert not os.path.exists(tmp_path / LOCK_FILE)  # released: the file is gone
  assert logdir_lock.holder(str(tmp_path)) is None
  with LogdirLock(str(tmp_path)) as lock:
    assert lock.notice is None


def test_a_lock_left_by_a_killed_run_is_taken_over_with_a_notice(tmp_path):
  process = _holding(tmp_path)
  process.kill()  # kill -9: no Python code runs, the lock file stays
  process.wait(TIMEOUT)
  record = json.loads((tmp_path / LOCK_FILE).read_text())
  assert record["pid"] == process.pid
  assert logdir_lock.holder(str(tmp_path)) is None
  with LogdirLock(str(tmp_path)) as lock:
    assert lock.notice.startswith(f"took over the lock {tmp_path / LOCK_FILE} of a run that is "
                                  f"no longer running (pid {process.pid} on host ")
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()


def test_two_runs_started_together_one_holds_the_other_refuses(tmp_path):
  go = tmp_path / "go"
  code = f"""
      import os, sys, time
      from open_seq2seq.errors import CheckpointError
      from open_seq2seq.training.logdir_lock import LogdirLock
      while not os.path.exists({str(go)!r}):
        time.sleep(0.001)
      try:
        with LogdirLock({str(tmp_path / "run")!r}, "train"):
          print("locked", flush=True)
          time.sleep(1.0)
      except CheckpointError as e:
        print("refused:", e, flush=True)
      """
  processes = [_python(code) for _ in range(2)]
  time.sleep(0.3)
  go.touch()
  outputs = sorted(p.communicate(timeout=TIMEOUT)[0].strip() for p in processes)
  assert outputs[0] == "locked", outputs
  assert outputs[1].startswith(f"refused: {tmp_path / 'run'} is in use by another run (pid "), \
      outputs
  assert not os.path.exists(tmp_path / "run")  # created by the lock, removed when released


def test_sigterm_and_errors_release_the_lock(tmp_path):
  process = _python(f"""
      import os, signal, time
      from open_seq2seq.training import logdir_lock, stopping
      with stopping.handling_signals(), logdir_lock.for_run({str(tmp_path)!r}, "train", True):
        print("locked", flush=True)
        time.sleep(30)
      """)
  assert process.stdout.readline().strip() == "locked"
  process.send_signal(signal.SIGTERM)
  _, stderr = process.communicate(timeout=TIMEOUT)
  assert "TrainingStopped" in stderr and not os.path.exists(tmp_path / LOCK_FILE)
  with pytest.raises(RuntimeError):
    with logdir_lock.for_run(str(tmp_path), "train_eval", True):
      assert os.path.exists(tmp_path / LOCK_FILE)
      raise RuntimeError("a bug")
  assert not os.path.exists(tmp_path / LOCK_FILE)


def test_only_the_chief_of_a_training_run_locks(tmp_path, capsys):
  with logdir_lock.for_run(str(tmp_path), "train", is_chief=False) as lock:
    assert lock is None and not os.path.exists(tmp_path / LOCK_FILE)
  with logdir_lock.for_run(str(tmp_path), "train", True, benchmark=True) as lock:
    assert lock is None
  with logdir_lock.for_run(str(tmp_path), "train", True):
    # eval beside a running training: it takes no lock, and says whose run it reads
    with logdir_lock.for_run(str(tmp_path), "eval", True) as lock:
      assert lock is None
  assert f"notice: a training run holds {tmp_path} (pid {os.getpid()}" in capsys.readouterr().err


def test_without_file_locks_the_record_decides(tmp_path, monkeypatch):
  def no_flock(fd, operation):
    raise OSError(errno.ENOLCK, "No locks available")
  monkeypatch.setattr(logdir_lock.fcntl, "flock", no_flock)
  parent = {"pid": os.getppid(), "host": socket.gethostname(), "started": "earlier",
            "mode": "train", "process_start": logdir_lock._process_start(os.getppid())}
  (tmp_path / LOCK_FILE).write_text(json.dumps(parent))
  with pytest.raises(CheckpointError, match=f"in use by another run \\(pid {os.getppid()} "):
    LogdirLock(str(tmp_path)).acquire()
  (tmp_path / LOCK_FILE).write_text(json.dumps({**parent, "host": "elsewhere"}))
  with pytest.raises(CheckpointError, match="on host elsewhere"):
    LogdirLock(str(tmp_path)).acquire()
  # the same pid, but a later process (another start time): the holder has ended
  (tmp_path / LOCK_FILE).write_text(json.dumps({**parent, "process_start": "1"}))
  with LogdirLock(str(tmp_path)) as lock:
    assert "took over the lock" in lock.notice


def test_a_logdir_made_by_the_refused_one_of_two_starts_is_removed_by_the_winner(tmp_path):
  """The race the two-process test can hit: the run that creates the logdir loses the lock.
  It cannot remove the folder (the winner's lock is in it), so it leaves a marker, and the
  winner removes both when it ends."""
  logdir = str(tmp_path / "run")
  loser = LogdirLock(logdir, "train")
  os.makedirs(logdir)  # the loser's makedirs came first ...
  loser._created_dir = True  # pylint: disable=protected-access
  with LogdirLock(logdir, "train"):  # ... the winner found the folder and took the lock
    with pytest.raises(CheckpointError):
      loser.acquire()
    assert sorted(os.listdir(logdir)) == [LOCK_FILE, logdir_lock.CREATED_MARKER]
  assert not os.path.exists(logdir)
  # a folder the winner's run used is left alone (only an empty one is removed)
  os.makedirs(logdir)
  loser = LogdirLock(logdir, "train")
  loser._created_dir = True  # pylint: disable=protected-access
  with LogdirLock(logdir, "train"):
    with pytest.raises(CheckpointError):
      loser.acquire()
    (tmp_path / "run" / "ckpt-1.index").write_text("")
  assert os.listdir(logdir) == ["ckpt-1.index"]
