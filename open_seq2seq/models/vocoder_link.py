"""A speech synthesizer's neural vocoder: an exported HiFi-GAN turning predicted mel frames
into waveforms (``FastPitch``'s ``vocoder`` key; Griffin-Lim when it is not set).

The vocoder is the SavedModel that ``run.py --mode=export`` wrote for a ``HiFiGAN`` run
(:mod:`open_seq2seq.serving.vocoder`: ``mel`` + ``mel_length`` -> ``audio`` +
``audio_length``), not its training run: an export is self-contained (weights, graph and the
spectrogram settings it was trained on, in its metadata), so the acoustic model reads it with
TensorFlow alone, and an exported synthesizer saves it inside itself (text in, waveform out,
one SavedModel).

Both models must cut audio into frames the same way: :func:`check_mel_settings` refuses a
vocoder whose sample rate, mel channels, STFT, mel filters, compression floor or feature
normalization differ from the acoustic model's, naming the first setting that differs.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.serving.export import METADATA_FILE as _METADATA
from open_seq2seq.utils.params import DeclaredDict, Param

__all__ = ["VOCODER", "MEL_SETTINGS", "ExportedVocoder", "check_mel_settings"]

#: Keys of a synthesizer's ``vocoder`` dict.
VOCODER = DeclaredDict({
    "export_dir": Param(str, doc="Directory of a HiFi-GAN vocoder exported with run.py "
                        "--mode=export (trained on the acoustic model's mel settings)."),
}, owner="vocoder")

#: The spectrogram settings a vocoder must share with the acoustic model: the name a user
#: knows (the data layer's key), and the SpectrogramFeatures field holding it.
MEL_SETTINGS = {"sampling_rate": "sample_rate", "num_audio_features": "num_mel",
                "n_fft": "n_fft", "hop_length": "hop_length", "win_length": "win_length",
                "mel_type": "mel_type", "fmin": "fmin", "fmax": "fmax",
                "mag_power": "mag_power", "data_min": "data_min_mel",
                "feature_normalize_mean": "normalize_mean",
                "feature_normalize_std": "normalize_std"}



def _setting(features: Any, field: str) -> Any:
  value = getattr(features, field)
  if field == "fmax" and value is None:
    return features.sample_rate / 2.0  # None means Nyquist
  return value


def check_mel_settings(acoustic: Any, vocoder: Any, where: str) -> None:
  """Raises a one-line ConfigError naming the first mel setting (data layer key) that
  differs between the acoustic model's features and the vocoder's (both
  :class:`~open_seq2seq.data.text2speech.features.SpectrogramFeatures`); ``where`` says
  which vocoder."""
  for key, field in MEL_SETTINGS.items():
    ours, theirs = _setting(acoustic, field), _setting(vocoder, field)
    same = (np.isclose(ours, theirs, rtol=1e-6, atol=0.0)
            if isinstance(ours, (int, float)) and isinstance(theirs, (int, float))
            else ours == theirs)
    if not same:
      raise ConfigError(f"vocoder: {where} was trained with {key} {theirs!r} but the acoustic "
                        f"model's data layer has {ours!r}; train the vocoder with the "
                        f"acoustic model's audio keys")


class ExportedVocoder:
  """An exported HiFi-GAN vocoder, loaded for a synthesizer whose frames it must fit.

  Args:
    params: the validated ``vocoder`` dict (:data:`VOCODER`).
    features: the acoustic model's
      :class:`~open_seq2seq.data.text2speech.features.SpectrogramFeatures`.

  Raises:
    ConfigError: no such export, not a mel -> waveform export, or other mel settings.
  """

  def __init__(self, params: dict[str, Any], features: Any):
    self.export_dir = os.path.abspath(params["export_dir"])
    where = f"export_dir {params['export_dir']}"
    path = os.path.join(self.export_dir, _METADATA)
    if not os.path.isfile(path):
      raise ConfigError(f"vocoder: {where} holds no open_seq2seq export ({_METADATA} is "
                        f"missing); export the HiFi-GAN run with run.py --mode=export")
    with open(path, encoding="utf-8") as f:
      self.metadata = json.load(f)
    signature = self.metadata.get("signatures", {}).get("serving_default", {})
    if set(signature.get("inputs", {})) != {"mel", "mel_length"}:
      raise ConfigError(f"vocoder: {where} is a {self.metadata.get('model')} export, not a "
                        f"vocoder (mel, mel_length -> audio); export a HiFiGAN run")
    if "audio_features" not in self.metadata:
      raise ConfigError(f"vocoder: {where} does not record its mel settings (exported by an "
                        f"earlier version); export the HiFi-GAN run again")
    own = type(features)(**self.metadata["audio_features"])
    check_mel_settings(features, own, where)
    self.sample_rate = int(own.sample_rate)
    self.hop_length = int(own.hop_length)
    self.num_mels = int(own.num_mel)
    self.module = tf.saved_model.load(self.export_dir)
    self._signature = self.module.signatures["serving_default"]
    self._numpy_fn = None

  def describe(self) -> dict[str, Any]:
    """What an exported synthesizer records of its vocoder."""
    return {"model": self.metadata.get("model"), "export_dir": self.export_dir,
            "checkpoint": self.metadata.get("checkpoint"), "step": self.metadata.get("step")}

  def __call__(self, mel: tf.Tensor, lengths: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """In-graph: float32 mel frames [batch, frames, mels] and their lengths [batch] ->
    (waveforms [batch, frames * hop], zero past each length; samples [batch])."""
    out = self._signature(mel=tf.cast(mel, tf.float32), mel_length=tf.cast(lengths, tf.int32))
    return out["audio"], out["audio_length"]

  def synthesize(self, mel: np.ndarray) -> np.ndarray:
    """float32 samples of one utterance's mel frames [frames, mels] (numpy)."""
    if self._numpy_fn is None:
      self._numpy_fn = tf.function(self.__call__, reduce_retracing=True, autograph=False)
    audio, length = self._numpy_fn(tf.constant(np.asarray(mel, np.float32)[None]),
                                   tf.constant([len(mel)], tf.int32))
    return np.asarray(audio[0, :int(length[0])], np.float32)

