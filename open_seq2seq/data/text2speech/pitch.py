"""Frame pitch of speech for FastPitch: librosa's pYIN or YIN, one f0 per mel frame, cached.

Alignment with the mel frames. The waveform is the one the mel frames are computed from (read
and resampled by the data layer), trimmed by the same
:func:`~open_seq2seq.parts.audio.spectrogram.nonsilent_interval` call as
:meth:`SpectrogramFeatures.compute` makes (``trim``, ``trim_top_db``, frame ``n_fft``, hop);
pitch frames are centred as the mel frames (frame ``t`` on sample ``t * hop_length``: zero
padding of half an even frame on each side), so there are ``1 + samples // hop`` of them,
and the first ``num_frames(samples)`` of them (the mel frame count, one fewer for an odd
``n_fft`` when ``samples`` is a multiple of the hop) are kept. The pitch frame is longer than
a mel frame when needed: it must hold two periods of ``fmin``.

Voicing. pYIN decides it (its hidden Markov model's voiced states). YIN always returns a
period, so a frame is voiced here when it repeats itself one period later: its aperiodicity,
``sum((x[n] - x[n + T])^2) / sum(x[n]^2 + x[n + T]^2)`` over the frame (``T`` the period YIN
found, rounded to samples; 0 for a periodic frame, about 1 for noise), is below
``yin_threshold``, and the frame is not silent (RMS above 1e-4, about -80 dBFS). At the default
0.5, YIN's voicing agrees with pYIN's on ~92 % of the frames of espeak-ng speech (two voices);
white noise measures 0.9 or more.

Unvoiced frames have f0 = 0. :class:`PitchStore` keeps one ``.npy`` per audio file in a cache
folder (keyed by the file's path, size and mtime and every setting of :class:`FramePitch`)
and the corpus statistics (mean and standard deviation of the voiced frames' f0) in a JSON
file keyed by every audio file of the corpus.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from typing import Any, Callable, Iterable

import numpy as np
import tensorflow as tf

from open_seq2seq.data.speech2text.feature_cache import FeatureCache
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.parts.audio.spectrogram import nonsilent_interval, num_frames
from open_seq2seq.utils.io import atomic_write_text
from open_seq2seq.utils.params import Param

PITCH_METHODS = ("pyin", "yin")
#: C2, the lower bound of NeMo's and NVIDIA's FastPitch recipes.
DEFAULT_FMIN = 65.40639132514966
#: Above any speaking voice's f0; those recipes' C7 (2093 Hz) makes pYIN 2.3x slower.
DEFAULT_FMAX = 800.0
_SILENT_RMS = 1e-4
#: Part of every cache key: bump it when the computation changes.
CACHE_VERSION = 1

PITCH_PARAMS = {
    "pitch_method": Param(str, "pyin", "Frame pitch: 'pyin' (librosa's pYIN, accurate) or "
                          "'yin' (librosa's YIN, ~100x faster; voiced below yin_threshold).",
                          choices=PITCH_METHODS),
    "pitch_fmin": Param(float, DEFAULT_FMIN, "Lowest pitch searched (Hz; C2 as NeMo's)."),
    "pitch_fmax": Param(float, DEFAULT_FMAX, "Highest pitch searched (Hz)."),
    "pitch_frame_length": Param((int, None), None, "Samples per pitch frame, even (default: "
                                "n_fft, or two periods of pitch_fmin if longer)."),
    "yin_threshold": Param(float, 0.5, "'yin': a frame is voiced when its aperiodicity (its "
                           "difference from itself a period later, relative to its energy: 0 "
                           "periodic, ~1 noise) is below this."),
}


def require_librosa() -> Any:
  """The librosa module, or a one-line ConfigError saying how to install it."""
  try:
    import librosa  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise ConfigError("pitch estimation needs librosa: pip install open_seq2seq[tts]") from None
  return librosa


@dataclasses.dataclass(frozen=True)
class FramePitch:
  """f0 (Hz, 0 when unvoiced) of each mel frame of a waveform (see the module docstring).

  Attributes:
    method: "pyin" or "yin".
    sample_rate, n_fft, hop_length: the mel frames' STFT.
    fmin, fmax: the pitch range searched (Hz).
    frame_length: samples per pitch frame (even).
    yin_threshold: "yin": aperiodicity below which a frame is voiced.
    trim, trim_top_db: the mel frames' silence trimming.
  """

  method: str
  sample_rate: int
  n_fft: int
  hop_length: int
  fmin: float
  fmax: float
  frame_length: int
  yin_threshold: float = 0.5
  trim: bool = False
  trim_top_db: float = 60.0

  @classmethod
  def for_features(cls, features: Any, params: dict[str, Any]) -> FramePitch:
    """The pitch of ``features``' frames (a SpectrogramFeatures) with the ``PITCH_PARAMS``
    of a data layer's ``params``; impossible settings are one-line ConfigErrors."""
    rate, fmin, fmax = features.sample_rate, params["pitch_fmin"], params["pitch_fmax"]
    if not 0 < fmin < fmax:
      raise ConfigError(f"data_layer_params/pitch_fmin: needs 0 < pitch_fmin < pitch_fmax, got "
                        f"{fmin:g} and {fmax:g}")
    if fmax > rate / 2:
      raise ConfigError(f"data_layer_params/pitch_fmax: {fmax:g} Hz is above the Nyquist "
                        f"frequency {rate / 2:g} Hz of sampling_rate {rate}")
    shortest = 2 * math.floor(rate / fmin) + 2  # librosa's two periods of fmin, even
    length = params["pitch_frame_length"]
    if length is None:
      length = max(shortest, features.n_fft + features.n_fft % 2)
    elif length % 2 or length < shortest:
      raise ConfigError(f"data_layer_params/pitch_frame_length: {length} must be even and hold "
                        f"two periods of pitch_fmin {fmin:g} Hz; use an even value >= "
                        f"{shortest}")
    if not 0 < params["yin_threshold"] <= 2:
      raise ConfigError(f"data_layer_params/yin_threshold: must be in (0, 2], got "
                        f"{params['yin_threshold']}")
    return cls(method=params["pitch_method"], sample_rate=rate, n_fft=features.n_fft,
               hop_length=features.hop_length, fmin=float(fmin), fmax=float(fmax),
               frame_length=int(length), yin_threshold=float(params["yin_threshold"]),
               trim=features.trim, trim_top_db=features.trim_top_db)

  def key(self) -> dict[str, Any]:
    """Everything that changes the result (the cache key)."""
    key = dataclasses.asdict(self)
    if self.method != "yin":
      del key["yin_threshold"]
    key.update(librosa=require_librosa().__version__, version=CACHE_VERSION)
    return key

  def compute(self, signal: np.ndarray) -> np.ndarray:
    """float32 [mel frames of ``signal``]: f0 in Hz, 0 on unvoiced frames."""
    signal = np.asarray(signal, np.float32)
    if self.trim:
      start, end = nonsilent_interval(tf.constant(signal), self.trim_top_db,
                                      frame_length=self.n_fft, hop_length=self.hop_length)
      signal = signal[int(start):int(end)]
    count = num_frames(len(signal), self.n_fft, self.hop_length)
    f0 = np.zeros(count, np.float32)
    if len(signal):
      found = self.estimate(signal)[:count]
      f0[:len(found)] = found
    return f0

  def estimate(self, signal: np.ndarray) -> np.ndarray:
    """f0 of the centred pitch frames of ``signal`` (``1 + len // hop``), 0 when unvoiced."""
    librosa = require_librosa()
    common = dict(fmin=self.fmin, fmax=self.fmax, sr=self.sample_rate,
                  frame_length=self.frame_length, hop_length=self.hop_length, center=True,
                  pad_mode="constant")
    if self.method == "pyin":
      f0, voiced, _ = librosa.pyin(signal, fill_na=0.0, **common)
      return np.where(voiced, f0, 0.0).astype(np.float32)
    f0 = librosa.yin(signal, **common)
    voiced = self.aperiodicity(signal, f0) < self.yin_threshold
    return np.where(voiced, f0, 0.0).astype(np.float32)

  def aperiodicity(self, signal: np.ndarray, f0: np.ndarray) -> np.ndarray:
    """Per pitch frame: its difference from itself one period (``sample_rate / f0``) later,
    relative to its energy; 1 for silent frames."""
    half = self.frame_length // 2
    padded = np.pad(signal.astype(np.float64), (half, half))
    frames = np.lib.stride_tricks.sliding_window_view(padded, self.frame_length)
    frames = frames[::self.hop_length][:len(f0)]
    lags = np.clip(np.rint(self.sample_rate / f0), 1, self.frame_length - 1).astype(int)
    result = np.ones(len(frames))
    for lag in np.unique(lags):
      rows = np.flatnonzero(lags == lag)
      early, late = frames[rows, :-lag], frames[rows, lag:]
      energy = np.sum(early ** 2, axis=1) + np.sum(late ** 2, axis=1)
      ratio = np.sum((early - late) ** 2, axis=1) / np.maximum(energy, 1e-20)
      silent = np.sqrt(np.mean(frames[rows] ** 2, axis=1)) < _SILENT_RMS
      result[rows] = np.where(silent, 1.0, ratio)
    return result


