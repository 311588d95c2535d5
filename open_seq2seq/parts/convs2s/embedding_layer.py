"""Token and learned position embeddings of ConvS2S."""

from __future__ import annotations

import keras
import tensorflow as tf

from open_seq2seq.parts.transformer.embedding_layer import EmbeddingSharedWeights

#: OpenSeq2Seq's ConvS2S embeddings: N(0, 0.1), not scaled by sqrt(width).
EMBEDDING_STD = 0.1


class ConvS2SEmbedding(EmbeddingSharedWeights):
  """Token embedding (usable as the pre-softmax projection) drawn from N(0, ``init_std``)
  and not scaled; otherwise the Transformer's :class:`EmbeddingSharedWeights`, so either
  family's decoder can share it."""

  def __init__(self, vocab_size: int, hidden_size: int, pad_vocab_to_eight: bool = False,
               init_std: float = EMBEDDING_STD, **kwargs):
    super().__init__(vocab_size, hidden_size, pad_vocab_to_eight, scale_embeddings=False,
                     **kwargs)
    self.init_std = init_std

  def build(self, input_shape=None):
    self.embeddings = self.add_weight(
        name="weights", shape=(self.padded_vocab_size, self.hidden_size),
        initializer=keras.initializers.RandomNormal(0.0, self.init_std))


class PositionEmbedding(keras.layers.Layer):
  """Learned embedding of positions 0 .. ``max_length - 1``; later positions get zeros
  (what OpenSeq2Seq's out-of-range lookups gave on GPU), so decoding may run past the table.

  Args:
    max_length: rows of the table (OpenSeq2Seq's ``max_input_length``).
    hidden_size: embedding width.
    init_std: standard deviation of the normal initialization.
  """

  def __init__(self, max_length: int, hidden_size: int, init_std: float = EMBEDDING_STD,
               **kwargs):
    super().__init__(**kwargs)
    self.max_length, self.hidden_size, self.init_std = max_length, hidden_size, init_std

  def build(self, input_shape=None):
    self.embeddings = self.add_weight(
        name="weights", shape=(self.max_length, self.hidden_size),
        initializer=keras.initializers.RandomNormal(0.0, self.init_std))

  def call(self, positions: tf.Tensor) -> tf.Tensor:
    """int positions [...] -> [..., hidden_size] in the compute dtype."""
    positions = tf.cast(positions, tf.int32)
    table = tf.cast(self.embeddings, self.compute_dtype)
    inside = positions < self.max_length
    rows = tf.gather(table, tf.minimum(positions, self.max_length - 1))
    return tf.where(inside[..., None], rows, tf.zeros([], rows.dtype))


__all__ = ["ConvS2SEmbedding", "PositionEmbedding", "EMBEDDING_STD"]
