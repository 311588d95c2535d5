"""Augmentation stays within its configured bounds and rejects bad configs."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import resolve_config
from open_seq2seq.data.speech2text.augmentation import (augment_signal, has_signal_augmentation,
                                                        has_spec_augment, spec_augment,
                                                        validate_augmentation)
from open_seq2seq.errors import ConfigError


def impulse(n=16000):
  signal = np.zeros(n, np.float32)
  signal[0] = 1.0
  return signal


# Speed perturbation means OpenSeq2Seq's: N samples are resampled to N * s samples.
@pytest.mark.parametrize("key", ["speed_perturbation_ratio", "time_stretch_ratio"])
def test_speed_perturbation_resamples_to_n_times_s(key):
  rng = np.random.default_rng(0)
  aug = validate_augmentation({key: 0.5})
  lengths = np.array([len(augment_signal(impulse(4000), aug, rng)) for _ in range(200)])
  assert lengths.max() <= 1.5 * 4000 + 1 and lengths.min() >= 0.5 * 4000  # s in [0.5, 1.5]
  assert lengths.min() < 0.6 * 4000 and lengths.max() > 1.4 * 4000  # and it reaches both ends
  assert abs(lengths.mean() / 4000 - 1.0) < 0.05  # s is uniform around 1, not 1 / s


def test_speed_list_gives_n_times_each_speed():
  rng = np.random.default_rng(0)
  aug = validate_augmentation({"speed_perturbation_ratio": [0.9, 1.0, 1.1]})
  lengths = {len(augment_signal(impulse(), aug, rng)) for _ in range(30)}
  assert lengths == {14400, 16000, 17600}


def test_small_ratio_perturbs_almost_every_draw():
  rng = np.random.default_rng(0)
  aug = validate_augmentation({"speed_perturbation_ratio": 0.05})
  signal = np.sin(np.arange(1000) * 0.05).astype(np.float32)
  reference = augment_signal(signal, {}, rng)  # peak normalisation only
  unchanged = sum(np.array_equal(augment_signal(signal, aug, rng), reference)
                  for _ in range(1000))
  assert unchanged < 10  # < 1 % (a speed within 2.5e-4 of 1 is left as 1: 0.5 % expected)


def test_time_stretch_ratio_is_an_alias():
  aug = validate_augmentation({"time_stretch_ratio": 0.05})
  assert aug["speed_perturbation_ratio"] == 0.05 and aug["time_stretch_ratio"] is None
  assert validate_augmentation(aug) == aug  # validating again changes nothing


def test_defaults_are_filled_and_mean_no_augmentation():
  aug = validate_augmentation({"speed_perturbation_ratio": None})
  assert aug["noise_level_min"] is None and aug["speed_perturbation_ratio"] is None
  assert not has_signal_augmentation(aug) and not has_spec_augment(aug)
  signal = np.linspace(-0.5, 0.5, 100).astype(np.float32)
  np.testing.assert_allclose(augment_signal(signal, aug, np.random.default_rng(0)),
                             signal / 0.5, rtol=1e-4)  # only peak normalisation
  features = np.ones((10, 4), np.float32)
  np.testing.assert_array_equal(spec_augment(features, aug, [0, 1]), features)


def test_spec_augment_defaults_are_openseq2seq_s():
  # OpenSeq2Seq: no masks unless n_*_mask is set; then widths up to 10 features, 50 frames
  aug = validate_augmentation({"n_freq_mask": 1, "n_time_mask": 1})
  assert (aug["width_freq_mask"], aug["width_time_mask"]) == (10, 50)
  assert validate_augmentation({"n_time_mask": 0})["n_freq_mask"] == 0
  features = np.ones((400, 64), np.float32)
  widths_t, widths_f = set(), set()
  for seed in range(60):
    out = spec_augment(features, aug, [seed, 3]).numpy()
    widths_t.add(int(np.all(out == 0, axis=1).sum()))
    widths_f.add(int(np.all(out == 0, axis=0).sum()))
  assert max(widths_t) <= 50 and max(widths_t) > 30
  assert max(widths_f) <= 10 and max(widths_f) > 6


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
  aug = validate_augmentation({"n_freq_mask": 2, "width_freq_mask": 5,
                               "n_time_mask": 3, "width_time_mask": 7})
  features = np.ones((100, 40), np.float32)
  for seed in range(50):
    out = spec_augment(features, aug, [seed, 0]).numpy()
    assert out.shape == features.shape
    zero_cols = np.all(out == 0, axis=0).sum()
    zero_rows = np.all(out == 0, axis=1).sum()
    assert zero_cols <= 2 * 5 and zero_rows <= 3 * 7
    assert set(np.unique(out)) <= {0.0, 1.0}
  assert np.all(features == 1)  # input untouched


def test_spec_augment_noop_without_masks():
  features = np.ones((10, 4), np.float32)
  np.testing.assert_array_equal(spec_augment(features, {}, [0, 0]), features)


def test_spec_augment_is_seeded_and_runs_in_graph():
  aug = validate_augmentation({"n_freq_mask": 2, "width_freq_mask": 8,
                               "n_time_mask": 2, "width_time_mask": 20})
  features = np.ones((120, 40), np.float32)
  a = spec_augment(features, aug, tf.constant([5, 6], tf.int64)).numpy()
  b = spec_augment(features, aug, tf.constant([5, 6], tf.int64)).numpy()
  np.testing.assert_array_equal(a, b)
  assert any(not np.array_equal(a, spec_augment(features, aug, [7, s]).numpy())
             for s in range(5))
  dataset = tf.data.Dataset.from_tensors(features).map(
      lambda x: spec_augment(x, aug, tf.constant([5, 6], tf.int64)))
  np.testing.assert_array_equal(next(iter(dataset)).numpy(), a)
  short = spec_augment(np.ones((3, 2), np.float32), aug, [1, 1]).numpy()  # masks fit
  assert short.shape == (3, 2)


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
