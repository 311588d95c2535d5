"""Augmentation stays within its configured bounds and rejects bad configs."""

import numpy as np
import pytest

from open_seq2seq.data.speech2text.augmentation import (augment_signal, spec_augment,
                                                        validate_augmentation)
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
  assert validate_augmentation({"time_stretch_ratio": 0.05}) == {"speed_perturbation_ratio": 0.05}


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
    ({"speed_ratio": 0.1}, "unknown augmentation"),
    ({"speed_perturbation_ratio": 1.5}, "ratio in"),
    ({"noise_level_min": -60}, "both"),
    ({"noise_level_min": -30, "noise_level_max": -60}, "above"),
    ({"n_freq_mask": -1}, "non-negative"),
])
def test_bad_augmentation_configs(augmentation, match):
  with pytest.raises(ConfigError, match=match):
    validate_augmentation(augmentation)
