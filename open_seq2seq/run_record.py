"""``--enable_logs``: a record of each run, enough to know later what ran and how.

Each invocation gets its own folder ``logdir/logs/<mode>-<UTC time>/`` holding

* ``command.txt`` -- the command line (shell-quoted), working directory, host and time;
* a copy of the config file as given, and the resolved configs (``config.txt``,
  ``config.yaml``) with every default and override applied;
* ``versions.txt`` -- Python, platform, CPU, and the versions of this package and of the
  libraries it runs on;
* ``git.txt`` and ``git.diff`` -- commit, branch and status of the git work tree holding the
  code (and the config file's, when it is another one), and the diff of uncommitted changes;
* ``stdout.log`` / ``stderr.log`` -- everything the run prints, as it prints it.

Files are written whole (temporary name, then rename), except the two console logs, which
grow as the run goes. OpenSeq2Seq's ``--enable_logs`` kept the command line, the config and
the console output; the versions and the work tree's state are what a reproduction needs too.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import shlex
import shutil
import socket
import subprocess
import sys
from typing import Mapping, TextIO

from open_seq2seq.utils.io import atomic_open, atomic_write_text

#: Distributions whose versions are recorded (those installed; missing ones are skipped).
DISTRIBUTIONS = ("open_seq2seq", "tensorflow", "tensorflow-cpu", "keras", "numpy", "horovod",
                 "mpi4py", "sentencepiece", "sacrebleu", "soundfile", "librosa", "kenlm",
                 "pyyaml")

_GIT_TIMEOUT = 20


class Tee:
  """Writes to a stream and to a log file."""

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


def record_dir(logdir: str, mode: str, now: datetime.datetime | None = None) -> str:
  """A new, empty folder for this run's record (a suffix keeps same-second runs apart)."""
  now = now or datetime.datetime.now(datetime.timezone.utc)
  base = os.path.join(logdir, "logs", f"{mode}-{now:%Y%m%d-%H%M%S}")
  path, n = base, 1
  while os.path.exists(path):
    n += 1
    path = f"{base}-{n}"
  os.makedirs(path)
  return path


def command_text(argv: list[str], now: datetime.datetime | None = None) -> str:
  now = now or datetime.datetime.now(datetime.timezone.utc)
  return (f"command: {shlex.join(argv)}\n"
          f"cwd: {os.getcwd()}\n"
          f"host: {socket.gethostname()}\n"
          f"time: {now:%Y-%m-%d %H:%M:%S} UTC\n")


def cpu_name() -> str:
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or "unknown"


def versions_text() -> str:
  lines = [f"python: {sys.version.split()[0]} ({sys.executable})",
           f"platform: {platform.platform()}",
           f"cpu: {cpu_name()} ({os.cpu_count()} logical cores)"]
  for name in DISTRIBUTIONS:
    try:
      lines.append(f"{name}: {importlib.metadata.version(name)}")
    except importlib.metadata.PackageNotFoundError:
      continue
  return "\n".join(lines) + "\n"


def _git(directory: str, *args: str) -> str | None:
  """Output of ``git -C directory args`` or None when git or the work tree is missing."""
  try:
    result = subprocess.run(["git", "-C", directory, *args], capture_output=True, text=True,
                            timeout=_GIT_TIMEOUT, check=False)
  except (OSError, subprocess.TimeoutExpired):
    return None
  return result.stdout if result.returncode == 0 else None


def work_tree(path: str) -> str | None:
  """Top folder of the git work tree holding ``path``, or None."""
  directory = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
  top = _git(directory, "rev-parse", "--show-toplevel")
  return top.strip() if top else None


def git_texts(paths: list[str]) -> tuple[str, str]:
  """(``git.txt``, ``git.diff``) for the distinct work trees holding ``paths``."""
  summary, diffs = [], []
  seen: list[str] = []
  for path in paths:
    top = work_tree(path)
    if top is None or top in seen:
      continue
    seen.append(top)
    commit = (_git(top, "rev-parse", "HEAD") or "(no commit yet)").strip()
    branch = (_git(top, "rev-parse", "--abbrev-ref", "HEAD") or "?").strip()
    status = _git(top, "status", "--short") or ""
    # untracked files (data folders, say) are listed but have no diff against HEAD
    lines = status.splitlines()
    changed = any(line.strip() and not line.startswith("??") for line in lines)
    untracked = sum(line.startswith("??") for line in lines)
    summary.append(f"work tree: {top}\ncommit: {commit}\nbranch: {branch}\n"
                   f"uncommitted changes: {'yes' if changed else 'none'}\n"
                   f"untracked files or folders: {untracked}\n"
                   + (f"status:\n{status}" if status.strip() else ""))
    diff = _git(top, "diff", "HEAD", "--binary") or ""
    if diff:
      diffs.append(f"# work tree: {top}\n{diff}")
  if not seen:
    return "not in a git work tree\n", ""
  return "\n".join(summary), "".join(diffs)


def write_run_record(logdir: str, mode: str, argv: list[str], config_file: str,
                     configs: Mapping[str, Mapping], capture_console: bool = True) -> str:
  """Writes this run's record into a new folder under ``logdir/logs/`` and returns it.

  Args:
    logdir: the run directory.
    mode: the run's mode (names the folder).
    argv: the full command line (``[sys.executable] + sys.argv``).
    config_file: the config file as given on the command line (copied as is).
    configs: the resolved configs, ``{mode: params}``.
    capture_console: also copy stdout and stderr into the folder from now on.
  """
  from open_seq2seq.config import config_to_text, config_to_yaml
  now = datetime.datetime.now(datetime.timezone.utc)
  folder = record_dir(logdir, mode, now)
  atomic_write_text(os.path.join(folder, "command.txt"), command_text(argv, now))
  with open(config_file, "rb") as source, \
      atomic_open(os.path.join(folder, os.path.basename(config_file)), binary=True) as copy:
    shutil.copyfileobj(source, copy)
  atomic_write_text(os.path.join(folder, "config.txt"), "".join(
      f"# mode: {m}\n{config_to_text(cfg)}\n" for m, cfg in configs.items()))
  atomic_write_text(os.path.join(folder, "config.yaml"), config_to_yaml(configs))
  atomic_write_text(os.path.join(folder, "versions.txt"), versions_text())
  package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  git_summary, git_diff = git_texts([package_dir, config_file])
  atomic_write_text(os.path.join(folder, "git.txt"), git_summary)
  if git_diff:
    atomic_write_text(os.path.join(folder, "git.diff"), git_diff)
  if capture_console:
    sys.stdout = Tee(sys.stdout, os.path.join(folder, "stdout.log"))
    sys.stderr = Tee(sys.stderr, os.path.join(folder, "stderr.log"))
  return folder


__all__ = ["write_run_record", "Tee", "versions_text", "git_texts", "work_tree", "cpu_name"]
