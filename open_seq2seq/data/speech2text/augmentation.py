"""Training-time augmentation: speed perturbation, additive noise and SpecAugment masks.

The ``augmentation`` dict of ``data_layer_params`` takes OpenSeq2Seq's keys::

    {"speed_perturbation_ratio": 0.05,   # N samples -> N * s, s in [0.95, 1.05] or from a list
     "noise_level_min": -90,              # white noise at a level drawn in [min, max) dB
     "noise_level_max": -60,              # relative to the peak-normalised signal
     "n_freq_mask": 2, "width_freq_mask": 6,    # SpecAugment: masks of up to width features
     "n_time_mask": 2, "width_time_mask": 6}    # and up to width frames, set to 0 (the mean)

Speed perturbation means what OpenSeq2Seq's ``time_stretch_ratio`` (and later
``speed_perturbation_ratio``) meant: a clip of N samples is resampled to N * s samples, s drawn
uniformly in [1 - r, 1 + r] or picked from the list, so it plays 1 / s times as fast (s = 1.1
is 10 % longer, [0.9, 1.0, 1.1] gives 0.9 N, N and 1.1 N). ``time_stretch_ratio`` is accepted
as the old name.
SpecAugment's defaults are OpenSeq2Seq's: no masks (``n_*_mask`` 0), and when masks are asked
for, widths up to 10 features and 50 frames. The waveform augmentations run in numpy (the
polyphase resampler); the masks are TF ops with stateless random numbers keyed by the
example's seed, so they run in the ``tf.data`` graph after the features.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import tensorflow as tf

from open_seq2seq.data.speech2text.audio import peak_normalize, resample_by
from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.params import Param, dict_of, non_negative_int


def _speeds(value: Any) -> bool:
  """A ratio in [0, 1) or a non-empty list of positive speeds."""
  if isinstance(value, list):
    return bool(value) and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                               for v in value)
  return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1


_speeds.type_name = "ratio in [0, 1) or list of speeds > 0"

#: Keys of ``data_layer_params/augmentation``.
AUGMENTATION_PARAMS = {
    "speed_perturbation_ratio": Param((_speeds, None), None,
                                      "The clip is resampled to N*s samples, s uniform in "
                                      "[1-r, 1+r] or picked from a list."),
    "time_stretch_ratio": Param((_speeds, None), None,
                                "OpenSeq2Seq's old name of speed_perturbation_ratio."),
    "noise_level_min": Param((float, None), None,
                             "White noise level in dB (of the peak-normalised signal): lowest."),
    "noise_level_max": Param((float, None), None, "White noise level in dB: highest."),
    "n_freq_mask": Param(non_negative_int, 0, "SpecAugment: number of feature-band masks."),
    "width_freq_mask": Param(non_negative_int, 10, "Widest feature-band mask (features)."),
    "n_time_mask": Param(non_negative_int, 0, "SpecAugment: number of time masks."),
    "width_time_mask": Param(non_negative_int, 50, "Widest time mask (frames)."),
}


def _check_augmentation(augmentation: dict, path: str) -> dict:
  """Rules across keys; resolves the ``time_stretch_ratio`` alias."""
  old_name = augmentation["time_stretch_ratio"]
  if old_name is not None:
    if augmentation["speed_perturbation_ratio"] is not None:
      raise ConfigError(f"{path}/time_stretch_ratio: given together with "
                        f"speed_perturbation_ratio, its new name; keep one")
    augmentation["speed_perturbation_ratio"], augmentation["time_stretch_ratio"] = old_name, None
  speed = augmentation["speed_perturbation_ratio"]
  if isinstance(speed, list):
    augmentation["speed_perturbation_ratio"] = [float(v) for v in speed]
  low, high = augmentation["noise_level_min"], augmentation["noise_level_max"]
  if (low is None) != (high is None):
    raise ConfigError(f"{path}: give both noise_level_min and noise_level_max")
  if low is not None and low > high:
    raise ConfigError(f"{path}: noise_level_min is above noise_level_max")
  return augmentation


#: The type of ``data_layer_params/augmentation``: validated with the data layer's params.
AUGMENTATION = dict_of(AUGMENTATION_PARAMS, "augmentation", _check_augmentation)


def validate_augmentation(augmentation: Mapping[str, Any] | None) -> dict:
  """Checks the dict's keys and values; returns it with defaults and the alias resolved."""
  if not augmentation:
    return {}
  return AUGMENTATION.validate(augmentation, "data_layer_params/augmentation")


