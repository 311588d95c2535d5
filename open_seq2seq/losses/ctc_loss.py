"""CTCLoss: connectionist temporal classification loss, always in float32."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from open_seq2seq.losses.loss import Loss
from open_seq2seq.utils.params import Param


def dense_to_sparse(ids: tf.Tensor, lengths: tf.Tensor) -> tf.SparseTensor:
  """Sparse labels of the first ``lengths[b]`` ids of each row."""
  mask = tf.sequence_mask(lengths, maxlen=tf.shape(ids)[1])
  indices = tf.where(mask)
  values = tf.gather_nd(ids, indices)
  return tf.SparseTensor(indices, tf.cast(values, tf.int32), tf.shape(ids, out_type=tf.int64))


def ctc_loss_per_utterance(labels: tf.Tensor, label_lengths: tf.Tensor, logits: tf.Tensor,
                           logit_lengths: tf.Tensor) -> tf.Tensor:
  """Negative log-likelihood of each utterance, blank = last class, logits [B, T, V].

  Uses TensorFlow's C++ CTC kernel (fast on CPUs). Labels longer than their logits give a
  loss of 0 with no gradient instead of an error; impossible alignments (too many repeats)
  give +inf, which ``mask_nan`` removes.
  """
  return tf.compat.v1.nn.ctc_loss(
      labels=dense_to_sparse(labels, label_lengths),
      inputs=tf.cast(logits, tf.float32),
      sequence_length=tf.cast(logit_lengths, tf.int32),
      preprocess_collapse_repeated=False, ctc_merge_repeated=True,
      ignore_longer_outputs_than_inputs=True, time_major=False)


class CTCLoss(Loss):
  """CTC loss summed over the batch's utterances; the weight is the number of utterances.

  Reads ``decoder_output["logits"]`` [B, T, V] and ``decoder_output["src_length"]`` (logit
  lengths) and the targets ``(ids, lengths)``. The trainer divides by the global number of
  utterances, so the reported loss is OpenSeq2Seq's mean CTC loss per utterance.
  """

  PARAMS = {
      "mask_nan": Param(bool, True,
                        "Replace NaN/inf utterance losses (impossible alignments) by 0."),
  }

  def __init__(self, params: dict[str, Any], model: Any = None, name: str = "ctc_loss"):
    super().__init__(params, model, name)

  def compute_loss(self, input_dict: dict) -> tuple[tf.Tensor, tf.Tensor]:
    decoder_output = input_dict["decoder_output"]
    ids, id_lengths = input_dict["target_tensors"]
    losses = ctc_loss_per_utterance(ids, id_lengths, decoder_output["logits"],
                                    decoder_output["src_length"])
    if self.params["mask_nan"]:
      losses = tf.where(tf.math.is_finite(losses), losses, tf.zeros_like(losses))
    weight = tf.cast(tf.shape(losses)[0], tf.float32)
    return tf.reduce_sum(losses), weight
