"""Guided attention (Tachibana et al., 2018): a penalty on attention far from the diagonal.

Text and speech advance together, so decoder step ``s`` of ``S`` should attend near symbol
``n = s / S * N``. The penalty weights each alignment by
``W[s, n] = 1 - exp(-(n / N - s / S)^2 / (2 g^2))`` (0 on the diagonal, near 1 far from it)
and sums it over each sequence's real steps and symbols. Added to the loss early in training,
it makes a Tacotron align in a few hundred steps instead of thousands.
"""

from __future__ import annotations

import tensorflow as tf


def guided_attention_penalty(alignments: tf.Tensor, text_lengths: tf.Tensor,
                             step_lengths: tf.Tensor, sigma: float = 0.2) -> tf.Tensor:
  """Per-sequence sum of ``alignments * W`` over real steps and symbols, float32 [B].

  Args:
    alignments: float32 [B, S, N] attention weights of every decoder step.
    text_lengths: [B] real symbols per sequence.
    step_lengths: [B] real decoder steps per sequence.
    sigma: width ``g`` of the band around the diagonal (fraction of the lengths).
  """
  alignments = tf.cast(alignments, tf.float32)
  steps, symbols = tf.shape(alignments)[1], tf.shape(alignments)[2]
  n = tf.cast(tf.range(symbols), tf.float32)[None, None, :]
  s = tf.cast(tf.range(steps), tf.float32)[None, :, None]
  big_n = tf.maximum(tf.cast(text_lengths, tf.float32), 1.0)[:, None, None]
  big_s = tf.maximum(tf.cast(step_lengths, tf.float32), 1.0)[:, None, None]
  weights = 1.0 - tf.exp(-tf.square(n / big_n - s / big_s) / (2.0 * sigma * sigma))
  mask = (tf.sequence_mask(step_lengths, steps, tf.float32)[:, :, None] *
          tf.sequence_mask(text_lengths, symbols, tf.float32)[:, None, :])
  return tf.reduce_sum(alignments * weights * mask, axis=[1, 2])
