"""HiFi-GAN's losses, as plain functions of tensors (no state), float32 scalars.

* :func:`discriminator_loss`: LSGAN, ``sum_d mean((1 - D_d(real))^2) + mean(D_d(fake)^2)``;
* :func:`generator_adversarial_loss`: ``sum_d mean((1 - D_d(fake))^2)``;
* :func:`feature_matching_loss`: ``sum_d sum_l mean |F_dl(real) - F_dl(fake)|``;
* :func:`mel_spectrogram_loss`: mean ``|log mel(real) - log mel(fake)|`` over frames and
  mel channels, the mel computed in-graph (``parts/audio/spectrogram.py``);
* :func:`multi_resolution_stft_loss`: Parallel WaveGAN's auxiliary loss (Yamamoto et al.,
  2020), spectral convergence + log-magnitude L1 of linear STFTs at several resolutions,
  averaged; every bin from DC to Nyquist, which coarse mel filters do not separate (and the
  Slaney/HTK filterbank gives DC no weight at all).

The paper's generator objective is ``adversarial + 2 * feature matching + 45 * mel``
(:data:`FEATURE_MATCHING_WEIGHT`, :data:`MEL_WEIGHT`); the discriminators minimise
:func:`discriminator_loss` on real audio and the generator's output with its gradient
stopped. Every mean is over valid positions only: the discriminators' ``score_masks`` /
``feature_masks`` (``discriminators.py``) and, for the mel loss, the frames of each
utterance's ``lengths`` samples, so a batch's padding never counts. Without masks the means
are over every position, as the reference's (which trains on fixed-size segments).
"""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np
import tensorflow as tf

from open_seq2seq.parts.audio.spectrogram import log_compress, mel_filterbank, stft_magnitude

FEATURE_MATCHING_WEIGHT = 2.0
MEL_WEIGHT = 45.0
#: Added to |STFT|^2 before the square root: the gradient of |z| is undefined at z = 0,
#: which silence (and zeroed padding) reaches exactly.
MAGNITUDE_EPSILON = 1e-9


def masked_mean(values: tf.Tensor, mask: tf.Tensor | None = None) -> tf.Tensor:
  """float32 mean of ``values`` over the positions where ``mask`` (broadcastable) is 1;
  0 when no position is valid."""
  values = tf.cast(values, tf.float32)
  if mask is None:
    return tf.reduce_mean(values)
  weights = tf.broadcast_to(tf.cast(mask, tf.float32), tf.shape(values))
  return tf.math.divide_no_nan(tf.reduce_sum(values * weights), tf.reduce_sum(weights))


def _masks(masks: Sequence | None, count: int) -> Sequence:
  return [None] * count if masks is None else masks


def discriminator_loss(real_scores: Sequence[tf.Tensor], fake_scores: Sequence[tf.Tensor],
                       masks: Sequence[tf.Tensor | None] | None = None) -> tf.Tensor:
  """LSGAN discriminator loss summed over sub-discriminators: real scores pulled to 1,
  scores of generated audio to 0.

  Args:
    real_scores, fake_scores: per sub-discriminator, scores of real and generated audio of
      the same lengths (``DiscriminatorOutput.scores``).
    masks: per sub-discriminator, 1 on valid scores (``score_masks``; None: all valid).
  """
  total = tf.constant(0.0, tf.float32)
  for real, fake, mask in zip(real_scores, fake_scores, _masks(masks, len(real_scores))):
    real, fake = tf.cast(real, tf.float32), tf.cast(fake, tf.float32)
    total += masked_mean(tf.square(1.0 - real), mask) + masked_mean(tf.square(fake), mask)
  return total


