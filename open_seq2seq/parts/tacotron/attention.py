"""Location-sensitive attention (Chorowski et al., 2015), as Tacotron 2 uses it.

The score of encoder position ``j`` at a decoder step adds, to Bahdanau's
``v . tanh(W q + keys_j)``, features of where the attention already went: the previous
step's alignments and their running sum (the *cumulative* alignments), convolved along the
text axis (``location_filters`` filters of width ``location_kernel_size``) and projected to
``num_units``. Knowing where it was pushes the attention forward monotonically, which is what
lets a Tacotron align text with thousands of frames.

Scores, the masked softmax and the cumulative sum are float32 under mixed precision (a
softmax over hundreds of positions loses its small weights in half precision); the
projections run in the layer's compute dtype.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.parts.rnns.attention import AttentionMechanism, AttentionMemory, masked_softmax
from open_seq2seq.utils.initializers import fresh


class LocationSensitiveAttention(AttentionMechanism):
  """Additive attention with location features.

  Args:
    num_units: depth of keys, query projection and location features
      (OpenSeq2Seq's ``attention_layer_size``).
    use_bias: a bias inside the tanh (OpenSeq2Seq's ``attention_bias``).
    location_filters, location_kernel_size: the convolution over the alignments.
    initializer: kernel initializer (None: Glorot uniform).
  """

  def __init__(self, num_units: int, use_bias: bool = False, location_filters: int = 32,
               location_kernel_size: int = 31, initializer: Any = None, **kwargs: Any):
    super().__init__(num_units, initializer=initializer, **kwargs)
    policy = self.dtype_policy
    self.use_bias = use_bias
    self.query_layer = keras.layers.Dense(num_units, use_bias=False, dtype=policy,
                                          kernel_initializer=fresh(self._initializer),
                                          name="query_layer")
    self.location_conv = keras.layers.Conv1D(location_filters, location_kernel_size,
                                             padding="same", use_bias=False, dtype=policy,
                                             kernel_initializer=fresh(self._initializer),
                                             name="location_conv")
    self.location_layer = keras.layers.Dense(num_units, use_bias=False, dtype=policy,
                                             kernel_initializer=fresh(self._initializer),
                                             name="location_layer")

  def build(self, memory_depth: int, query_depth: int) -> None:
    super().build(memory_depth, query_depth)
    self.query_layer.build((None, query_depth))
    self.location_conv.build((None, None, 2))
    self.location_layer.build((None, None, self.location_conv.filters))
    # The score vector stays float32 (no autocast): the reduction over units decides the
    # softmax.
    self.v = self.add_weight(name="attention_v", shape=(self.num_units,),
                             initializer=fresh(self._initializer), autocast=False)
    self.b = (self.add_weight(name="attention_b", shape=(self.num_units,), initializer="zeros")
              if self.use_bias else None)
    self.built = True

  def location_alignments(self, query: tf.Tensor, memory: AttentionMemory,
                          previous: tf.Tensor, cumulative: tf.Tensor) -> tf.Tensor:
    """Float32 weights [B, S] of ``query`` [B, Q], given the previous step's alignments and
    the cumulative ones (both float32 [B, S])."""
    dtype = self.compute_dtype
    locations = tf.cast(tf.stack([previous, cumulative], axis=-1), dtype)  # [B, S, 2]
    location_keys = self.location_layer(self.location_conv(locations))
    hidden = (memory.keys + self.query_layer(tf.cast(query, dtype))[:, None, :] +
              location_keys)
    if self.b is not None:
      hidden = hidden + tf.cast(self.b, dtype)
    score = tf.reduce_sum(tf.cast(tf.tanh(hidden), tf.float32) * tf.cast(self.v, tf.float32),
                          axis=-1)
    return masked_softmax(score, memory.mask)
