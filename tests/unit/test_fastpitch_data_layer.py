"""FastPitchDataLayer: the 4th target tensor (normalised frame pitch) aligned with the mel
frames, training statistics in every mode, the cache across epochs and runs."""

import sys

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.data.description import FastPitchDescription
from open_seq2seq.data.text2speech.fastpitch import FastPitchDataLayer
from open_seq2seq.data.text2speech.pitch import FramePitch
from open_seq2seq.errors import ConfigError
from tests.helpers.tts import VOCAB, write_clips

RATE, N_FFT, HOP, PAD_TO = 16000, 512, 128, 4
LOW, HIGH = 120.0, 220.0
TEXTS = ["Hello world.", "A pitch change.", "The last one."]


def clip(seconds, rate, low=LOW, high=HIGH, lead=0.3, tail=0.2):
  """Silence, a pure tone at ``low`` then at ``high`` (switching halfway), silence."""
  t = np.arange(int(seconds / 2 * rate)) / rate
  tones = [0.4 * np.sin(2 * np.pi * f * t) for f in (low, high)]
  return np.concatenate([np.zeros(int(lead * rate)), *tones, np.zeros(int(tail * rate))]
                        ).astype(np.float32)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  root = tmp_path_factory.mktemp("fastpitch")
  train = write_clips(str(root), [clip(s, RATE) for s in (0.6, 0.8, 1.0)], TEXTS, RATE)
  evaluation = write_clips(str(root), [clip(0.7, RATE, 150.0, 250.0)], TEXTS[:1], RATE,
                           name="eval.csv", prefix="ev")
  return {"root": str(root), "train": train, "eval": evaluation}


def params(csv, **overrides):
  base = {"dataset_files": [csv], "vocab_file": VOCAB, "num_audio_features": 40,
          "output_type": "mel", "sampling_rate": RATE, "n_fft": N_FFT, "hop_length": HOP,
          "pad_to": PAD_TO, "trim": True, "shuffle": False, "repeat": False,
          "pitch_method": "yin", "pitch_stats_files": [csv]}
  base.update(overrides)
  return base


def batches(layer):
  return [tf.nest.map_structure(lambda t: t.numpy(), b) for b in layer.build_dataset()]


def rows(layer):
  """{id: (mel frames, stop, length, pitch)} over one pass."""
  found = {}
  for b in batches(layer):
    mel, stop, lengths, pitch = b["target_tensors"]
    assert pitch.dtype == np.float32 and pitch.shape == stop.shape == mel.shape[:2]
    for i, index in enumerate(b["id"]):
      found[int(index)] = (mel[i], stop[i], int(lengths[i]), pitch[i])
  return found


