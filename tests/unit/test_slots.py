"""One table of slots drives validation, overrides, --help_params and the reference."""

import textwrap

import pytest

from open_seq2seq import config as cfg
from open_seq2seq import slots
from open_seq2seq.encoders.tdnn_encoder import TDNNEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.models.model import Model
from open_seq2seq.utils.params import Configurable, Param, callable_or_class
from open_seq2seq.reference import config_reference
from tests.unit.test_config import FakeDecoder, FakeLayer, FakeLoss

BLOCKS = [{"kernel_size": [11], "stride": [2], "num_channels": 8},
          {"kernel_size": [5], "num_channels": 8, "residual": True},
          {"kernel_size": [5], "num_channels": 8, "type": "sep_conv1d"},
          {"kernel_size": [1], "num_channels": 16}]

BASE = {
    "batch_size_per_gpu": 2, "max_steps": 10,
    "data_layer": FakeLayer, "data_layer_params": {"source_file": "a.txt"},
    "encoder": TDNNEncoder, "encoder_params": {"convnet_layers": BLOCKS},
    "decoder": FakeDecoder, "loss": FakeLoss,
}


def resolve(**changes):
  return cfg.resolve_config(Model, cfg.deep_merge(BASE, changes), "train")


def error_of(**changes) -> str:
  with pytest.raises(ConfigError) as info:
    resolve(**changes)
  message = str(info.value)
  assert "\n" not in message
  return message


# ----------------------------------------------------------------------------- the table
def test_table_and_model_declare_the_same_slots():
  declared = slots.top_level_declarations(Model)
  assert [s.name for s in slots.SLOTS] == ["data_layer", "encoder", "decoder", "loss",
                                          "optimizer", "lr_policy", "regularizer",
                                          "initializer", "loss_scaling"]
  for slot in slots.SLOTS:
    assert slot.name in declared and slot.params_key in declared
    assert slots.slot_of(slot.params_key) is slot
  # every *_params key of the model belongs to a slot or declares its own keys (larc_params):
  # none escapes validation
  unchecked = {k for k in declared if k.endswith("_params") and declared[k].nested() is None}
  assert unchecked == {s.params_key for s in slots.SLOTS}


def test_the_model_declares_what_shapes_it_and_the_run_the_rest():
  """Model.PARAMS holds the model's keys only; the run's keys are declared once, by their
  owner (training/run_params.py), and a model class may not declare one again."""
  from open_seq2seq.training.run_params import GROUPS, RUN_PARAMS
  assert set(Model.declared_params()) == {
      "data_layer", "data_layer_params", "encoder", "encoder_params", "decoder",
      "decoder_params", "loss", "loss_params", "initializer", "initializer_params",
      "batch_size_per_gpu", "eval_batch_size_per_gpu", "random_seed", "dtype"}
  assert not set(Model.declared_params()) & set(RUN_PARAMS)
  assert sum(len(group) for group in GROUPS.values()) == len(RUN_PARAMS)
  for model_class in (choice.value for choice in slots.package_choices("models")):
    assert not set(model_class.declared_params()) & set(RUN_PARAMS), model_class

  class Clashing(Model):
    PARAMS = {"max_steps": Param(int, 1, "a run key again")}

  with pytest.raises(ConfigError, match=r"^Clashing: declares max_steps, a key of the run"):
    cfg.resolve_config(Clashing, BASE, "train")


def test_a_model_keeps_only_its_own_keys_and_the_trainer_reads_the_run():
  from tests.helpers import linear
  trainer = linear.trainer(max_steps=7, iter_size=2, batch_size_per_gpu=2)
  assert "max_steps" not in trainer.model.params and "optimizer" not in trainer.model.params
  assert trainer.model.params["batch_size_per_gpu"] == 2
  assert trainer.max_steps == 7 and trainer.params["iter_size"] == 2


def test_a_key_outside_the_table_is_rejected():
  assert slots.slot_of("foo_params") is None
  assert error_of(foo_params={"a": 1}).startswith("foo_params: unknown parameter of Model")
  with pytest.raises(ConfigError, match="^foo_params: unknown parameter of Model"):
    cfg.apply_overrides(Model, BASE, [("foo_params/a", "1")])


class Scorer(Configurable):
  PARAMS = {"beam": Param(int, 4, "Beam width.")}


class ScoredModel(Model):
  PARAMS = {"scorer": Param((callable_or_class, None), None, "Scorer class."),
            "scorer_params": Param(dict, {}, "Parameters of the scorer.")}


