"""Exported vocoders: mel frames in, waveform out (a HiFi-GAN generator).

The frames are the training data layer's (``VocoderDataLayer``: log mel with its STFT,
filters, floor and normalization), e.g. a Tacotron model's predicted spectrogram; the
export's description records the mel count, hop length and sample rate.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from open_seq2seq.serving.adapter import ServingAdapter

__all__ = ["MelToWaveformServing"]


class MelToWaveformServing(ServingAdapter):
  """``mel`` [batch, frames, num_mels] and ``mel_length`` [batch] -> ``audio`` [batch,
  frames * hop_length] (zero past each length) and ``audio_length``.

  Args:
    num_mels: mel channels per frame.
    hop_length: samples per frame.
    sample_rate: Hz of the audio.
  """

  outputs = {"audio": "the waveform of each spectrogram [batch, samples], zero-padded",
             "audio_length": "samples of each waveform (mel_length * hop_length)"}

  def __init__(self, num_mels: int, hop_length: int, sample_rate: int):
    super().__init__(name="mel_to_waveform")
    self.num_mels, self.hop_length, self.sample_rate = num_mels, hop_length, sample_rate

  @property
  def inputs(self) -> dict[str, tuple[tf.TensorSpec, str]]:  # sized by the model's mels
    return {"mel": (tf.TensorSpec([None, None, self.num_mels], tf.float32),
                    f"log mel frames [batch, frames, {self.num_mels}] in the training "
                    f"data's layout"),
            "mel_length": (tf.TensorSpec([None], tf.int32), "frames of each spectrogram")}

  def describe(self) -> dict[str, Any]:
    return dict(super().describe(), sample_rate=self.sample_rate, hop_length=self.hop_length,
                num_mels=self.num_mels,
                audio_outputs={"audio": {"length": "audio_length",
                                         "sample_rate": self.sample_rate}})

  def example_inputs(self) -> dict[str, tf.Tensor]:
    return {"mel": tf.zeros([1, 2, self.num_mels]), "mel_length": tf.constant([2])}

  def to_batch(self, inputs):
    return {"source_tensors": (inputs["mel"], inputs["mel_length"])}

  def to_outputs(self, inputs, batch, predictions):
    return {"audio": tf.cast(predictions["audio"], tf.float32),
            "audio_length": tf.cast(predictions["audio_lengths"], tf.int32)}
