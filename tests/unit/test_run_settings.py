"""The overrides a run was made with, saved beside it and read back (run_settings.py)."""

import os

import pytest

from open_seq2seq import run_settings
from open_seq2seq.errors import ConfigError
from open_seq2seq.overrides import Parsed


def test_overrides_round_trip_last_value_per_key_and_devices_forgotten(tmp_path):
  run_settings.write_overrides(str(tmp_path), [
      ("encoder_params/encoder_layers", "3"), ("logdir", "x"), ("num_gpus", "2"),
      ("decoder_params/alpha", Parsed(0.5)), ("encoder_params/encoder_layers", "4")])
  saved = run_settings.read_overrides(str(tmp_path))
  assert [(k, v.value if isinstance(v, Parsed) else v) for k, v in saved] == [
      ("decoder_params/alpha", 0.5), ("encoder_params/encoder_layers", "4")]
  assert run_settings.read_overrides(str(tmp_path / "none")) is None


@pytest.mark.parametrize("text", ["[unclosed", "- just a string\n", "{a: 1}\n"])
def test_a_garbled_overrides_file_is_one_line(tmp_path, text):
  (tmp_path / run_settings.OVERRIDES_FILE).write_text(text)
  with pytest.raises(ConfigError, match="remove the file") as info:
    run_settings.read_overrides(str(tmp_path))
  assert "\n" not in str(info.value)


def test_notices_name_what_applies_and_what_the_command_line_replaces():
  saved = [("encoder_params/encoder_layers", "3"), ("dtype", Parsed("mixed"))]
  assert run_settings.applied_notice("runs/a", saved) == (
      "the settings runs/a was made with apply (overrides.yaml): "
      "--encoder_params/encoder_layers=3 --dtype='mixed'")
  assert run_settings.applied_notice("runs/a", [("logdir", "b")]) is None
  assert run_settings.displaced(saved, [("encoder_params/encoder_layers", "2"),
                                        ("dtype", Parsed("mixed")), ("max_steps", "5")]) == [
      "--encoder_params/encoder_layers=2 replaces the run's encoder_params/encoder_layers=3"]


def test_model_differences_compare_model_keys_and_vocabularies_only():
  run = {"encoder_params": {"layers": 3, "width": 8}, "batch_size_per_gpu": 4,
         "data_layer_params": {"source_file": "train.txt", "src_vocab_file": "v1"},
         "max_steps": 10}
  now = {"encoder_params": {"layers": 2, "width": 8}, "batch_size_per_gpu": 1,
         "data_layer_params": {"source_file": "dev.txt", "src_vocab_file": "v2"},
         "max_steps": 99}
  keys = ["encoder_params", "batch_size_per_gpu", "data_layer_params"]
  assert [str(d) for d in run_settings.model_differences(run, now, keys)] == [
      "encoder_params/layers: run 3, now 2",
      "data_layer_params/src_vocab_file: run 'v1', now 'v2'"]
  assert run_settings.model_differences(run, run, keys) == []


def test_saved_train_config_reads_config_yaml(tmp_path):
  assert run_settings.saved_train_config(str(tmp_path)) is None
  (tmp_path / "config.yaml").write_text("train:\n  dtype: float32\neval:\n  dtype: mixed\n")
  assert run_settings.saved_train_config(str(tmp_path)) == {"dtype": "float32"}
  os.remove(tmp_path / "config.yaml")


def test_eval_takes_its_own_data_and_a_resumed_run_the_runs():
  saved = [("data_layer_params/source_file", "train.txt"), ("batch_size_per_gpu", "64"),
           ("data_layer_params/src_vocab_file", "v.txt"), ("encoder_params/layers", "3"),
           ("data_layer_params/dataset_files", "['a.csv']"), ("num_gpus", "2"),
           ("eval_batches", "5")]
  assert [k for k, _ in run_settings.applicable(saved, resuming=False)] == [
      "data_layer_params/src_vocab_file", "encoder_params/layers"]
  assert [k for k, _ in run_settings.applicable(saved, resuming=True)] == [
      "data_layer_params/source_file", "batch_size_per_gpu", "data_layer_params/src_vocab_file",
      "encoder_params/layers", "data_layer_params/dataset_files", "eval_batches"]
