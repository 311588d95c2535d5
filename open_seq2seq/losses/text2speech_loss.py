"""Text2SpeechLoss: spectrogram reconstruction, stop token, and guided attention."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from open_seq2seq.losses.loss import Loss
from open_seq2seq.parts.tacotron.guided_attention import guided_attention_penalty
from open_seq2seq.utils.params import Param


class Text2SpeechLoss(Loss):
  """OpenSeq2Seq's Tacotron loss, summed over frames (the weight is the number of frames).

  Per real target frame: ``mel_weight`` x (error of the decoder's spectrogram + error of the
  postnet's), mean over features, L2 (or L1 with ``l1_norm``); ``mag_weight`` x the magnitude
  error ("both"); ``stop_token_weight`` x the stop token's binary cross-entropy. The trainer
  divides by the global number of frames, which reproduces OpenSeq2Seq's batch means and
  combines batches and replicas by their true sizes. ``use_mask: False`` counts padded frames
  as OpenSeq2Seq did without the mask.

  With ``guided_attention_weight`` > 0, training adds the guided-attention penalty
  (``parts/tacotron/guided_attention.py``) per decoder step, weighted by
  ``guided_attention_weight`` x max(0, 1 - step / ``guided_attention_decay_steps``) (constant
  when the decay is None). Eval losses leave it out, so they compare across schedules.
  """

  PARAMS = {
      "use_mask": Param(bool, True, "Average over real frames only."),
      "scale": Param((float, None), None, "Multiply the whole loss by this."),
      "stop_token_weight": Param(float, 1.0, "Weight of the stop-token cross-entropy."),
      "mel_weight": Param(float, 1.0, "Weight of the (mel) spectrogram errors."),
      "mag_weight": Param(float, 1.0, "Weight of the magnitude error (output_type 'both')."),
      "l1_norm": Param(bool, False, "L1 instead of L2 spectrogram errors."),
      "guided_attention_weight": Param(float, 0.0, "Weight of the guided-attention penalty "
                                       "(training only; 0: off)."),
      "guided_attention_sigma": Param(float, 0.2, "Width g of the guided-attention band."),
      "guided_attention_decay_steps": Param((int, None), None, "Steps over which the penalty's "
                                            "weight falls linearly to 0 (None: constant)."),
  }

  def __init__(self, params: dict[str, Any] | None = None, *, name: str = "text2speech_loss",
               num_mel_features: int = 80, num_magnitude_features: int = 0,
               reduction_factor: int = 1):
    super().__init__(params, name=name)
    self.num_mel, self.num_mag = num_mel_features, num_magnitude_features
    self.r = reduction_factor

  def _error(self, target: tf.Tensor, prediction: tf.Tensor) -> tf.Tensor:
    """Mean over features of the L1/L2 error, float32 [B, T]."""
    diff = tf.cast(prediction, tf.float32) - target
    diff = tf.abs(diff) if self.params["l1_norm"] else tf.square(diff)
    return tf.reduce_mean(diff, axis=-1)

  def guided_weight(self, step: tf.Tensor | None) -> tf.Tensor | None:
    """The penalty's weight at ``step`` (None: no penalty)."""
    weight, decay = self.params["guided_attention_weight"], self.params[
        "guided_attention_decay_steps"]
    if step is None or weight <= 0:
      return None
    if decay is None:
      return tf.constant(weight, tf.float32)
    return weight * tf.maximum(0.0, 1.0 - tf.cast(step, tf.float32) / float(decay))

  def compute_loss(self, input_dict: dict, step: tf.Tensor | None = None
                   ) -> tuple[tf.Tensor, tf.Tensor]:
    out = input_dict["decoder_output"]
    spec, stop_target, lengths = input_dict["target_tensors"]
    spec = tf.cast(spec, tf.float32)
    frames = tf.shape(spec)[1]
    if self.params["use_mask"]:
      mask = tf.sequence_mask(lengths, frames, tf.float32)
    else:
      mask = tf.ones(tf.shape(spec)[:2], tf.float32)
    mel = spec[:, :, :self.num_mel]
    per_frame = self.params["mel_weight"] * (
        self._error(mel, out["decoder_spectrogram"]) + self._error(mel, out["spectrogram"]))
    if self.num_mag:
      per_frame += self.params["mag_weight"] * self._error(
          spec[:, :, self.num_mel:self.num_mel + self.num_mag], out["magnitude"])
    per_frame += self.params["stop_token_weight"] * tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(stop_target, tf.float32),
        logits=tf.cast(out["stop_token_logits"], tf.float32))
    loss_sum = tf.reduce_sum(per_frame * mask)
    weight = tf.reduce_sum(mask)
    guided = self.guided_weight(step)
    if guided is not None:
      steps = -(-tf.cast(lengths, tf.int32) // self.r)
      penalty = guided_attention_penalty(out["alignments"], out["src_lengths"], steps,
                                         self.params["guided_attention_sigma"])
      # Per decoder step, expressed per frame (r frames a step) so the weight counts frames.
      loss_sum += guided * float(self.r) * tf.reduce_sum(penalty)
    if self.params["scale"] is not None:
      loss_sum *= self.params["scale"]
    return loss_sum, weight


class TacotronLoss(Text2SpeechLoss):
  """OpenSeq2Seq's later name of :class:`Text2SpeechLoss` (its configs use either name)."""
