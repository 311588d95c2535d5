"""Griffin-Lim and mel inversion (open_seq2seq/parts/audio/griffin_lim.py) against librosa."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.parts.audio.griffin_lim import (griffin_lim, mel_pseudo_inverse,
                                                  mel_to_linear, spectral_convergence)
from open_seq2seq.parts.audio.spectrogram import mel_filterbank, stft_magnitude

from tests.unit.test_spectrogram import chirps  # noqa: E402  (the same test signal)

librosa = pytest.importorskip("librosa")

N_FFT, HOP = 512, 128


@pytest.fixture(scope="module")
def magnitude():
  return stft_magnitude(chirps(), N_FFT, HOP).numpy()  # [frames, bins]


def convergence(target, waveform, **stft_args):
  estimate = stft_magnitude(waveform, N_FFT, HOP, **stft_args)
  return float(spectral_convergence(target, estimate))


def test_spectral_convergence_definition():
  target = np.arange(12, dtype=np.float32).reshape(3, 4)
  assert float(spectral_convergence(target, target)) == 0.0
  assert float(spectral_convergence(target, np.zeros_like(target))) == pytest.approx(1.0)
  assert float(spectral_convergence(target, 1.5 * target)) == pytest.approx(0.5)
  batched = spectral_convergence(np.stack([target, target]),
                                 np.stack([target, 2 * target])).numpy()
  np.testing.assert_allclose(batched, [0.0, 1.0], atol=1e-6)


def test_convergence_falls_with_iterations_and_tracks_librosa(magnitude):
  ours, theirs = [], []
  for num_iters in (5, 20, 60):
    waveform = griffin_lim(magnitude, N_FFT, HOP, num_iters=num_iters).numpy()
    reference = librosa.griffinlim(magnitude.T, n_iter=num_iters, hop_length=HOP,
                                   n_fft=N_FFT, init=None, momentum=0.0)
    assert waveform.shape == reference.shape == ((magnitude.shape[0] - 1) * HOP,)
    ours.append(convergence(magnitude, waveform))
    theirs.append(convergence(magnitude, reference))
    # Same algorithm, same framing: the waveforms agree sample by sample (measured ~1e-5),
    # so ours lines up with the analysed signal exactly as librosa's does.
    np.testing.assert_allclose(waveform, reference, rtol=0,
                               atol=1e-3 * np.abs(reference).max())
  assert ours[0] > ours[1] > ours[2]
  assert ours[2] < 0.15
  # Tolerance 1 % relative (measured: a few 1e-6).
  np.testing.assert_allclose(ours, theirs, rtol=0.01)


@pytest.mark.parametrize("num_iters,tolerance", [(0, 1e-5), (2, 1e-3)])
def test_ends_are_normalised_like_librosa(num_iters, tolerance):
  # A signal loud up to both ends: a steady-state overlap-add normalisation (what
  # tf.signal.inverse_stft_window_fn does) is off by ~18 % in the first and last samples.
  t = np.arange(4800) / 16000
  y = (0.3 * np.sin(2 * np.pi * (300 * t + 500 * t ** 2))
       + 0.2 * np.sin(2 * np.pi * 1200 * t)).astype(np.float32)
  magnitude = stft_magnitude(y, N_FFT, HOP).numpy()
  waveform = griffin_lim(magnitude, N_FFT, HOP, num_iters=num_iters).numpy()
  reference = librosa.griffinlim(magnitude.T, n_iter=num_iters, hop_length=HOP, n_fft=N_FFT,
                                 init=None, momentum=0.0)
  np.testing.assert_allclose(waveform, reference, rtol=0,
                             atol=tolerance * np.abs(reference).max())


def test_fast_griffin_lim_matches_librosa_momentum(magnitude):
  waveform = griffin_lim(magnitude, N_FFT, HOP, num_iters=20, momentum=0.99).numpy()
  reference = librosa.griffinlim(magnitude.T, n_iter=20, hop_length=HOP, n_fft=N_FFT,
                                 init=None, momentum=0.99)
  ours, theirs = convergence(magnitude, waveform), convergence(magnitude, reference)
  assert ours == pytest.approx(theirs, rel=0.01)
  # Momentum speeds convergence up: better than 20 classic iterations.
  classic = griffin_lim(magnitude, N_FFT, HOP, num_iters=20).numpy()
  assert ours < convergence(magnitude, classic)


def test_short_window_and_power_and_length():
  y = chirps(seconds=0.4)
  power = stft_magnitude(y, N_FFT, HOP, win_length=400, power=2.0).numpy()
  waveform = griffin_lim(power, N_FFT, HOP, win_length=400, num_iters=10, power=2.0)
  reference = librosa.griffinlim(np.sqrt(power.T), n_iter=10, hop_length=HOP,
                                 win_length=400, n_fft=N_FFT, init=None, momentum=0.0)
  np.testing.assert_allclose(waveform.numpy(), reference, rtol=0,
                             atol=1e-3 * np.abs(reference).max())
  padded = griffin_lim(power, N_FFT, HOP, win_length=400, num_iters=10, power=2.0,
                       length=len(y))
  assert padded.shape == (len(y),)
  np.testing.assert_array_equal(padded.numpy()[:len(reference)], waveform.numpy())
  assert not np.any(padded.numpy()[len(reference):])
  assert griffin_lim(power, N_FFT, HOP, 400, num_iters=1, power=2.0, length=1000).shape == (1000,)


def test_runs_in_tf_function_with_a_batch(magnitude):
  other = stft_magnitude(chirps(seed=5)[::-1].copy(), N_FFT, HOP).numpy()
  batch = np.stack([magnitude, other])

  @tf.function(input_signature=[tf.TensorSpec([None, None, N_FFT // 2 + 1], tf.float32)])
  def reconstruct(spectrograms):
    return griffin_lim(spectrograms, N_FFT, HOP, num_iters=8)

  batched = reconstruct(batch).numpy()
  assert batched.shape == (2, (magnitude.shape[0] - 1) * HOP)
  for row, single in zip(batched, batch):
    np.testing.assert_allclose(row, griffin_lim(single, N_FFT, HOP, num_iters=8).numpy(),
                               rtol=0, atol=1e-5)
  assert not np.allclose(batched[0], batched[1])


@pytest.mark.parametrize("mel_type", ["htk", "slaney"])
def test_mel_to_linear_inverts_the_filterbank(mel_type):
  sample_rate, n_fft = 22050, 1024
  basis = mel_filterbank(sample_rate, n_fft, 80, mel_type=mel_type)
  linear = stft_magnitude(chirps(sample_rate, 0.5), n_fft, 256).numpy()
  mel = linear @ basis.T
  recovered = mel_to_linear(np.stack([mel, 2 * mel]), basis).numpy()
  assert recovered.shape == (2,) + linear.shape
  assert recovered.min() >= 0.0
  np.testing.assert_allclose(recovered[1], 2 * recovered[0], rtol=1e-5, atol=1e-9)
  # Clamping the least-squares solution at zero costs ~5 % of the mel (measured 4.7 %).
  remapped = recovered[0] @ basis.T
  assert np.linalg.norm(remapped - mel) / np.linalg.norm(mel) < 0.1
  # Unclamped, the pseudo-inverse is exact: the filterbank has full row rank.
  unclamped = mel_to_linear(mel, basis, floor=-np.inf).numpy()
  np.testing.assert_allclose(unclamped @ basis.T, mel, rtol=0, atol=1e-4 * mel.max())


def test_mel_pseudo_inverse_is_cached_and_shaped():
  basis = mel_filterbank(16000, 512, 40)
  inverse = mel_pseudo_inverse(basis)
  assert inverse.shape == (40, 257) and inverse.dtype == np.float32
  assert mel_pseudo_inverse(basis.copy()) is inverse
  np.testing.assert_allclose(basis @ inverse.T, np.eye(40), atol=1e-4)
