"""Config loading, mode merging, overrides and validation (no model is built)."""

import os
import textwrap

import pytest

from open_seq2seq import config as cfg
from open_seq2seq.errors import ConfigError
from open_seq2seq.models.model import Model
from open_seq2seq.utils.params import Configurable, Param, validate_params


class FakeEncoder(Configurable):
  PARAMS = {
      "num_hidden_layers": Param(int, doc="Layers."),
      "hidden_size": Param(int, 16, "Width."),
      "dropout": Param(float, 0.1, "Dropout."),
      "name_scope": Param(str, "enc", "A string."),
      "activation": Param(str, "relu", "Activation.", choices=("relu", "gelu")),
  }


class FakeDecoder(Configurable):
  PARAMS = {"beam_size": Param(int, 1, "Beam."), "alpha": Param(float, 0.6, "Penalty.")}


class FakeLayer(Configurable):
  PARAMS = {"source_file": Param(str, doc="Source."), "shuffle": Param(bool, False, "Shuffle.")}


class FakeLoss(Configurable):
  PARAMS = {}


def policy(global_step, learning_rate: float, warmup_steps: int = 10):
  return learning_rate


BASE = {
    "batch_size_per_gpu": 8,
    "max_steps": 10,
    "data_layer": FakeLayer,
    "data_layer_params": {"source_file": "a.txt"},
    "encoder": FakeEncoder,
    "encoder_params": {"num_hidden_layers": 2},
    "decoder": FakeDecoder,
    "decoder_params": {},
    "loss": FakeLoss,
    "lr_policy": policy,
    "lr_policy_params": {"learning_rate": 0.1},
}


def test_defaults_are_filled_in():
  params = cfg.resolve_config(Model, BASE, "train")
  assert params["num_checkpoints"] == 5
  assert params["encoder_params"]["hidden_size"] == 16
  assert params["decoder_params"]["alpha"] == 0.6
  assert params["iter_size"] == 1


def test_typo_names_full_path_and_suggests():
  bad = cfg.deep_merge(BASE, {"encoder_params": {"num_hiden_layers": 2}})
  with pytest.raises(ConfigError, match=r"encoder_params/num_hiden_layers.*'num_hidden_layers'"):
    cfg.resolve_config(Model, bad, "train")


def test_top_level_typo():
  bad = dict(BASE, batch_size_per_gpus=3)
  with pytest.raises(ConfigError, match=r"^batch_size_per_gpus: .*'batch_size_per_gpu'"):
    cfg.resolve_config(Model, bad, "train")


def test_wrong_type_names_path():
  bad = cfg.deep_merge(BASE, {"decoder_params": {"beam_size": "4"}})
  with pytest.raises(ConfigError, match=r"decoder_params/beam_size: expected int, got str '4'"):
    cfg.resolve_config(Model, bad, "train")


def test_bool_is_not_int_and_int_widens_to_float():
  declared = {"n": Param(int), "x": Param(float)}
  with pytest.raises(ConfigError):
    validate_params({"n": True, "x": 1}, declared)
  assert validate_params({"n": 3, "x": 1}, declared) == {"n": 3, "x": 1.0}


def test_missing_required_key():
  bad = cfg.deep_merge(BASE, {})
  bad["encoder_params"] = {}
  with pytest.raises(ConfigError, match=r"encoder_params/num_hidden_layers: required"):
    cfg.resolve_config(Model, bad, "train")


def test_choices():
  bad = cfg.deep_merge(BASE, {"encoder_params": {"activation": "tanh"}})
  with pytest.raises(ConfigError, match="encoder_params/activation: 'tanh' is not one of"):
    cfg.resolve_config(Model, bad, "train")


def test_lr_policy_params_checked_against_signature():
  bad = cfg.deep_merge(BASE, {"lr_policy_params": {"warmup_step": 5}})
  with pytest.raises(ConfigError, match=r"lr_policy_params/warmup_step.*'warmup_steps'"):
    cfg.resolve_config(Model, bad, "train")


