"""Frame pitch for FastPitch (data/text2speech/pitch.py): accuracy, voicing, frame alignment
with the mel frames, the cache and the corpus statistics."""

import os
import sys

import numpy as np
import pytest

from open_seq2seq.data.text2speech.features import SpectrogramFeatures
from open_seq2seq.data.text2speech.pitch import (PITCH_PARAMS, FramePitch, PitchStore,
                                                 voiced_statistics)
from open_seq2seq.errors import ConfigError, DataError

DEFAULTS = {key: param.default for key, param in PITCH_PARAMS.items()}


def harmonic(seconds, freq, rate, amplitude=0.3):
  """A tone with three harmonics (a voice-like spectrum)."""
  t = np.arange(int(round(seconds * rate))) / rate
  wave = sum(amplitude / k * np.sin(2 * np.pi * k * freq * t) for k in (1, 2, 3))
  return wave.astype(np.float32)


def features(rate=16000, n_fft=512, hop=128, trim=False):
  return SpectrogramFeatures(output_type="mel", num_mel=10, num_magnitude=0, sample_rate=rate,
                             n_fft=n_fft, hop_length=hop, win_length=n_fft, trim=trim)


def frame_pitch(method="yin", rate=16000, n_fft=512, hop=128, trim=False, **params):
  return FramePitch.for_features(features(rate, n_fft, hop, trim),
                                 {**DEFAULTS, "pitch_method": method, **params})


# ----------------------------------------------------------------------------- accuracy
@pytest.mark.parametrize("method", ["yin", "pyin"])
def test_pitch_of_a_tone_that_changes_halfway_and_silence_is_unvoiced(method):
  rate, hop = 16000, 128
  silence = np.zeros(int(0.2 * rate), np.float32)
  low, high = harmonic(0.45, 120.0, rate), harmonic(0.45, 220.0, rate)
  signal = np.concatenate([silence, low, high, silence])
  estimator = frame_pitch(method, rate=rate, hop=hop)
  f0 = estimator.compute(signal)
  assert f0.dtype == np.float32 and len(f0) == 1 + len(signal) // hop
  half = estimator.frame_length // 2
  start, switch = len(silence), len(silence) + len(low)
  end = switch + len(high)
  centres = np.arange(len(f0)) * hop
  # frames whose whole window holds one tone (or silence) must show it: a shift of a
  # frame or two moves a window across an edge
  in_low = (centres - half >= start) & (centres + half <= switch)
  in_high = (centres - half >= switch) & (centres + half <= end)
  silent = (centres + half <= start) | (centres - half >= end)
  assert in_low.sum() > 20 and in_high.sum() > 20 and silent.sum() > 20
  for frames, freq in ((in_low, 120.0), (in_high, 220.0)):
    voiced = f0[frames] > 0  # pYIN's HMM leaves the voice a frame or two before a jump
    assert voiced.mean() > 0.9
    np.testing.assert_allclose(f0[frames][voiced], freq, atol=3.0)
  assert np.all(f0[silent] == 0.0)
  # the switch lies between the last 120 Hz frame and the first 220 Hz frame, which is at
  # most a frame after the first frame centred past it (mixed frames in between: unvoiced)
  last_low = int(np.flatnonzero(np.abs(f0 - 120.0) < 5.0)[-1])
  first_high = int(np.argmax(np.abs(f0 - 220.0) < 5.0))
  assert last_low * hop < switch < first_high * hop <= switch + 2 * hop


def test_yin_voicing_is_the_aperiodicity_threshold():
  rate = 16000
  rng = np.random.default_rng(0)
  noise = (0.1 * rng.standard_normal(int(0.5 * rate))).astype(np.float32)
  assert np.all(frame_pitch("yin").compute(noise) == 0.0)  # noise: aperiodicity ~1
  # a tone in noise at an aperiodicity of about N / (S + N) ~ 0.18
  t = np.arange(int(0.5 * rate)) / rate
  noisy = (0.3 * np.sin(2 * np.pi * 150.0 * t)).astype(np.float32) + noise
  inner = slice(3, -3)
  voiced = frame_pitch("yin", yin_threshold=0.5).compute(noisy)[inner]
  assert np.all(np.abs(voiced - 150.0) < 8.0)
  assert np.all(frame_pitch("yin", yin_threshold=0.05).compute(noisy)[inner] == 0.0)
  assert np.all(frame_pitch("yin").compute(np.zeros(4000, np.float32)) == 0.0)


# ----------------------------------------------------------------------------- alignment
@pytest.mark.parametrize("rate,n_fft,hop", [(8000, 256, 64), (16000, 512, 128),
                                            (22050, 1024, 256), (16000, 511, 100)])
@pytest.mark.parametrize("trim", [False, True])
def test_pitch_frames_count_equals_the_mel_frames(rate, n_fft, hop, trim):
  estimator = frame_pitch("yin", rate=rate, n_fft=n_fft, hop=hop, trim=trim)
  mel = features(rate, n_fft, hop, trim)
  rng = np.random.default_rng(rate + n_fft)
  for samples in (1, hop - 1, hop, hop + 1, 5 * hop, int(0.37 * rate) + 3):
    lead, tail = rng.integers(0, 3 * hop, size=2)
    signal = np.concatenate([np.zeros(lead), harmonic(samples / rate, 150.0, rate),
                             np.zeros(tail)]).astype(np.float32)
    assert len(estimator.compute(signal)) == mel.compute(signal).shape[0], (samples, lead, tail)