def has_signal_augmentation(augmentation: Mapping[str, Any]) -> bool:
  """True if the augmentation changes the waveform (so cached features cannot be used)."""
  speed = augmentation.get("speed_perturbation_ratio")
  return bool(speed) or augmentation.get("noise_level_min") is not None


def augment_signal(signal: np.ndarray, augmentation: Mapping[str, Any],
                   rng: np.random.Generator) -> np.ndarray:
  """Speed perturbation (N samples become N * s) then additive white noise on a
  peak-normalised signal."""
  signal = peak_normalize(signal)
  speed = augmentation.get("speed_perturbation_ratio")
  if isinstance(speed, list):
    signal = resample_by(signal, float(rng.choice(speed)))
  elif speed:
    signal = resample_by(signal, float(rng.uniform(1.0 - speed, 1.0 + speed)))
  if augmentation.get("noise_level_min") is not None:
    level_db = rng.uniform(augmentation["noise_level_min"], augmentation["noise_level_max"])
    noise = rng.standard_normal(len(signal), dtype=np.float32) * 10.0 ** (level_db / 20.0)
    signal = signal + noise
  return peak_normalize(signal)


def has_spec_augment(augmentation: Mapping[str, Any]) -> bool:
  """True if the augmentation masks any feature band or frame span."""
  return bool((augmentation.get("n_freq_mask", 0) and augmentation.get("width_freq_mask", 10))
              or (augmentation.get("n_time_mask", 0) and augmentation.get("width_time_mask", 50)))


def _span_mask(size: tf.Tensor, max_width: int, seed: tf.Tensor) -> tf.Tensor:
  """bool [size]: True on one span of a width drawn in [0, min(max_width, size)]."""
  width_seed, start_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
  width = tf.random.stateless_uniform([], width_seed, 0, tf.minimum(max_width, size) + 1,
                                      tf.int32)
  start = tf.random.stateless_uniform([], start_seed, 0, size - width + 1, tf.int32)
  positions = tf.range(size)
  return tf.logical_and(positions >= start, positions < start + width)


def spec_augment(features: tf.Tensor, augmentation: Mapping[str, Any],
                 seed: tf.Tensor) -> tf.Tensor:
  """Zeroes random bands of features and spans of frames (SpecAugment without warping).

  Args:
    features: float32 [frames, features] (normalised: 0 is the mean).
    augmentation: the validated augmentation dict (``n_freq_mask``, ``width_freq_mask``,
      ``n_time_mask``, ``width_time_mask``).
    seed: int32/int64 [2] stateless seed; the same seed draws the same masks.
  """
  n_freq, width_freq = augmentation.get("n_freq_mask", 0), augmentation.get("width_freq_mask", 10)
  n_time, width_time = augmentation.get("n_time_mask", 0), augmentation.get("width_time_mask", 50)
  features = tf.convert_to_tensor(features, tf.float32)
  if not has_spec_augment(augmentation):
    return features
  num_frames, num_features = tf.shape(features)[0], tf.shape(features)[1]
  seeds = tf.unstack(tf.random.experimental.stateless_split(
      tf.cast(seed, tf.int64), (n_freq if width_freq else 0) + (n_time if width_time else 0)))
  freq_masked = tf.zeros([num_features], tf.bool)
  for _ in range(n_freq if width_freq else 0):
    freq_masked = tf.logical_or(freq_masked, _span_mask(num_features, width_freq, seeds.pop()))
  time_masked = tf.zeros([num_frames], tf.bool)
  for _ in range(n_time if width_time else 0):
    time_masked = tf.logical_or(time_masked, _span_mask(num_frames, width_time, seeds.pop()))
  masked = tf.logical_or(time_masked[:, None], freq_masked[None, :])
  return tf.where(masked, tf.zeros_like(features), features)
