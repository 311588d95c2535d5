"""Cross-entropy losses for sequences and classes (OpenSeq2Seq's names and parameters).

Every loss returns ``(loss_sum, weight)`` (see :class:`~open_seq2seq.losses.loss.Loss`):
OpenSeq2Seq divided inside the loss (by the token count or by ``batch_size``); here the
trainer divides by the weight of the whole global batch, which gives the same value for one
batch and the exact value across accumulated or data-parallel batches. ``batch_size`` is
therefore accepted for compatibility and unused. Logits are cast to float32 before the
softmax, so the losses are safe under mixed precision.
"""

from __future__ import annotations

import math
from typing import Any

import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.losses.loss import Loss
from open_seq2seq.utils.params import Param


def _pad_time(tensor: tf.Tensor, length: tf.Tensor) -> tf.Tensor:
  """Pads axis 1 of ``tensor`` with zeros up to ``length``."""
  extra = length - tf.shape(tensor)[1]
  paddings = [[0, 0], [0, extra]] + [[0, 0]] * (len(tensor.shape) - 2)
  return tf.pad(tensor, paddings)


def _gold_log_probs(log_probs: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
  """``log_probs[b, t, labels[b, t]]`` -> [batch, time]."""
  return tf.gather(log_probs, tf.cast(labels, tf.int32), batch_dims=2)


class PaddedCrossEntropyLossWithSmoothing(Loss):
  """Token cross entropy with label smoothing over padded target batches.

  Smoothing follows tensor2tensor (as OpenSeq2Seq did): the target distribution puts
  ``1 - label_smoothing`` on the gold token and ``label_smoothing / (V - 1)`` on each other
  token, and the entropy of that distribution is subtracted so a perfect prediction costs 0::

      loss_t = -sum_v q_v log p_v + (c log c + (V - 1) l log l),  c = 1 - ls, l = ls / (V - 1)

  Logits and targets are zero-padded to a common length; positions past each target's
  length are masked out. Returns the sum over real target tokens and their number.

  ``V`` is ``tgt_vocab_size`` if set, else ``vocab_size`` (which the model takes from its
  data layer's description), else the logits' last dimension; with ``pad_embeddings_2_eight`` it is rounded up to a multiple of
  8, like the decoder's output layer.
  """

  PARAMS = {
      "label_smoothing": Param(float, 0.0, "Probability mass spread over non-gold tokens."),
      "pad_embeddings_2_eight": Param(bool, False,
                                      "Vocabulary padded to a multiple of 8 (as the decoder)."),
      "tgt_vocab_size": Param((int, None), None,
                              "Target vocabulary size (default: the data's, or logits')."),
      "batch_size": Param((int, None), None,
                          "Ignored: the batch size is the logits' first dimension."),
  }

  def __init__(self, params: dict[str, Any] | None = None, *, vocab_size: int | None = None,
               name: str = "padded_cross_entropy_with_smoothing"):
    super().__init__(params, name=name)
    smoothing = self.params["label_smoothing"]
    if not 0.0 <= smoothing < 1.0:
      raise ConfigError(f"loss_params/label_smoothing: must be in [0, 1), got {smoothing}")
    configured = self.params["tgt_vocab_size"]
    self._vocab_size = configured if configured is not None else vocab_size

  def vocab_size(self, logits: tf.Tensor) -> int:
    """The ``V`` of the smoothing formula for these logits."""
    vocab_size = self._vocab_size
    if vocab_size is None:
      vocab_size = logits.shape[-1]
      if vocab_size is None:
        raise ValueError("PaddedCrossEntropyLossWithSmoothing needs logits with a static "
                         "last dimension or tgt_vocab_size")
    elif self.params["pad_embeddings_2_eight"] and logits.shape[-1] != vocab_size:
      # decoders that pad their embedding to a multiple of 8 may or may not trim the logits
      # back to the real vocabulary (TransformerDecoder does): accept either width
      vocab_size = (vocab_size + 7) // 8 * 8
    if logits.shape[-1] is not None and logits.shape[-1] != vocab_size:
      raise ConfigError(
          f"loss_params: logits have {logits.shape[-1]} classes but the loss expects "
          f"{vocab_size}; make tgt_vocab_size/pad_embeddings_2_eight match the decoder")
    return vocab_size

  def compute_loss(self, input_dict: dict) -> tuple[tf.Tensor, tf.Tensor]:
    logits = tf.cast(input_dict["decoder_output"]["logits"], tf.float32)
    labels, lengths = map(tf.convert_to_tensor, input_dict["target_tensors"][:2])
    vocab_size = self.vocab_size(logits)
    max_length = tf.maximum(tf.shape(logits)[1], tf.shape(labels)[1])
    logits = _pad_time(logits, max_length)
    labels = _pad_time(labels, max_length)
    mask = tf.sequence_mask(lengths, max_length, dtype=tf.float32)

    log_probs = tf.nn.log_softmax(logits)
    gold = _gold_log_probs(log_probs, labels)
    smoothing = self.params["label_smoothing"]
    if smoothing > 0.0:
      confidence = 1.0 - smoothing
      low = smoothing / (vocab_size - 1)
      # -sum_v q_v log p_v without building the [batch, time, V] target distribution.
      xentropy = -((confidence - low) * gold + low * tf.reduce_sum(log_probs, axis=-1))
      min_xentropy = -(confidence * math.log(confidence)
                       + (vocab_size - 1) * low * math.log(low + 1e-20))
      xentropy -= min_xentropy
    else:
      xentropy = -gold
    return tf.reduce_sum(xentropy * mask), tf.reduce_sum(mask)


class BasicSequenceLoss(Loss):
  """Token cross entropy (sparse labels), masked by the target lengths.

  ``offset_target_by_one`` compares logits at step ``t`` with target ``t + 1`` (for targets
  that begin with a start symbol); this repository's decoders align logits with the targets,
  hence the default False. A model whose targets never begin with one (Text2Text: OpenSeq2Seq's
  RNN configs set the key for targets starting with ``<S>``) builds the loss with
  ``targets_start_with_go=False``, which turns the offset off. The weight is the number of real target tokens with
  ``average_across_timestep`` (a per-token mean), else the number of sequences (a
  per-sequence sum, OpenSeq2Seq's ``sum / batch_size``). Without ``do_mask`` every position
  of the (common) time span counts.
  """

  PARAMS = {
      "offset_target_by_one": Param(bool, False,
                                    "Logits at step t predict target t + 1."),
      "average_across_timestep": Param(bool, False,
                                       "Weight by tokens (True) or by sequences (False)."),
      "do_mask": Param(bool, True, "Ignore positions past each target's length."),
      "tgt_vocab_size": Param((int, None), None,
                              "Ignored: the vocabulary size is the logits' last dimension."),
      "batch_size": Param((int, None), None,
                          "Ignored: the batch size is the logits' first dimension."),
  }

  def __init__(self, params: dict[str, Any] | None = None, *,
               targets_start_with_go: bool = True, name: str = "basic_sequence_loss"):
    super().__init__(params, name=name)
    # A model whose targets carry no start symbol (Text2Text) passes False: its decoders
    # align logits with the targets, and shifting them would compare the wrong pairs.
    self.offset = self.params["offset_target_by_one"] and targets_start_with_go

  def compute_loss(self, input_dict: dict) -> tuple[tf.Tensor, tf.Tensor]:
    logits = tf.convert_to_tensor(input_dict["decoder_output"]["logits"])
    targets, lengths = map(tf.convert_to_tensor, input_dict["target_tensors"][:2])
    steps = tf.minimum(tf.shape(targets)[1], tf.shape(logits)[1])
    if self.offset:
      steps -= 1
      logits = logits[:, :steps]
      targets = targets[:, 1:steps + 1]
      lengths = lengths - 1
    else:
      logits = logits[:, :steps]
      targets = targets[:, :steps]
    logits = tf.cast(logits, tf.float32)
    xentropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(targets, tf.int32), logits=logits)
    return self.total(xentropy, lengths)

  def total(self, xentropy: tf.Tensor, lengths: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``(loss_sum, weight)`` of token losses [batch, steps] (masked with ``do_mask``)."""
    if self.params["do_mask"]:
      mask = tf.sequence_mask(lengths, tf.shape(xentropy)[1], dtype=tf.float32)
    else:
      mask = tf.ones_like(xentropy)
    loss_sum = tf.reduce_sum(xentropy * mask)
    if self.params["average_across_timestep"]:
      return loss_sum, tf.reduce_sum(mask)
    return loss_sum, tf.cast(tf.shape(xentropy)[0], tf.float32)


class BasicSampledSequenceLoss(BasicSequenceLoss):
  """BasicSequenceLoss with a sampled softmax when the model gives one (training).

  A language model with ``num_sampled`` (LMEncoder) returns, in training, its last hidden
  states and output weights instead of logits; the loss then scores each target word
  against ``num_sampled`` words drawn from a log-uniform (Zipf) distribution over the ids —
  which assumes ids sorted by falling frequency, as the LM data layer's vocabulary is —
  with ``tf.nn.sampled_softmax_loss``. Given logits (eval, or no sampling), it is
  BasicSequenceLoss. Masking and weighting are BasicSequenceLoss's.
  """

  def __init__(self, params: dict[str, Any] | None = None, *,
               name: str = "basic_sampled_sequence_loss"):
    super().__init__(params, name=name)

  def compute_loss(self, input_dict: dict) -> tuple[tf.Tensor, tf.Tensor]:
    output = input_dict["decoder_output"]
    if "num_sampled" not in output:
      return super().compute_loss(input_dict)
    hidden = tf.cast(output["hidden"], tf.float32)
    weights = tf.cast(output["softmax_weights"], tf.float32)
    vocab_size = weights.shape[0]
    bias = output.get("softmax_bias")
    bias = tf.zeros([vocab_size]) if bias is None else tf.cast(bias, tf.float32)
    targets, lengths = map(tf.convert_to_tensor, input_dict["target_tensors"][:2])
    steps = tf.minimum(tf.shape(targets)[1], tf.shape(hidden)[1])
    if self.offset:
      steps -= 1
      hidden, targets, lengths = hidden[:, :steps], targets[:, 1:steps + 1], lengths - 1
    else:
      hidden, targets = hidden[:, :steps], targets[:, :steps]
    flat_hidden = tf.reshape(hidden, [-1, hidden.shape[-1]])
    labels = tf.reshape(tf.cast(targets, tf.int64), [-1, 1])
    xentropy = tf.nn.sampled_softmax_loss(
        weights=weights, biases=bias, labels=labels, inputs=flat_hidden,
        num_sampled=int(tf.get_static_value(output["num_sampled"])), num_classes=vocab_size)
    return self.total(tf.reshape(xentropy, tf.shape(targets)), lengths)


class CrossEntropyLoss(Loss):
  """Softmax cross entropy of one label per example (classification).

  Labels are class ids ([batch], integer) or one-hot / probability rows ([batch, classes],
  float). When the logits have a time axis more than the labels need, the last step is used,
  as in OpenSeq2Seq. Returns the sum over examples and the number of examples.
  """

  PARAMS = {}

  def __init__(self, params: dict[str, Any] | None = None, *,
               name: str = "cross_entropy_loss"):
    super().__init__(params, name=name)

  def compute_loss(self, input_dict: dict) -> tuple[tf.Tensor, tf.Tensor]:
    logits = input_dict["decoder_output"]["logits"]
    targets = input_dict["target_tensors"]
    labels = tf.convert_to_tensor(targets[0] if isinstance(targets, (tuple, list)) else targets)
    logits = tf.convert_to_tensor(logits)
    sparse = labels.dtype.is_integer
    label_rank = len(labels.shape) + (1 if sparse else 0)
    while len(logits.shape) > label_rank:
      logits = logits[:, -1]
    logits = tf.cast(logits, tf.float32)
    if sparse:
      xentropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels=tf.cast(labels, tf.int32), logits=logits)
    else:
      xentropy = tf.nn.softmax_cross_entropy_with_logits(
          labels=tf.cast(labels, tf.float32), logits=logits)
    return tf.reduce_sum(xentropy), tf.cast(tf.size(xentropy), tf.float32)


__all__ = ["PaddedCrossEntropyLossWithSmoothing", "BasicSequenceLoss",
           "BasicSampledSequenceLoss", "CrossEntropyLoss"]
