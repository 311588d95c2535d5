"""Augmentation stays within its configured bounds and rejects bad configs."""

import numpy as np
import pytest

from open_seq2seq.config import resolve_config
from open_seq2seq.data.speech2text.augmentation import (augment_signal, has_signal_augmentation,
                                                        spec_augment, validate_augmentation)
from open_seq2seq.errors import ConfigError


def impulse(n=16000):
  signal = np.zeros(n, np.float32)
  signal[0] = 1.0
  return signal


def test_speed_perturbation_length_within_ratio():
  rng = np.random.default_rng(0)
  aug = validate_augmentation({"speed_perturbation_ratio": 0.1})
  lengths = [len(augment_signal(impulse(), aug, rng)) for _ in range(40)]
  assert min(lengths) >= 16000 / 1.1 - 2 and max(lengths) <= 16000 / 0.9 + 2
  assert max(lengths) - min(lengths) > 1000  # it does vary


def test_speed_list_picks_listed_speeds():
  rng = np.random.default_rng(0)
  aug = validate_augmentation({"speed_perturbation_ratio": [0.9, 1.0, 1.1]})
  lengths = {len(augment_signal(impulse(), aug, rng)) for _ in range(30)}
  expected = {round(16000 / s) for s in (0.9, 1.0, 1.1)}
  assert all(min(abs(l - e) for e in expected) <= 2 for l in lengths)
  assert len(lengths) == 3


def test_time_stretch_ratio_is_an_alias():
  aug = validate_augmentation({"time_stretch_ratio": 0.05})
  assert aug["speed_perturbation_ratio"] == 0.05 and aug["time_stretch_ratio"] is None
  assert validate_augmentation(aug) == aug  # validating again changes nothing


def test_defaults_are_filled_and_mean_no_augmentation():
  aug = validate_augmentation({"n_time_mask": 1})
  assert aug["noise_level_min"] is None and aug["speed_perturbation_ratio"] is None
  assert aug["n_freq_mask"] == 0 and aug["width_time_mask"] == 0
  assert not has_signal_augmentation(aug)
  signal = np.linspace(-0.5, 0.5, 100).astype(np.float32)
  np.testing.assert_allclose(augment_signal(signal, aug, np.random.default_rng(0)),
                             signal / 0.5, rtol=1e-4)  # only peak normalisation
  features = np.ones((10, 4), np.float32)
  assert spec_augment(features, aug, np.random.default_rng(0)) is features  # width 0


def test_speed_list_becomes_floats():
  assert validate_augmentation({"speed_perturbation_ratio": [1, 1.1]})[
      "speed_perturbation_ratio"] == [1.0, 1.1]


def test_noise_level_within_bounds():
  rng = np.random.default_rng(0)
  aug = validate_augmentation({"noise_level_min": -60, "noise_level_max": -40})
  for _ in range(10):
    out = augment_signal(impulse(), aug, rng)
    rms = out[1:].std()
    assert 10 ** (-60 / 20) * 0.8 <= rms <= 10 ** (-40 / 20) * 1.2
    assert np.abs(out).max() <= 1.0


def test_spec_augment_masks_within_bounds():
  rng = np.random.default_rng(0)
  aug = validate_augmentation({"n_freq_mask": 2, "width_freq_mask": 5,
                               "n_time_mask": 3, "width_time_mask": 7})
  features = np.ones((100, 40), np.float32)
  for _ in range(50):
    out = spec_augment(features, aug, rng)
    assert out.shape == features.shape
    zero_cols = np.all(out == 0, axis=0).sum()
    zero_rows = np.all(out == 0, axis=1).sum()
    assert zero_cols <= 2 * 5 and zero_rows <= 3 * 7
    assert set(np.unique(out)) <= {0.0, 1.0}
  assert np.all(features == 1)  # input untouched


def test_spec_augment_noop_without_masks():
  features = np.ones((10, 4), np.float32)
  assert spec_augment(features, {}, np.random.default_rng(0)) is features


@pytest.mark.parametrize("augmentation,match", [
    ({"speed_ratio": 0.1}, r"^data_layer_params/augmentation/speed_ratio: unknown parameter of "
                           r"augmentation; did you mean 'speed_perturbation_ratio'\?$"),
    ({"speed_perturbation_ratio": 1.5}, "speed_perturbation_ratio: expected ratio in"),
    ({"speed_perturbation_ratio": []}, "list of speeds > 0"),
    ({"speed_perturbation_ratio": [1.0, 0]}, "list of speeds > 0"),
    ({"noise_level_min": -60}, "augmentation: give both"),
    ({"noise_level_min": -30, "noise_level_max": -60}, "above"),
    ({"noise_level_min": "loud", "noise_level_max": -60}, "noise_level_min: expected float"),
    ({"n_freq_mask": -1}, "n_freq_mask: expected non-negative int"),
    ({"width_time_mask": True}, "width_time_mask: expected non-negative int"),
    ({"time_stretch_ratio": 0.1, "speed_perturbation_ratio": 0.1}, "keep one"),
])
def test_bad_augmentation_configs(augmentation, match):
  with pytest.raises(ConfigError, match=match) as info:
    validate_augmentation(augmentation)
  assert "\n" not in str(info.value)


def test_augmentation_typo_is_caught_when_the_config_is_resolved(tmp_path):
  from open_seq2seq.models.speech2text import Speech2Text
  from tests.helpers.speech import speech_config
  # the CSV does not exist: the error comes from validation, before any data is read
  config = speech_config([str(tmp_path / "missing.csv")],
                         data_params={"augmentation": {"n_time_mask": 2, "width_tme_mask": 5}})
  with pytest.raises(ConfigError, match=r"^data_layer_params/augmentation/width_tme_mask: "
                                        r"unknown parameter of augmentation; did you mean "
                                        r"'width_time_mask'\?"):
    resolve_config(Speech2Text, config, "train")
  config["data_layer_params"]["augmentation"] = {"time_stretch_ratio": 0.05}
  resolved = resolve_config(Speech2Text, config, "train")["data_layer_params"]["augmentation"]
  assert resolved["speed_perturbation_ratio"] == 0.05 and resolved["n_freq_mask"] == 0
