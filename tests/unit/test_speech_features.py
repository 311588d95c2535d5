"""Speech features (TF ops) agree with librosa's; shapes, frame counts, normalisation, the
in-graph path (tf.data, tf.function) and the psf backend."""

import logging

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.data.speech2text import features as features_module
from open_seq2seq.data.speech2text.features import (FeatureExtractor, normalize_features,
                                                    preemphasize)
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.audio.spectrogram import mel_filterbank

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
  ours = mel_filterbank(SR, num_fft, num_mels, mel_type="slaney")
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


@pytest.mark.parametrize("num_mfcc,window_size,window,librosa_window", [
    (13, 0.025, "hanning", "hann"), (40, 0.02, "hamming", "hamming"), (20, 0.032, "none", "boxcar")])
def test_mfcc_matches_librosa(signal, num_mfcc, window_size, window, librosa_window):
  fe = FeatureExtractor("mfcc", num_mfcc, SR, window_size=window_size, window_stride=0.01,
                        window=window)
  ours = fe.raw_features(signal)
  ref = librosa.feature.mfcc(y=preemphasize(signal), sr=SR, n_mfcc=num_mfcc, n_mels=2 * num_mfcc,
                             n_fft=512, hop_length=160, win_length=fe.win_length,
                             window=librosa_window, center=True).T
  assert ours.shape == ref.shape
  np.testing.assert_allclose(ours, ref, atol=1e-2, rtol=1e-4)


@pytest.mark.parametrize("input_type,num_features", [("spectrogram", 96), ("logfbank", 40),
                                                     ("mfcc", 13)])
@pytest.mark.parametrize("per_feature", [False, True])
def test_normalised_features_match_librosa_pipeline(signal, input_type, num_features,
                                                    per_feature):
  """features_graph (peak normalisation, features, per-utterance normalisation) against the
  same steps done by librosa + numpy."""
  fe = FeatureExtractor(input_type, num_features, SR, norm_per_feature=per_feature)
  y = 0.5 * signal / (np.abs(signal).max() + 1e-5)  # any gain: peak-normalised first
  peak = y / (np.abs(y).max() + 1e-5)
  if input_type == "spectrogram":
    raw = 10 * np.log10(np.maximum(stft_power(peak, 320, 320, 160), 1e-30)).T[:, :96]
  elif input_type == "logfbank":
    mel = librosa.filters.mel(sr=SR, n_fft=512, n_mels=40) @ stft_power(preemphasize(peak),
                                                                        512, 320, 160)
    raw = np.log(mel + 1e-20).T
  else:
    raw = librosa.feature.mfcc(y=preemphasize(peak), sr=SR, n_mfcc=13, n_mels=26, n_fft=512,
                               hop_length=160, win_length=320, window="hann").T
  axis = 0 if per_feature else None
  ref = (raw - raw.mean(axis=axis, keepdims=True)) / (raw.std(axis=axis, keepdims=True) + 1e-5)
  np.testing.assert_allclose(fe(y), ref, atol=2e-3)


def test_features_graph_runs_in_tf_data_and_tf_function(signal):
  fe = FeatureExtractor("logfbank", 40, SR)
  eager = fe(signal)
  dataset = tf.data.Dataset.from_tensor_slices([signal, signal[::-1].copy()]).map(
      fe.features_graph)
  in_data = [x.numpy() for x in dataset]
  np.testing.assert_allclose(in_data[0], eager, atol=1e-5)
  assert in_data[1].shape == eager.shape and not np.allclose(in_data[1], eager)
  serve = tf.function(fe.features_graph, input_signature=[tf.TensorSpec([None], tf.float32)])
  graph = serve.get_concrete_function().graph
  assert not any(op.type in ("PyFunc", "EagerPyFunc", "PyFuncStateless") for op in
                 graph.get_operations())  # pure TF: exportable in a SavedModel
  np.testing.assert_allclose(serve(signal).numpy(), eager, atol=1e-5)


def test_dither_is_seeded_and_only_when_asked(signal):
  fe = FeatureExtractor("logfbank", 40, SR)
  plain = fe.features_graph(signal).numpy()
  np.testing.assert_allclose(fe.features_graph(signal, 1e-3).numpy(), plain)  # no seed: off
  a = fe.features_graph(signal, 1e-3, tf.constant([1, 2], tf.int64)).numpy()
  b = fe.features_graph(signal, 1e-3, tf.constant([1, 2], tf.int64)).numpy()
  np.testing.assert_array_equal(a, b)
  assert not np.allclose(a, plain, atol=1e-4)


