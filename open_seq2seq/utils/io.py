"""File writing that never leaves a half-written file behind."""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import BinaryIO, Iterator, TextIO


@contextlib.contextmanager
def atomic_open(path: str, encoding: str = "utf-8", binary: bool = False
                ) -> Iterator[TextIO | BinaryIO]:
  """Opens a temporary file next to ``path`` and renames it over ``path`` on success.

  ``binary`` opens it in ``"wb"`` mode (pickles, audio) instead of text.

  If the block raises (or the process dies), ``path`` keeps its previous content and the
  temporary file is removed (on exceptions) or left with a ``.tmp`` suffix (on a kill).
  """
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=directory)
  try:
    with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding=encoding)) as f:
      yield f
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.remove(tmp)
    raise


def atomic_write_text(path: str, text: str) -> None:
  with atomic_open(path) as f:
    f.write(text)
