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


def test_a_model_that_does_not_fit_the_run_is_refused_naming_the_key(deeper):
  common, logdir, _ = deeper
  result = toy.run_cli(common + ["--mode=eval", "--encoder_params/encoder_layers=1"])
  assert "notice: --encoder_params/encoder_layers=1 replaces the run's " \
         "encoder_params/encoder_layers=2" in result.stderr
  assert result.returncode == 2, result.stderr[-3000:]
  [error] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
  assert re.search(r"ckpt-4: its weights do not fit the model built with "
                   r"encoder_params/encoder_layers: run 2, now 1 \(\d+ of its variables are "
                   r"not in the model .*--allow_model_changes", error), error
  # a resume with the changed model is refused the same way, and changes nothing
  before = sorted(os.listdir(logdir))
  result = toy.run_cli(common + ["--mode=train", "--continue_learning", "--max_steps=6",
                                 "--encoder_params/encoder_layers=1"])
  assert result.returncode == 2 and "run 2, now 1" in result.stderr, result.stderr[-3000:]
  assert sorted(os.listdir(logdir)) == before


def test_a_deliberate_change_loads_what_fits(deeper):
  common, _, _ = deeper
  result = toy.run_cli(common + ["--mode=eval", "--encoder_params/encoder_layers=1",
                                 "--allow_model_changes"])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "warning: model settings that differ from those" in result.stderr
  assert re.search(r"warning: allow_model_changes: loading what fits of .*ckpt-4 \(\d+ of its "
                   r"variables are not in the model", result.stdout + result.stderr)


def test_a_decoding_change_applies_with_one_notice(deeper):
  common, _, train = deeper
  result = toy.run_cli(common + ["--mode=eval", "--decoder_params/alpha=0.6"])
  assert result.returncode == 0, result.stderr[-3000:]
  assert re.search(r"notice: model settings that differ from those .* was trained with "
                   r"\(config.yaml\) apply: decoder_params/alpha: run 1.0, now 0.6",
                   result.stderr), result.stderr
  assert "warning:" not in result.stderr
  assert _eval_loss(result.stdout) == _eval_loss(train.stdout)  # the same weights


def test_a_vocabulary_of_other_contents_is_refused_before_building(deeper, tmp_path):
  common, logdir, _ = deeper
  with open(os.path.join(logdir, "config.yaml"), encoding="utf-8") as f:
    import yaml
    vocab = yaml.safe_load(f)["train"]["data_layer_params"]["src_vocab_file"]
  same, other = tmp_path / "same.txt", tmp_path / "other.txt"
  with open(vocab, encoding="utf-8") as f:
    text = f.read()
  same.write_text(text, encoding="utf-8")
  other.write_text(text.replace("\n", "x\n", 1), encoding="utf-8")
  result = toy.run_cli(common + ["--mode=eval", f"--data_layer_params/src_vocab_file={same}"])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "differ from those" not in result.stderr  # the same contents: no difference
  result = toy.run_cli(common + ["--mode=eval", f"--data_layer_params/src_vocab_file={other}"])
  assert result.returncode == 2
  assert re.search(r"error: .* was trained with another model: data_layer_params/"
                   r"src_vocab_file: run .*, now .*other.txt' \(its config.yaml\); give the run's "
                   r"values, or --allow_model_changes", result.stderr), result.stderr


def test_continue_learning_keeps_the_runs_settings(deeper):
  common, logdir, _ = deeper
  result = toy.run_cli(common + ["--mode=train", "--continue_learning", "--max_steps=6"])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Restored" in result.stdout and "Finished training at step 6" in result.stdout
  with open(os.path.join(logdir, OVERRIDES_FILE), encoding="utf-8") as f:
    saved = f.read()
  assert "encoder_params/encoder_layers" in saved and "'6'" in saved  # the resumed run's too