def generator_adversarial_loss(fake_scores: Sequence[tf.Tensor],
                               masks: Sequence[tf.Tensor | None] | None = None) -> tf.Tensor:
  """LSGAN generator loss summed over sub-discriminators: scores of generated audio
  pulled to 1 (``masks`` as in :func:`discriminator_loss`)."""
  total = tf.constant(0.0, tf.float32)
  for fake, mask in zip(fake_scores, _masks(masks, len(fake_scores))):
    total += masked_mean(tf.square(1.0 - tf.cast(fake, tf.float32)), mask)
  return total


def feature_matching_loss(real_maps: Sequence[Sequence[tf.Tensor]],
                          fake_maps: Sequence[Sequence[tf.Tensor]],
                          masks: Sequence[Sequence[tf.Tensor] | None] | None = None
                          ) -> tf.Tensor:
  """L1 distance of the discriminators' feature maps on real and generated audio: the mean
  absolute difference of each map, summed over maps and sub-discriminators (unweighted; the
  paper weights it by 2).

  Args:
    real_maps, fake_maps: ``DiscriminatorOutput.feature_maps`` of real and generated audio.
    masks: ``DiscriminatorOutput.feature_masks`` (None: all valid).
  """
  total = tf.constant(0.0, tf.float32)
  for real, fake, sub_masks in zip(real_maps, fake_maps, _masks(masks, len(real_maps))):
    for r, f, mask in zip(real, fake, _masks(sub_masks, len(real))):
      total += masked_mean(tf.abs(tf.cast(r, tf.float32) - tf.cast(f, tf.float32)), mask)
  return total


@functools.lru_cache(maxsize=8)
def _filterbank(sample_rate: int, n_fft: int, num_mels: int, fmin: float,
                fmax: float | None, mel_type: str) -> np.ndarray:
  """[bins, num_mels], for ``magnitude @ filterbank``."""
  return np.ascontiguousarray(mel_filterbank(sample_rate, n_fft, num_mels, fmin, fmax,
                                             mel_type).T)


def log_mel_spectrogram(audio: tf.Tensor, lengths: tf.Tensor | None = None, *,
                        sample_rate: int = 22050, n_fft: int = 1024, hop_length: int = 256,
                        win_length: int | None = None, num_mels: int = 80, fmin: float = 0.0,
                        fmax: float | None = None, mel_type: str = "slaney",
                        log_floor: float = 1e-5) -> tuple[tf.Tensor, tf.Tensor | None]:
  """``log(max(mel(|STFT|), log_floor))``, float32 ``[B, frames, num_mels]``, and each
  utterance's frames.

  The STFT is the project's (librosa's centred framing, Hann window; the reference
  implementation pads by reflection without centring, which moves frames by a few samples),
  the magnitude ``sqrt(|STFT|^2 + 1e-9)`` so that silence has a gradient. With ``lengths``
  (samples), the samples past them are zeroed first and utterance b has
  ``1 + lengths[b] // hop_length`` frames: those it has alone. The defaults are the paper's
  loss spectrogram (22.05 kHz, 1024-point FFT, hop 256, 80 Slaney mels up to Nyquist).

  Args:
    audio: [B, samples] (or [B, samples, 1]).
    lengths: [B] int samples, or None.
  """
  audio = tf.cast(audio, tf.float32)
  if audio.shape.rank == 3:
    audio = audio[..., 0]
  frame_lengths = None
  if lengths is not None:
    audio *= tf.sequence_mask(lengths, tf.shape(audio)[1], dtype=tf.float32)
    frame_lengths = 1 + tf.cast(lengths, tf.int32) // hop_length
  power = stft_magnitude(audio, n_fft, hop_length, win_length, power=2.0)
  magnitude = tf.sqrt(power + MAGNITUDE_EPSILON)
  mel = tf.linalg.matmul(magnitude, tf.constant(
      _filterbank(sample_rate, n_fft, num_mels, fmin, fmax, mel_type)))
  return log_compress(mel, log_floor), frame_lengths