@pytest.mark.parametrize("input_type,num_features", [("logfbank", 40), ("mfcc", 13),
                                                     ("spectrogram", 64)])
def test_psf_backend_is_python_speech_features(signal, input_type, num_features):
  psf = pytest.importorskip("python_speech_features")
  fe = FeatureExtractor(input_type, num_features, SR, backend="psf")
  assert not fe.in_graph
  ours = fe(signal)
  scaled = signal / (np.abs(signal).max() + 1e-5) * 32767.0
  if input_type == "logfbank":
    ref = psf.logfbank(scaled, SR, 0.02, 0.01, nfilt=40, nfft=512, preemph=0.97)
  elif input_type == "mfcc":
    ref = psf.mfcc(scaled, SR, 0.02, 0.01, numcep=13, nfilt=26, nfft=512, preemph=0.97,
                   ceplifter=26, appendEnergy=False)
  else:
    frames = psf.sigproc.framesig(scaled, 320, 160, winfunc=np.hanning)
    ref = psf.sigproc.logpowspec(frames, 320)[:, :64]
  ref = (ref - ref.mean()) / (ref.std() + 1e-5)
  assert ours.shape == ref.shape == (fe.num_frames(len(signal)), num_features)
  np.testing.assert_allclose(ours, ref, atol=1e-3)
  with pytest.raises(ConfigError, match="backend: 'psf' features are computed in numpy"):
    fe.features_graph(tf.constant(signal))


def test_psf_backend_without_the_package_warns_and_falls_back(signal, monkeypatch, caplog):
  monkeypatch.setattr(features_module, "psf_available", lambda: False)
  with caplog.at_level(logging.WARNING):
    fe = FeatureExtractor("logfbank", 40, SR, backend="psf")
  assert fe.backend == "librosa" and fe.in_graph
  warnings = [r.getMessage() for r in caplog.records if "python_speech_features" in r.getMessage()]
  assert len(warnings) == 1 and "\n" not in warnings[0]
  np.testing.assert_allclose(fe(signal), FeatureExtractor("logfbank", 40, SR)(signal))


@pytest.mark.parametrize("num_samples", [0, 1, 159, 160, 161, 16000, 16001])
def test_frame_count_matches_librosa(num_samples):
  fe = FeatureExtractor("logfbank", 40, SR)
  y = np.zeros(num_samples, np.float32)
  assert fe(y).shape == (fe.num_frames(num_samples), 40)
  if num_samples >= 512:
    assert fe.num_frames(num_samples) == librosa.stft(y, n_fft=512, hop_length=160).shape[1]


def test_normalization_per_feature_and_global():
  x = np.random.default_rng(1).normal(3.0, 2.0, size=(200, 8)).astype(np.float32) * np.arange(1, 9)
  per = normalize_features(x, per_feature=True).numpy()
  np.testing.assert_allclose(per.mean(axis=0), 0, atol=1e-4)
  np.testing.assert_allclose(per.std(axis=0), 1, atol=1e-3)
  glob = normalize_features(x, per_feature=False).numpy()
  assert abs(glob.mean()) < 1e-4 and abs(glob.std() - 1) < 1e-3
  assert not np.allclose(glob.std(axis=0), 1, atol=0.1)
  silent = normalize_features(np.zeros((5, 3), np.float32), True).numpy()
  assert np.isfinite(silent).all()


def test_config_errors():
  with pytest.raises(ConfigError, match="num_audio_features"):
    FeatureExtractor("spectrogram", 200, SR)  # a 320-point FFT has 161 bins
  with pytest.raises(ConfigError, match="input_type"):
    FeatureExtractor("wavelets", 40, SR)
  with pytest.raises(ConfigError, match="num_fft"):
    FeatureExtractor("logfbank", 40, SR, num_fft=256)  # shorter than the 320-sample window
  with pytest.raises(ConfigError, match="window"):
    FeatureExtractor("logfbank", 40, SR, window="blackman")
  with pytest.raises(ConfigError, match="backend"):
    FeatureExtractor("logfbank", 40, SR, backend="kaldi")
