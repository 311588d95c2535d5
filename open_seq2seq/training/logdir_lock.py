"""One writer per log directory: the lock a training run's chief holds for the life of the run.

``logdir/.lock`` holds who took it (pid, host, start time, mode) and an exclusive ``flock``
that the kernel drops when the process ends, however it ends: a second run into the same
logdir refuses in one line naming the holder, and a lock left by a run that was killed is
taken over with a notice. The holder's record is checked too, for filesystems where
``flock`` does not reach other processes: a holder that is still running on this host (same
pid, same process start time) is never taken over. The lock file is removed when the run
ends (every exit path that runs Python: errors, SIGINT, SIGTERM).

Only the chief (rank 0) of a job locks; eval and infer do not (they only read the run's
checkpoints, and may run beside its training), but say when a training run holds the
directory.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from typing import Iterator

from open_seq2seq.errors import CheckpointError
from open_seq2seq.utils.io import check_writable

LOCK_FILE = ".lock"
#: Left in a logdir created by a run refused at the same moment (see release).
CREATED_MARKER = ".lock.created"
#: errors of flock on filesystems without locks (some network filesystems)
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


def _process_start(pid: int) -> str | None:
  """The start time of process ``pid`` (clock ticks since boot), telling it from a later
  process that reuses the pid; None when it does not exist (or /proc is unavailable)."""
  try:
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
      fields = f.read().rsplit(")", 1)[1].split()
  except OSError:
    return None
  # a zombie (killed, not yet reaped) has ended too
  return fields[19] if len(fields) > 19 and fields[0] not in ("Z", "X") else None


def _alive_here(holder: dict) -> bool:
  """Whether the process a lock record names is still running on this host."""
  if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
    return False
  start = _process_start(holder["pid"])
  if start is None:
    try:
      os.kill(holder["pid"], 0)
    except ProcessLookupError:
      return False
    except PermissionError:
      return True
    return not os.path.isdir("/proc")
  return holder.get("process_start") in (None, start)


def refusal(logdir: str, holder: dict) -> CheckpointError:
  """The one-line error of a run refused because ``holder`` holds ``logdir``."""
  who = describe(holder) if holder else "a run that left no record"
  return CheckpointError(
      f"{logdir} is in use by another run ({who}): wait for it to end or stop it, or choose "
      f"another --logdir (if no run uses it, remove {os.path.join(logdir, LOCK_FILE)})")


def describe(holder: dict) -> str:
  return (f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, started "
          f"{holder.get('started', '?')}, --mode={holder.get('mode', '?')}")


def _read(fd: int) -> dict | None:
  """The record in the lock file (None: empty); {} when it is not a record."""
  os.lseek(fd, 0, os.SEEK_SET)
  data = b""
  while chunk := os.read(fd, 65536):
    data += chunk
  if not data.strip():
    return None
  try:
    record = json.loads(data.decode("utf-8"))
  except (UnicodeDecodeError, ValueError):
    return {}
  return record if isinstance(record, dict) else {}


class LogdirLock:
  """The lock of ``logdir``, taken by :meth:`acquire` and given back by :meth:`release`."""

  def __init__(self, logdir: str, mode: str = "train"):
    self.logdir = logdir
    self.path = os.path.join(logdir, LOCK_FILE)
    self.mode = mode
    self._fd: int | None = None
    self._created_dir = False
    #: a notice for the user (a stale lock taken over, locks unsupported), or None
    self.notice: str | None = None

  def acquire(self) -> "LogdirLock":
    """Takes the lock, or raises CheckpointError naming the run that holds it."""
    if not os.path.isdir(self.logdir):
      with contextlib.suppress(FileExistsError):  # a run starting at the same moment made it
        os.makedirs(self.logdir)
        self._created_dir = True
    for _ in range(10):  # retried when the holder removed the file while we opened it
      fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
      try:
        flocked = self._flock(fd)
        if not _same_file(fd, self.path):
          os.close(fd)
          continue
        record = _read(fd)
        if record is not None:
          # flock free: the holder has ended, unless this filesystem's flock does not reach
          # it (then its record decides; another host's run cannot be checked)
          elsewhere = record.get("host") != socket.gethostname()
          if _alive_here(record) and record.get("pid") != os.getpid() or \
              not flocked and (elsewhere or not record):
            raise self._refusal(record)
          self.notice = (f"took over the lock {self.path} of a run that is no longer running "
                         f"({describe(record) if record else 'an unreadable record'})")
        self._write(fd)
      except BaseException:
        os.close(fd)
        self._hand_over_created_dir()
        raise
      self._fd = fd
      return self
    raise CheckpointError(f"{self.path}: could not take the lock (it kept changing); "
                          f"is another run starting into {self.logdir}?")

  def _flock(self, fd: int) -> bool:
    """Takes the flock; False where the filesystem has none (then the record decides)."""
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      return True
    except BlockingIOError:
      record = _read(fd)
      if not record or not _alive_here(record) and record.get("host") == socket.gethostname():
        time.sleep(0.2)  # the holder has just taken over and not yet written its record
        record = _read(fd)
      raise self._refusal(record or {}) from None
    except OSError as e:
      if e.errno not in _NO_LOCKS:
        raise
      self.notice = f"{self.path}: this filesystem has no file locks; relying on the pid"
      return False

  def _refusal(self, holder: dict) -> CheckpointError:
    return refusal(self.logdir, holder)

  def _write(self, fd: int) -> None:
    record = {"pid": os.getpid(), "host": socket.gethostname(),
              "started": time.strftime("%Y-%m-%d %H:%M:%S"), "mode": self.mode,
              "process_start": _process_start(os.getpid()),
              "command": " ".join(sys.argv)[:500]}
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, (json.dumps(record) + "\n").encode("utf-8"))
    os.fsync(fd)

  def release(self) -> None:
    """Removes the lock file (while still holding the lock) and lets go of it."""
    if self._fd is None:
      return
    fd, self._fd = self._fd, None
    with contextlib.suppress(OSError):
      if _same_file(fd, self.path):
        os.remove(self.path)
    os.close(fd)
    with contextlib.suppress(OSError):  # made by a run that started with this one and lost
      os.remove(os.path.join(self.logdir, CREATED_MARKER))
      self._created_dir = True
    self._remove_created_dir()

  def _hand_over_created_dir(self) -> None:
    """Refused (or failed) after creating the logdir: removed again if empty; if it holds
    only the lock of the run that started at the same moment and won, a marker tells that
    run to remove it when it ends."""
    if not self._created_dir:
      return
    with contextlib.suppress(OSError):
      if os.listdir(self.logdir) == [os.path.basename(self.path)]:
        marker = os.path.join(self.logdir, CREATED_MARKER)
        with open(marker, "w", encoding="utf-8"):
          pass
        if os.path.exists(self.path):
          return
        os.remove(marker)  # the winner ended meanwhile
    self._remove_created_dir()

  def _remove_created_dir(self) -> None:
    """A logdir this lock created and nothing else used is removed again."""
    if self._created_dir:
      with contextlib.suppress(OSError):
        os.rmdir(self.logdir)

  def __enter__(self) -> "LogdirLock":
    return self.acquire()

  def __exit__(self, *exc) -> None:
    self.release()


def _same_file(fd: int, path: str) -> bool:
  try:
    return os.fstat(fd).st_ino == os.stat(path).st_ino
  except FileNotFoundError:
    return False


def holder(logdir: str, this_host: bool = False) -> dict | None:
  """The record of the run that holds ``logdir``'s lock (one on another host may have
  ended; ``this_host``: only a run alive on this host), or None. Takes no lock itself: a
  training run starting meanwhile is not refused."""
  try:
    with open(os.path.join(logdir, LOCK_FILE), "rb") as f:
      record = _read(f.fileno())
  except OSError:
    return None
  here = record and record.get("host") == socket.gethostname()
  if not record or (here or this_host) and not _alive_here(record):
    return None
  return record


def check_before_training(logdir: str, continue_learning: bool, no_dir_check: bool) -> None:
  """What every process of a training run checks before anything is built: ``logdir`` can
  be written, no run alive on this host holds it, and (unless resuming) it holds no run."""
  from open_seq2seq.training.checkpoints import logdir_holds_run  # (imports TensorFlow)
  check_writable(logdir, "--logdir", directory=True)
  running = holder(logdir, this_host=True)  # before "holds a run": that run is running
  if running is not None:
    raise refusal(logdir, running)
  if continue_learning or not logdir_holds_run(logdir):
    return
  if not no_dir_check:
    raise CheckpointError(
        f"{logdir} already holds a run: pass --continue_learning to resume it, or choose "
        f"another --logdir (nothing was overwritten)")
  print(f"warning: --no_dir_check: training from scratch in {logdir}, which holds a run; its "
        f"checkpoints are moved into {logdir}/earlier_run-<time>/ when the first new one is "
        f"saved", file=sys.stderr)


@contextlib.contextmanager
def for_run(logdir: str, mode: str, is_chief: bool, benchmark: bool = False,
            log=None) -> Iterator[LogdirLock | None]:
  """The lock a run of ``mode`` holds for its duration: training's chief takes it (a
  ``benchmark`` writes nothing and does not); the chief of eval, infer or export says when a
  training run holds the directory. ``log`` prints a line (default: stderr)."""
  say = log or (lambda line: print(line, file=sys.stderr, flush=True))
  if not is_chief or benchmark:
    yield None
    return
  if mode not in ("train", "train_eval"):
    running = holder(logdir)
    if running is not None:
      say(f"notice: a training run holds {logdir} ({describe(running)}): --mode={mode} "
          f"reads its checkpoint as it is now")
    yield None
    return
  lock = LogdirLock(logdir, mode).acquire()
  try:
    if lock.notice:
      say(f"notice: {lock.notice}")
    yield lock
  finally:
    lock.release()
