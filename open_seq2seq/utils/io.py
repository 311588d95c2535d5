"""File writing that never leaves a half-written file behind, and checks that a path can be
written before the work that fills it is done."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
from typing import BinaryIO, Iterator, TextIO

from open_seq2seq.errors import ConfigError, write_cause, write_failure

#: Errors of writing that say nothing about the file's own content: disk full, size limit
_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


@contextlib.contextmanager
def atomic_open(path: str, encoding: str = "utf-8", binary: bool = False
                ) -> Iterator[TextIO | BinaryIO]:
  """Opens a temporary file next to ``path`` and renames it over ``path`` on success.

  ``binary`` opens it in ``"wb"`` mode (pickles, audio) instead of text.

  If the block raises (or the process dies), ``path`` keeps its previous content and the
  temporary file is removed (on exceptions) or left with a ``.tmp`` suffix (on a kill).
  The file gets the mode ``open`` would give it: an existing file's mode, else 0666 less
  the umask (not the 0600 of the temporary file).
  """
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  try:
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp",
                               dir=directory)
  except OSError as e:
    raise write_failure(e, what=f"could not write {path}") or e from None
  try:
    os.chmod(tmp, _mode_for(path))
    with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding=encoding)) as f:
      yield f
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException as e:
    with contextlib.suppress(OSError):
      os.remove(tmp)
    # a full disk or a size limit met while writing this file: one line naming it
    if isinstance(e, OSError) and e.errno in _SPACE and e.filename in (None, tmp, path):
      raise write_failure(e, what=f"could not write {path}") from None
    raise


def _mode_for(path: str) -> int:
  """The permission bits of ``path`` if it exists, else those a new file gets."""
  try:
    return stat.S_IMODE(os.stat(path).st_mode)
  except FileNotFoundError:
    return 0o666 & ~current_umask()


def current_umask() -> int:
  """The process's umask, read without changing it where Linux allows (``/proc``)."""
  try:
    with open("/proc/self/status", encoding="ascii") as f:
      for line in f:
        if line.startswith("Umask:"):
          return int(line.split()[1], 8)
  except OSError:
    pass
  mask = os.umask(0o022)  # elsewhere: set and restore (not thread-safe, but brief)
  os.umask(mask)
  return mask


def atomic_write_text(path: str, text: str) -> None:
  with atomic_open(path) as f:
    f.write(text)


def unwritable(path: str, directory: bool = False) -> str | None:
  """Why a file (``directory``: a directory) could not be written at ``path``, or None.

  Checks the path itself (a directory where a file is wanted, or the reverse), the nearest
  folder that exists (a regular file in the way) and, by creating and removing a temporary
  file there, that it can be written (permissions, a read-only filesystem; also for root)."""
  path = os.path.abspath(path)
  if os.path.exists(path):
    if directory != os.path.isdir(path):
      return "is a directory, not a file" if directory is False else \
          "is a regular file, not a directory"
    where = path if directory else os.path.dirname(path)
  else:
    where = os.path.dirname(path)
    while not os.path.lexists(where):
      where = os.path.dirname(where)
    if not os.path.isdir(where):
      return f"{where} is a regular file, not a directory"
  try:
    fd, probe = tempfile.mkstemp(prefix=".write-check-", dir=where)
  except OSError as e:
    return f"{where} cannot be written: {write_cause(e) or e.strerror}"
  os.close(fd)
  os.remove(probe)
  return None


def check_writable(path: str, flag: str, directory: bool = False) -> None:
  """Raises a one-line ConfigError naming ``flag`` when ``path`` (a file, or ``directory``)
  cannot be written (see :func:`unwritable`): checked before the work that fills it."""
  folder = os.path.dirname(os.path.abspath(path))
  if not directory and not os.path.lexists(folder):
    raise ConfigError(f"{flag}: directory {folder} does not exist")
  problem = unwritable(path, directory)
  if problem:
    raise ConfigError(f"{flag} {path}: {problem}; choose another {flag}")


def exit_if_unwritable(path: str, flag: str, directory: bool = False,
                       makes_folders: bool = False) -> None:
  """For scripts, right after their arguments are parsed: when ``path`` cannot be written
  (:func:`check_writable`; ``makes_folders``: the script creates missing parent folders, so
  only the nearest existing one must be writable), prints ``error: ...`` (one line) and exits
  with status 2, before any work that would fill it is done."""
  try:
    if makes_folders:
      problem = unwritable(path, directory)
      if problem:
        raise ConfigError(f"{flag} {path}: {problem}; choose another {flag}")
    else:
      check_writable(path, flag, directory)
  except ConfigError as e:
    print(f"error: {e}", file=sys.stderr)
    raise SystemExit(2) from None
