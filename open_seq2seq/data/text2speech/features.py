"""The spectrogram features of the speech-synthesis family, and their way back to audio.

:class:`SpectrogramFeatures` holds every choice that defines a target frame (rate, FFT,
hop, mel filters, log floor, normalization) and computes the features inside the
``tf.data`` graph with ``tf.signal`` (``parts/audio/spectrogram.py``). The same object
inverts predicted features to a waveform (exp, de-normalization, mel -> linear through the
filterbank's pseudo-inverse, Griffin-Lim in TensorFlow), so training targets and synthesized
audio can never disagree on a parameter. The data layer publishes it in its description.

Feature layout per frame (OpenSeq2Seq's): ``mel`` -> log mel; ``magnitude`` -> log
magnitude; ``both`` -> log mel then the magnitude (raw when ``exp_mag``, as OpenSeq2Seq's
``exp_mag`` made the postnet predict it in linear scale), concatenated.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property

import numpy as np
import tensorflow as tf

from open_seq2seq.parts.audio.griffin_lim import griffin_lim, mel_to_linear
from open_seq2seq.parts.audio.spectrogram import (log_compress, mel_filterbank, num_frames,
                                                  stft_magnitude, trim_silence)

OUTPUT_TYPES = ("magnitude", "mel", "both")


@dataclasses.dataclass(frozen=True)
class SpectrogramFeatures:
  """How audio becomes target frames and frames become audio (see the module docstring).

  Attributes:
    output_type: "magnitude", "mel" or "both".
    num_mel, num_magnitude: features of each kind (0 when not produced; the magnitude has
      ``n_fft // 2 + 1`` bins at most and keeps the lowest ``num_magnitude``).
    sample_rate, n_fft, hop_length, win_length: the STFT.
    mel_type: "htk" or "slaney" filters; fmin, fmax: their band (fmax None: Nyquist).
    mag_power: the magnitude is raised to this power (1: magnitude, 2: power) before the
      mel filters and the log.
    data_min_mel, data_min_magnitude: floors before the log.
    exp_mag: "both": the magnitude part is linear, not log.
    normalize_mean, normalize_std: features are ``(x - mean) / std`` (0, 1: unchanged).
    trim: cut leading and trailing silence (``trim_top_db`` below the loudest frame).
  """

  output_type: str
  num_mel: int
  num_magnitude: int
  sample_rate: int
  n_fft: int
  hop_length: int
  win_length: int
  mel_type: str = "htk"
  fmin: float = 0.0
  fmax: float | None = None
  mag_power: float = 1.0
  data_min_mel: float = 1e-2
  data_min_magnitude: float = 1e-5
  exp_mag: bool = False
  normalize_mean: float = 0.0
  normalize_std: float = 1.0
  trim: bool = False
  trim_top_db: float = 60.0

  @property
  def num_features(self) -> int:
    """Features per frame (mel and magnitude together for "both")."""
    return self.num_mel + self.num_magnitude

  @cached_property
  def mel_basis(self) -> np.ndarray:
    """The [num_mel, n_fft // 2 + 1] filterbank (empty without mel features)."""
    if not self.num_mel:
      return np.zeros([0, self.n_fft // 2 + 1], np.float32)
    return mel_filterbank(self.sample_rate, self.n_fft, self.num_mel, self.fmin, self.fmax,
                          self.mel_type)

  def num_frames(self, num_samples: int) -> int:
    return num_frames(num_samples, self.n_fft, self.hop_length)

  # ------------------------------------------------------------------ audio -> features
  def compute(self, signal: tf.Tensor) -> tf.Tensor:
    """float32 [frames, num_features] of a mono float32 signal [samples] (in-graph)."""
    signal = tf.convert_to_tensor(signal, tf.float32)
    if self.trim:
      signal = trim_silence(signal, self.trim_top_db, frame_length=self.n_fft,
                            hop_length=self.hop_length)
    power = stft_magnitude(signal, self.n_fft, self.hop_length, self.win_length,
                           power=self.mag_power)
    parts = []
    if self.num_mel:
      mel = tf.linalg.matmul(power, tf.constant(self.mel_basis.T))
      parts.append(log_compress(mel, self.data_min_mel))
    if self.num_magnitude:
      magnitude = power[:, :self.num_magnitude]
      parts.append(magnitude if self.exp_mag else log_compress(magnitude,
                                                                self.data_min_magnitude))
    features = tf.concat(parts, axis=-1)
    return (features - self.normalize_mean) / self.normalize_std

  @property
  def pad_frame(self) -> np.ndarray:
    """A silent frame, float32 [num_features]: each feature at its floor (the end-of-speech
    frames and the batch padding are made of it)."""
    mag = (self.data_min_magnitude if self.exp_mag and self.output_type == "both"
           else np.log(self.data_min_magnitude))
    frame = np.concatenate([np.full(self.num_mel, np.log(self.data_min_mel)),
                            np.full(self.num_magnitude, mag)])
    return ((frame - self.normalize_mean) / self.normalize_std).astype(np.float32)

  # ------------------------------------------------------------------ features -> audio
  def magnitude(self, features: tf.Tensor, magnitude: tf.Tensor | None = None) -> tf.Tensor:
    """Linear magnitude [..., frames, n_fft // 2 + 1] (``|STFT| ** mag_power``) from mel
    features [..., frames, num_mel] (or a predicted ``magnitude`` part, preferred)."""
    bins = self.n_fft // 2 + 1
    features = tf.cast(features, tf.float32) * self.normalize_std + self.normalize_mean
    if magnitude is not None or not self.num_mel:
      source = features[..., -self.num_magnitude:] if magnitude is None else tf.cast(
          magnitude, tf.float32)
      linear = source if (self.exp_mag and self.output_type == "both") else tf.exp(source)
      missing = bins - self.num_magnitude
      paddings = [[0, 0]] * (len(linear.shape) - 1) + [[0, missing]]
      return tf.pad(linear, paddings)
    return mel_to_linear(tf.exp(features[..., :self.num_mel]), self.mel_basis)

  def to_audio(self, features: tf.Tensor, magnitude: tf.Tensor | None = None,
               num_iters: int = 50) -> tf.Tensor:
    """Waveform [..., samples] of predicted features through Griffin-Lim (in-graph)."""
    return griffin_lim(self.magnitude(features, magnitude), self.n_fft, self.hop_length,
                       self.win_length, num_iters=num_iters, power=self.mag_power)
