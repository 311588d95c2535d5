"""Training-time augmentation: speed perturbation, additive noise and SpecAugment masks.

The ``augmentation`` dict of ``data_layer_params`` takes OpenSeq2Seq's keys::

    {"speed_perturbation_ratio": 0.05,   # speed in [0.95, 1.05], or a list of speeds to pick
     "noise_level_min": -90,              # white noise at a level drawn in [min, max) dB
     "noise_level_max": -60,              # relative to the peak-normalised signal
     "n_freq_mask": 2, "width_freq_mask": 6,    # SpecAugment: masks of up to width features
     "n_time_mask": 2, "width_time_mask": 6}    # and up to width frames, set to 0 (the mean)

``time_stretch_ratio`` is accepted as OpenSeq2Seq's old name of ``speed_perturbation_ratio``.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from open_seq2seq.data.speech2text.audio import change_speed, peak_normalize
from open_seq2seq.errors import ConfigError

AUGMENTATION_KEYS = ("speed_perturbation_ratio", "time_stretch_ratio", "noise_level_min",
                     "noise_level_max", "n_freq_mask", "width_freq_mask", "n_time_mask",
                     "width_time_mask")


def validate_augmentation(augmentation: Mapping[str, Any] | None) -> dict:
  """Checks the dict's keys and values; returns it normalised (alias resolved)."""
  if not augmentation:
    return {}
  where = "data_layer_params/augmentation"
  result = {}
  for key, value in augmentation.items():
    if key not in AUGMENTATION_KEYS:
      raise ConfigError(f"{where}/{key}: unknown augmentation; valid keys are: "
                        f"{', '.join(AUGMENTATION_KEYS)}")
    if key in ("speed_perturbation_ratio", "time_stretch_ratio"):
      if isinstance(value, (list, tuple)):
        if not value or any(not isinstance(v, (int, float)) or v <= 0 for v in value):
          raise ConfigError(f"{where}/{key}: expected positive speeds, got {value!r}")
        value = [float(v) for v in value]
      elif not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ConfigError(f"{where}/{key}: expected a ratio in [0, 1) or a list of speeds, "
                          f"got {value!r}")
      result["speed_perturbation_ratio"] = value
    elif key in ("noise_level_min", "noise_level_max"):
      if not isinstance(value, (int, float)):
        raise ConfigError(f"{where}/{key}: expected a level in dB, got {value!r}")
      result[key] = float(value)
    else:
      if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{where}/{key}: expected a non-negative int, got {value!r}")
      result[key] = value
  if ("noise_level_min" in result) != ("noise_level_max" in result):
    raise ConfigError(f"{where}: give both noise_level_min and noise_level_max")
  if "noise_level_min" in result and result["noise_level_min"] > result["noise_level_max"]:
    raise ConfigError(f"{where}: noise_level_min is above noise_level_max")
  return result


def has_signal_augmentation(augmentation: Mapping[str, Any]) -> bool:
  """True if the augmentation changes the waveform (so cached features cannot be used)."""
  speed = augmentation.get("speed_perturbation_ratio")
  return bool(speed) or "noise_level_min" in augmentation


def augment_signal(signal: np.ndarray, augmentation: Mapping[str, Any],
                   rng: np.random.Generator) -> np.ndarray:
  """Speed perturbation then additive white noise on a peak-normalised signal."""
  signal = peak_normalize(signal)
  speed = augmentation.get("speed_perturbation_ratio")
  if isinstance(speed, list):
    signal = change_speed(signal, float(rng.choice(speed)))
  elif speed:
    signal = change_speed(signal, float(rng.uniform(1.0 - speed, 1.0 + speed)))
  if "noise_level_min" in augmentation:
    level_db = rng.uniform(augmentation["noise_level_min"], augmentation["noise_level_max"])
    noise = rng.standard_normal(len(signal), dtype=np.float32) * 10.0 ** (level_db / 20.0)
    signal = signal + noise
  return peak_normalize(signal)


def spec_augment(features: np.ndarray, augmentation: Mapping[str, Any],
                 rng: np.random.Generator) -> np.ndarray:
  """Zeroes random bands of features and spans of frames (SpecAugment without warping)."""
  n_freq, width_freq = augmentation.get("n_freq_mask", 0), augmentation.get("width_freq_mask", 0)
  n_time, width_time = augmentation.get("n_time_mask", 0), augmentation.get("width_time_mask", 0)
  if not (n_freq and width_freq) and not (n_time and width_time):
    return features
  features = features.copy()
  num_frames, num_features = features.shape
  for _ in range(n_freq if width_freq else 0):
    width = int(rng.integers(0, min(width_freq, num_features) + 1))
    start = int(rng.integers(0, num_features - width + 1))
    features[:, start:start + width] = 0.0
  for _ in range(n_time if width_time else 0):
    width = int(rng.integers(0, min(width_time, num_frames) + 1))
    start = int(rng.integers(0, num_frames - width + 1))
    features[start:start + width, :] = 0.0
  return features
