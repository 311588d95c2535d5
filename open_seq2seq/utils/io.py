"""File writing that never leaves a half-written file behind."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from typing import BinaryIO, Iterator, TextIO


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
  fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=directory)
  try:
    os.chmod(tmp, _mode_for(path))
    with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding=encoding)) as f:
      yield f
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.remove(tmp)
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
