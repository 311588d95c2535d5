"""Data that several test modules read, made once per test session over every xdist worker.

A module-scoped fixture runs once per module, so five learning modules that each wrote the
same synthetic speech corpus spent five times its ~30 s of CPU. :func:`shared_directory`
makes a directory once per session: the first worker to ask writes it (into a ``.partial``
directory renamed into place when complete) while holding a lock that the others wait on;
every later caller gets the finished directory. Callers treat it as read-only: a module links
it into its own working directory and writes its runs there.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from typing import Callable

import pytest


def session_root(tmp_path_factory: pytest.TempPathFactory) -> str:
  """The directory the whole session shares (xdist gives each worker
  ``<the session's basetemp>/popen-<worker>``: its parent)."""
  root = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):
    root = root.parent
  return str(root)


def shared_directory(tmp_path_factory: pytest.TempPathFactory, name: str,
                     make: Callable[[str], None]) -> str:
  """``<session root>/shared-<name>``, written by ``make(directory)`` the first time any
  worker of the session asks for ``name``."""
  root = session_root(tmp_path_factory)
  target = os.path.join(root, f"shared-{name}")
  with open(os.path.join(root, f"shared-{name}.lock"), "w", encoding="utf-8") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not os.path.isdir(target):
      partial = target + ".partial"
      shutil.rmtree(partial, ignore_errors=True)
      make(partial)
      os.rename(partial, target)
  return target


def linked_into(directory: str, relative: str, shared: str) -> str:
  """Links ``shared`` as ``directory/relative`` (parents created); returns ``directory``."""
  link = os.path.join(directory, relative)
  os.makedirs(os.path.dirname(link), exist_ok=True)
  os.symlink(shared, link)
  return directory
