"""Early stopping through run.py: the run ends after `patience` evals without improvement,
a resumed run stops at the same step as an uninterrupted one, and a run that early stopping
ended trains no further when resumed.

The watched metric is the eval loss declared higher-is-better: it falls as the toy model
learns, so after the first eval it never "improves", and the stopping step is known in
advance (evals at 5, 10, 15: best, then 1 and 2 evals without improvement -> step 15)."""

import json
import os

import pytest
import tensorflow as tf

from tests.helpers import toy

pytestmark = pytest.mark.slow

EARLY = ["--early_stopping={'metric': 'loss', 'patience': 2, 'higher_is_better': True}",
         "--eval_steps=5", "--save_checkpoint_steps=5", "--print_loss_steps=None"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return toy.make_toy_data(str(tmp_path_factory.mktemp("early")), train=64, dev=8, test=8)


def args(data_dir, logdir, *extra):
  return ([f"--config_file={toy.TOY_CONFIG}", "--mode=train_eval", f"--logdir={logdir}"] +
          toy.TINY_MODEL + toy.data_overrides(data_dir) + toy.split_overrides(data_dir, "train")
          + EARLY + list(extra))


def eval_steps(logdir):
  with open(os.path.join(logdir, "metrics.jsonl"), encoding="utf-8") as f:
    return [r["step"] for r in map(json.loads, f) if "eval/loss" in r]


def test_stops_after_patience_and_resumes_to_the_same_step(data_dir, tmp_path):
  straight, split = str(tmp_path / "straight"), str(tmp_path / "split")
  result = toy.run_cli(args(data_dir, straight, "--max_steps=100"))
  assert result.returncode == 0, result.stderr[-3000:]
  assert ("early stopping at step 15: loss has not improved in 2 evals (best "
          in result.stdout), result.stdout[-2000:]
  assert "at step 5, kept in best_models/)" in result.stdout
  assert "Finished training at step 15" in result.stdout
  assert tf.train.latest_checkpoint(straight).endswith("ckpt-15")
  assert eval_steps(straight) == [5, 10, 15]  # the stop's eval is the final one, not repeated

  # 10 steps (the final eval at 10 counts), then resumed with the same max_steps as above
  result = toy.run_cli(args(data_dir, split, "--max_steps=10"))
  assert result.returncode == 0, result.stderr[-3000:]
  result = toy.run_cli(args(data_dir, split, "--max_steps=100", "--continue_learning"))
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Finished training at step 15" in result.stdout, result.stdout[-2000:]

  # resuming the run that early stopping ended trains nothing more
  result = toy.run_cli(args(data_dir, straight, "--max_steps=100", "--continue_learning"))
  assert result.returncode == 0, result.stderr[-3000:]
  assert "early stopping had ended this run at step 15 (loss best at step 5)" in result.stdout
  assert "Finished training at step 15" in result.stdout
  assert eval_steps(straight) == [5, 10, 15]


def test_needs_evals_during_training(data_dir, tmp_path):
  result = toy.run_cli(args(data_dir, str(tmp_path / "run"), "--max_steps=10",
                            "--eval_steps=None"))
  assert result.returncode == 2
  assert result.stderr.strip().splitlines()[-1] == (
      "error: early_stopping: needs evals during training: run --mode=train_eval with "
      "eval_steps set")