def test_training_needs_steps_or_epochs():
  bad = dict(BASE)
  del bad["max_steps"]
  with pytest.raises(ConfigError, match="max_steps"):
    cfg.resolve_config(Model, bad, "train")
  cfg.resolve_config(Model, bad, "infer")  # not needed to infer
  with pytest.raises(ConfigError, match="not both"):
    cfg.resolve_config(Model, dict(BASE, num_epochs=2), "train")


@pytest.mark.parametrize("key,value,message", [
    ("max_steps", 0, "max_steps: must be at least 1, got 0"),
    ("max_steps", -5, "max_steps: must be at least 1, got -5"),
    ("num_epochs", -1, "num_epochs: must be at least 1, got -1"),
    ("save_checkpoint_steps", 0, r"save_checkpoint_steps: must be at least 1 \(None turns"),
    ("eval_steps", -10, "eval_steps: must be at least 1"),
    ("print_loss_steps", 0, "print_loss_steps: must be at least 1"),
    ("print_samples_steps", 0, "print_samples_steps: must be at least 1"),
    ("save_summaries_steps", 0, "save_summaries_steps: must be at least 1"),
    ("eval_batch_size_per_gpu", 0, "eval_batch_size_per_gpu: must be at least 1"),
    ("bench_start", -1, "bench_start: must be at least 0"),
    ("profile_steps", [5], r"profile_steps: must be \[first, last\].*got \[5\]"),
    ("profile_steps", [0, 3], r"profile_steps: must be .*1 <= first <= last, got \[0, 3\]"),
    ("profile_steps", [6, 5], r"profile_steps: .*got \[6, 5\]"),
    ("profile_steps", [1.5, 3], r"profile_steps: .*got \[1.5, 3\]"),
])
def test_counts_and_periods_out_of_range_are_rejected(key, value, message):
  bad = dict(BASE, **{key: value})
  if key == "num_epochs":
    del bad["max_steps"]
  for mode in ("train", "eval"):  # a range error is one whatever the mode
    with pytest.raises(ConfigError, match=message):
      cfg.resolve_config(Model, bad, mode)


def test_periods_may_be_none():
  periods = {key: None for key in cfg.PERIOD_KEYS}
  assert cfg.resolve_config(Model, dict(BASE, **periods), "train")["eval_steps"] is None


def _write_config(tmp_path, body):
  path = tmp_path / "config.py"
  path.write_text(textwrap.dedent(body))
  return str(path)


CONFIG_FILE = """
from open_seq2seq.models.model import Model
from tests.unit.test_config import FakeEncoder, FakeDecoder, FakeLayer, FakeLoss
base_model = Model
base_params = {
    "batch_size_per_gpu": 8, "max_steps": 10, "logdir": "base",
    "data_layer": FakeLayer, "data_layer_params": {"source_file": "train.txt", "shuffle": True},
    "encoder": FakeEncoder, "encoder_params": {"num_hidden_layers": 2, "hidden_size": 32},
    "decoder": FakeDecoder, "loss": FakeLoss,
}
eval_params = {"data_layer_params": {"source_file": "dev.txt", "shuffle": False},
               "encoder_params": {"num_hidden_layers": 6}}
infer_params = {"batch_size_per_gpu": 1, "data_layer_params": {"source_file": "test.txt"}}
"""


def test_mode_dicts_deep_merge(tmp_path):
  path = _write_config(tmp_path, CONFIG_FILE)
  _, configs = cfg.load_config(path, "train_eval")
  assert configs["train"]["data_layer_params"] == {"source_file": "train.txt", "shuffle": True}
  assert configs["eval"]["data_layer_params"] == {"source_file": "dev.txt", "shuffle": False}
  # merged, not replaced: hidden_size survives the eval dict
  assert configs["eval"]["encoder_params"]["hidden_size"] == 32
  assert configs["eval"]["encoder_params"]["num_hidden_layers"] == 6
  _, configs = cfg.load_config(path, "interactive_infer")  # falls back to infer_params
  assert configs["interactive_infer"]["batch_size_per_gpu"] == 1


