"""Spectrogram features (open_seq2seq/parts/audio/spectrogram.py) against librosa 0.11."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.data.speech2text import features
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.audio.spectrogram import (log_compress, log_decompress,
                                                  mel_filterbank, nonsilent_interval,
                                                  num_frames, stft_magnitude, trim_silence)

librosa = pytest.importorskip("librosa")


def chirps(sample_rate=16000, seconds=0.6, seed=0):
  """Two chirps and a tone under a Hann envelope, plus a little noise: float32."""
  t = np.arange(int(seconds * sample_rate)) / sample_rate
  y = (np.sin(2 * np.pi * (200 * t + 400 * t ** 2))
       + 0.5 * np.sin(2 * np.pi * (900 * t - 300 * t ** 2))
       + 0.3 * np.sin(2 * np.pi * 2500 * t)) * np.hanning(len(t))
  noise = np.random.default_rng(seed).standard_normal(len(t))
  return (0.3 * y + 0.01 * noise).astype(np.float32)


MEL_SIZES = [  # sample_rate, n_fft, num_mels, fmin, fmax
    (8000, 256, 40, 0.0, 4000.0),
    (22050, 1024, 80, 0.0, None),
    (16000, 512, 64, 55.0, 7600.0),
    (24000, 2048, 128, 20.0, 12000.0),
]


@pytest.mark.parametrize("sample_rate,n_fft,num_mels,fmin,fmax", MEL_SIZES)
@pytest.mark.parametrize("mel_type", ["htk", "slaney"])
def test_mel_filterbank_matches_librosa(sample_rate, n_fft, num_mels, fmin, fmax, mel_type):
  ours = mel_filterbank(sample_rate, n_fft, num_mels, fmin, fmax, mel_type=mel_type)
  htk = mel_type == "htk"
  theirs = librosa.filters.mel(sr=sample_rate, n_fft=n_fft, n_mels=num_mels, fmin=fmin,
                               fmax=fmax, htk=htk, norm=None if htk else "slaney")
  assert ours.dtype == np.float32
  assert ours.shape == (num_mels, n_fft // 2 + 1)
  np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4)
  # Not trivially zero: every filter has weight, HTK filters peak near 1.
  assert np.all(ours.sum(axis=1) > 0)
  if htk:
    assert ours.max() > 0.9


def test_mel_filterbank_default_is_htk():
  np.testing.assert_array_equal(mel_filterbank(16000, 512, 40),
                                mel_filterbank(16000, 512, 40, mel_type="htk"))
  assert not np.allclose(mel_filterbank(16000, 512, 40),
                         mel_filterbank(16000, 512, 40, mel_type="slaney"))


@pytest.mark.parametrize("sample_rate,n_fft,num_mels", [(8000, 256, 40), (16000, 512, 64),
                                                       (22050, 1024, 80)])
def test_speech2text_features_use_this_slaney_filterbank(sample_rate, n_fft, num_mels):
  # one implementation: the speech-recognition features use this module's mel filters
  extractor = features.FeatureExtractor("logfbank", num_mels, sample_rate, num_fft=n_fft)
  np.testing.assert_array_equal(
      extractor.mel_basis, mel_filterbank(sample_rate, n_fft, num_mels, mel_type="slaney"))


def test_unknown_mel_type_is_a_one_line_config_error():
  with pytest.raises(ConfigError, match="mel_type") as info:
    mel_filterbank(16000, 512, 40, mel_type="kaldi")
  assert "\n" not in str(info.value)


@pytest.mark.parametrize("n_fft,hop_length,win_length,power", [
    (512, 128, None, 1.0), (512, 160, 400, 1.0), (511, 100, 301, 1.0),
    (1024, 256, 800, 2.0), (256, 64, None, 1.5)])
def test_stft_magnitude_matches_librosa(n_fft, hop_length, win_length, power):
  y = chirps()
  ours = stft_magnitude(y, n_fft, hop_length, win_length, power=power).numpy()
  theirs = np.abs(librosa.stft(y, n_fft=n_fft, hop_length=hop_length,
                               win_length=win_length)).T ** power
  assert ours.dtype == np.float32
  assert ours.shape == theirs.shape == (num_frames(len(y), n_fft, hop_length),
                                        n_fft // 2 + 1)
  np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4 * theirs.max())


def test_stft_magnitude_uncentred_matches_librosa():
  y = chirps(seconds=0.3)
  ours = stft_magnitude(y, 512, 128, center=False).numpy()
  theirs = np.abs(librosa.stft(y, n_fft=512, hop_length=128, center=False)).T
  assert ours.shape == theirs.shape == (num_frames(len(y), 512, 128, center=False), 257)
  np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4 * theirs.max())


def test_stft_magnitude_batch_tf_function_and_tf_data():
  a, b = chirps(seed=1), chirps(seed=2)
  single = [stft_magnitude(x, 512, 128).numpy() for x in (a, b)]
  batched = stft_magnitude(np.stack([a, b]), 512, 128).numpy()
  np.testing.assert_allclose(batched, np.stack(single), atol=1e-5)

  traced = tf.function(lambda x: stft_magnitude(x, 512, 128),
                       input_signature=[tf.TensorSpec([None], tf.float32)])
  np.testing.assert_allclose(traced(a).numpy(), single[0], atol=1e-5)

  dataset = tf.data.Dataset.from_generator(lambda: iter([a, b[:5000]]),
                                           output_signature=tf.TensorSpec([None], tf.float32))
  shapes = [x.shape for x in dataset.map(lambda x: stft_magnitude(x, 512, 128))]
  assert shapes == [(num_frames(len(a), 512, 128), 257), (num_frames(5000, 512, 128), 257)]


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("num_samples", [0, 1, 255, 256, 511, 512, 513, 1000, 4097])
def test_num_frames_is_what_stft_makes(num_samples, center):
  signal = np.ones(num_samples, np.float32)
  frames = stft_magnitude(signal, 512, 128, center=center).shape[0]
  assert num_frames(num_samples, 512, 128, center=center) == frames
  if center and num_samples:
    assert frames == 1 + num_samples // 128


def test_log_compress_floors_and_inverts():
  x = np.array([0.0, 1e-7, 1e-5, 0.5, 3.0], np.float32)
  y = log_compress(x, 1e-5).numpy()
  np.testing.assert_allclose(y, np.log(np.maximum(x, 1e-5)), rtol=1e-6)
  assert np.all(np.isfinite(y))
  np.testing.assert_allclose(log_decompress(y).numpy()[2:], x[2:], rtol=1e-6)
  np.testing.assert_allclose(log_decompress(y).numpy()[:2], 1e-5, rtol=1e-6)


def tone_in_silence(sample_rate=16000, start=3000, stop=11000, seed=0):
  """A 440 Hz tone from ``start`` to ``stop`` in 1 s of noise 70 dB below it."""
  y = 1e-4 * np.random.default_rng(seed).standard_normal(sample_rate)
  t = np.arange(stop - start) / sample_rate
  y[start:stop] += 0.5 * np.sin(2 * np.pi * 440 * t)
  return y.astype(np.float32)


@pytest.mark.parametrize("frame_length,hop_length,top_db", [(2048, 512, 60), (1024, 256, 30),
                                                            (400, 100, 45)])
def test_trim_silence_matches_librosa(frame_length, hop_length, top_db):
  y = tone_in_silence()
  trimmed, (start, end) = librosa.effects.trim(y, top_db=top_db, frame_length=frame_length,
                                               hop_length=hop_length)
  ours_start, ours_end = (int(v) for v in nonsilent_interval(y, top_db, frame_length,
                                                             hop_length))
  assert abs(ours_start - start) <= hop_length and abs(ours_end - end) <= hop_length
  assert (ours_start, ours_end) == (start, end)
  np.testing.assert_array_equal(trim_silence(y, top_db, frame_length, hop_length).numpy(),
                                trimmed)
  # The noise is cut: the span is the tone widened by at most one frame on each side.
  assert 3000 - frame_length <= ours_start <= 3000 < 11000 <= ours_end <= 11000 + frame_length


def test_trim_silence_all_silent_and_stereo_like_librosa():
  zeros = np.zeros(5000, np.float32)
  assert trim_silence(zeros).shape == librosa.effects.trim(zeros)[0].shape == (5000,)
  stereo = np.stack([tone_in_silence(start=2000, stop=6000, seed=1),
                     tone_in_silence(start=9000, stop=12000, seed=2)])
  expected, (start, end) = librosa.effects.trim(stereo, frame_length=1024, hop_length=256)
  assert [int(v) for v in nonsilent_interval(stereo, 60, 1024, 256)] == [start, end]
  np.testing.assert_array_equal(trim_silence(stereo, 60, 1024, 256).numpy(), expected)


def test_trim_silence_in_tf_data():
  y = tone_in_silence()
  dataset = tf.data.Dataset.from_tensors(y).map(lambda x: trim_silence(x, 60, 1024, 256))
  (trimmed,) = list(dataset)
  np.testing.assert_array_equal(trimmed.numpy(),
                                librosa.effects.trim(y, frame_length=1024, hop_length=256)[0])
