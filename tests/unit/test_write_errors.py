"""Write failures named as what they are (a full disk, a file-size limit, a permission, a
read-only filesystem), from Python's OSError and from TensorFlow's errors, never as "out of
memory"; paths checked for writability before any work; summaries and metrics.jsonl name
the file they could not write."""

import errno
import os

import pytest
import tensorflow as tf

from open_seq2seq import cli
from open_seq2seq.errors import WriteError, out_of_memory, write_failure
from open_seq2seq.training import reporting
from open_seq2seq.utils.io import atomic_open, unwritable

# what TensorFlow raises when a checkpoint or summary write fails (its messages, trimmed)
TF_FAILURES = {
    "disk full": (tf.errors.ResourceExhaustedError, "No space left on device", "ENOSPC",
                  "the disk is full"),
    "size limit": (tf.errors.OutOfRangeError, "File too large", "EFBIG",
                   "the file exceeds the file-size limit (ulimit -f)"),
    "permission": (tf.errors.PermissionDeniedError, "Permission denied", "EACCES",
                   "permission denied"),
    "read-only": (tf.errors.PermissionDeniedError, "Read-only file system", "EROFS",
                  "the filesystem is read-only"),
}


@pytest.mark.parametrize("case", sorted(TF_FAILURES))
def test_tensorflow_write_failures_are_named(case):
  kind, text, name, cause = TF_FAILURES[case]
  error = kind(None, None, "{{function_node __wrapped__SaveV2}} /run/ckpt-4_temp/part-00000-of-"
                           f"00001.data-00000-of-00001.tempstate123; {text} [Op:SaveV2]")
  failure = write_failure(error, what="could not write the checkpoint of step 4 in /run",
                          kept="the newest checkpoint is still /run/ckpt-2")
  assert isinstance(failure, WriteError)
  assert str(failure).startswith(f"could not write the checkpoint of step 4 in /run: {cause}")
  assert f"({name}); " in str(failure)
  assert str(failure).endswith("; the newest checkpoint is still /run/ckpt-2")
  assert out_of_memory(error) is None  # a full disk is no longer "out of memory"
  # without a description, the file the error names
  assert str(write_failure(error)).startswith("/run/ckpt-4_temp/part-00000-of-00001.data-")


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES,
                                  errno.EROFS])
def test_os_errors_of_writing_are_named(code):
  error = OSError(code, os.strerror(code), "/run/metrics.jsonl")
  assert str(write_failure(error)).startswith(
      "/run/metrics.jsonl: ") and f"({errno.errorcode[code]}); " in str(write_failure(error))


def test_other_errors_are_not_write_failures():
  assert write_failure(OSError(errno.ENOENT, "No such file or directory", "x")) is None
  assert write_failure(RuntimeError("a bug")) is None
  oom = tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor with "
                                                     "shape[8,1024] on CPU")
  assert write_failure(oom) is None and "shape[8,1024]" in str(out_of_memory(oom))


def test_the_command_line_prints_a_write_failure_as_one_line(monkeypatch, capsys):
  def run(argv):  # a summary write past `ulimit -f`, as TensorFlow raises it
    raise tf.errors.OutOfRangeError(None, None, "/run/events.out.tfevents.1; File too large\n\t"
                                                "Failed to flush 11 events")

  monkeypatch.setattr(cli, "run", run)
  assert cli.main([]) == 2
  assert capsys.readouterr().err == (
      "error: /run/events.out.tfevents.1: the file exceeds the file-size limit (ulimit -f) or "
      "the filesystem's largest file (EFBIG); raise the limit (ulimit -f unlimited) or write "
      "elsewhere\n")


def test_an_atomic_write_on_a_full_disk_names_the_file_and_leaves_no_temporary(
    tmp_path, monkeypatch):
  path = tmp_path / "out.txt"
  path.write_text("old\n")

  def full(fd):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

  monkeypatch.setattr(os, "fsync", full)
  with pytest.raises(WriteError, match=f"could not write {path}: the disk is full \\(ENOSPC\\)"):
    with atomic_open(str(path)) as f:
      f.write("new\n")
  assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["out.txt"]


def test_metrics_jsonl_and_summaries_name_the_file(tmp_path, monkeypatch):
  summaries = reporting.Summaries(str(tmp_path))

  def full(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

  monkeypatch.setattr(reporting, "open", full, raising=False)
  with pytest.raises(WriteError, match=f"could not write {tmp_path}/metrics.jsonl: the disk is "
                                       f"full \\(ENOSPC\\)"):
    summaries.scalars(1, {"loss": 1.0})


def test_unwritable_paths(tmp_path):
  blocker = tmp_path / "file"
  blocker.write_text("x")
  assert unwritable(str(tmp_path / "new" / "run"), directory=True) is None
  assert unwritable(str(blocker), directory=True) == "is a regular file, not a directory"
  assert unwritable(str(tmp_path), directory=False) == "is a directory, not a file"
  assert unwritable(str(blocker / "run" / "x"), directory=True) == \
      f"{blocker} is a regular file, not a directory"
  assert unwritable(str(blocker)) is None  # an existing file in a writable folder
  assert sorted(os.listdir(tmp_path)) == ["file"]  # the checks leave nothing behind


@pytest.mark.skipif(os.geteuid() != 0, reason="drops privileges: needs root")
def test_a_folder_the_user_cannot_write_is_named():
  # root writes anywhere: the check runs as nobody, in a child process, on a folder it can
  # reach (pytest's tmp_path is private to root) but not write
  import shutil  # pylint: disable=import-outside-toplevel
  import subprocess  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  import tempfile  # pylint: disable=import-outside-toplevel
  folder = tempfile.mkdtemp(prefix="closed-")
  try:
    os.chmod(folder, 0o755)
    # imports first: nobody may not read the Python installation (under /root with pyenv)
    code = ("import os; from open_seq2seq.utils.io import unwritable; "
            "os.setgid(65534); os.setuid(65534); "
            f"print(unwritable({folder + '/run'!r}, directory=True))")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, cwd="/", env=dict(os.environ, PYTHONPATH=root),
                            check=False)
  finally:
    shutil.rmtree(folder)
  assert result.stdout.strip() == f"{folder} cannot be written: permission denied (EACCES)", \
      result.stderr
