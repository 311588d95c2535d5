"""A run remembers how it was made: eval and --continue_learning apply its overrides again
(the README's runs/deeper case), and a changed model setting is named with both values."""

import os
import re

import pytest

from open_seq2seq.run_settings import OVERRIDES_FILE
from tests.helpers import toy

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def deeper(tmp_path_factory):
  """The tiny toy model trained 4 steps with one more encoder layer than TINY_MODEL's."""
  data = toy.make_toy_data(str(tmp_path_factory.mktemp("toy")), train=64, dev=16, test=16)
  logdir = str(tmp_path_factory.mktemp("run") / "deeper")
  # what the later commands give: the config and the run, nothing else (README: runs/deeper)
  common = [f"--config_file={toy.TOY_CONFIG}", f"--logdir={logdir}"]
  train = toy.run_cli(common + [
      *toy.TINY_MODEL, *toy.data_overrides(data),
      *[f"--train_params/{o[2:]}" for o in toy.split_overrides(data, "train")],
      *[f"--eval_params/{o[2:]}" for o in toy.split_overrides(data, "dev")],
      "--mode=train_eval", "--max_steps=4", "--eval_steps=4",
      "--encoder_params/encoder_layers=2"])
  assert train.returncode == 0, train.stderr[-3000:]
  return common, logdir, train


def _eval_loss(output: str) -> str:
  return re.search(r"eval at step 4: loss (\S+),", output).group(1)


def test_eval_rebuilds_the_model_the_run_was_trained_with(deeper):
  common, logdir, train = deeper
  assert os.path.isfile(os.path.join(logdir, OVERRIDES_FILE))
  result = toy.run_cli(common + ["--mode=eval"])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "--encoder_params/encoder_layers=2" in result.stderr  # the notice names it
  assert "warning:" not in result.stderr and "ignored" not in result.stderr
  # the same 2-layer encoder, the same weights: the same loss as the run's own eval
  assert _eval_loss(result.stdout) == _eval_loss(train.stdout)


def test_a_changed_model_setting_is_named_with_both_values(deeper):
  common, _, _ = deeper
  result = toy.run_cli(common + ["--mode=eval", "--encoder_params/encoder_layers=1"])
  assert "notice: --encoder_params/encoder_layers=1 replaces the run's " \
         "encoder_params/encoder_layers=2" in result.stderr
  assert re.search(r"warning: the model's settings differ from those .* was trained with "
                   r"\(config.yaml\): encoder_params/encoder_layers: run 2, now 1",
                   result.stderr), result.stderr


def test_continue_learning_keeps_the_runs_settings(deeper):
  common, logdir, _ = deeper
  result = toy.run_cli(common + ["--mode=train", "--continue_learning", "--max_steps=6"])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Restored" in result.stdout and "Finished training at step 6" in result.stdout
  with open(os.path.join(logdir, OVERRIDES_FILE), encoding="utf-8") as f:
    saved = f.read()
  assert "encoder_params/encoder_layers" in saved and "'6'" in saved  # the resumed run's too
