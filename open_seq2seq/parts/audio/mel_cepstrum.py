"""Mel-cepstra and mel-cepstral distortion (MCD), in numpy on the host: an evaluation metric.

A frame's mel-cepstrum ``c~`` describes its log amplitude spectrum on a warped frequency
axis: ``log |H(e^jw)| = sum_m c~_m cos(m b(w))``, where ``b`` is the phase of the first-order
all-pass ``(z^-1 - alpha) / (1 - alpha z^-1)``. With the all-pass constant ``alpha`` chosen
for the sample rate (:func:`default_alpha`: 0.31 at 8 kHz, 0.42 at 16 kHz ...), ``b`` follows
the mel scale, so low frequencies get more coefficients, as hearing gives them more
resolution. As SPTK computes mel-cepstra from a spectrum (its ``sp2mc``), the steps are:

1. the power spectrum of each frame (:func:`power_spectrogram`: centred frames, periodic Hann
   window, floored ``dynamic_range_db`` below the loudest bin of the two signals);
2. its real cepstrum (:func:`real_cepstrum`): the inverse FFT of the log power spectrum,
   halved at quefrency 0 (and N/2), i.e. the cepstrum of the minimum-phase ``H`` with
   ``|H|^2`` = the power spectrum;
3. frequency warping by ``alpha`` (:func:`warp_cepstrum`): Oppenheim and Johnson's (1972)
   recursion through a chain of all-pass sections, an exact linear map of the cepstrum
   (truncated to the output order).

The distortion between two frames is ``10 / ln 10 * sqrt(2 * sum_{d=1..order} (c_d -
c'_d)^2)`` dB (c0, the frame's energy, left out), averaged over frames. Frames are compared
position by position (copy synthesis: the same frames) or, with ``dtw=True``, along the
dynamic-time-warping path of the two sequences (TTS output against a recording, lengths
that differ).
"""

from __future__ import annotations

import functools

import numpy as np

from open_seq2seq.parts.audio.spectrogram import window_function

#: All-pass constants by sample rate: SPTK's manual for 8, 10, 12 and 16 kHz; above, the
#: least-squares fit of the warping to the mel scale (:func:`fit_alpha`, pysptk's
#: ``mcepalpha``).
ALPHAS = {8000: 0.31, 10000: 0.35, 12000: 0.37, 16000: 0.42, 22050: 0.455, 24000: 0.466,
          32000: 0.504, 44100: 0.544, 48000: 0.554}
#: c1 .. c24: the order most MCD figures in the speech-synthesis literature use.
DEFAULT_ORDER = 24
#: dB of 10 / ln 10 * sqrt(2 * squared distance): the natural-log cepstra in decibels.
_DB = 10.0 / np.log(10.0)


def fit_alpha(sample_rate: float, points: int = 1000) -> float:
  """The all-pass constant (0 .. 1, step 0.001) whose frequency warping is closest, in mean
  squared error over ``points`` frequencies up to Nyquist, to the mel scale ``log(1 + f /
  1000)`` (both normalized to 1 at Nyquist)."""
  freqs = np.arange(1, points + 1) * (sample_rate / 2.0 / points)
  mel = np.log1p(freqs / 1000.0)
  mel /= mel[-1]
  omega = np.arange(1, points + 1) * (np.pi / points)
  alphas = np.arange(0, 1001) / 1000.0
  warped = omega[None, :] + 2.0 * np.arctan(alphas[:, None] * np.sin(omega)[None, :] /
                                            (1.0 - alphas[:, None] * np.cos(omega)[None, :]))
  warped /= warped[:, -1:]
  return float(alphas[np.argmin(np.mean((warped - mel[None, :]) ** 2, axis=1))])


def default_alpha(sample_rate: int) -> float:
  """:data:`ALPHAS`'s constant for ``sample_rate``, else :func:`fit_alpha`'s."""
  if int(sample_rate) in ALPHAS:
    return ALPHAS[int(sample_rate)]
  return fit_alpha(sample_rate)


def default_frames(sample_rate: int) -> tuple[int, int]:
  """``(n_fft, hop_length)`` when none are given: 32 ms or more (a power of two), 5 ms hop."""
  return 1 << int(np.ceil(np.log2(0.032 * sample_rate))), max(1, round(0.005 * sample_rate))