def test_trimming_removes_the_same_leading_silence_as_the_mel_frames():
  rate, hop = 16000, 128
  lead = np.zeros(int(0.3 * rate), np.float32)  # ~37 frames the mel frames drop
  signal = np.concatenate([lead, harmonic(0.4, 120.0, rate)])
  trimmed = frame_pitch("yin", trim=True).compute(signal)
  untrimmed = frame_pitch("yin").compute(signal)
  assert features(trim=True).compute(signal).shape[0] == len(trimmed) < len(untrimmed) - 30
  # the trimmed track starts voiced within a few frames (the mel frames' own lead-in)
  assert np.argmax(trimmed > 0) <= 4 and np.argmax(untrimmed > 0) > 30


# ----------------------------------------------------------------------------- settings
def test_impossible_settings_are_config_errors(monkeypatch):
  with pytest.raises(ConfigError, match="Nyquist"):
    frame_pitch(rate=8000, n_fft=256, hop=64, pitch_fmax=4500.0)
  with pytest.raises(ConfigError, match="pitch_fmin < pitch_fmax"):
    frame_pitch(pitch_fmin=300.0, pitch_fmax=200.0)
  with pytest.raises(ConfigError, match="even"):
    frame_pitch(pitch_frame_length=513)
  with pytest.raises(ConfigError, match=">= 490"):  # two periods of 65.4 Hz at 16 kHz
    frame_pitch(pitch_frame_length=400)
  assert frame_pitch(rate=22050, n_fft=512).frame_length == 676  # lengthened for fmin
  assert frame_pitch(n_fft=1024).frame_length == 1024
  monkeypatch.setitem(sys.modules, "librosa", None)
  with pytest.raises(ConfigError, match=r"pip install open_seq2seq\[tts\]"):
    frame_pitch().compute(np.zeros(100, np.float32))


# ----------------------------------------------------------------------------- cache
def write_wav(path, signal, rate=16000):
  import soundfile
  soundfile.write(path, signal, rate, subtype="PCM_16")
  return path


def read_wav(path):
  import soundfile
  return soundfile.read(path, dtype="float32")[0]


@pytest.fixture
def spy(monkeypatch):
  """The audio lengths FramePitch.compute is called on."""
  calls = []
  original = FramePitch.compute

  def compute(self, signal):
    calls.append(len(signal))
    return original(self, signal)

  monkeypatch.setattr(FramePitch, "compute", compute)
  return calls


def test_cache_is_written_once_reused_and_invalidated(tmp_path, spy):
  wav = write_wav(str(tmp_path / "a.wav"), harmonic(0.5, 140.0, 16000))
  cache = str(tmp_path / "cache")
  first = PitchStore(frame_pitch(), read_wav, cache).f0(wav)
  assert len(spy) == 1 and np.median(first[first > 0]) == pytest.approx(140.0, abs=2.0)
  entries = [f for _, _, files in os.walk(cache) for f in files]
  assert len(entries) == 1 and entries[0].endswith(".npy")
  again = PitchStore(frame_pitch(), read_wav, cache)  # another epoch or run
  np.testing.assert_array_equal(again.f0(wav), first)
  np.testing.assert_array_equal(again.f0(wav), first)
  assert len(spy) == 1
  PitchStore(frame_pitch(pitch_fmax=600.0), read_wav, cache).f0(wav)  # a setting changed
  PitchStore(frame_pitch(pitch_method="pyin"), read_wav, cache).f0(wav)
  assert len(spy) == 3
  write_wav(wav, harmonic(0.6, 180.0, 16000))  # the file changed
  changed = PitchStore(frame_pitch(), read_wav, cache).f0(wav)
  assert len(spy) == 4 and np.median(changed[changed > 0]) == pytest.approx(180.0, abs=2.0)


def test_without_a_cache_folder_nothing_is_written_and_memory_serves(tmp_path, spy):
  wav = write_wav(str(tmp_path / "a.wav"), harmonic(0.3, 140.0, 16000))
  store = PitchStore(frame_pitch(), read_wav, None)
  np.testing.assert_array_equal(store.f0(wav), store.f0(wav))
  assert len(spy) == 1 and sorted(os.listdir(tmp_path)) == ["a.wav"]


# ----------------------------------------------------------------------------- statistics
def test_voiced_statistics_ignore_unvoiced_frames():
  count, mean, std = voiced_statistics([np.array([0.0, 100.0, 0.0, 200.0]),
                                        np.array([300.0]), np.zeros(5)])
  assert count == 3 and mean == pytest.approx(200.0) and std == pytest.approx(np.std([100, 200,
                                                                                     300]))
  assert voiced_statistics([np.zeros(3)]) == (0, 0.0, 0.0)


def test_statistics_are_cached_and_follow_the_files(tmp_path, spy):
  paths = [write_wav(str(tmp_path / f"{i}.wav"), harmonic(0.4, freq, 16000))
           for i, freq in enumerate((110.0, 150.0, 190.0))]
  cache = str(tmp_path / "cache")
  mean, std = PitchStore(frame_pitch(), read_wav, cache).statistics(paths, "here")
  assert mean == pytest.approx(150.0, abs=2.0) and std == pytest.approx(32.7, abs=2.0)
  assert len(spy) == 3 and len([f for f in os.listdir(cache) if f.endswith(".json")]) == 1
  store = PitchStore(frame_pitch(), read_wav, cache)
  store.f0 = None  # the statistics file alone answers: not even the .npy files are read
  assert store.statistics(paths, "here") == (mean, std)
  write_wav(paths[2], harmonic(0.4, 250.0, 16000))
  moved, _ = PitchStore(frame_pitch(), read_wav, cache).statistics(paths, "here")
  assert moved == pytest.approx(170.0, abs=2.0) and len(spy) == 4
  silent = write_wav(str(tmp_path / "silent.wav"), np.zeros(8000, np.float32))
  with pytest.raises(DataError, match="here: 0 voiced frame"):
    PitchStore(frame_pitch(), read_wav, None).statistics([silent], "here")