def test_pitch_tensor_is_aligned_with_the_mel_frames_and_zero_off_speech(corpus):
  layer = FastPitchDataLayer(params(corpus["train"]), mode="eval", batch_size=2)
  assert isinstance(layer.description, FastPitchDescription)
  mean, std = layer.description.pitch_mean, layer.description.pitch_std
  assert LOW < mean < HIGH and std > 10.0
  found = rows(layer)
  assert sorted(found) == [0, 1, 2]
  # the mel channels that hear one tone and not the other
  t = np.arange(RATE // 4) / RATE
  low_ref, high_ref = (layer.features.compute(np.sin(2 * np.pi * f * t).astype(np.float32))
                       .numpy().mean(axis=0) for f in (LOW, HIGH))
  low_bin, high_bin = int(np.argmax(low_ref - high_ref)), int(np.argmax(high_ref - low_ref))
  assert low_bin != high_bin
  for mel, stop, length, pitch in found.values():
    speech = int(np.sum(stop == 0))
    assert np.all(pitch[speech:] == 0.0)  # end-of-speech frames and batch padding
    hz = np.where(pitch != 0, pitch * std + mean, 0.0)
    # what each mel frame holds decides what its pitch must be
    contrast = mel[:speech, low_bin] - mel[:speech, high_bin]
    low_frames, high_frames = contrast > 3.0, contrast < -3.0
    assert low_frames.sum() > 5 and high_frames.sum() > 5
    for frames, freq in ((low_frames, LOW), (high_frames, HIGH)):
      # frames next to an edge mix silence or the other tone: the pitch frame sees the mix
      inner = frames & np.roll(frames, 1) & np.roll(frames, -1)
      inner[[0, -1]] = False
      np.testing.assert_allclose(hz[:speech][inner], freq, atol=4.0)
    # the switch in the pitch track is where the mel frames switch (within a frame)
    mel_switch = int(np.argmax(contrast < 0))
    pitch_switch = int(np.argmax(hz > (LOW + HIGH) / 2))
    assert abs(pitch_switch - mel_switch) <= 1, (pitch_switch, mel_switch)
    voiced = pitch[:speech] != 0
    assert voiced.mean() > 0.7


def test_normalised_pitch_of_the_corpus_has_zero_mean_and_unit_std(corpus):
  layer = FastPitchDataLayer(params(corpus["train"]), mode="train", batch_size=2)
  values = np.concatenate([p[:int(np.sum(s == 0))] for _, s, _, p in rows(layer).values()])
  voiced = values[values != 0]
  assert voiced.size > 100
  assert abs(voiced.mean()) < 1e-3 and abs(voiced.std() - 1.0) < 1e-3


def test_resampled_audio_keeps_pitch_and_mel_frames_in_step(corpus):
  layer = FastPitchDataLayer(params(corpus["train"], sampling_rate=8000, n_fft=256,
                                    hop_length=64), mode="eval", batch_size=3)
  for mel, stop, _, pitch in rows(layer).values():  # the in-graph count check passes
    hz = pitch[pitch != 0] * layer.pitch_std + layer.pitch_mean
    assert np.mean(np.abs(hz - LOW) < 4.0) > 0.3 and np.mean(np.abs(hz - HIGH) < 4.0) > 0.3


def test_eval_and_infer_use_the_training_statistics(corpus):
  train = FastPitchDataLayer(params(corpus["train"]), mode="train")
  shared = {"pitch_stats_files": [corpus["train"]]}
  evaluation = FastPitchDataLayer(params(corpus["eval"], **shared), mode="eval", batch_size=1)
  assert (evaluation.pitch_mean, evaluation.pitch_std) == (train.pitch_mean, train.pitch_std)
  (_, stop, _, pitch), = rows(evaluation).values()
  hz = pitch[pitch != 0] * train.pitch_std + train.pitch_mean
  assert np.mean(np.abs(hz - 150.0) < 4.0) > 0.3 and np.mean(np.abs(hz - 250.0) < 4.0) > 0.3
  infer = FastPitchDataLayer(params(corpus["eval"], **shared), mode="infer", batch_size=1)
  assert infer.description.pitch_mean == train.pitch_mean
  assert all("target_tensors" not in b for b in batches(infer))
  with pytest.raises(ConfigError, match="pitch_stats_files: eval needs the training"):
    FastPitchDataLayer(params(corpus["eval"], pitch_stats_files=None), mode="eval")
  with pytest.raises(ConfigError, match="together"):
    FastPitchDataLayer(params(corpus["eval"], pitch_mean=100.0), mode="eval")


def test_interactive_infer_needs_neither_audio_nor_librosa(monkeypatch):
  monkeypatch.setitem(sys.modules, "librosa", None)
  layer = FastPitchDataLayer(params(None, dataset_files=None, pitch_stats_files=None,
                                    pitch_mean=180.0,
                                    pitch_std=40.0), mode="interactive_infer", batch_size=2)
  assert (layer.description.pitch_mean, layer.description.pitch_std) == (180.0, 40.0)
  b, = list(layer.dataset_from_inputs(["Hello there.", "Bye."]))
  assert "target_tensors" not in b and b["source_tensors"][0].shape[0] == 2


def test_missing_librosa_is_one_config_error(corpus, monkeypatch):
  monkeypatch.setitem(sys.modules, "librosa", None)
  with pytest.raises(ConfigError, match=r"pip install open_seq2seq\[tts\]"):
    FastPitchDataLayer(params(corpus["train"], pitch_cache_dir=None), mode="train")


def test_pitch_is_computed_once_across_epochs_and_runs(corpus, tmp_path, monkeypatch):
  calls = []
  original = FramePitch.compute

  def spy(self, signal):
    calls.append(len(signal))
    return original(self, signal)

  monkeypatch.setattr(FramePitch, "compute", spy)
  cache = str(tmp_path / "cache")
  layer = FastPitchDataLayer(params(corpus["train"], pitch_cache_dir=cache), mode="train")
  assert len(calls) == 3  # the statistics computed (and cached) every utterance's pitch
  first = rows(layer)
  rows(layer)  # a second epoch
  again = FastPitchDataLayer(params(corpus["train"], pitch_cache_dir=cache), mode="train")
  assert (again.pitch_mean, again.pitch_std) == (layer.pitch_mean, layer.pitch_std)
  for index, (_, _, _, pitch) in rows(again).items():
    np.testing.assert_array_equal(pitch, first[index][3])
  assert len(calls) == 3
  # given statistics and a cold cache: the first epoch computes, later epochs read
  given = dict(pitch_cache_dir=str(tmp_path / "cold"), pitch_mean=170.0, pitch_std=50.0)
  lazy = FastPitchDataLayer(params(corpus["train"], **given), mode="train")
  assert len(calls) == 3
  rows(lazy)
  rows(lazy)
  assert len(calls) == 6


def test_default_cache_folder_is_next_to_the_dataset(corpus):
  layer = FastPitchDataLayer(params(corpus["train"]), mode="eval")
  assert layer.store.cache_dir == f"{corpus['root']}/pitch_cache"
  assert FastPitchDataLayer(params(corpus["train"], pitch_cache_dir=None),
                            mode="eval").store.cache_dir is None
