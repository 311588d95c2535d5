"""Command-line values always win: per-mode overrides, max_steps vs num_epochs, notices."""

import textwrap

import pytest

from open_seq2seq import config as cfg
from open_seq2seq.errors import ConfigError
from open_seq2seq.overrides import by_mode, parse_overrides
from tests.unit.test_config import CONFIG_FILE

EPOCHS_FILE = CONFIG_FILE.replace('"max_steps": 10', '"num_epochs": 50')


def _write(tmp_path, body, name="config.py"):
  path = tmp_path / name
  path.write_text(textwrap.dedent(body))
  return str(path)


def test_max_steps_replaces_a_configs_num_epochs_with_a_notice(tmp_path):
  path = _write(tmp_path, EPOCHS_FILE)
  with pytest.raises(ConfigError, match="give one of them"):  # both in the file: ambiguous
    cfg.load_config(_write(tmp_path, EPOCHS_FILE.replace('"num_epochs": 50',
                                                         '"num_epochs": 50, "max_steps": 3'),
                           "both.py"), "train")
  notices = []
  _, configs = cfg.load_config(path, "train_eval", ["--max_steps=5"], notices=notices)
  assert (configs["train"]["max_steps"], configs["train"]["num_epochs"]) == (5, None)
  assert notices == ["--max_steps=5 replaces the config's num_epochs=50"]


def test_num_epochs_replaces_a_configs_max_steps(tmp_path):
  path = _write(tmp_path, CONFIG_FILE)
  notices = []
  _, configs = cfg.load_config(path, "train", ["--num_epochs=2"], notices=notices)
  assert (configs["train"]["max_steps"], configs["train"]["num_epochs"]) == (None, 2)
  assert notices == ["--num_epochs=2 replaces the config's max_steps=10"]
  # setting both on the command line is as ambiguous as in the file
  with pytest.raises(ConfigError, match="give one of them"):
    cfg.load_config(path, "train", ["--num_epochs=2", "--max_steps=4"])


def test_an_overrides_file_replaces_the_duration_too(tmp_path):
  path = _write(tmp_path, EPOCHS_FILE)
  overrides = _write(tmp_path, "max_steps: 7\n", "overrides.yaml")
  notices = []
  _, configs = cfg.load_config(path, "train", overrides_file=overrides, notices=notices)
  assert (configs["train"]["max_steps"], configs["train"]["num_epochs"]) == (7, None)
  assert notices == ["--max_steps=7 replaces the config's num_epochs=50"]


def test_a_runs_own_max_steps_replaces_num_epochs_without_a_notice(tmp_path):
  """Issue 38: eval or infer of a run trained with --max_steps replayed its notice; only a
  --max_steps of this command line says it replaces num_epochs."""
  path = _write(tmp_path, EPOCHS_FILE)
  run = parse_overrides(["--max_steps=5"])  # what the run remembers (open_seq2seq.run_settings)
  for mode in ("eval", "infer", "train"):
    notices = []
    _, configs = cfg.load_config(path, mode, notices=notices, run_overrides=run)
    assert (configs[mode]["max_steps"], configs[mode]["num_epochs"]) == (5, None)
    assert notices == []
  notices = []
  _, configs = cfg.load_config(path, "eval", ["--max_steps=6"], notices=notices,
                               run_overrides=run)
  assert configs["eval"]["max_steps"] == 6
  assert notices == ["--max_steps=6 replaces the config's num_epochs=50"]


def test_per_mode_overrides_reach_their_mode_only(tmp_path):
  path = _write(tmp_path, CONFIG_FILE)
  _, configs = cfg.load_config(path, "train_eval", [
      "--eval_params/batch_size_per_gpu=2", "--train_params/encoder_params/hidden_size=64",
      "--decoder_params/alpha=0.3"])
  assert configs["train"]["batch_size_per_gpu"] == 8
  assert configs["eval"]["batch_size_per_gpu"] == 2
  assert configs["train"]["encoder_params"]["hidden_size"] == 64
  assert configs["eval"]["encoder_params"]["hidden_size"] == 32
  assert configs["train"]["decoder_params"]["alpha"] == configs["eval"]["decoder_params"][
      "alpha"] == 0.3  # un-prefixed: both
  # infer_params reaches interactive_infer as well (as in a config file)
  _, configs = cfg.load_config(path, "interactive_infer", ["--infer_params/batch_size_per_gpu=3"])
  assert configs["interactive_infer"]["batch_size_per_gpu"] == 3


def test_per_mode_override_errors_and_notices(tmp_path):
  path = _write(tmp_path, CONFIG_FILE)
  notices = []
  _, configs = cfg.load_config(path, "train", ["--eval_params/batch_size_per_gpu=2"],
                               notices=notices)
  assert notices == ["--eval_params/...: ignored: --mode=train builds no eval config"]
  with pytest.raises(ConfigError, match=r"eval_params/batch_size_per_gpus: .*did you mean "
                                        r"'batch_size_per_gpu'"):
    cfg.load_config(path, "eval", ["--eval_params/batch_size_per_gpus=2"])
  with pytest.raises(ConfigError, match="name a key inside it"):
    cfg.load_config(path, "eval", ["--eval_params=2"])
  overrides = _write(tmp_path, "eval_params:\n  batch_size_per_gpu: 4\n", "overrides.yaml")
  _, configs = cfg.load_config(path, "eval", overrides_file=overrides)
  assert configs["eval"]["batch_size_per_gpu"] == 4


def test_an_unprefixed_data_override_in_train_eval_says_it_reaches_both(tmp_path):
  path = _write(tmp_path, CONFIG_FILE)
  notices = []
  _, configs = cfg.load_config(path, "train_eval", ["--data_layer_params/source_file=x.txt"],
                               notices=notices)
  assert configs["eval"]["data_layer_params"]["source_file"] == "x.txt"
  assert notices == ["--data_layer_params/source_file=... reaches both the train and the eval "
                     "config of train_eval (the config file gives them different values); "
                     "write --train_params/data_layer_params/source_file=... or "
                     "--eval_params/data_layer_params/source_file=... to set one"]
  notices = []
  cfg.load_config(path, "train_eval", ["--train_params/data_layer_params/source_file=x.txt",
                                       "--batch_size_per_gpu=4"], notices=notices)
  assert notices == []


def test_by_mode_keeps_the_order():
  common, per_mode = by_mode([("a", "1"), ("eval_params/b", "2"), ("infer_params/c/d", "3"),
                              ("eval_params/b", "4")])
  assert common == [("a", "1")]
  assert {mode: [(path, value.value) for path, value in entries]
          for mode, entries in per_mode.items()} == {
      "eval": [("b", "2"), ("b", "4")], "infer": [("c/d", "3")],
      "interactive_infer": [("c/d", "3")]}
