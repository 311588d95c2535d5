"""FastPitchLoss: mel, duration, pitch, forward-sum and binarization terms."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.losses.loss import Loss
from open_seq2seq.parts.fastpitch.alignment import binarization_loss, forward_sum_loss
from open_seq2seq.utils.params import Param

#: The terms, in the order they are reported.
PARTS = ("mel", "duration", "pitch", "forward_sum", "binarization")


def _masked_mean(values: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
  """Per utterance mean of ``values`` [B, L] over ``mask`` [B, L], float32 [B]."""
  mask = tf.cast(mask, tf.float32)
  return tf.math.divide_no_nan(tf.reduce_sum(values * mask, 1), tf.reduce_sum(mask, 1))


class FastPitchLoss(Loss):
  """FastPitch's objective, per utterance (the weight is the number of utterances).

  For each utterance, each term is a mean over its own frames or symbols:

  * ``mel``: squared error of the mel frames (mean over frames and channels; the frames are
    laid out by the MAS durations, so it compares like with like);
  * ``duration``: squared error of the predicted log(1 + frames) against the MAS durations;
  * ``pitch``: squared error of the predicted per-symbol pitch (normalised units) against
    the frame pitch averaged over each symbol's MAS frames;
  * ``forward_sum``: the aligner's CTC-style likelihood of all monotonic alignments, per
    symbol (``parts/fastpitch/alignment.py``);
  * ``binarization``: -log of the soft alignment on the hard path, per frame; in training it
    counts from update ``binarization_start_step`` on (the soft alignment must be roughly
    right before it is pulled towards its own Viterbi path). The model hands the update
    counter to the loss, as for Tacotron's guided attention; eval leaves the term out of the
    loss (it is still reported), so eval losses compare across schedules.

  :meth:`parts` returns every term per utterance (the model's eval reports them);
  :meth:`compute_loss` returns the weighted sum over the batch and the batch size.
  """

  PARAMS = {
      "mel_weight": Param(float, 1.0, "Weight of the mel squared error."),
      "duration_weight": Param(float, 0.1, "Weight of the log-duration squared error."),
      "pitch_weight": Param(float, 0.1, "Weight of the pitch squared error."),
      "forward_sum_weight": Param(float, 1.0, "Weight of the aligner's forward-sum loss."),
      "binarization_weight": Param(float, 1.0, "Weight of the binarization loss once on."),
      "binarization_start_step": Param(int, 1000, "Training update from which the "
                                       "binarization loss counts."),
  }

  def __init__(self, params: dict[str, Any] | None = None, *, name: str = "fastpitch_loss",
               num_mel_features: int = 80):
    super().__init__(params, name=name)
    for key in ("mel_weight", "duration_weight", "pitch_weight", "forward_sum_weight",
                "binarization_weight", "binarization_start_step"):
      if self.params[key] < 0:
        raise ConfigError(f"loss_params/{key}: must be at least 0, got {self.params[key]}")
    self.num_mel = num_mel_features

  def parts(self, decoder_output: dict, target_tensors: tuple) -> dict[str, tf.Tensor]:
    """Every term per utterance, float32 [B] each (keys :data:`PARTS`)."""
    out = decoder_output
    mel, _, mel_lengths = target_tensors[:3]
    mel_lengths = tf.cast(mel_lengths, tf.int32)
    target = tf.cast(mel, tf.float32)[:, :, :self.num_mel]
    frame_mask = tf.sequence_mask(mel_lengths, tf.shape(target)[1])
    mel_error = tf.reduce_mean(tf.square(out["spectrogram"] - target), axis=-1)
    text_lengths = out["src_lengths"]
    symbol_mask = tf.sequence_mask(text_lengths, tf.shape(out["durations"])[1])
    log_durations = tf.math.log1p(tf.cast(out["durations"], tf.float32))
    duration_error = tf.square(out["log_duration_predictions"] - log_durations)
    pitch_error = tf.square(out["pitch_predictions"] - out["pitch_targets"])
    return {
        "mel": _masked_mean(mel_error, frame_mask),
        "duration": _masked_mean(duration_error, symbol_mask),
        "pitch": _masked_mean(pitch_error, symbol_mask),
        "forward_sum": forward_sum_loss(out["alignment_log_probs"], text_lengths, mel_lengths),
        "binarization": binarization_loss(out["alignments"], out["soft_alignments"],
                                          mel_lengths),
    }

  def binarization_on(self, step: tf.Tensor | None) -> tf.Tensor:
    """1.0 when the binarization term counts at training update ``step``, else 0.0."""
    if step is None:
      return tf.constant(0.0)
    start = self.params["binarization_start_step"]
    return tf.cast(tf.cast(step, tf.int64) >= start, tf.float32)

  def compute_loss(self, input_dict: dict, step: tf.Tensor | None = None
                   ) -> tuple[tf.Tensor, tf.Tensor]:
    parts = self.parts(input_dict["decoder_output"], input_dict["target_tensors"])
    p = self.params
    per_utterance = (p["mel_weight"] * parts["mel"] + p["duration_weight"] * parts["duration"]
                     + p["pitch_weight"] * parts["pitch"]
                     + p["forward_sum_weight"] * parts["forward_sum"]
                     + p["binarization_weight"] * self.binarization_on(step)
                     * parts["binarization"])
    weight = tf.cast(tf.shape(per_utterance)[0], tf.float32)
    return tf.reduce_sum(per_utterance), weight
