"""scripts/average_checkpoints.py end to end: train the tiny toy Transformer with a checkpoint
every 10 steps, average the last 3, and eval/infer the result with run.py like any run."""

import math
import os
import re
import subprocess
import sys

import pytest

from tests.helpers import toy

pytestmark = pytest.mark.slow

SCRIPT = os.path.join(toy.ROOT, "scripts", "average_checkpoints.py")


def _args(data_dir, logdir, mode, split):
  return ([f"--config_file={toy.TOY_CONFIG}", f"--mode={mode}", f"--logdir={logdir}"] +
          toy.TINY_MODEL + toy.data_overrides(data_dir) + toy.split_overrides(data_dir, split))


def _eval_loss(data_dir, logdir):
  result = toy.run_cli(_args(data_dir, logdir, "eval", "dev"))
  assert result.returncode == 0, result.stderr[-3000:]
  found = re.search(r"eval at step 30: loss ([-\d.naif]+)", result.stdout)
  assert found, result.stdout[-2000:]
  return float(found.group(1))


def test_averaged_run_evaluates_and_infers(tmp_path):
  data_dir = toy.make_toy_data(str(tmp_path / "toy"), train=200, dev=24, test=24)
  run, out = str(tmp_path / "run"), str(tmp_path / "run-avg3")
  trained = toy.run_cli(_args(data_dir, run, "train", "train") + [
      "--max_steps=30", "--save_checkpoint_steps=10", "--num_checkpoints=5"])
  assert trained.returncode == 0, trained.stderr[-3000:]

  averaged = subprocess.run(
      [sys.executable, SCRIPT, "--logdir", run, "--last_n", "3", "--output_dir", out],
      capture_output=True, text=True, timeout=300,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert averaged.returncode == 0, averaged.stderr[-3000:]
  assert all(f"ckpt-{s}" in averaged.stdout for s in (10, 20, 30)), averaged.stdout
  assert f"wrote {os.path.join(out, 'ckpt-30')}" in averaged.stdout
  assert os.path.isfile(os.path.join(out, "config.yaml"))

  last, average = _eval_loss(data_dir, run), _eval_loss(data_dir, out)
  assert math.isfinite(average) and average != last

  predictions = str(tmp_path / "predictions.txt")
  inferred = toy.run_cli(_args(data_dir, out, "infer", "test") +
                         [f"--infer_output_file={predictions}"])
  assert inferred.returncode == 0, inferred.stderr[-3000:]
  assert f"Restored weights from {os.path.join(out, 'ckpt-30')}" in inferred.stdout
  with open(predictions, encoding="utf-8") as f:
    assert len(f.read().splitlines()) == 24

