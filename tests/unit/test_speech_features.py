"""Speech features agree with librosa's; shapes, frame counts and normalisation."""

import numpy as np
import pytest

from open_seq2seq.data.speech2text.features import (FeatureExtractor, mel_filterbank,
                                                    normalize_features, preemphasize)
from open_seq2seq.errors import ConfigError

librosa = pytest.importorskip("librosa")

SR = 16000


@pytest.fixture(scope="module")
def signal():
  rng = np.random.default_rng(0)
  t = np.arange(int(1.37 * SR)) / SR
  y = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(len(t))
  return y.astype(np.float32)


@pytest.mark.parametrize("num_fft,num_mels", [(512, 64), (512, 40), (1024, 80), (400, 26)])
def test_mel_filterbank_matches_librosa(num_fft, num_mels):
  ours = mel_filterbank(SR, num_fft, num_mels)
  ref = librosa.filters.mel(sr=SR, n_fft=num_fft, n_mels=num_mels, fmin=0, fmax=SR / 2)
  np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-7)


def stft_power(y, n_fft, win, hop, window="hann"):
  return np.abs(librosa.stft(y, n_fft=n_fft, hop_length=hop, win_length=win, window=window,
                             center=True)) ** 2


@pytest.mark.parametrize("window,librosa_window", [("hanning", "hann"), ("hamming", "hamming"),
                                                   ("none", "boxcar")])
def test_logfbank_matches_librosa(signal, window, librosa_window):
  fe = FeatureExtractor("logfbank", 64, SR, window=window)
  ours = fe.raw_features(signal)
  emphasized = preemphasize(signal)
  mel = librosa.filters.mel(sr=SR, n_fft=512, n_mels=64) @ stft_power(emphasized, 512, 320, 160,
                                                                       librosa_window)
  ref = np.log(mel + 1e-20).T
  assert ours.shape == ref.shape == (fe.num_frames(len(signal)), 64)
  np.testing.assert_allclose(ours, ref, atol=2e-3)


def test_spectrogram_matches_librosa(signal):
  fe = FeatureExtractor("spectrogram", 96, SR, window_size=0.02, window_stride=0.01)
  ours = fe.raw_features(signal)
  ref = 10 * np.log10(np.maximum(stft_power(signal, 320, 320, 160), 1e-30)).T[:, :96]
  assert ours.shape == ref.shape
  np.testing.assert_allclose(ours, ref, atol=5e-3)


def test_mfcc_matches_librosa(signal):
  fe = FeatureExtractor("mfcc", 13, SR, window_size=0.025, window_stride=0.01)
  ours = fe.raw_features(signal)
  ref = librosa.feature.mfcc(y=preemphasize(signal), sr=SR, n_mfcc=13, n_mels=26, n_fft=512,
                             hop_length=160, win_length=400, window="hann", center=True).T
  assert ours.shape == ref.shape
  np.testing.assert_allclose(ours, ref, atol=1e-2, rtol=1e-4)


@pytest.mark.parametrize("num_samples", [0, 1, 159, 160, 161, 16000, 16001])
def test_frame_count_matches_librosa(num_samples):
  fe = FeatureExtractor("logfbank", 40, SR)
  y = np.zeros(num_samples, np.float32)
  assert fe(y).shape == (fe.num_frames(num_samples), 40)
  if num_samples >= 512:
    assert fe.num_frames(num_samples) == librosa.stft(y, n_fft=512, hop_length=160).shape[1]


def test_normalization_per_feature_and_global():
  x = np.random.default_rng(1).normal(3.0, 2.0, size=(200, 8)).astype(np.float32) * np.arange(1, 9)
  per = normalize_features(x, per_feature=True)
  np.testing.assert_allclose(per.mean(axis=0), 0, atol=1e-4)
  np.testing.assert_allclose(per.std(axis=0), 1, atol=1e-3)
  glob = normalize_features(x, per_feature=False)
  assert abs(glob.mean()) < 1e-4 and abs(glob.std() - 1) < 1e-3
  assert not np.allclose(glob.std(axis=0), 1, atol=0.1)
  silent = normalize_features(np.zeros((5, 3), np.float32), True)
  assert np.isfinite(silent).all()


def test_config_errors():
  with pytest.raises(ConfigError, match="num_audio_features"):
    FeatureExtractor("spectrogram", 200, SR)  # a 320-point FFT has 161 bins
  with pytest.raises(ConfigError, match="input_type"):
    FeatureExtractor("wavelets", 40, SR)
  with pytest.raises(ConfigError, match="num_fft"):
    FeatureExtractor("logfbank", 40, SR, num_fft=256)  # shorter than the 320-sample window
