"""atomic_open: all or nothing, and the mode a plain ``open`` would give."""

import os
import stat

import pytest

from open_seq2seq.utils.io import atomic_open, atomic_write_text, current_umask


def _mode(path):
  return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask_027():
  previous = os.umask(0o027)
  yield
  os.umask(previous)


def test_a_new_file_gets_the_umask_mode(tmp_path, umask_027):
  assert current_umask() == 0o027
  path = tmp_path / "new.txt"
  atomic_write_text(str(path), "x\n")
  assert _mode(path) == 0o640  # 0666 less the umask, not mkstemp's 0600


def test_an_existing_file_keeps_its_mode(tmp_path, umask_027):
  path = tmp_path / "old.txt"
  path.write_text("old\n")
  os.chmod(path, 0o604)
  atomic_write_text(str(path), "new\n")
  assert path.read_text() == "new\n" and _mode(path) == 0o604


def test_a_failed_write_keeps_the_old_content_and_leaves_no_temporary(tmp_path):
  path = tmp_path / "kept.txt"
  path.write_text("old\n")
  with pytest.raises(RuntimeError):
    with atomic_open(str(path)) as f:
      f.write("half")
      raise RuntimeError("disk full")
  assert path.read_text() == "old\n"
  assert sorted(os.listdir(tmp_path)) == ["kept.txt"]
