"""Reading audio files (WAV, FLAC ... through libsndfile) and resampling."""

from __future__ import annotations

import math
import os
import re
import threading
from fractions import Fraction

import numpy as np

from open_seq2seq.errors import DataError
from open_seq2seq.utils.quiet_start import filtered_native_stderr

#: First bytes of the containers libsndfile recognises by their header alone. Any other file
#: (MP3, or not audio at all) is also offered to mpg123, which prints notes on stderr.
_CONTAINER_MAGICS = (b"RIFF", b"RIFX", b"RF64", b"fLaC", b"OggS", b"FORM", b"caff", b"riff")
#: mpg123's notes and warnings ("Note: Illegal Audio-MPEG-Header ...", "[src/libmpg123/...").
_DECODER_CHATTER = re.compile(r"^(Note|Warning|Error|warning|error): |^\[src/libmpg123/")
_STDERR_LOCK = threading.Lock()  # file descriptor 2 is the process's: one capture at a time


def _cannot_read(path: str, error: Exception) -> str:
  """What libsndfile's error means for ``path``, in a user's words."""
  if not os.path.exists(path):
    return "file not found"
  if not os.path.isfile(path):
    return "not a regular file"
  if not os.access(path, os.R_OK):
    return "permission denied"
  reason = str(error).strip()
  reason = reason.split("': ", 1)[1] if reason.startswith("Error opening '") else reason
  if "does not exist" in reason or reason.startswith("System error"):
    # what libsndfile says of a file that mpg123 was offered and refused
    reason = "no decoder recognises it"
  return f"not audio or corrupt ({reason.rstrip('.')})"


def _info_quietly(path: str):
  """``soundfile.info(path)``; a file that is not in a known container is probed with the
  process's stderr captured, and mpg123's notes about it are dropped."""
  import soundfile  # pylint: disable=import-outside-toplevel
  try:
    with open(path, "rb") as f:
      known = f.read(4) in _CONTAINER_MAGICS
  except OSError:
    known = True  # soundfile.info fails on it below, without probing
  if known:
    return soundfile.info(path)
  with _STDERR_LOCK, filtered_native_stderr(lambda line: bool(_DECODER_CHATTER.match(line))):
    return soundfile.info(path)


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
    raise DataError(f"{path}: cannot read audio: {_cannot_read(path, e)}") from None
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
    info = _info_quietly(path)
  except (OSError, RuntimeError, soundfile.LibsndfileError) as e:
    raise DataError(f"{where}: {path}: cannot read audio: {_cannot_read(path, e)}; replace "
                    f"the file or drop its line") from None
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


#: Largest denominator of :func:`resample_by`'s factor. A polyphase filter needs a rational
#: factor up/down and has ~20 * max(up, down) taps: at 2000 that is ~40k taps (a few ms per
#: clip) and a factor moves by less than 2.5e-4, a speed error no model hears. Only factors
#: within 2.5e-4 of 1 become 1: 0.5 % of the draws at r = 0.05, not the 10 % that a
#: denominator of 100 left unperturbed.
MAX_FACTOR_DENOMINATOR = 2000


def resample_by(signal: np.ndarray, factor: float) -> np.ndarray:
  """Resamples ``signal`` to ``ceil(len * factor)`` samples (OpenSeq2Seq's speed perturbation).

  Played at the original rate, the result is ``1 / factor`` times as fast, pitch included:
  ``factor`` 1.1 gives a clip 10 % longer and lower. The factor is rounded to a fraction
  with a denominator of at most :data:`MAX_FACTOR_DENOMINATOR` (see there why).
  """
  ratio = Fraction(float(factor)).limit_denominator(MAX_FACTOR_DENOMINATOR)
  ratio = max(ratio, Fraction(1, MAX_FACTOR_DENOMINATOR))  # a tiny positive factor, not 0
  if ratio == 1 or len(signal) == 0:
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