@pytest.fixture
def scorer_slot(monkeypatch):
  slot = slots.Slot("scorer", "scorer_params", "Scorers", lambda klass: klass.declared_params(),
                    lambda: [slots.Choice("Scorer", Scorer, "A scorer.")])
  monkeypatch.setattr(slots, "SLOTS", slots.SLOTS + (slot,))
  return slot


def test_a_new_row_drives_validation_overrides_help_and_reference(scorer_slot):
  config = cfg.deep_merge(BASE, {"scorer": Scorer, "scorer_params": {}})
  assert cfg.resolve_config(ScoredModel, config, "train")["scorer_params"] == {"beam": 4}
  with pytest.raises(ConfigError, match="scorer_params/bem: .*did you mean 'beam'"):
    cfg.resolve_config(ScoredModel, dict(config, scorer_params={"bem": 2}), "train")
  with pytest.raises(ConfigError, match="scorer_params/bem: .*did you mean 'beam'"):
    cfg.apply_overrides(ScoredModel, config, [("scorer_params/bem", "2")])
  assert cfg.apply_overrides(ScoredModel, config, [("scorer_params/beam", "2")])[
      "scorer_params"] == {"beam": 2}
  assert "## scorer_params: Scorer" in slots.help_params(ScoredModel, config)
  assert "## Scorers (`scorer`, `scorer_params`)" in config_reference()


# ----------------------------------------------------------------------------- validation
def test_nested_list_entries_are_validated_with_index_paths():
  blocks = [dict(b) for b in BLOCKS]
  blocks[3] = {"kernel_szie": [1], "num_channels": 16}
  assert error_of(encoder_params={"convnet_layers": blocks}) == (
      "encoder_params/convnet_layers/3/kernel_szie: unknown parameter of a convnet_layers "
      "block; did you mean 'kernel_size'?")
  blocks[3] = {"kernel_size": 1, "num_channels": 16}
  assert error_of(encoder_params={"convnet_layers": blocks}).startswith(
      "encoder_params/convnet_layers/3/kernel_size: expected list of 1 int >= 1 "
      "([k]; [k, 1] for conv2d), got int 1")
  blocks[3] = {"kernel_size": [1], "num_channels": 16, "stride": [2], "residual": True}
  assert "convnet_layers/3: a residual block cannot have stride > 1" in error_of(
      encoder_params={"convnet_layers": blocks})
  blocks[3] = {"kernel_size": [1], "num_channels": 16, "padding": "full"}
  assert "convnet_layers/3/padding: padding must be" in error_of(
      encoder_params={"convnet_layers": blocks})
  assert error_of(encoder_params={"convnet_layers": []}).startswith(
      "encoder_params/convnet_layers: needs at least 1 entry")
  assert error_of(encoder_params={"convnet_layers": [3]}).startswith(
      "encoder_params/convnet_layers/0: expected a dict, got int 3")


def test_nested_defaults_are_filled_without_touching_the_config():
  config = cfg.deep_merge(BASE, {})
  blocks = cfg.resolve_config(Model, config, "train")["encoder_params"]["convnet_layers"]
  assert blocks[1] == {"type": "conv1d", "repeat": 1, "kernel_size": [5], "stride": [1],
                       "dilation": [1], "num_channels": 8, "padding": "SAME",
                       "dropout_keep_prob": None, "residual": True, "residual_dense": False}
  assert blocks[1]["stride"] is not blocks[2]["stride"]  # no shared default list
  assert config["encoder_params"]["convnet_layers"][1] == BLOCKS[1]  # input unchanged
  # a resolved config validates to itself (components validate their params again)
  assert TDNNEncoder.validate_params(
      cfg.resolve_config(Model, config, "train")["encoder_params"])["convnet_layers"] == blocks


def test_params_without_a_chosen_part_are_an_error():
  assert error_of(regularizer_params={"scale": 1e-4}) == (
      "regularizer_params: given, but regularizer is None; set regularizer or remove "
      "regularizer_params")
  assert error_of(lr_policy_params={"learning_rate": 0.1}).startswith(
      "lr_policy_params: given, but lr_policy is None")


def test_optimizer_is_validated_through_its_slot():
  assert error_of(optimizer_params={"epsilom": 1e-8}) == (
      "optimizer_params/epsilom: unknown parameter of Adam; did you mean 'epsilon'?")
  assert "top-level 'iter_size'" in error_of(optimizer_params={"gradient_accumulation_steps": 2})
  assert error_of(optimizer="Momentum").startswith("optimizer_params/momentum: required")
  assert error_of(optimizer="NovoGradd").startswith("optimizer: unknown optimizer 'NovoGradd'")
  assert resolve(optimizer="sgd", optimizer_params={"momentum": 1})["optimizer_params"] == {
      "momentum": 1.0}


