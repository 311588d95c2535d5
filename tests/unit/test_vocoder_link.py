"""A synthesizer's exported vocoder (open_seq2seq/models/vocoder_link.py): a vocoder trained on
other mel settings is refused in one line naming the setting; exports that are no vocoder, or
too old to say their settings, are refused; a real mel -> waveform SavedModel is called in
graph and from numpy, and an exported synthesizer saves it inside itself."""

import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.data.text2speech.features import SpectrogramFeatures
from open_seq2seq.errors import ConfigError
from open_seq2seq.models.vocoder_link import MEL_SETTINGS, ExportedVocoder, check_mel_settings
from open_seq2seq.serving.export import METADATA_FILE
from open_seq2seq.serving.vocoder import MelToWaveformServing

FEATURES = SpectrogramFeatures(output_type="mel", num_mel=8, num_magnitude=0, sample_rate=8000,
                               n_fft=256, hop_length=4, win_length=256, mel_type="htk",
                               data_min_mel=1e-2)


def _error(acoustic, vocoder) -> str:
  with pytest.raises(ConfigError) as e:
    check_mel_settings(acoustic, vocoder, "export_dir runs/v")
  message = str(e.value)
  assert "\n" not in message
  return message


@pytest.mark.parametrize("key,change", [
    ("sampling_rate", {"sample_rate": 16000}), ("num_audio_features", {"num_mel": 16}),
    ("n_fft", {"n_fft": 512}), ("hop_length", {"hop_length": 8}),
    ("win_length", {"win_length": 128}), ("mel_type", {"mel_type": "slaney"}),
    ("fmin", {"fmin": 50.0}), ("fmax", {"fmax": 3000.0}), ("mag_power", {"mag_power": 2.0}),
    ("data_min", {"data_min_mel": 1e-5}), ("feature_normalize_mean", {"normalize_mean": -2.0}),
    ("feature_normalize_std", {"normalize_std": 3.0})])
def test_each_differing_mel_setting_is_named(key, change):
  vocoder = dataclasses.replace(FEATURES, **change)
  field = MEL_SETTINGS[key]
  theirs = getattr(vocoder, field)
  ours = getattr(FEATURES, field)
  ours = FEATURES.sample_rate / 2 if field == "fmax" and ours is None else ours
  assert _error(FEATURES, vocoder) == (
      f"vocoder: export_dir runs/v was trained with {key} {theirs!r} but the acoustic "
      f"model's data layer has {ours!r}; train the vocoder with the acoustic model's audio "
      f"keys")


def test_settings_that_do_not_change_the_frames_pass():
  check_mel_settings(FEATURES, FEATURES, "v")
  # fmax None is Nyquist; trimming is the acoustic data layer's own business
  check_mel_settings(FEATURES, dataclasses.replace(FEATURES, fmax=4000.0, trim=True), "v")
  assert set(MEL_SETTINGS.values()) <= {f.name for f in dataclasses.fields(SpectrogramFeatures)}


def _metadata(directory, inputs=("mel", "mel_length"), features=FEATURES, model="HiFiGAN"):
  os.makedirs(os.path.join(directory, "assets.extra"), exist_ok=True)
  metadata = {"model": model, "checkpoint": "/runs/v/ckpt-7", "step": 7,
              "signatures": {"serving_default": {"inputs": {k: {} for k in inputs}}}}
  if features is not None:
    metadata["audio_features"] = dataclasses.asdict(features)
  with open(os.path.join(directory, METADATA_FILE), "w", encoding="utf-8") as f:
    json.dump(metadata, f)


def test_exports_that_are_no_fitting_vocoder_are_refused(tmp_path):
  with pytest.raises(ConfigError, match="holds no open_seq2seq export"):
    ExportedVocoder({"export_dir": str(tmp_path / "missing")}, FEATURES)
  _metadata(str(tmp_path / "tts"), inputs=("text",), model="FastPitch")
  with pytest.raises(ConfigError, match="is a FastPitch export, not a vocoder"):
    ExportedVocoder({"export_dir": str(tmp_path / "tts")}, FEATURES)
  _metadata(str(tmp_path / "old"), features=None)
  with pytest.raises(ConfigError, match="does not record its mel settings"):
    ExportedVocoder({"export_dir": str(tmp_path / "old")}, FEATURES)
  # the settings are checked before any graph is loaded (there is none here)
  _metadata(str(tmp_path / "other"), features=dataclasses.replace(FEATURES, num_mel=80))
  with pytest.raises(ConfigError, match="num_audio_features 80 .* has 8;"):
    ExportedVocoder({"export_dir": str(tmp_path / "other")}, FEATURES)


class _Generator(tf.Module):
  """A stand-in vocoder: each frame's first mel value times a learned gain, hop times."""

  def __init__(self):
    super().__init__()
    self.gain = tf.Variable(0.5)

  def predict(self, batch):
    mel, lengths = batch["source_tensors"]
    audio = tf.repeat(mel[:, :, 0] * self.gain, FEATURES.hop_length, axis=1)
    samples = lengths * FEATURES.hop_length
    mask = tf.sequence_mask(samples, tf.shape(audio)[1], audio.dtype)
    return {"audio": audio * mask, "audio_lengths": samples}


def _export_vocoder(directory: str) -> None:
  adapter = MelToWaveformServing(FEATURES.num_mel, FEATURES.hop_length, FEATURES.sample_rate)
  generator = _Generator()
  specs = [tf.TensorSpec(spec.shape, spec.dtype, name=name)
           for name, (spec, _) in adapter.inputs.items()]

  def serve(mel, mel_length):
    inputs = {"mel": mel, "mel_length": mel_length}
    batch = adapter.to_batch(inputs)
    return adapter.to_outputs(inputs, batch, generator.predict(batch))

  generator.serve = tf.function(serve, input_signature=specs, autograph=False)
  tf.saved_model.save(generator, directory,
                      signatures={"serving_default": generator.serve.get_concrete_function()})
  _metadata(directory)


def test_a_loaded_vocoder_synthesizes_and_is_saved_inside_a_synthesizer(tmp_path):
  _export_vocoder(str(tmp_path / "vocoder"))
  vocoder = ExportedVocoder({"export_dir": str(tmp_path / "vocoder")}, FEATURES)
  assert (vocoder.sample_rate, vocoder.hop_length, vocoder.num_mels) == (8000, 4, 8)
  assert vocoder.describe() == {"model": "HiFiGAN", "export_dir": str(tmp_path / "vocoder"),
                                "checkpoint": "/runs/v/ckpt-7", "step": 7}
  mel = np.arange(3 * 8, dtype=np.float32).reshape(3, 8)
  np.testing.assert_allclose(vocoder.synthesize(mel), np.repeat(mel[:, 0] * 0.5, 4))

  # a module holding the loaded vocoder saves its weights: it serves after the original is gone
  holder = tf.Module()
  holder.vocoder_module = vocoder.module
  holder.run = tf.function(lambda m, n: vocoder(m, n)[0], autograph=False, input_signature=[
      tf.TensorSpec([None, None, 8], tf.float32), tf.TensorSpec([None], tf.int32)])
  tf.saved_model.save(holder, str(tmp_path / "holder"))
  os.rename(tmp_path / "vocoder", tmp_path / "moved")
  loaded = tf.saved_model.load(str(tmp_path / "holder"))
  audio = loaded.run(tf.constant(mel[None]), tf.constant([2])).numpy()
  np.testing.assert_allclose(audio[0], np.concatenate([np.repeat(mel[:2, 0] * 0.5, 4),
                                                       np.zeros(4)]))