def power_spectrogram(signal: np.ndarray, n_fft: int, hop_length: int,
                      win_length: int | None = None) -> np.ndarray:
  """``|STFT|^2``, float64 ``[frames, n_fft // 2 + 1]``: frames centred on multiples of the
  hop (zero-padded ``n_fft // 2`` each side, librosa's framing) through a periodic Hann
  window of ``win_length`` (default ``n_fft``)."""
  signal = np.asarray(signal, np.float64).reshape(-1)
  window = window_function("hann", win_length or n_fft, n_fft).astype(np.float64)
  padded = np.pad(signal, (n_fft // 2, n_fft // 2))
  if len(padded) < n_fft:
    return np.zeros([0, n_fft // 2 + 1])
  frames = np.lib.stride_tricks.sliding_window_view(padded, n_fft)[::hop_length]
  spectrum = np.fft.rfft(frames * window, axis=-1)
  return spectrum.real ** 2 + spectrum.imag ** 2


def real_cepstrum(power: np.ndarray, order: int) -> np.ndarray:
  """``c_0 .. c_order`` ``[..., order + 1]`` of the minimum-phase filter whose power
  response is ``power`` ``[..., n_fft // 2 + 1]`` (strictly positive): ``log |H(e^jw)| =
  c_0 + sum_{m >= 1} c_m cos(m w)``, from the inverse FFT of ``log power``."""
  power = np.asarray(power, np.float64)
  n_fft = 2 * (power.shape[-1] - 1)
  if order > n_fft // 2:
    raise ValueError(f"order {order} is above the {n_fft // 2} quefrencies of {n_fft} points")
  # log P = 2 log|H| = sum_n q_n e^{-jwn} with q_n = q_{-n}: q_0 = 2 c_0, q_n = c_n.
  cepstrum = np.fft.irfft(np.log(power), n=n_fft, axis=-1)[..., :order + 1].copy()
  cepstrum[..., 0] /= 2.0
  if order == n_fft // 2:
    cepstrum[..., -1] /= 2.0
  return cepstrum


@functools.lru_cache(maxsize=32)
def _warping_matrix(in_order: int, out_order: int, alpha: float) -> np.ndarray:
  """``[in_order + 1, out_order + 1]``: ``cepstrum @ matrix`` warps by ``alpha``."""
  # The recursion is linear, so run it on the identity: row i is the warped unit c_i.
  cepstra = np.eye(in_order + 1)
  out = np.zeros([in_order + 1, out_order + 1])
  beta = 1.0 - alpha * alpha
  # Oppenheim & Johnson: feed the coefficients from the highest quefrency down through the
  # all-pass chain; each pass shifts every output one section further.
  for i in range(in_order, -1, -1):
    previous = out.copy()
    out[:, 0] = cepstra[:, i] + alpha * previous[:, 0]
    if out_order >= 1:
      out[:, 1] = beta * previous[:, 0] + alpha * previous[:, 1]
    for j in range(2, out_order + 1):
      out[:, j] = previous[:, j - 1] + alpha * (previous[:, j] - out[:, j - 1])
  return out


def warp_cepstrum(cepstrum: np.ndarray, alpha: float, order: int) -> np.ndarray:
  """The cepstrum ``[..., M + 1]`` on the frequency axis warped by the all-pass constant
  ``alpha`` (``-1 < alpha < 1``; 0 leaves it as it is), to ``order``: ``[..., order + 1]``.
  Warping by ``alpha`` then by ``-alpha`` gives the cepstrum back (to the truncation of the
  intermediate order)."""
  if not -1.0 < alpha < 1.0:
    raise ValueError(f"the all-pass constant must be in (-1, 1), got {alpha}")
  cepstrum = np.asarray(cepstrum, np.float64)
  return cepstrum @ _warping_matrix(cepstrum.shape[-1] - 1, int(order), float(alpha))


def mel_cepstrum(power: np.ndarray, order: int = DEFAULT_ORDER, alpha: float = 0.0
                 ) -> np.ndarray:
  """Mel-cepstra ``[..., order + 1]`` of power spectra ``[..., n_fft // 2 + 1]`` (strictly
  positive): the real cepstrum at every quefrency, warped by ``alpha``."""
  power = np.asarray(power, np.float64)
  return warp_cepstrum(real_cepstrum(power, power.shape[-1] - 1), alpha, order)


def mel_cepstra(signal: np.ndarray, sample_rate: int, order: int = DEFAULT_ORDER,
                alpha: float | None = None, n_fft: int | None = None,
                hop_length: int | None = None, win_length: int | None = None,
                floor: float | None = None) -> np.ndarray:
  """Mel-cepstra ``[frames, order + 1]`` of a waveform (``alpha`` default:
  :func:`default_alpha`, frames: :func:`default_frames`), the power floored at ``floor``
  (default: 1e-12 of the signal's loudest bin, 120 dB)."""
  n_fft = n_fft or default_frames(sample_rate)[0]
  hop_length = hop_length or default_frames(sample_rate)[1]
  power = power_spectrogram(signal, n_fft, hop_length, win_length)
  if floor is None:
    floor = 1e-12 * float(power.max(initial=0.0))
  power = np.maximum(power, max(floor, np.finfo(np.float64).tiny))
  return mel_cepstrum(power, order, default_alpha(sample_rate) if alpha is None else alpha)


def dtw_path(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Indices ``(i, j)`` of the cheapest monotonic alignment of frames ``x`` [T, D] and
  ``y`` [U, D] (Euclidean frame distance; steps right, down, diagonal; from (0, 0) to the
  last frames of both)."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  if not len(x) or not len(y):
    raise ValueError("dynamic time warping needs at least one frame on each side")
  cost = np.sqrt(np.maximum(np.sum(x ** 2, 1)[:, None] + np.sum(y ** 2, 1)[None, :]
                            - 2.0 * x @ y.T, 0.0))
  total = np.empty_like(cost)
  total[0] = np.cumsum(cost[0])
  for i in range(1, len(x)):
    # total[i, j] = cost[i, j] + min(total[i-1, j], total[i-1, j-1], total[i, j-1]): with
    # the row's prefix sums s, it is s[j] + min over k <= j of (best[k] - s[k-1]).
    best = total[i - 1].copy()
    best[1:] = np.minimum(best[1:], total[i - 1, :-1])
    sums = np.cumsum(cost[i])
    total[i] = sums + np.minimum.accumulate(best - (sums - cost[i]))
  i, j = len(x) - 1, len(y) - 1
  path = [(i, j)]
  while i or j:
    steps = [(a, b) for a, b in ((i - 1, j - 1), (i - 1, j), (i, j - 1)) if a >= 0 and b >= 0]
    i, j = min(steps, key=lambda s: total[s])
    path.append((i, j))
  path.reverse()
  return np.array([p[0] for p in path]), np.array([p[1] for p in path])


def cepstral_distortions(reference: np.ndarray, synthesized: np.ndarray, dtw: bool = False
                         ) -> np.ndarray:
  """Per compared frame, the distortion in dB of two mel-cepstrum sequences ``[T, order +
  1]`` over c1 .. c_order: position by position (the same frame count), or along the DTW
  path of c1 .. c_order with ``dtw``."""
  reference = np.asarray(reference, np.float64)[:, 1:]
  synthesized = np.asarray(synthesized, np.float64)[:, 1:]
  if dtw:
    i, j = dtw_path(reference, synthesized)
    reference, synthesized = reference[i], synthesized[j]
  elif reference.shape != synthesized.shape:
    raise ValueError(f"frame-aligned MCD needs sequences of the same shape, got "
                     f"{reference.shape} and {synthesized.shape}: cut them to the same "
                     f"length or align them with dtw=True")
  return _DB * np.sqrt(2.0 * np.sum((reference - synthesized) ** 2, axis=-1))


def mcd_frames(reference: np.ndarray, synthesized: np.ndarray, sample_rate: int,
               order: int = DEFAULT_ORDER, alpha: float | None = None,
               n_fft: int | None = None, hop_length: int | None = None,
               win_length: int | None = None, dtw: bool = False,
               dynamic_range_db: float = 120.0) -> np.ndarray:
  """Per compared frame, the mel-cepstral distortion (dB) of a synthesized waveform from the
  reference one. Both spectra are floored ``dynamic_range_db`` below the loudest bin of
  either (one floor for both: the distance is symmetric, and scaling both signals changes
  nothing). Without ``dtw`` the waveforms must have the same number of frames (copy
  synthesis)."""
  n_fft = n_fft or default_frames(sample_rate)[0]
  hop_length = hop_length or default_frames(sample_rate)[1]
  loudest = max(float(power_spectrogram(x, n_fft, hop_length, win_length).max(initial=0.0))
                for x in (reference, synthesized))
  floor = 10.0 ** (-dynamic_range_db / 10.0) * loudest
  options = {"order": order, "alpha": alpha, "n_fft": n_fft, "hop_length": hop_length,
             "win_length": win_length, "floor": floor}
  return cepstral_distortions(mel_cepstra(reference, sample_rate, **options),
                              mel_cepstra(synthesized, sample_rate, **options), dtw)


def mel_cepstral_distortion(reference: np.ndarray, synthesized: np.ndarray,
                            sample_rate: int, **options) -> float:
  """Mean over frames of :func:`mcd_frames` (same keywords), in dB."""
  return float(np.mean(mcd_frames(reference, synthesized, sample_rate, **options)))


__all__ = ["ALPHAS", "DEFAULT_ORDER", "cepstral_distortions", "default_alpha",
           "default_frames", "dtw_path", "fit_alpha", "mcd_frames", "mel_cepstra",
           "mel_cepstral_distortion", "mel_cepstrum", "power_spectrogram", "real_cepstrum",
           "warp_cepstrum"]