def mel_spectrogram_loss(real: tf.Tensor, fake: tf.Tensor, lengths: tf.Tensor | None = None,
                         **mel_options) -> tf.Tensor:
  """Mean absolute difference of the log mel spectrograms of real and generated audio over
  each utterance's frames and every mel channel (unweighted; the paper weights it by 45).

  Args:
    real, fake: [B, samples] waveforms of the same shape.
    lengths: [B] int samples per utterance (None: all).
    **mel_options: keywords of :func:`log_mel_spectrogram` (sample_rate, n_fft, ...).
  """
  real_mel, frame_lengths = log_mel_spectrogram(real, lengths, **mel_options)
  fake_mel, _ = log_mel_spectrogram(fake, lengths, **mel_options)
  mask = None
  if frame_lengths is not None:
    mask = tf.sequence_mask(frame_lengths, tf.shape(real_mel)[1], dtype=tf.float32)[..., None]
  return masked_mean(tf.abs(real_mel - fake_mel), mask)


def _stft_frames(audio: tf.Tensor, lengths: tf.Tensor | None, n_fft: int, hop_length: int,
                 win_length: int) -> tuple[tf.Tensor, tf.Tensor | None]:
  """``sqrt(|STFT|^2 + eps)`` [B, frames, n_fft // 2 + 1] of audio zeroed past ``lengths``,
  and the mask [B, frames, 1] of each utterance's own ``1 + lengths // hop`` frames."""
  if lengths is not None:
    audio *= tf.sequence_mask(lengths, tf.shape(audio)[1], dtype=tf.float32)
  magnitude = tf.sqrt(stft_magnitude(audio, n_fft, hop_length, win_length, power=2.0)
                      + MAGNITUDE_EPSILON)
  if lengths is None:
    return magnitude, None
  frames = 1 + tf.cast(lengths, tf.int32) // hop_length
  return magnitude, tf.sequence_mask(frames, tf.shape(magnitude)[1], dtype=tf.float32)[..., None]


def multi_resolution_stft_loss(real: tf.Tensor, fake: tf.Tensor,
                               lengths: tf.Tensor | None = None, *,
                               resolutions: Sequence[Sequence[int]] = ((1024, 120, 600),
                                                                       (2048, 240, 1200),
                                                                       (512, 50, 240)),
                               log_floor: float = 1e-5) -> tf.Tensor:
  """Mean over ``resolutions`` ``(n_fft, hop_length, win_length)`` of spectral convergence
  ``||S_real - S_fake||_F / ||S_real||_F`` plus ``mean |log S_real - log S_fake|`` (the
  logs floored at ``log_floor``), S the STFT magnitudes (the project's centred Hann STFT) of
  the batch's valid frames; unweighted. The defaults are Parallel WaveGAN's (24 kHz).

  Args:
    real, fake: [B, samples] waveforms of the same shape.
    lengths: [B] int samples per utterance (None: all).
  """
  real, fake = tf.cast(real, tf.float32), tf.cast(fake, tf.float32)
  if real.shape.rank == 3:
    real, fake = real[..., 0], fake[..., 0]
  total = tf.constant(0.0, tf.float32)
  for n_fft, hop_length, win_length in resolutions:
    real_mag, mask = _stft_frames(real, lengths, n_fft, hop_length, win_length)
    fake_mag, _ = _stft_frames(fake, lengths, n_fft, hop_length, win_length)
    weights = tf.ones_like(real_mag) if mask is None else tf.broadcast_to(mask,
                                                                          tf.shape(real_mag))
    convergence = tf.math.divide_no_nan(
        tf.sqrt(tf.reduce_sum(tf.square(real_mag - fake_mag) * weights)),
        tf.sqrt(tf.reduce_sum(tf.square(real_mag) * weights)))
    log_l1 = masked_mean(tf.abs(log_compress(real_mag, log_floor)
                                - log_compress(fake_mag, log_floor)), mask)
    total += convergence + log_l1
  return total / len(resolutions)