def normalize(f0: tf.Tensor, mean: float, std: float) -> tf.Tensor:
  """``(f0 - mean) / std`` on voiced frames (f0 > 0), exactly 0 on the others (in-graph)."""
  f0 = tf.convert_to_tensor(f0, tf.float32)
  return tf.where(f0 > 0, (f0 - mean) / std, tf.zeros_like(f0))


class PitchStore:
  """Frame pitch of audio files by path: from the cache, else computed (and cached).

  Args:
    pitch: how pitch is computed.
    read: path -> the waveform the mel frames are computed from (mono float32 at the
      features' sample rate).
    cache_dir: folder of the ``.npy`` files and statistics; None: nothing is written, each
      file's pitch is computed once per process and kept in memory.
  """

  def __init__(self, pitch: FramePitch, read: Callable[[str], np.ndarray],
               cache_dir: str | None):
    self.pitch = pitch
    self.read = read
    self.cache_dir = cache_dir
    self._key = pitch.key()
    self._cache = None if cache_dir is None else FeatureCache(cache_dir, self._key)
    self._memory: dict[str, np.ndarray] = {}

  def f0(self, path: str) -> np.ndarray:
    """float32 [mel frames]: the f0 (Hz, 0 unvoiced) of ``path``'s frames."""
    if self._cache is not None:
      found = self._cache.load(path)
      if found is not None:
        return found
    elif path in self._memory:
      return self._memory[path]
    f0 = self.pitch.compute(self.read(path))
    if self._cache is not None:
      self._cache.save(path, f0)
    else:
      self._memory[path] = f0
    return f0

  def statistics(self, paths: list[str], where: str) -> tuple[float, float]:
    """(mean, std) in Hz of the voiced frames of ``paths`` (read from the statistics file
    when the cache holds them for exactly these files and settings)."""
    stats_file = None
    if self.cache_dir is not None:
      files = [(os.path.abspath(p), os.stat(p).st_size, os.stat(p).st_mtime_ns) for p in paths]
      digest = hashlib.sha1(json.dumps([self._key, files], sort_keys=True,
                                       default=str).encode("utf-8")).hexdigest()
      stats_file = os.path.join(self.cache_dir, f"pitch_stats-{digest}.json")
      try:
        with open(stats_file, encoding="utf-8") as f:
          saved = json.load(f)
        return float(saved["pitch_mean"]), float(saved["pitch_std"])
      except (OSError, ValueError, KeyError):
        pass
    count, mean, std = voiced_statistics(self.f0(path) for path in paths)
    if count < 2 or not std > 0:
      raise DataError(f"{where}: {count} voiced frame(s) in {len(paths)} utterance(s), too few "
                      f"for pitch statistics; check pitch_fmin/pitch_fmax or the audio")
    if stats_file is not None:
      atomic_write_text(stats_file, json.dumps(
          {"pitch_mean": mean, "pitch_std": std, "voiced_frames": count,
           "utterances": len(paths)}, indent=1) + "\n")
    return mean, std


def voiced_statistics(f0_arrays: Iterable[np.ndarray]) -> tuple[int, float, float]:
  """(voiced frames, mean, standard deviation) of the f0 > 0 values of the arrays."""
  count, total, squares = 0, 0.0, 0.0
  for f0 in f0_arrays:
    voiced = np.asarray(f0, np.float64)[np.asarray(f0) > 0]
    count += voiced.size
    total += float(voiced.sum())
    squares += float(np.square(voiced).sum())
  if count == 0:
    return 0, 0.0, 0.0
  mean = total / count
  return count, mean, math.sqrt(max(squares / count - mean * mean, 0.0))