def test_partial_slots_check_given_keys_only():
  import keras
  from open_seq2seq.optimizers import poly_decay
  params = resolve(lr_policy=poly_decay, lr_policy_params={"learning_rate": 0.1})
  assert params["lr_policy_params"] == {"learning_rate": 0.1}  # decay_steps: the trainer's
  assert "lr_policy_params/decay_steps: expected int" in error_of(
      lr_policy=poly_decay, lr_policy_params={"learning_rate": 0.1, "decay_steps": "10"})
  assert error_of(regularizer=keras.regularizers.L2, regularizer_params={"scael": 1.0}) == (
      "regularizer_params/scael: unknown parameter of L2; did you mean 'scale'?")


def test_loss_scaling_params_are_checked_against_the_chosen_scaler():
  params = resolve(loss_scaling="Backoff", loss_scaling_params={"step_window": 10})
  assert params["loss_scaling_params"]["step_window"] == 10
  assert params["loss_scaling_params"]["scale_min"] == 1.0  # defaults filled in
  assert error_of(loss_scaling="Backoff", loss_scaling_params={"step_windw": 10}) == (
      "loss_scaling_params/step_windw: unknown parameter of BackoffScaler; did you mean "
      "'step_window'?")
  assert "loss_scaling_params/beta2: must be in (0, 1)" in error_of(
      loss_scaling="logmax", loss_scaling_params={"beta2": 1.5})
  assert error_of(loss_scaling_params={"step_window": 10}).startswith(
      "loss_scaling_params: given, but loss_scaling is None")
  assert error_of(loss_scaling=128.0, loss_scaling_params={"scale_min": 1.0}).startswith(
      "loss_scaling_params: a static loss_scaling takes no parameters, got scale_min")
  assert error_of(loss_scaling="Backof").startswith("loss_scaling: 'Backof' is not a number")
  assert resolve(loss_scaling="512")["loss_scaling_params"] == {}


# ----------------------------------------------------------------------------- overrides
def override(*pairs, config=None):
  return cfg.apply_overrides(Model, config or BASE, [p.split("=", 1) for p in pairs])


def test_overrides_index_into_lists_of_declared_dicts():
  config = override("encoder_params/convnet_layers/1/kernel_size=[7]",
                    "encoder_params/convnet_layers/2/type=conv1d",
                    "encoder_params/convnet_layers/0/padding=valid")
  blocks = config["encoder_params"]["convnet_layers"]
  assert blocks[1]["kernel_size"] == [7] and blocks[2]["type"] == "conv1d"
  assert blocks[0]["padding"] == "valid"  # a str key keeps the text
  assert BLOCKS[1]["kernel_size"] == [5]  # the original is untouched
  resolved = cfg.resolve_config(Model, config, "train")["encoder_params"]["convnet_layers"]
  assert resolved[0]["padding"] == "VALID"
  whole = override("encoder_params/convnet_layers/3={'kernel_size': [3], 'num_channels': 4}")
  assert whole["encoder_params"]["convnet_layers"][3] == {"kernel_size": [3], "num_channels": 4}


@pytest.mark.parametrize("path,message", [
    ("encoder_params/convnet_layers/0/kernel_szie=[3]",
     "^encoder_params/convnet_layers/0/kernel_szie: unknown parameter of a convnet_layers "
     "block; did you mean 'kernel_size'"),
    ("encoder_params/convnet_layers/4/kernel_size=[3]",
     r"^--encoder_params/convnet_layers/4/kernel_size: encoder_params/convnet_layers is a list "
     r"of 4 entries; '4' is not one of its indices"),
    ("encoder_params/convnet_layers/first/kernel_size=[3]",
     "convnet_layers is a list; expected an entry index, got 'first'"),
    ("encoder_params/convnet_layer/0/kernel_size=[3]", "did you mean 'convnet_layers'"),
])
def test_bad_list_overrides(path, message):
  with pytest.raises(ConfigError, match=message):
    override(path)


def test_override_creates_an_unset_declared_dict():
  from open_seq2seq.data.speech2text.speech2text import Speech2TextDataLayer
  config = dict(BASE, data_layer=Speech2TextDataLayer,
                data_layer_params={"num_audio_features": 8, "vocab_file": "v.txt",
                                   "augmentation": None})
  config = override("data_layer_params/augmentation/n_time_mask=2", config=config)
  assert config["data_layer_params"]["augmentation"] == {"n_time_mask": 2}
  with pytest.raises(ConfigError, match="augmentation/n_time_msk: .*'n_time_mask'"):
    override("data_layer_params/augmentation/n_time_msk=2", config=config)


