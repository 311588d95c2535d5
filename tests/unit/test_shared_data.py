"""tests/helpers/shared_data.py: a shared directory is made once, by the first caller, while
the others wait for it; a half-written one is never handed out."""

import os
import threading
import time

import pytest

from tests.helpers import shared_data


def test_concurrent_callers_get_one_directory_made_once(tmp_path_factory):
  made = []

  def make(directory):
    made.append(directory)
    os.makedirs(directory)
    time.sleep(0.3)  # the other callers arrive while it is being written
    with open(os.path.join(directory, "data.txt"), "w", encoding="utf-8") as f:
      f.write("complete")

  results = []
  threads = [threading.Thread(target=lambda: results.append(
      shared_data.shared_directory(tmp_path_factory, "concurrent", make))) for _ in range(3)]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  assert len(made) == 1 and made[0].endswith(".partial")
  assert len(set(results)) == 1 and results[0].endswith("shared-concurrent")
  with open(os.path.join(results[0], "data.txt"), encoding="utf-8") as f:
    assert f.read() == "complete"
  assert not os.path.exists(made[0])


def test_a_failed_make_leaves_nothing_and_the_next_caller_makes_it(tmp_path_factory):
  def broken(directory):
    os.makedirs(directory)
    raise RuntimeError("espeak-ng crashed")

  with pytest.raises(RuntimeError):
    shared_data.shared_directory(tmp_path_factory, "retry", broken)
  target = shared_data.shared_directory(tmp_path_factory, "retry", os.makedirs)
  assert os.path.isdir(target) and not os.listdir(target)


def test_linked_into_makes_the_parents(tmp_path):
  shared = tmp_path / "shared"
  shared.mkdir()
  work = shared_data.linked_into(str(tmp_path / "work"), "data/corpus", str(shared))
  assert os.path.realpath(os.path.join(work, "data", "corpus")) == str(shared)
