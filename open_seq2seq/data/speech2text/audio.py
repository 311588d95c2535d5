"""Reading audio files (WAV, FLAC ... through libsndfile) and resampling."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from open_seq2seq.errors import DataError


def read_audio(path: str, sample_freq: int, resample: bool = True) -> np.ndarray:
  """Mono float32 samples of ``path`` at ``sample_freq`` Hz, in [-1, 1].

  Multi-channel files are averaged to mono.

  Raises:
    DataError: the file is missing or unreadable, or its rate differs from ``sample_freq``
      while ``resample`` is off.
  """
  import soundfile  # imported lazily: only audio-reading processes need libsndfile

  try:
    signal, rate = soundfile.read(path, dtype="float32", always_2d=False)
  except (OSError, RuntimeError, soundfile.LibsndfileError) as e:
    raise DataError(f"{path}: cannot read audio ({e})") from None
  if signal.ndim > 1:
    signal = signal.mean(axis=1, dtype=np.float32)
  if rate != sample_freq:
    if not resample:
      raise DataError(f"{path}: sampled at {rate} Hz but sample_freq is {sample_freq}; "
                      f"resample the corpus or set data_layer_params/resample=True")
    signal = resample_signal(signal, rate, sample_freq)
  return signal


def check_audio_header(path: str, sample_freq: int, resample: bool, where: str) -> None:
  """Reads only ``path``'s header, so that a file :func:`read_audio` would fail on is one
  line when the data layer is built, not an error inside the input pipeline mid-training.

  Raises:
    DataError: naming ``where`` (the CSV line): unreadable or not audio, no samples, or a
      rate other than ``sample_freq`` while ``resample`` is off.
  """
  import soundfile  # imported lazily: only audio-reading processes need libsndfile

  try:
    info = soundfile.info(path)
  except (OSError, RuntimeError, soundfile.LibsndfileError) as e:
    raise DataError(f"{where}: {path}: cannot read audio ({str(e).strip()}); replace the file "
                    f"or drop its line") from None
  if info.frames == 0:
    raise DataError(f"{where}: {path}: holds no audio samples; drop its line")
  if info.samplerate != sample_freq and not resample:
    raise DataError(f"{where}: {path}: sampled at {info.samplerate} Hz but sample_freq is "
                    f"{sample_freq}; resample the corpus or set data_layer_params/resample=True")


def resample_signal(signal: np.ndarray, rate_in: float, rate_out: float) -> np.ndarray:
  """Band-limited polyphase resampling from ``rate_in`` to ``rate_out`` Hz."""
  if rate_in == rate_out or len(signal) == 0:
    return signal.astype(np.float32, copy=False)
  ratio = Fraction(rate_out / rate_in).limit_denominator(1000)
  if ratio.numerator == ratio.denominator:
    return signal.astype(np.float32, copy=False)
  from scipy.signal import resample_poly
  return resample_poly(signal, ratio.numerator, ratio.denominator).astype(np.float32)


def change_speed(signal: np.ndarray, speed: float) -> np.ndarray:
  """Plays ``signal`` ``speed`` times faster (pitch moves too, as in Kaldi/OpenSeq2Seq).

  The factor is rounded to a fraction with a denominator of at most 100 so the polyphase
  filter stays short; the length becomes about ``len / speed``.
  """
  if math.isclose(speed, 1.0) or len(signal) == 0:
    return signal
  ratio = Fraction(1.0 / speed).limit_denominator(100)
  from scipy.signal import resample_poly
  return resample_poly(signal, ratio.numerator, ratio.denominator).astype(np.float32)


def peak_normalize(signal: np.ndarray) -> np.ndarray:
  """Scales to a peak of ~1 (as OpenSeq2Seq did) so gain differences between files vanish."""
  return (signal / (np.max(np.abs(signal), initial=0.0) + 1e-5)).astype(np.float32)