def test_overrides_of_loss_scaling_params_follow_the_chosen_scaler():
  config = override("loss_scaling=Backoff", "loss_scaling_params/step_window=5")
  assert config["loss_scaling_params"] == {"step_window": 5}
  with pytest.raises(ConfigError, match="loss_scaling_params/step_window: .*LogMax"):
    override("loss_scaling=LogMax", "loss_scaling_params/step_window=5")


# ----------------------------------------------------------------------------- help
def test_help_lists_every_chosen_part_with_nested_keys():
  from open_seq2seq.optimizers import poly_decay
  config = resolve(lr_policy=poly_decay, lr_policy_params={"learning_rate": 0.1},
                   loss_scaling="Backoff")
  text = slots.help_params(Model, config)
  for heading in ("## Model (top-level keys)", "## data_layer_params: FakeLayer",
                  "## encoder_params: TDNNEncoder", "## decoder_params: FakeDecoder",
                  "## loss_params: FakeLoss", "## optimizer_params: Adam",
                  "## lr_policy_params: poly_decay", "## loss_scaling_params: Backoff"):
    assert heading in text
  assert "## regularizer_params" not in text  # none chosen
  assert "| `convnet_layers/<i>/kernel_size` |" in text
  assert "| `decay_steps` | int | **required** | Length of the decay" in text
  assert "| `step_window` | int | `2000` |" in text


def test_backoff_typo_stops_load_config_before_data_is_read(tmp_path):
  path = tmp_path / "config.py"
  path.write_text(textwrap.dedent(f"""
      from open_seq2seq.models.speech2text import Speech2Text
      from tests.helpers.speech import speech_config
      base_model = Speech2Text
      base_params = speech_config([{str(tmp_path / 'no_such.csv')!r}], loss_scaling="Backoff",
                                  loss_scaling_params={{"step_windw": 100}})
      """))
  with pytest.raises(ConfigError, match="^loss_scaling_params/step_windw: .*'step_window'"):
    cfg.load_config(str(path), "train")
  # the same typo from the command line is caught while parsing the override
  path.write_text(path.read_text().replace('"step_windw": 100', '"step_window": 100'))
  with pytest.raises(ConfigError, match="^loss_scaling_params/scale_mn: .*'scale_min'"):
    cfg.load_config(str(path), "train", ["--loss_scaling_params/scale_mn=2.0"])
  assert cfg.load_config(str(path), "train")[1]["train"]["loss_scaling_params"][
      "step_window"] == 100


# ----------------------------------------------------------------------------- ignored keys
def test_keys_that_change_nothing_are_named_once_with_the_reason(tmp_path):
  from open_seq2seq.decoders import FullyConnectedCTCDecoder
  from open_seq2seq.encoders import DeepSpeech2Encoder
  from open_seq2seq.models import Speech2Text
  config = {
      "encoder": DeepSpeech2Encoder,
      "encoder_params": {"use_cudnn_rnn": False, "data_format": "channels_last",
                         "n_hidden": 8},
      "decoder": FullyConnectedCTCDecoder, "decoder_params": {"trie_path": "/x/trie"},
  }
  lines = slots.ignored_settings(Speech2Text, config)
  # data_format is set to the default (what the encoder does anyway): no notice
  assert lines == [
      "encoder_params/use_cudnn_rnn: ignored: Keras picks the fused kernel itself.",
      "decoder_params/trie_path: ignored: the LM decoder needs no trie."]


def test_initializer_params_are_checked_against_the_chosen_initializer():
  config = {"initializer": "random_normal", "initializer_params": {"stdev": 0.1}}
  with pytest.raises(ConfigError, match="initializer_params/stdev.*'stddev'"):
    slots.validate_slots(config)
  with pytest.raises(ConfigError, match="initializer: unknown Keras initializer 'nope'"):
    slots.validate_slots({"initializer": "nope"})
  assert slots.validate_slots({"initializer": "random_normal",
                               "initializer_params": {"stddev": 0.1}})[
      "initializer_params"] == {"stddev": 0.1}


def test_every_ignored_key_says_why():
  from open_seq2seq.utils.params import Param
  assert Param(int, 0, "Ignored: not needed here.").ignored == "not needed here."
  assert Param(int, 0, "Works.").ignored == ""
