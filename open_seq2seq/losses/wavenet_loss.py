"""WavenetLoss: softmax cross-entropy over the mu-law bins of every predicted sample."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from open_seq2seq.losses.loss import Loss


class WavenetLoss(Loss):
  """Cross-entropy of the next sample's mu-law bin, summed over the samples the mask keeps.

  Takes the decoder output's ``logits`` [B, T, Q] and ``target_tensors = (target ids [B, T],
  mask [B, T])`` (:class:`~open_seq2seq.data.text2speech.wavenet.WavenetDataLayer`: 0 on batch
  padding and on context-only samples). Returns ``(loss sum, number of samples)``: the trainer
  divides by the global count, so the loss is the mean over real samples as OpenSeq2Seq's
  ``reduce_mean`` was over its unpadded batch.
  """

  PARAMS = {}

  def __init__(self, params: dict[str, Any] | None = None, *, name: str = "wavenet_loss"):
    super().__init__(params, name=name)

  def compute_loss(self, input_dict: dict) -> tuple[tf.Tensor, tf.Tensor]:
    logits = tf.cast(input_dict["decoder_output"]["logits"], tf.float32)
    targets, mask = input_dict["target_tensors"][:2]
    mask = tf.cast(mask, tf.float32)
    cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(targets, tf.int32), logits=logits)
    return tf.reduce_sum(cross_entropy * mask), tf.reduce_sum(mask)
