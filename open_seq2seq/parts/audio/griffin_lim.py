"""Waveforms from magnitude spectrograms: Griffin-Lim phase reconstruction, in TensorFlow.

Griffin & Lim (1984) alternate between the signal domain and the STFT domain: invert the
current complex spectrogram, re-analyse the waveform, keep its phase and put the target
magnitude back. Each step cannot increase the distance between the target magnitude and the
magnitude of the signal, so the spectral convergence (:func:`spectral_convergence`) falls
with iterations. With ``momentum > 0`` this is the "fast Griffin-Lim" of Perraudin et al.
(2013), as in librosa's ``griffinlim``.

The framing inverts :func:`open_seq2seq.parts.audio.spectrogram.stft_magnitude` (centred
frames, centrally padded periodic Hann window), and the overlap-add is divided by the exact
window-square envelope, edges included, as librosa's ``istft`` does: so the result lines up
sample for sample with the analysed signal. Everything runs in-graph with a fixed iteration
count (a ``tf.while_loop``), in float32, over any leading batch axes.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from open_seq2seq.parts.audio.spectrogram import (fixed_window_fn, hann_window,
                                                  pad_last_axis)

_TINY = float(np.finfo(np.float32).tiny)  # keeps |x| / (|x| + tiny) finite at x = 0


def _overlap_add_envelope(window: np.ndarray, frames: tf.Tensor, hop_length: int) -> tf.Tensor:
  """Sum over frames of the squared window at each output sample, ``[samples]``."""
  squared = tf.constant(window.astype(np.float64) ** 2, tf.float32)
  tiled = tf.tile(squared[None, :], tf.stack([frames, 1]))
  return tf.signal.overlap_and_add(tiled, hop_length)


def _istft(stft: tf.Tensor, window: np.ndarray, n_fft: int, hop_length: int, center: bool,
           inverse_envelope: tf.Tensor) -> tf.Tensor:
  """Inverse STFT: windowed overlap-add divided by the window-square envelope, then with the
  centre padding cut off (librosa's ``istft``)."""
  # tf.signal.inverse_stft with the plain analysis window gives sum_t w * frame_t; the
  # division by sum_t w^2 follows. inverse_stft_window_fn would fold in a steady-state
  # envelope instead, which is wrong within one window of either end.
  signal = tf.signal.inverse_stft(stft, frame_length=n_fft, frame_step=hop_length,
                                  fft_length=n_fft,
                                  window_fn=fixed_window_fn(window))
  signal = signal * inverse_envelope
  if center:
    half = n_fft // 2
    signal = signal[..., half:tf.shape(signal)[-1] - half]
  return signal


def _stft(signal: tf.Tensor, window: np.ndarray, n_fft: int, hop_length: int,
          center: bool) -> tf.Tensor:
  if center:
    signal = pad_last_axis(signal, n_fft // 2, n_fft // 2)
  return tf.signal.stft(signal, frame_length=n_fft, frame_step=hop_length, fft_length=n_fft,
                        window_fn=fixed_window_fn(window), pad_end=False)


def _fit_length(signal: tf.Tensor, length: int) -> tf.Tensor:
  """Cuts or zero-pads the last axis to ``length`` samples."""
  signal = signal[..., :length]
  return pad_last_axis(signal, 0, length - tf.shape(signal)[-1])


def griffin_lim(magnitude: tf.Tensor, n_fft: int, hop_length: int,
                win_length: int | None = None, num_iters: int = 50, power: float = 1.0,
                momentum: float = 0.0, center: bool = True,
                length: int | None = None) -> tf.Tensor:
  """Waveform whose STFT magnitude approximates ``magnitude``, float32 ``[..., samples]``.

  Starts from zero phase (deterministic) and runs ``num_iters`` inverse-STFT / STFT rounds,
  each keeping the estimated phase and restoring the target magnitude.

  Args:
    magnitude: ``|STFT| ** power``, float32 ``[..., frames, n_fft // 2 + 1]``, as made by
      ``stft_magnitude`` with the same ``n_fft``, ``hop_length``, ``win_length``, ``center``.
    n_fft, hop_length, win_length: the STFT's parameters (``win_length`` default ``n_fft``).
    num_iters: number of phase updates (a Python int: the loop length is fixed in-graph).
    power: the exponent the spectrogram was raised to; its ``1 / power`` root is taken first.
    momentum: fast Griffin-Lim's momentum (0: classic Griffin-Lim; librosa defaults to 0.99).
    center: whether the frames were centred (then the padding is removed again).
    length: cut or zero-pad the output to this many samples (default:
      ``(frames - 1) * hop_length`` for even ``n_fft`` and centred frames, i.e. the input
      length rounded down to a multiple of the hop).
  """
  window = hann_window(win_length or n_fft, n_fft)
  magnitude = tf.convert_to_tensor(magnitude, tf.float32)
  if power != 1.0:
    magnitude = tf.pow(magnitude, 1.0 / power)
  target = tf.complex(magnitude, tf.zeros_like(magnitude))
  frames = tf.shape(magnitude)[-2]
  envelope = _overlap_add_envelope(window, frames, hop_length)
  # Where no window reaches (never, for a Hann window and hop < n_fft) leave the sum as is.
  inverse_envelope = tf.where(envelope > _TINY, 1.0 / tf.maximum(envelope, _TINY), 1.0)
  damping = tf.constant(momentum / (1.0 + momentum), tf.complex64)

  def invert(stft):
    return _istft(stft, window, n_fft, hop_length, center, inverse_envelope)

  def step(i, estimate, previous):
    rebuilt = _stft(invert(estimate), window, n_fft, hop_length, center)
    # previous is zero on the first round, so momentum starts on the second, as in librosa.
    direction = rebuilt - damping * previous
    unit = direction / tf.complex(tf.abs(direction) + _TINY, 0.0)
    return i + 1, target * unit, rebuilt

  _, estimate, _ = tf.while_loop(
      lambda i, *_: i < num_iters, step,
      (tf.constant(0), target, tf.zeros_like(target)))
  signal = invert(estimate)
  if length is not None:
    signal = _fit_length(signal, length)
  return signal


def spectral_convergence(target_magnitude: tf.Tensor,
                         estimated_magnitude: tf.Tensor) -> tf.Tensor:
  """``||S - S_hat||_F / ||S||_F`` over the last two axes, ``[...]`` (one per example).

  Both magnitudes must have the same shape ``[..., frames, bins]``.
  """
  target = tf.convert_to_tensor(target_magnitude, tf.float32)
  estimate = tf.convert_to_tensor(estimated_magnitude, tf.float32)
  error = tf.sqrt(tf.reduce_sum(tf.square(target - estimate), axis=[-2, -1]))
  return error / tf.maximum(tf.sqrt(tf.reduce_sum(tf.square(target), axis=[-2, -1])), _TINY)


_PINV_CACHE: dict = {}
_PINV_CACHE_SIZE = 8


def mel_pseudo_inverse(mel_basis: np.ndarray) -> np.ndarray:
  """Moore-Penrose pseudo-inverse of a ``[num_mels, bins]`` filterbank, float32
  ``[num_mels, bins]`` laid out for ``mel @ inverse``; cached, so computed once per bank."""
  mel_basis = np.asarray(mel_basis, np.float32)
  key = (mel_basis.shape, mel_basis.tobytes())
  if key not in _PINV_CACHE:
    if len(_PINV_CACHE) >= _PINV_CACHE_SIZE:
      _PINV_CACHE.pop(next(iter(_PINV_CACHE)))
    _PINV_CACHE[key] = np.linalg.pinv(mel_basis.astype(np.float64)).T.astype(np.float32)
  return _PINV_CACHE[key]


def mel_to_linear(mel: tf.Tensor, mel_basis: np.ndarray, floor: float = 1e-10) -> tf.Tensor:
  """Linear-frequency magnitude ``[..., frames, bins]`` from a mel spectrogram
  ``[..., frames, num_mels]`` through the filterbank's pseudo-inverse, floored at ``floor``
  (the least-squares solution can dip below zero, which no magnitude does)."""
  mel = tf.convert_to_tensor(mel, tf.float32)
  inverse = tf.constant(mel_pseudo_inverse(mel_basis))
  return tf.maximum(tf.linalg.matmul(mel, inverse), floor)
