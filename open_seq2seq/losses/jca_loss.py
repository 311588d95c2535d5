"""MultiTaskCTCEntropyLoss: joint CTC-attention training's loss (OpenSeq2Seq's jca_loss).

``(1 - lambda_value) * attention cross entropy + lambda_value * CTC loss``, each term the mean
OpenSeq2Seq's own loss gives: the cross entropy per target character with
``seq_loss_params/average_across_timestep`` (as the example configs set it; per utterance
without), the CTC loss per utterance.

Returned as ``(loss_sum, weight)`` with the utterances as weight: ``loss_sum`` is the mixed mean
times the batch's utterances, so one batch reports exactly OpenSeq2Seq's value and batches
(accumulated, or on several replicas) combine weighted by their number of utterances.

The CTC branch reads the targets without their final ``</S>`` (autoregressive targets end
with it; CTC has no such class): the model passes the end symbol's id.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.losses.ctc_loss import CTCLoss
from open_seq2seq.losses.loss import Loss
from open_seq2seq.losses.sequence_loss import BasicSequenceLoss
from open_seq2seq.utils.params import Param, dict_of


def strip_end_symbol(ids: tf.Tensor, lengths: tf.Tensor, end_symbol: int | None) -> tf.Tensor:
  """Lengths of the targets without their last id where it is ``end_symbol``."""
  lengths = tf.cast(lengths, tf.int32)
  if end_symbol is None:
    return lengths
  last = tf.gather(tf.cast(ids, tf.int32), tf.maximum(lengths - 1, 0), batch_dims=1)
  ends = tf.logical_and(lengths > 0, tf.equal(last, end_symbol))
  return lengths - tf.cast(ends, tf.int32)


class MultiTaskCTCEntropyLoss(Loss):
  """``(1 - lambda) * attention cross entropy + lambda * CTC`` (module doc).

  Reads ``decoder_output["seq_outputs"]`` (``logits`` of the attention decoder) and
  ``decoder_output["ctc_outputs"]`` (``logits`` and ``src_lengths`` of the CTC decoder), as
  :class:`~open_seq2seq.decoders.jca_decoder.JointCTCAttentionDecoder` returns them.
  """

  PARAMS = {
      "seq_loss_params": Param(dict_of(BasicSequenceLoss.declared_params(), "seq_loss_params"),
                               {}, "Parameters of the attention decoder's BasicSequenceLoss."),
      "ctc_loss_params": Param(dict_of(CTCLoss.declared_params(), "ctc_loss_params"), {},
                               "Parameters of the CTC decoder's CTCLoss."),
      "lambda_value": Param(float, doc="Weight of the CTC loss, in [0, 1]; the attention loss "
                            "gets 1 - lambda_value."),
      "tgt_vocab_size": Param((int, None), None, "Ignored: the sizes are the logits'."),
      "batch_size": Param((int, None), None, "Ignored: the batch size is the targets'."),
  }

  def __init__(self, params: dict[str, Any] | None = None, *, end_symbol: int | None = None,
               name: str = "multitask_ctc_entropy_loss"):
    super().__init__(params, name=name)
    lam = self.params["lambda_value"]
    if not 0.0 <= lam <= 1.0:
      raise ConfigError(f"loss_params/lambda_value: must be in [0, 1], got {lam}")
    self.lambda_value = lam
    self.end_symbol = end_symbol
    self.seq_loss = BasicSequenceLoss(self.params["seq_loss_params"])
    self.ctc_loss = CTCLoss(self.params["ctc_loss_params"])

  def compute_loss(self, input_dict: dict) -> tuple[tf.Tensor, tf.Tensor]:
    output = input_dict["decoder_output"]
    ids, lengths = input_dict["target_tensors"][:2]
    seq_sum, seq_weight = self.seq_loss.compute_loss(
        {"decoder_output": output["seq_outputs"], "target_tensors": (ids, lengths)})
    ctc_lengths = strip_end_symbol(ids, lengths, self.end_symbol)
    ctc_sum, ctc_weight = self.ctc_loss.compute_loss(
        {"decoder_output": output["ctc_outputs"], "target_tensors": (ids, ctc_lengths)})
    mean = ((1.0 - self.lambda_value) * seq_sum / tf.maximum(seq_weight, 1.0) +
            self.lambda_value * ctc_sum / tf.maximum(ctc_weight, 1.0))
    utterances = tf.cast(tf.shape(ids)[0], tf.float32)
    return mean * utterances, utterances


__all__ = ["MultiTaskCTCEntropyLoss", "strip_end_symbol"]