def test_overrides_win_over_mode_dicts(tmp_path):
  path = _write_config(tmp_path, CONFIG_FILE)
  _, configs = cfg.load_config(path, "eval", [
      "--encoder_params/num_hidden_layers=3", "--logdir=elsewhere",
      "--decoder_params/alpha=1", "--data_layer_params/shuffle=True",
      "--encoder_params/name_scope=123"])
  params = configs["eval"]
  assert params["encoder_params"]["num_hidden_layers"] == 3  # eval dict said 6
  assert params["logdir"] == "elsewhere"
  assert params["decoder_params"]["alpha"] == 1.0
  assert params["data_layer_params"]["shuffle"] is True
  assert params["encoder_params"]["name_scope"] == "123"  # str key keeps the text


def test_override_typo_is_reported(tmp_path):
  path = _write_config(tmp_path, CONFIG_FILE)
  with pytest.raises(ConfigError, match=r"encoder_params/num_hiden_layers.*num_hidden_layers"):
    cfg.load_config(path, "train", ["--encoder_params/num_hiden_layers=3"])
  with pytest.raises(ConfigError, match="unknown argument"):
    cfg.load_config(path, "train", ["positional"])


def test_bad_config_files(tmp_path):
  with pytest.raises(ConfigError, match="does not exist"):
    cfg.load_config(str(tmp_path / "nope.py"), "train")
  path = _write_config(tmp_path, "base_params = {}\n")
  with pytest.raises(ConfigError, match="no base_model"):
    cfg.load_config(path, "train")
  path = _write_config(tmp_path, "base_model = 1\nbase_params = {\n")
  with pytest.raises(ConfigError, match=r"config.py:\d+: syntax error"):
    cfg.load_config(path, "train")
  path = _write_config(tmp_path, "import no_such_module_xyz\n")
  with pytest.raises(ConfigError, match=r"config.py:1: config failed to load: ModuleNotFoundError"):
    cfg.load_config(path, "train")
  # a relative --config_file keeps the line of the error too
  relative = os.path.relpath(path)
  with pytest.raises(ConfigError, match=r"config.py:1: config failed to load: ModuleNotFoundError"):
    cfg.load_config(relative, "train")


def test_config_to_text_names_classes():
  text = cfg.config_to_text(cfg.resolve_config(Model, BASE, "train"))
  assert "tests.unit.test_config.FakeEncoder" in text
  assert "'batch_size_per_gpu': 8" in text


# ----------------------------------------------------------------------------- declarations
def test_declared_lists_and_dicts_validate_recursively():
  from open_seq2seq.utils.params import dict_of, list_of

  def no_empty_name(entry, path):
    if not entry["name"]:
      raise ConfigError(f"{path}/name: must not be empty")
    return dict(entry, name=entry["name"].lower())

  declared = {"layers": Param(list_of({"name": Param(str, doc="N."),
                                       "size": Param(int, 4, "S.")}, "a layer", no_empty_name),
                              doc="L."),
              "extra": Param((dict_of({"on": Param(bool, False, "O.")}, "extra"), None), None,
                             "E.")}
  got = validate_params({"layers": [{"name": "A"}, {"name": "b", "size": 2}]}, declared, "x")
  assert got == {"layers": [{"name": "a", "size": 4}, {"name": "b", "size": 2}], "extra": None}
  assert validate_params({"layers": [], "extra": {}}, declared)["extra"] == {"on": False}
  with pytest.raises(ConfigError, match=r"^x/layers/1/sise: unknown parameter of a layer; "
                                        r"did you mean 'size'\?$"):
    validate_params({"layers": [{"name": "a"}, {"name": "b", "sise": 2}]}, declared, "x")
  with pytest.raises(ConfigError, match="^x/layers/0/name: must not be empty$"):
    validate_params({"layers": [{"name": ""}]}, declared, "x")
  with pytest.raises(ConfigError, match="^x/extra/on: expected bool, got int 1$"):
    validate_params({"layers": [], "extra": {"on": 1}}, declared, "x")
  with pytest.raises(ConfigError, match="^x/layers: expected list of dicts, got dict"):
    validate_params({"layers": {"name": "a"}}, declared, "x")


def test_partial_validation_and_empty_declarations():
  declared = {"a": Param(int, doc="A."), "b": Param(int, 2, "B.")}
  assert validate_params({"b": 3}, declared, partial=True) == {"b": 3}
  with pytest.raises(ConfigError, match="b: expected int"):
    validate_params({"b": "3"}, declared, partial=True)
  with pytest.raises(ConfigError, match="^p/x: Static takes no parameters$"):
    validate_params({"x": 1}, {}, "p", "Static")


