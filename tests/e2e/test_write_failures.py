"""Writes that fail (a file-size limit, a full disk) and paths that cannot be written: one
line naming what and where, exit status 2, the previous checkpoint kept and no temporary
folder left; unusable paths are refused before any model is built.

Full and read-only filesystems are small tmpfs mounts (root, as in CI; skipped where mount
is not permitted), unmounted even when a test fails."""

import contextlib
import glob
import os
import resource
import subprocess
import sys

import pytest
import tensorflow as tf

from tests.helpers import toy

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return toy.make_toy_data(str(tmp_path_factory.mktemp("toy")), train=64, dev=8, test=8)


def _args(data_dir, logdir, mode="train", *extra):
  return ([f"--config_file={toy.TOY_CONFIG}", f"--mode={mode}", f"--logdir={logdir}"] +
          toy.TINY_MODEL + toy.data_overrides(data_dir) + toy.split_overrides(data_dir, "train")
          + list(extra))


@contextlib.contextmanager
def _tmpfs(directory, options):
  """A tmpfs mounted on ``directory`` for the block (unmounted however it ends)."""
  os.makedirs(directory, exist_ok=True)
  mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)],
                           capture_output=True, text=True, timeout=30, check=False)
  if mounted.returncode != 0:
    pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
  try:
    yield str(directory)
  finally:
    subprocess.run(["umount", "-l", str(directory)], capture_output=True, timeout=30,
                   check=False)


def _one_error_line(result):
  """The run's one error line (asserting status 2, no traceback, nothing else on stderr)."""
  assert result.returncode == 2, result.stderr[-3000:]
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  lines = [line for line in result.stderr.splitlines() if line.strip()]
  errors = [line for line in lines if line.startswith("error: ")]
  assert len(errors) == 1 and lines[-1] == errors[0], result.stderr[-3000:]
  return errors[0]


def test_a_file_size_limit_during_a_checkpoint_save_is_one_line(data_dir, tmp_path):
  # The config files fit under 64 KiB, a checkpoint (~320 KB) does not. A real process: the
  # limit is set between fork and exec (a warm run cannot take it).
  limit = 64 * 1024
  logdir = tmp_path / "run"
  result = subprocess.run(
      [sys.executable, os.path.join(toy.ROOT, "run.py"),
       *_args(data_dir, logdir, "train", "--max_steps=2", "--save_checkpoint_steps=2")],
      preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)),
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=toy.ROOT),
      capture_output=True, text=True, timeout=300, check=False)
  line = _one_error_line(result)
  assert line.startswith(f"error: could not write the checkpoint of step 2 in {logdir}: the "
                         f"file exceeds the file-size limit (ulimit -f)"), line
  assert "(EFBIG); raise the limit" in line and "the newest checkpoint is still none" in line
  assert not glob.glob(str(logdir / "ckpt-*")), os.listdir(logdir)  # no temporary folder


def test_a_full_disk_is_named_and_keeps_the_previous_checkpoint(data_dir, tmp_path):
  # 500 KiB: the run's small files and one checkpoint (~320 KB) fit, a second one does not
  with _tmpfs(tmp_path / "small", "size=500k") as disk:
    logdir = os.path.join(disk, "run")
    result = toy.run_cli(_args(data_dir, logdir, "train", "--max_steps=4",
                               "--save_checkpoint_steps=2"))
    line = _one_error_line(result)
    assert line.startswith(f"error: could not write the checkpoint of step 4 in {logdir}: the "
                           f"disk is full (ENOSPC); free space on it or write elsewhere; the "
                           f"newest checkpoint is still {logdir}/ckpt-2"), line
    assert "out of memory" not in result.stderr
    assert sorted(n for n in os.listdir(logdir) if n.startswith("ckpt-")) == [
        "ckpt-2.data-00000-of-00001", "ckpt-2.index"]
    assert tf.train.latest_checkpoint(logdir) == f"{logdir}/ckpt-2"
    assert tf.train.load_checkpoint(f"{logdir}/ckpt-2").get_variable_to_shape_map()


def _ro_mount(tmp_path):
  return _tmpfs(tmp_path / "ro", "ro,size=64k")


@pytest.mark.parametrize("case", ["logdir_is_a_file", "logdir_under_a_file", "logdir_read_only",
                                  "infer_output_read_only", "export_dir_read_only"])
def test_unusable_paths_are_refused_before_any_model_is_built(data_dir, tmp_path, case):
  blocker = tmp_path / "a_file"
  blocker.write_text("not a directory\n")
  with contextlib.ExitStack() as stack:
    if case == "logdir_is_a_file":
      args, expected = _args(data_dir, blocker), f"--logdir {blocker}: is a regular file, " \
                                                 f"not a directory; choose another --logdir"
    elif case == "logdir_under_a_file":
      args = _args(data_dir, blocker / "run")
      expected = f"--logdir {blocker}/run: {blocker} is a regular file, not a directory"
    else:
      ro = stack.enter_context(_ro_mount(tmp_path))
      readonly = f"{ro} cannot be written: the filesystem is read-only (EROFS)"
      if case == "logdir_read_only":
        args, expected = _args(data_dir, f"{ro}/run"), f"--logdir {ro}/run: {readonly}"
      elif case == "infer_output_read_only":
        args = _args(data_dir, tmp_path / "no_run", "infer", f"--infer_output_file={ro}/out.txt")
        expected = f"--infer_output_file {ro}/out.txt: {readonly}"
      else:
        args = _args(data_dir, tmp_path / "no_run", "export", f"--export_dir={ro}/export")
        expected = f"--export_dir {ro}/export: {readonly}"
    result = toy.run_cli(args)
  line = _one_error_line(result)
  assert line.startswith(f"error: {expected}"), line
  assert result.stdout == ""  # nothing built: not even the precision line


def test_inference_onto_a_full_disk_is_one_line_and_leaves_no_partial_file(data_dir, tmp_path):
  logdir = str(tmp_path / "run")
  trained = toy.run_cli(_args(data_dir, logdir, "train", "--max_steps=2"))
  assert trained.returncode == 0, trained.stderr[-3000:]
  with _tmpfs(tmp_path / "full", "size=64k") as disk:
    with open(os.path.join(disk, "filler"), "wb", buffering=0) as filler:  # every page taken
      with contextlib.suppress(OSError):
        while True:
          filler.write(b"\0" * 4096)
    output = os.path.join(disk, "predictions.txt")
    result = toy.run_cli([f"--config_file={toy.TOY_CONFIG}", "--mode=infer", f"--logdir={logdir}",
                          f"--infer_output_file={output}", *toy.split_overrides(data_dir, "test")])
    line = _one_error_line(result)
    assert "the disk is full (ENOSPC)" in line and "free space on it or write elsewhere" in line
    assert os.listdir(disk) == ["filler"]  # no partial predictions, no temporary file
