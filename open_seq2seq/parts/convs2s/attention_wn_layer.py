"""Multi-step attention of the ConvS2S decoder (Gehring et al. 2017, section 3.3)."""

from __future__ import annotations

import math
from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.parts.convs2s.ffn_wn_layer import FeedForwardNetworkNormalized
from open_seq2seq.parts.convs2s.utils import residual_scale


class AttentionLayerNormalized(keras.layers.Layer):
  """Attention of one decoder layer over the encoder's outputs.

  The query is the conv output projected to the embedding width plus the target
  embedding (scaled by ``scaling_factor``); keys are the encoder's ``outputs``, values its
  ``outputs_b``. Scores, the source-padding mask and the softmax are float32. The attended
  sum is multiplied by ``sqrt(source length)`` (the *real* length of each source, as fairseq
  does; OpenSeq2Seq used the padded length, which let padding change outputs), projected
  back to the conv width and added to the conv output (residual, scaled).

  Args:
    in_dim: channels of the conv output (and of this layer's output).
    embed_size: target embedding width (= key and value width).
    scaling_factor: scale of the two residual sums.
    normalization_type, init_var, data_init_scale: of the two linear projections.
  """

  def __init__(self, in_dim: int, embed_size: int, scaling_factor: float = math.sqrt(0.5),
               normalization_type: str | None = "weight_norm", init_var: float | None = None,
               data_init_scale: float | None = None, **kwargs):
    super().__init__(**kwargs)
    self.in_dim, self.embed_size, self.scaling_factor = in_dim, embed_size, scaling_factor
    common = dict(normalization_type=normalization_type, init_var=init_var,
                  data_init_scale=data_init_scale, dtype=self.dtype_policy)
    self.tgt_embed_proj = FeedForwardNetworkNormalized(
        in_dim, embed_size, name="att_linear_mapping_tgt_embed", **common)
    self.out_proj = FeedForwardNetworkNormalized(
        embed_size, in_dim, name="att_linear_mapping_out", **common)

  def build(self, input_shape=None):
    self.tgt_embed_proj.build()
    self.out_proj.build()

  def call(self, x: tf.Tensor, target_embed: tf.Tensor, keys: tf.Tensor, values: tf.Tensor,
           source_mask: tf.Tensor, source_scale: tf.Tensor, training: bool | None = None,
           padding_mask: tf.Tensor | None = None) -> tf.Tensor:
    """Attends from every target position.

    Args:
      x: conv output [batch, time, in_dim].
      target_embed: target embeddings [batch, time, embed_size].
      keys, values: encoder outputs [batch, source_time, embed_size].
      source_mask: bool [batch, source_time], True at real source positions.
      source_scale: [batch] ``sqrt`` of each real source length, in the compute dtype.
      padding_mask: bool [batch, time] real target positions (batch norm statistics).

    Returns:
      [batch, time, in_dim].
    """
    norm = dict(training=training, padding_mask=padding_mask)
    query = residual_scale(self.tgt_embed_proj(x, **norm) + target_embed, self.scaling_factor)
    scores = tf.cast(tf.matmul(query, keys, transpose_b=True), tf.float32)
    scores = tf.where(source_mask[:, None, :], scores, tf.constant(-1e9, tf.float32))
    weights = tf.cast(tf.nn.softmax(scores), values.dtype)
    attended = tf.matmul(weights, values) * source_scale[:, None, None]
    out = self.out_proj(attended, **norm)
    return residual_scale(out + x, self.scaling_factor)


def source_scale(lengths: tf.Tensor, dtype: Any) -> tf.Tensor:
  """``sqrt(length)`` per source, the attention output's scale, in ``dtype``."""
  return tf.cast(tf.sqrt(tf.cast(lengths, tf.float32)), dtype)


__all__ = ["AttentionLayerNormalized", "source_scale"]