def test_signature_params_read_descriptions_from_the_docstring():
  from open_seq2seq.utils.signatures import signature_params

  def f(global_step, rate: float, steps: int = 3):
    """Does f.

    Args:
      global_step: ignored.
      rate: the ``rate``, on
        two lines.

    Returns:
      nothing: not an argument.
    """

  declared = signature_params(f, skip=("global_step",))
  assert declared["rate"].doc == "The `rate`, on two lines."
  assert declared["steps"].doc == "" and declared["steps"].default == 3


# ----------------------------------------------------------------------------- infer fallback
def test_infer_without_infer_params_uses_the_eval_data(tmp_path):
  body = CONFIG_FILE.split("infer_params =")[0]
  _, configs = cfg.load_config(_write_config(tmp_path, body), "infer")
  assert configs["infer"]["data_layer_params"]["source_file"] == "dev.txt"
  _, configs = cfg.load_config(_write_config(tmp_path, CONFIG_FILE), "infer")
  assert configs["infer"]["data_layer_params"]["source_file"] == "test.txt"


# ----------------------------------------------------------------------------- YAML
def _yaml(tmp_path, text):
  path = tmp_path / "overrides.yaml"
  path.write_text(textwrap.dedent(text))
  return str(path)


def test_overrides_file_sets_keys_like_command_line_overrides(tmp_path):
  path = _write_config(tmp_path, CONFIG_FILE)
  overrides = _yaml(tmp_path, """
      logdir: from-yaml
      encoder_params:
        num_hidden_layers: 2
        name_scope: "007"
      decoder_params/alpha: 0.9
      data_layer_params: {shuffle: false}
  """)
  _, configs = cfg.load_config(path, "train", overrides_file=overrides)
  params = configs["train"]
  assert params["logdir"] == "from-yaml"
  # nested keys are set one by one: hidden_size (from base_params) survives
  assert params["encoder_params"] == {"num_hidden_layers": 2, "hidden_size": 32,
                                      "dropout": 0.1, "name_scope": "007",
                                      "activation": "relu"}
  assert params["decoder_params"]["alpha"] == 0.9
  assert params["data_layer_params"] == {"source_file": "train.txt", "shuffle": False}
  # the command line wins over the file
  _, configs = cfg.load_config(path, "train", ["--logdir=cli"], overrides_file=overrides)
  assert configs["train"]["logdir"] == "cli"


@pytest.mark.parametrize("text,message", [
    ("encoder_params:\n  num_hiden_layers: 2\n", "encoder_params/num_hiden_layers.*'num_hidden_layers'"),
    ("decoder_params: {alpha: fast}\n", "decoder_params/alpha: expected float"),
    ("logdir: [unclosed\n", r"overrides.yaml:\d+: YAML syntax error"),
    ("- a\n- b\n", "expected a mapping of config keys to values, got list"),
])
def test_overrides_file_errors_are_one_line(tmp_path, text, message):
  path = _write_config(tmp_path, CONFIG_FILE)
  with pytest.raises(ConfigError, match=message) as info:
    cfg.load_config(path, "train", overrides_file=_yaml(tmp_path, text))
  assert "\n" not in str(info.value)


def test_missing_overrides_file_is_named(tmp_path):
  path = _write_config(tmp_path, CONFIG_FILE)
  with pytest.raises(ConfigError, match="--overrides_file: cannot read .*nope.yaml"):
    cfg.load_config(path, "train", overrides_file=str(tmp_path / "nope.yaml"))


def test_resolved_config_as_yaml(tmp_path):
  import yaml
  _, configs = cfg.load_config(_write_config(tmp_path, CONFIG_FILE), "train_eval")
  loaded = yaml.safe_load(cfg.config_to_yaml(configs))
  assert set(loaded) == {"train", "eval"}
  assert loaded["train"]["encoder"] == "tests.unit.test_config.FakeEncoder"
  assert loaded["eval"]["data_layer_params"] == {"source_file": "dev.txt", "shuffle": False}
  assert loaded["train"]["max_steps"] == 10
