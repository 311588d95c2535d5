"""Text2SpeechWavenet: a WaveNet vocoder (mel frames in, audio samples out)."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from open_seq2seq.data.description import DataDescription, WavenetDescription
from open_seq2seq.data.text2speech.wavenet import mu_law_decode
from open_seq2seq.errors import ConfigError
from open_seq2seq.models.model import Model
from open_seq2seq.models.waveform_outputs import WaveformOutputs
from open_seq2seq.outputs import AudioSample


def entropy(counts: np.ndarray) -> float:
  """Entropy in nats of the distribution proportional to ``counts``."""
  total = float(np.sum(counts))
  if total <= 0:
    return float("nan")
  p = np.asarray(counts, np.float64)[np.asarray(counts) > 0] / total
  return float(-np.sum(p * np.log(p)))


class Text2SpeechWavenet(WaveformOutputs, Model):
  """WaveNet vocoder family (OpenSeq2Seq's ``Text2SpeechWavenet``).

  The encoder (:class:`~open_seq2seq.encoders.WavenetEncoder`) does the work; the decoder is a
  ``FakeDecoder``; the loss is :class:`~open_seq2seq.losses.WavenetLoss`.

  Eval (teacher forced, one pass per batch) reports per predicted sample:

  * ``cross_entropy``: nats per sample (the loss);
  * ``accuracy``: share of samples whose most likely bin is the true one;
  * ``unigram_entropy``: the entropy of the eval targets' own bin histogram: the cross-entropy
    of the best model that ignores context and conditioning. A model has learned something
    from the past samples and the mel frames only where ``cross_entropy`` is below it.

  Samples (every ``print_samples_steps``) print the teacher-forced bin accuracy of one training
  window and send two clips of it to TensorBoard: ``teacher_forced_audio``, each sample the
  most likely bin given the true past (what OpenSeq2Seq wrote as ``sample_step<N>_train.wav``),
  and ``target_audio``, the window itself.

  Infer synthesizes each input's mel frames into ``<logdir>/infer_audio/<name>.wav`` and writes
  a CSV (name, wav path, seconds) to ``--infer_output_file``; ``interactive_infer`` writes
  ``<logdir>/interactive_audio/<name>.wav`` per input path (paths relative to the run's
  directory: the toolkit's output sink resolves them).
  """

  PARAMS = {}

  predictions_from_loss_pass = True

  # ------------------------------------------------------------------ wiring
  def component_kwargs(self, slot: str, description: DataDescription) -> dict[str, Any]:
    if not isinstance(description, WavenetDescription):
      raise ConfigError(f"data_layer: Text2SpeechWavenet needs a data layer describing mel "
                        f"frames and mu-law audio (WavenetDataLayer), got "
                        f"{type(description).__name__}")
    if slot != "encoder":
      return {}
    return {"quantization_channels": description.quantization_channels,
            "hop_length": description.hop_length, "random_seed": self.params["random_seed"]}

  @property
  def quantization_channels(self) -> int:
    return self.description.quantization_channels

  # ------------------------------------------------------------------ computation
  def create_variables(self, batch: dict) -> None:
    """An inference batch builds the variables with a teacher-forced pass over its first
    frame, not by generating every sample eagerly (the base class runs the forward pass)."""
    if self._variables_created or len(batch["source_tensors"]) != 2:
      super().create_variables(batch)
      return
    mel, _ = batch["source_tensors"]
    size, hop = tf.shape(mel)[0], self.description.hop_length
    ids = tf.fill([size, hop], self.quantization_channels // 2)
    source = (ids, tf.fill([size], hop), mel[:, :1], tf.ones([size], tf.int32))
    self.forward({"source_tensors": source}, training=False)
    self._variables_created = True

  def eval_outputs(self, batch: dict) -> dict:
    """Eval: the loss plus per-window statistics (not the [B, T, Q] logits, which would be
    copied to the host for nothing); infer: the generated audio."""
    if "target_tensors" not in batch or self.loss is None:
      return {"predictions": self.predict(batch)}
    loss_sum, weight, outputs = self.compute_loss(batch, training=False)
    return {"predictions": self.window_statistics(outputs["logits"], batch["target_tensors"]),
            "loss_sum": loss_sum, "weight": weight}

  def window_statistics(self, logits: tf.Tensor, target_tensors: tuple) -> dict:
    """Per window: summed cross-entropy, correct bins, counted samples, target histogram."""
    targets, mask = target_tensors[0], tf.cast(target_tensors[1], tf.float32)
    logits = tf.cast(logits, tf.float32)
    cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits)
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), targets), tf.float32)
    histogram = tf.reduce_sum(tf.one_hot(targets, self.quantization_channels) * mask[..., None],
                              axis=1)
    return {"cross_entropy": tf.reduce_sum(cross_entropy * mask, axis=1),
            "correct": tf.reduce_sum(correct * mask, axis=1),
            "count": tf.reduce_sum(mask, axis=1), "histogram": histogram}

  # ------------------------------------------------------------------ family hooks
  def format_samples(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                     max_samples: int = 1) -> list[str]:
    if "logits" not in outputs or "target_tensors" not in batch:
      return []
    targets, mask = batch["target_tensors"]
    lines = []
    for b in range(min(max_samples, len(targets))):
      keep = mask[b] > 0
      predicted = np.argmax(outputs["logits"][b], axis=-1)
      accuracy = float(np.mean(predicted[keep] == targets[b][keep])) if keep.any() else 0.0
      name = self._name(int(batch["id"][b]))
      lines.append(f"Sample {name}: teacher-forced bin accuracy {accuracy:.3f} over "
                   f"{int(keep.sum())} samples")
    return lines

  def sample_summaries(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]
                       ) -> list:
    if "logits" not in outputs or "target_tensors" not in batch:
      return []
    targets, mask = batch["target_tensors"]
    keep = mask[0] > 0
    if not keep.any():
      return []
    channels, rate = self.quantization_channels, self.description.sample_rate
    predicted = np.argmax(outputs["logits"][0], axis=-1)[keep]
    return [AudioSample("teacher_forced_audio", mu_law_decode(predicted, channels), rate),
            AudioSample("target_audio", mu_law_decode(targets[0][keep], channels), rate)]

  def evaluate(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> list:
    """Per window: (id, (cross-entropy sum, correct, count, target histogram))."""
    return [(int(index), (float(outputs["cross_entropy"][b]), float(outputs["correct"][b]),
                          float(outputs["count"][b]), outputs["histogram"][b]))
            for b, index in enumerate(batch["id"])]

  def finalize_evaluation(self, results: list) -> dict[str, float]:
    if not results:
      return {}
    count = sum(r[2] for _, r in results)
    if count <= 0:
      return {}
    histogram = np.sum([r[3] for _, r in results], axis=0)
    return {"cross_entropy": sum(r[0] for _, r in results) / count,
            "accuracy": sum(r[1] for _, r in results) / count,
            "unigram_entropy": entropy(histogram)}

  def infer(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> list:
    """Per input: (id, float32 audio in [-1, 1])."""
    return [(int(index), mu_law_decode(outputs["audio_ids"][b][:int(outputs["audio_lengths"][b])],
                                       self.quantization_channels))
            for b, index in enumerate(batch["id"])]

  @property
  def output_sample_rate(self) -> int:
    return self.description.sample_rate
