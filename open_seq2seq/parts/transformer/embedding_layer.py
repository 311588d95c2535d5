"""Token embedding whose matrix can double as the pre-softmax projection."""

from __future__ import annotations

import keras
import tensorflow as tf


class EmbeddingSharedWeights(keras.layers.Layer):
  """Embedding matrix [vocab, hidden] used for lookups and, transposed, for logits.

  Args:
    vocab_size: number of token ids.
    hidden_size: embedding width.
    pad_vocab_to_eight: allocate rows up to a multiple of 8 (tensor-core friendly shapes);
      the extra rows are never looked up and their logits are sliced off.
    scale_embeddings: multiply looked-up vectors by sqrt(hidden_size), as in the paper, so
      that they match the scale of the position encodings.
  """

  def __init__(self, vocab_size: int, hidden_size: int, pad_vocab_to_eight: bool = False,
               scale_embeddings: bool = True, **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.padded_vocab_size = -(-vocab_size // 8) * 8 if pad_vocab_to_eight else vocab_size
    self.scale_embeddings = scale_embeddings

  def build(self, input_shape=None):
    # std hidden**-0.5: after the sqrt(hidden) scaling the embeddings have unit variance.
    self.embeddings = self.add_weight(
        name="weights", shape=(self.padded_vocab_size, self.hidden_size),
        initializer=keras.initializers.RandomNormal(0.0, self.hidden_size ** -0.5))

  def call(self, ids: tf.Tensor) -> tf.Tensor:
    """int ids [...] -> embeddings [..., hidden] in the compute dtype."""
    embeddings = tf.cast(self.embeddings, self.compute_dtype)
    out = tf.gather(embeddings, ids)
    if self.scale_embeddings:
      out *= tf.cast(self.hidden_size ** 0.5, out.dtype)
    return out

  def linear(self, x: tf.Tensor) -> tf.Tensor:
    """[..., hidden] -> logits [..., vocab_size] in the compute dtype (x @ E^T)."""
    embeddings = tf.cast(self.embeddings, self.compute_dtype)
    x = tf.cast(x, self.compute_dtype)
    shape = tf.shape(x)
    logits = tf.matmul(tf.reshape(x, [-1, self.hidden_size]), embeddings, transpose_b=True)
    if self.padded_vocab_size != self.vocab_size:
      logits = logits[:, :self.vocab_size]
    return tf.reshape(logits, tf.concat([shape[:-1], [self.vocab_size]], axis=0))
