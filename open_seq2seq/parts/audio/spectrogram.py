"""Spectrogram features in TensorFlow, shared by speech synthesis and speech recognition:
STFT magnitude, windows, mel filterbank, dB and log compression, DCT (MFCC), silence
trimming.

The definitions follow librosa 0.11 so that spectrograms computed here agree with librosa's
on the same audio: frames are centred by zero-padding ``n_fft // 2`` samples on each side
(librosa's default ``pad_mode="constant"``), the periodic window of ``win_length`` is
zero-padded centrally to ``n_fft``, and mel filters are librosa's (HTK or Slaney scale).
Everything except the constant matrices and windows (numpy, computed once) is TensorFlow, so
it runs inside a ``tf.data`` map or a ``tf.function``, in float32, over any leading batch
axes.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from open_seq2seq.errors import ConfigError

MEL_TYPES = ("htk", "slaney")
_AMPLITUDE_FLOOR = 1e-5  # librosa.amplitude_to_db's default ``amin``, used by trim_silence


def hz_to_mel(freq: np.ndarray | float, htk: bool = True) -> np.ndarray:
  """Hz to mel: HTK's ``2595 log10(1 + f / 700)``, or Slaney's (linear below 1 kHz,
  logarithmic above)."""
  freq = np.asarray(freq, dtype=np.float64)
  if htk:
    return 2595.0 * np.log10(1.0 + freq / 700.0)
  f_sp = 200.0 / 3
  min_log_hz, min_log_mel, logstep = 1000.0, 1000.0 / f_sp, math.log(6.4) / 27.0
  return np.where(freq >= min_log_hz,
                  min_log_mel + np.log(np.maximum(freq, 1e-10) / min_log_hz) / logstep,
                  freq / f_sp)


def mel_to_hz(mels: np.ndarray | float, htk: bool = True) -> np.ndarray:
  """Inverse of :func:`hz_to_mel` on the same scale."""
  mels = np.asarray(mels, dtype=np.float64)
  if htk:
    return 700.0 * (10.0 ** (mels / 2595.0) - 1.0)
  f_sp = 200.0 / 3
  min_log_hz, min_log_mel, logstep = 1000.0, 1000.0 / f_sp, math.log(6.4) / 27.0
  return np.where(mels >= min_log_mel, min_log_hz * np.exp(logstep * (mels - min_log_mel)),
                  f_sp * mels)


def mel_filterbank(sample_rate: int, n_fft: int, num_mels: int, fmin: float = 0.0,
                   fmax: float | None = None, mel_type: str = "htk") -> np.ndarray:
  """Triangular mel filters, float32 ``[num_mels, n_fft // 2 + 1]``.

  Args:
    sample_rate: audio rate in Hz.
    n_fft: FFT size of the spectrogram the filters apply to.
    num_mels: number of filters.
    fmin, fmax: frequency range in Hz covered by the filters (``fmax`` default: Nyquist).
    mel_type: ``"htk"``: HTK mel scale, filters peak at 1 (librosa ``htk=True, norm=None``);
      ``"slaney"``: Slaney's scale, each filter scaled to unit area (librosa's default,
      ``htk=False, norm="slaney"``).

  Raises:
    ConfigError: unknown ``mel_type``.
  """
  if mel_type not in MEL_TYPES:
    raise ConfigError(f"mel_type: {mel_type!r} is not one of {', '.join(MEL_TYPES)}")
  htk = mel_type == "htk"
  fmax = sample_rate / 2.0 if fmax is None else float(fmax)
  fft_freqs = np.linspace(0.0, sample_rate / 2.0, n_fft // 2 + 1)
  # num_mels + 2 band edges equally spaced on the mel scale: filter i rises from edge i to
  # edge i + 1 and falls back to zero at edge i + 2.
  edges = mel_to_hz(np.linspace(hz_to_mel(fmin, htk), hz_to_mel(fmax, htk), num_mels + 2),
                    htk)
  widths = np.diff(edges)
  offsets = edges[:, None] - fft_freqs[None, :]
  rising = -offsets[:-2] / widths[:-1, None]
  falling = offsets[2:] / widths[1:, None]
  weights = np.maximum(0.0, np.minimum(rising, falling))
  if not htk:
    weights *= (2.0 / (edges[2:] - edges[:-2]))[:, None]
  return weights.astype(np.float32)


#: Window names :func:`window_function` accepts ("hanning" is OpenSeq2Seq's, numpy's name).
WINDOWS = ("hann", "hanning", "hamming", "none")


def window_function(name: str, win_length: int, n_fft: int) -> np.ndarray:
  """Periodic (FFT) window of ``win_length`` zero-padded centrally to ``n_fft``, as librosa
  builds it (``get_window(..., fftbins=True)`` then ``pad_center``: the extra sample of an
  odd padding goes to the right).

  Args:
    name: "hann" (or "hanning"), "hamming" or "none" (rectangular).
    win_length: window length in samples.
    n_fft: FFT size (>= ``win_length``).

  Raises:
    ConfigError: unknown name, or a window longer than the FFT.
  """
  if win_length > n_fft:
    raise ConfigError(f"win_length: {win_length} is longer than n_fft {n_fft}; use "
                      "win_length <= n_fft")
  n = np.arange(win_length)
  if name in ("hann", "hanning"):
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * n / win_length)
  elif name == "hamming":
    window = 0.54 - 0.46 * np.cos(2.0 * np.pi * n / win_length)
  elif name == "none":
    window = np.ones(win_length)
  else:
    raise ConfigError(f"window: {name!r} is not one of {', '.join(WINDOWS)}")
  left = (n_fft - win_length) // 2
  return np.pad(window, (left, n_fft - win_length - left)).astype(np.float32)


def hann_window(win_length: int, n_fft: int) -> np.ndarray:
  """Periodic Hann window of ``win_length`` zero-padded centrally to ``n_fft``."""
  return window_function("hann", win_length, n_fft)


def fixed_window_fn(window: np.ndarray):
  """A ``window_fn`` for ``tf.signal`` that returns the precomputed ``window``."""
  def window_fn(frame_length, dtype=tf.float32):
    del frame_length  # always len(window): the caller frames with n_fft
    return tf.constant(window, dtype=dtype)
  return window_fn


def pad_last_axis(signal: tf.Tensor, left: int, right: int) -> tf.Tensor:
  """Zero-pads the last axis of a tensor of any (even unknown) rank."""
  rank = tf.rank(signal)
  paddings = tf.concat([tf.zeros([rank - 1, 2], tf.int32), [[left, right]]], axis=0)
  return tf.pad(signal, paddings)


def num_frames(num_samples: int, n_fft: int, hop_length: int, center: bool = True) -> int:
  """Frames :func:`stft_magnitude` makes of ``num_samples`` samples."""
  padded = num_samples + 2 * (n_fft // 2) if center else num_samples
  if padded < n_fft:
    return 0
  return 1 + (padded - n_fft) // hop_length


def stft_magnitude(signal: tf.Tensor, n_fft: int, hop_length: int,
                   win_length: int | None = None, center: bool = True,
                   power: float = 1.0, window: str = "hann") -> tf.Tensor:
  """``|STFT| ** power``, float32 ``[..., frames, n_fft // 2 + 1]``, as librosa computes it.

  Args:
    signal: float32 ``[..., samples]``.
    n_fft: FFT size, and frame length.
    hop_length: samples between frame starts.
    win_length: window length (default ``n_fft``), zero-padded centrally to ``n_fft``.
    center: centre frame ``t`` on sample ``t * hop_length`` by zero-padding ``n_fft // 2``
      samples on each side (librosa's ``center=True, pad_mode="constant"``).
    power: exponent of the magnitude (1: magnitude, 2: power).
    window: "hann", "hamming" or "none" (see :func:`window_function`).
  """
  window = window_function(window, win_length or n_fft, n_fft)
  signal = tf.convert_to_tensor(signal, tf.float32)
  if center:
    signal = pad_last_axis(signal, n_fft // 2, n_fft // 2)
  stft = tf.signal.stft(signal, frame_length=n_fft, frame_step=hop_length, fft_length=n_fft,
                        window_fn=fixed_window_fn(window), pad_end=False)
  if power == 2.0:  # |z|^2 without the square root (exact, and cheaper than abs then pow)
    return tf.square(tf.math.real(stft)) + tf.square(tf.math.imag(stft))
  magnitude = tf.abs(stft)
  if power == 1.0:
    return magnitude
  return tf.pow(magnitude, power)


def power_to_db(power: tf.Tensor, amin: float = 1e-10, top_db: float | None = None
                ) -> tf.Tensor:
  """``10 log10(max(power, amin))``, floored ``top_db`` below the maximum over the whole
  tensor when given (librosa's ``power_to_db`` with ``ref=1``)."""
  power = tf.convert_to_tensor(power, tf.float32)
  db = (10.0 / math.log(10.0)) * tf.math.log(tf.maximum(power, amin))
  if top_db is not None:
    db = tf.maximum(db, tf.reduce_max(db) - top_db)
  return db


def dct_matrix(num_inputs: int, num_outputs: int) -> np.ndarray:
  """float32 [num_inputs, num_outputs]: ``x @ M`` is the first ``num_outputs`` coefficients
  of the orthonormal DCT-II of ``x`` (scipy's ``dct(type=2, norm="ortho")``)."""
  n = np.arange(num_inputs)[:, None]
  k = np.arange(num_outputs)[None, :]
  matrix = np.cos(np.pi * k * (2 * n + 1) / (2 * num_inputs)) * np.sqrt(2.0 / num_inputs)
  matrix[:, 0] /= np.sqrt(2.0)
  return matrix.astype(np.float32)


def mfcc_from_log_mel(log_mel_db: tf.Tensor, num_mfcc: int) -> tf.Tensor:
  """The first ``num_mfcc`` coefficients of the orthonormal DCT-II over the last axis
  (librosa's ``mfcc(S=..., dct_type=2, norm="ortho")``), as one product with a constant
  matrix: faster here than ``tf.signal.dct``'s FFT for a few dozen bands, and
  ``tf.signal.mfccs_from_log_mel_spectrograms`` scales the 0th coefficient differently."""
  log_mel_db = tf.convert_to_tensor(log_mel_db, tf.float32)
  matrix = dct_matrix(int(log_mel_db.shape[-1]), num_mfcc)
  return tf.linalg.matmul(log_mel_db, tf.constant(matrix))


def log_compress(x: tf.Tensor, data_min: float) -> tf.Tensor:
  """``log(max(x, data_min))``: the floor keeps silence from reaching ``-inf``."""
  x = tf.convert_to_tensor(x, tf.float32)
  return tf.math.log(tf.maximum(x, data_min))


def log_decompress(y: tf.Tensor) -> tf.Tensor:
  """``exp(y)``, the inverse of :func:`log_compress` above the floor."""
  return tf.exp(tf.convert_to_tensor(y, tf.float32))


def nonsilent_interval(signal: tf.Tensor, top_db: float = 60.0, frame_length: int = 2048,
                       hop_length: int = 512) -> tuple[tf.Tensor, tf.Tensor]:
  """``(start, end)`` int32 sample indices of the non-silent span, as librosa.effects.trim.

  A frame (centred, zero-padded) is non-silent when its RMS is within ``top_db`` dB of the
  loudest frame's (amplitudes floored at 1e-5, librosa's ``amin``); the span runs from the
  first non-silent frame's start ``first * hop_length`` to ``(last + 1) * hop_length``
  (clipped to the signal). With several channels ``[..., samples]`` a frame counts as
  non-silent if it is in any channel. As in librosa, an all-zero signal is kept whole (every
  frame equals the loudest); ``(0, 0)`` only when no frame passes (``top_db <= 0``).
  """
  signal = tf.convert_to_tensor(signal, tf.float32)
  length = tf.shape(signal)[-1]
  padded = pad_last_axis(signal, frame_length // 2, frame_length // 2)
  frames = tf.signal.frame(padded, frame_length, hop_length)  # [..., frames, frame_length]
  rms = tf.sqrt(tf.reduce_mean(tf.square(frames), axis=-1))
  rms = tf.reshape(rms, [-1, tf.shape(rms)[-1]])
  db = 20.0 * (tf.math.log(tf.maximum(rms, _AMPLITUDE_FLOOR)) / math.log(10.0))
  loudest = tf.reduce_max(db)
  keep = tf.reduce_any(db > loudest - top_db, axis=0)
  kept = tf.cast(tf.reshape(tf.where(keep), [-1]), tf.int32)
  # Appending 0 makes the empty case read (0, 0) without a tf.cond.
  first = tf.concat([kept[:1], [0]], axis=0)[0]
  last_end = tf.concat([kept[-1:] + 1, [0]], axis=0)[0]
  return first * hop_length, tf.minimum(length, last_end * hop_length)


def trim_silence(signal: tf.Tensor, top_db: float = 60.0, frame_length: int = 2048,
                 hop_length: int = 512) -> tf.Tensor:
  """``signal[..., start:end]`` with leading and trailing silence removed (librosa's
  ``effects.trim``); see :func:`nonsilent_interval` for what counts as silence."""
  signal = tf.convert_to_tensor(signal, tf.float32)
  start, end = nonsilent_interval(signal, top_db, frame_length, hop_length)
  return signal[..., start:end]
