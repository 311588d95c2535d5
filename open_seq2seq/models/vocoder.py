"""HiFiGAN: a GAN vocoder (mel frames in, waveform out) trained by two optimizers.

Components: :class:`~open_seq2seq.data.text2speech.vocoder.VocoderDataLayer`,
:class:`~open_seq2seq.encoders.hifigan_encoder.HiFiGANEncoder` (the generator),
``FakeDecoder`` and :class:`~open_seq2seq.losses.hifigan_loss.HiFiGANLoss` (the
discriminators and both objectives).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from open_seq2seq.data.description import DataDescription, VocoderDescription
from open_seq2seq.errors import ConfigError
from open_seq2seq.losses.hifigan_loss import mel_options_of, utterance_distances
from open_seq2seq.models.model import Model, UpdateGroup
from open_seq2seq.models.waveform_outputs import WaveformOutputs
from open_seq2seq.outputs import AudioSample
from open_seq2seq.parts.audio.mel_cepstrum import mcd_frames


class HiFiGAN(WaveformOutputs, Model):
  """HiFi-GAN vocoder family (Kong et al., 2020).

  Each training step updates two groups (``Model.update_groups``), each with its own
  optimizer settings under the run's ``optimizers/<group>``:

  1. ``discriminator``: the loss layer's multi-period and multi-scale discriminators on
     the LSGAN loss of real segments against the generator's output;
  2. ``generator``: the generator (the encoder) on ``adversarial + 2 x feature matching +
     45 x mel L1`` (the loss's weights), judged by the discriminators as just updated. Its
     update counter is the global step; its loss is the run's ``loss``.

  Eval synthesizes whole utterances from their mel frames and reports ``mel_l1`` (mean
  absolute log-mel difference over every frame and channel, the loss's spectrogram; the best
  checkpoint is the lowest) and ``mcd``, the mel-cepstral distortion in dB of true
  mel-cepstra c1 .. c24 (:mod:`open_seq2seq.parts.audio.mel_cepstrum`: the all-pass
  constant of the sample rate, the data layer's STFT frames, compared frame by frame), on
  the host from both waveforms, averaged over every frame of the pass. Infer
  writes ``<logdir>/infer_audio/<name>.wav`` per input and a CSV (name, wav path, seconds)
  to ``--infer_output_file``; ``interactive_infer`` takes a ``.wav`` (copy synthesis) or a
  ``.npy`` mel array per line and writes ``<logdir>/interactive_audio/<name>.wav``.
  ``--mode=export`` saves mel -> waveform (:mod:`open_seq2seq.serving.vocoder`).
  """

  PARAMS = {}

  # ------------------------------------------------------------------ wiring
  def component_kwargs(self, slot: str, description: DataDescription) -> dict[str, Any]:
    if not isinstance(description, VocoderDescription):
      raise ConfigError(f"data_layer: HiFiGAN needs a data layer of mel frames and their "
                        f"audio (VocoderDataLayer), got {type(description).__name__}")
    f = description.features
    if slot == "encoder":
      return {"num_mels": f.num_mel, "hop_length": f.hop_length}
    if slot == "loss":
      mode = "infer" if self.mode == "interactive_infer" else self.mode
      return {"features": f, "mode": mode, "dtype": self.params["dtype"]}
    return {}

  def connect_components(self) -> None:
    if self.loss is not None and not callable(getattr(self.loss, "discriminator_loss", None)):
      raise ConfigError(f"loss: HiFiGAN trains discriminators: it needs HiFiGANLoss, got "
                        f"{type(self.loss).__name__}")

  @property
  def features(self):
    return self.description.features

  @property
  def mel_options(self) -> dict[str, Any]:
    """The spectrogram of the mel loss and of the eval metrics."""
    if self.loss is not None:
      return self.loss.mel_options
    return mel_options_of(self.features)

  # ------------------------------------------------------------------ computation
  def create_variables(self, batch: dict) -> None:
    """Training builds the discriminators too; eval and infer only the generator (their
    checkpoints' discriminator weights are not read)."""
    if self._variables_created:
      return
    if self.mode == "train" and "target_tensors" in batch and self.loss is not None:
      self.compute_loss(batch, training=False)
    else:
      self.forward(batch, training=False)
    self._variables_created = True

  def compute_loss(self, batch: dict, training: bool) -> tuple[tf.Tensor, tf.Tensor, dict]:
    """The generator's objective: ``(B * loss, B, generator output)``."""
    output = self.forward(batch, training)
    loss_sum, weight = self.loss.compute_loss(
        {"decoder_output": output, "target_tensors": batch["target_tensors"]}, training=training)
    return tf.cast(loss_sum, tf.float32), tf.cast(weight, tf.float32), output

  def discriminator_loss(self, batch: dict, training: bool) -> tuple[tf.Tensor, tf.Tensor,
                                                                     dict]:
    """The discriminators' LSGAN loss on the batch's audio and the generator's output."""
    output = self.forward(batch, training)
    audio, lengths = batch["target_tensors"][:2]
    loss_sum, weight = self.loss.discriminator_loss(output["audio"], audio,
                                                    tf.cast(lengths, tf.int32), training)
    return loss_sum, weight, output

  def update_groups(self) -> list[UpdateGroup]:
    if self.loss is None:
      raise ConfigError("loss: HiFiGAN needs HiFiGANLoss to train")
    return [UpdateGroup("discriminator", ("loss",), self.discriminator_loss),
            UpdateGroup("generator", None, self.compute_loss)]

  def eval_outputs(self, batch: dict) -> dict:
    """Infer: the audio. Eval: also per utterance the log-mel distances of its audio to the
    recording (in-graph; the mel-cepstral distortion follows on the host)."""
    output = self.predict(batch)
    predictions = {k: output[k] for k in ("audio", "audio_lengths")}
    if "target_tensors" in batch:
      audio, lengths = batch["target_tensors"][:2]
      predictions.update(utterance_distances(audio, output["audio"],
                                             tf.cast(lengths, tf.int32), self.mel_options))
    return {"predictions": predictions}

  # ------------------------------------------------------------------ numpy hooks
  @property
  def output_sample_rate(self) -> int:
    return self.features.sample_rate

  def mcd_frames(self, target: np.ndarray, generated: np.ndarray) -> np.ndarray:
    """Per frame, the mel-cepstral distortion (dB) of ``generated`` from ``target`` (two
    waveforms of the same length) on the data layer's STFT frames."""
    f = self.features
    return mcd_frames(target, generated, f.sample_rate, n_fft=f.n_fft,
                      hop_length=f.hop_length, win_length=f.win_length)

  def _utterance_mcd(self, batch: dict, outputs: dict, b: int) -> np.ndarray:
    audio, lengths = batch["target_tensors"][:2]
    length = int(lengths[b])
    return self.mcd_frames(audio[b, :length], outputs["audio"][b, :length])

  def _sample_distances(self, batch: dict, outputs: dict, b: int) -> tuple[float, float]:
    audio, lengths = batch["target_tensors"][:2]
    length = int(lengths[b])
    d = utterance_distances(tf.constant(audio[b:b + 1, :length], tf.float32),
                            tf.constant(outputs["audio"][b:b + 1, :length], tf.float32),
                            tf.constant([length]), self.mel_options)
    frames = float(d["frames"][0])
    return (float(d["mel_l1_sum"][0]) / (frames * self.features.num_mel),
            float(np.mean(self._utterance_mcd(batch, outputs, b))))

  def format_samples(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                     max_samples: int = 1) -> list[str]:
    lines = []
    for b in range(min(max_samples, len(batch["id"]))):
      seconds = int(outputs["audio_lengths"][b]) / self.features.sample_rate
      line = f"Sample {self._name(int(batch['id'][b]))}: {seconds:.2f} s synthesized"
      if "target_tensors" in batch:
        l1, mcd = self._sample_distances(batch, outputs, b)
        line += f", mel L1 {l1:.3f}, MCD {mcd:.2f} dB"
      lines.append(line)
    return lines

  def sample_summaries(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]
                       ) -> list:
    rate, length = self.features.sample_rate, int(outputs["audio_lengths"][0])
    items = [AudioSample("generated_audio", outputs["audio"][0][:length], rate)]
    if "target_tensors" in batch:
      items.append(AudioSample("target_audio", batch["target_tensors"][0][0][:length], rate))
    return items

  def evaluate(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> list:
    """Per utterance: (id, (summed |log mel difference|, its frames, summed MCD, MCD
    frames))."""
    results = []
    for b, index in enumerate(batch["id"]):
      mcd = self._utterance_mcd(batch, outputs, b)
      results.append((int(index), (float(outputs["mel_l1_sum"][b]), int(outputs["frames"][b]),
                                   float(np.sum(mcd)), len(mcd))))
    return results

  def finalize_evaluation(self, results: list) -> dict[str, float]:
    frames, mcd_frames_ = sum(r[1] for _, r in results), sum(r[3] for _, r in results)
    if frames <= 0 or mcd_frames_ <= 0:
      return {}
    return {"mel_l1": sum(r[0] for _, r in results) / (frames * self.features.num_mel),
            "mcd": sum(r[2] for _, r in results) / mcd_frames_}

  best_metric = ("mel_l1", False)

  def infer(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> list:
    """Per input: (id, float32 audio)."""
    return [(int(index), np.asarray(outputs["audio"][b][:int(outputs["audio_lengths"][b])],
                                    np.float32))
            for b, index in enumerate(batch["id"])]

  def serving_adapter(self):
    """Exported vocoders take mel frames and return waveforms."""
    from open_seq2seq.serving.vocoder import MelToWaveformServing  # pylint: disable=import-outside-toplevel
    f = self.features
    return MelToWaveformServing(f.num_mel, f.hop_length, f.sample_rate)
