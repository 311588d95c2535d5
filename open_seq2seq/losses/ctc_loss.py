"""CTCLoss: connectionist temporal classification loss, always in float32."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from open_seq2seq.losses.loss import Loss
# the kernel's wrapper lives in parts/ (FastPitch's aligner uses it too); importable here
from open_seq2seq.parts.ctc import ctc_loss_per_utterance, dense_to_sparse  # noqa: F401
from open_seq2seq.utils.params import Param


class CTCLoss(Loss):
  """CTC loss summed over the batch's utterances; the weight is the number of utterances.

  Reads ``decoder_output["logits"]`` [B, T, V] and ``decoder_output["src_lengths"]`` (logit
  lengths) and the targets ``(ids, lengths)``. The trainer divides by the global number of
  utterances, so the reported loss is OpenSeq2Seq's mean CTC loss per utterance.
  """

  PARAMS = {
      "mask_nan": Param(bool, True,
                        "Replace NaN/inf utterance losses (impossible alignments) by 0."),
  }

  def __init__(self, params: dict[str, Any] | None = None, *, name: str = "ctc_loss"):
    super().__init__(params, name=name)

  def compute_loss(self, input_dict: dict) -> tuple[tf.Tensor, tf.Tensor]:
    decoder_output = input_dict["decoder_output"]
    ids, id_lengths = input_dict["target_tensors"]
    losses = ctc_loss_per_utterance(ids, id_lengths, decoder_output["logits"],
                                    decoder_output["src_lengths"])
    if self.params["mask_nan"]:
      losses = tf.where(tf.math.is_finite(losses), losses, tf.zeros_like(losses))
    weight = tf.cast(tf.shape(losses)[0], tf.float32)
    return tf.reduce_sum(losses), weight
