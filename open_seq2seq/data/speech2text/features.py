"""Speech-recognition features as TensorFlow ops: log power spectrogram, log mel filterbank
and MFCC, then the per-utterance normalization the data layer applies.

:meth:`FeatureExtractor.features_graph` is pure TF (``tf.signal`` STFT, a constant mel matrix,
``tf.signal.dct``): it runs inside the ``tf.data`` graph, in a ``tf.function`` and in an
exported SavedModel, and needs no numpy at call time. The STFT and the mel filters are the
ones of the speech-synthesis family (``open_seq2seq/parts/audio/spectrogram.py``), so both
families share one implementation. Definitions follow librosa's (centred frames with zero
padding, periodic windows zero-padded to ``num_fft``, Slaney mel filters, orthonormal DCT-II,
``power_to_db`` with an 80 dB floor), and the tests hold them to librosa.

``backend: "psf"`` computes the features with python_speech_features in numpy (OpenSeq2Seq's
default backend) when that package is installed; it cannot run in the graph.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Mapping

import numpy as np
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.audio.spectrogram import (mel_filterbank, mfcc_from_log_mel,
                                                  num_frames, power_to_db, stft_magnitude)

INPUT_TYPES = ("spectrogram", "mfcc", "logfbank")
WINDOWS = ("hanning", "hamming", "none")
BACKENDS = ("librosa", "psf")
PREEMPHASIS = 0.97  # applied before mfcc and logfbank, as in OpenSeq2Seq
_NORM_EPSILON = 1e-5  # added to the standard deviation: a silent utterance stays finite

_log = logging.getLogger(__name__)


def preemphasize(signal: np.ndarray, coeff: float = PREEMPHASIS) -> np.ndarray:
  """``y[0] = x[0]; y[n] = x[n] - coeff x[n - 1]`` in numpy (the reference for the tests)."""
  if len(signal) < 2:
    return signal
  return np.concatenate([signal[:1], signal[1:] - coeff * signal[:-1]]).astype(np.float32)


def preemphasize_graph(signal: tf.Tensor, coeff: float = PREEMPHASIS) -> tf.Tensor:
  """:func:`preemphasize` as TF ops on a [samples] tensor."""
  return tf.concat([signal[:1], signal[1:] - coeff * signal[:-1]], axis=0)


def peak_normalize_graph(signal: tf.Tensor) -> tf.Tensor:
  """Scales to a peak of ~1, as ``audio.peak_normalize`` does in numpy."""
  peak = tf.reduce_max(tf.concat([tf.abs(signal), [0.0]], axis=0))  # 0 for an empty signal
  return signal / (peak + 1e-5)


def normalize_features(features: tf.Tensor, per_feature: bool) -> tf.Tensor:
  """Zero mean, unit variance over time (per feature) or over everything (TF or numpy in)."""
  features = tf.convert_to_tensor(features, tf.float32)
  axis = 0 if per_feature else None
  mean = tf.reduce_mean(features, axis=axis, keepdims=True)
  std = tf.math.reduce_std(features, axis=axis, keepdims=True)
  return (features - mean) / (std + _NORM_EPSILON)


def psf_available() -> bool:
  try:
    import python_speech_features  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  except ImportError:
    return False
  return True


class FeatureExtractor:
  """Computes one utterance's features ``[num_frames, num_audio_features]``.

  Args:
    input_type: "spectrogram" (log power of the first ``num_features`` FFT bins, FFT size
      the window length unless ``num_fft``), "logfbank" (log mel filterbank) or "mfcc"
      (DCT of ``2 * num_features`` log mel bands).
    num_features: features per frame.
    sample_freq: audio rate in Hz.
    window_size, window_stride: seconds.
    window: "hanning", "hamming" or "none".
    num_fft: FFT size (default: the next power of two of the window for mel features).
    norm_per_feature: normalise each feature separately (else one global mean/std).
    backend: "librosa" (TF ops equal to librosa's features) or "psf" (python_speech_features
      in numpy; falls back to "librosa" with a warning when the package is missing).
  """

  def __init__(self, input_type: str, num_features: int, sample_freq: int = 16000,
               window_size: float = 20e-3, window_stride: float = 10e-3,
               window: str = "hanning", num_fft: int | None = None,
               norm_per_feature: bool = False, backend: str = "librosa"):
    if input_type not in INPUT_TYPES:
      raise ConfigError(f"data_layer_params/input_type: {input_type!r} is not one of "
                        f"{', '.join(INPUT_TYPES)}")
    if window not in WINDOWS:
      raise ConfigError(f"data_layer_params/window: {window!r} is not one of "
                        f"{', '.join(WINDOWS)}")
    if backend not in BACKENDS:
      raise ConfigError(f"data_layer_params/backend: {backend!r} is not one of "
                        f"{', '.join(BACKENDS)}")
    if backend == "psf" and not psf_available():
      _log.warning("data_layer_params/backend: 'psf' needs python_speech_features (pip install "
                   "python_speech_features); computing librosa-equal features instead")
      backend = "librosa"
    self.backend = backend
    self.input_type = input_type
    self.num_features = num_features
    self.sample_freq = sample_freq
    self.window_size, self.window_stride = window_size, window_stride
    self.win_length = int(round(sample_freq * window_size))
    self.hop_length = int(round(sample_freq * window_stride))
    if self.win_length < 1 or self.hop_length < 1:
      raise ConfigError("data_layer_params/window_size, window_stride: too short for "
                        f"sample_freq {sample_freq}")
    if num_fft is None:
      num_fft = (self.win_length if input_type == "spectrogram"
                 else 2 ** math.ceil(math.log2(self.win_length)))
    if num_fft < self.win_length:
      raise ConfigError(f"data_layer_params/num_fft: {num_fft} is shorter than the window "
                        f"({self.win_length} samples)")
    self.num_fft = num_fft
    self.window = window
    self.norm_per_feature = norm_per_feature
    num_bins = num_fft // 2 + 1
    if input_type == "spectrogram" and num_features > num_bins:
      raise ConfigError(f"data_layer_params/num_audio_features: {num_features} spectrogram "
                        f"features need num_fft >= {2 * (num_features - 1)}; the FFT has "
                        f"only {num_bins} bins")
    self.mel_basis = None
    if input_type in ("logfbank", "mfcc"):
      num_mels = num_features if input_type == "logfbank" else 2 * num_features
      self.mel_basis = mel_filterbank(sample_freq, num_fft, num_mels, mel_type="slaney")
    self._eager = tf.function(self.features_graph,
                              input_signature=[tf.TensorSpec([None], tf.float32)],
                              autograph=False)
    self._eager_raw = tf.function(self.raw_features_graph,
                                  input_signature=[tf.TensorSpec([None], tf.float32)],
                                  autograph=False)

  @classmethod
  def from_params(cls, params: Mapping[str, Any]) -> "FeatureExtractor":
    """The extractor of a (validated) ``data_layer_params`` dict of Speech2TextDataLayer."""
    return cls(params["input_type"], params["num_audio_features"], params["sample_freq"],
               params["window_size"], params["window_stride"], params["window"],
               params["num_fft"], params["norm_per_feature"], params.get("backend", "librosa"))

  @property
  def in_graph(self) -> bool:
    """True when the features are TF ops (the "librosa" backend)."""
    return self.backend == "librosa"

  def num_frames(self, num_samples: int) -> int:
    if self.backend == "psf":
      return 1 + max(0, math.ceil((num_samples - self.win_length) / self.hop_length))
    return num_frames(num_samples, self.num_fft, self.hop_length)

  # ------------------------------------------------------------------ TF
  def raw_features_graph(self, signal: tf.Tensor) -> tf.Tensor:
    """Features before normalisation (the quantities librosa computes), TF ops."""
    signal = tf.convert_to_tensor(signal, tf.float32)
    if self.input_type == "spectrogram":
      power = stft_magnitude(signal, self.num_fft, self.hop_length, self.win_length,
                             power=2.0, window=self.window)[:, :self.num_features]
      return power_to_db(power, amin=1e-30)
    power = stft_magnitude(preemphasize_graph(signal), self.num_fft, self.hop_length,
                           self.win_length, power=2.0, window=self.window)
    mel = tf.linalg.matmul(power, tf.constant(self.mel_basis.T))
    if self.input_type == "logfbank":
      return tf.math.log(mel + 1e-20)
    return mfcc_from_log_mel(power_to_db(mel, amin=1e-10, top_db=80.0), self.num_features)

  def features_graph(self, signal: tf.Tensor, dither: float = 0.0,
                     seed: tf.Tensor | None = None) -> tf.Tensor:
    """float32 ``[frames, num_features]`` of a float32 ``[samples]`` signal, pure TF.

    What the data layer computes for one utterance: peak normalization, optional Gaussian
    dither (training only: ``dither`` > 0 with a stateless ``seed``, int32/int64 [2]),
    the features, then the per-utterance mean/variance normalization.

    Raises:
      ConfigError: the extractor uses the numpy-only "psf" backend.
    """
    if not self.in_graph:
      raise ConfigError("data_layer_params/backend: 'psf' features are computed in numpy "
                        "and cannot run in a TF graph; use backend 'librosa'")
    signal = peak_normalize_graph(tf.convert_to_tensor(signal, tf.float32))
    if dither > 0 and seed is not None:
      signal += dither * tf.random.stateless_normal(tf.shape(signal), seed)
    return normalize_features(self.raw_features_graph(signal), self.norm_per_feature)

  # ------------------------------------------------------------------ numpy in, numpy out
  def raw_features(self, signal: np.ndarray) -> np.ndarray:
    """:meth:`raw_features_graph` on a numpy signal (for tests and references)."""
    return self._eager_raw(np.asarray(signal, np.float32)).numpy()

  def psf_features(self, signal: np.ndarray) -> np.ndarray:
    """python_speech_features' features, as OpenSeq2Seq's "psf" backend made them: the
    peak-normalised signal at 16-bit scale, 512-point FFT for mel features, ``2 * n``
    filters and a lifter of ``2 * n`` for MFCC, one global mean/std normalization."""
    import python_speech_features as psf  # pylint: disable=import-outside-toplevel
    scaled = signal.astype(np.float64) / (np.max(np.abs(signal), initial=0.0) + 1e-5) * 32767.0
    if len(scaled) < self.win_length:  # psf frames a short signal as one zero-padded frame
      scaled = np.pad(scaled, (0, self.win_length - len(scaled)))
    n = self.num_features
    if self.input_type == "spectrogram":
      frames = psf.sigproc.framesig(scaled, self.win_length, self.hop_length, winfunc=np.hanning)
      features = psf.sigproc.logpowspec(frames, self.win_length)[:, :n]
    elif self.input_type == "mfcc":
      features = psf.mfcc(scaled, self.sample_freq, self.window_size, self.window_stride,
                          numcep=n, nfilt=2 * n, nfft=512, lowfreq=0, highfreq=None,
                          preemph=PREEMPHASIS, ceplifter=2 * n, appendEnergy=False)
    else:
      features = psf.logfbank(scaled, self.sample_freq, self.window_size, self.window_stride,
                              nfilt=n, nfft=512, lowfreq=0, highfreq=self.sample_freq / 2,
                              preemph=PREEMPHASIS)
    features = np.asarray(features, np.float32)
    return ((features - features.mean()) / (features.std() + _NORM_EPSILON)).astype(np.float32)

  def __call__(self, signal: np.ndarray) -> np.ndarray:
    """Normalised float32 features of a numpy signal, shape [num_frames, num_features]."""
    signal = np.asarray(signal, np.float32).reshape(-1)
    if not self.in_graph:
      return self.psf_features(signal)
    return self._eager(signal).numpy()
