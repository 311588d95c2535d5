"""Centaur's attention block and the position encodings it relies on.

Centaur's decoder has no recurrence and no self-attention: a causal convolution gives each
frame its past, and a multi-head dot-product attention over the encoder outputs (queries
from the frames, keys and values from the text) aligns it with the text. Both sides carry
sinusoidal position encodings (:func:`position_encoding`), which is what lets a
content-free query find "where in the text" it is. One block is::

    y = causal_conv_block(x)                          (optional: conv_params)
    y = y + dropout(attention(layer_norm(y), text))   (pre-norm residual)
    y = y + dropout(dense(layer_norm(y)))             (linear feed-forward, as OpenSeq2Seq)

Logits, the mask and the softmax are float32 under mixed precision, and the weights come out
float32 [B, heads, T, S]. Free-running synthesis can force the attention forward
(``window_size``): each head may attend only to ``window_size`` symbols starting
``back_step_size`` before the symbol it attended most at the previous frame.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.parts.centaur.conv_block import ConvBlock
from open_seq2seq.parts.transformer.utils import get_position_encoding
from open_seq2seq.utils.initializers import fresh

#: Logit of a position that may not be attended (float32).
MASKED = -1e9


def position_encoding(length: Any, depth: int, dtype: Any = tf.float32) -> tf.Tensor:
  """Sinusoidal encodings [length, depth] (sines then cosines; an odd depth drops the last
  cosine channel, as OpenSeq2Seq's Centaur did)."""
  even = depth + depth % 2
  return tf.cast(get_position_encoding(length, even)[:, :depth], dtype)


def window_mask(positions: tf.Tensor, source_length: Any, window_size: int,
                back_step_size: int) -> tf.Tensor:
  """bool [B, H, S]: True within ``[p - back, p - back + window)`` (clipped at 0) of each
  head's previous position ``p`` (int32 [B, H])."""
  start = tf.maximum(positions - back_step_size, 0)[..., None]
  index = tf.range(source_length)[None, None, :]
  return (index >= start) & (index < start + window_size)


class CentaurAttention(keras.layers.Layer):
  """Multi-head dot-product attention of frames over the text (q, k, v, output projections
  without bias, OpenSeq2Seq's transformer ``Attention``), returning its weights.

  Args:
    hidden_size: width of the queries, keys, values and output; divisible by ``num_heads``.
    num_heads: attention heads.
    memory_depth: width of the encoder outputs (or given to :meth:`build`).
    attention_dropout: dropout on the weights (training only).
    kernel_initializer: initializer of the projections.
  """

  def __init__(self, hidden_size: int, num_heads: int, memory_depth: int | None = None,
               attention_dropout: float = 0.0, kernel_initializer: Any = None, **kwargs: Any):
    super().__init__(**kwargs)
    self.hidden_size, self.num_heads, self.memory_depth = hidden_size, num_heads, memory_depth
    self.depth = hidden_size // num_heads
    self.attention_dropout = attention_dropout
    init = kernel_initializer or "glorot_uniform"
    dense = lambda name: keras.layers.Dense(  # noqa: E731
        hidden_size, use_bias=False, kernel_initializer=fresh(init), dtype=self.dtype_policy,
        name=name)
    self.q_dense, self.k_dense, self.v_dense = dense("q"), dense("k"), dense("v")
    self.output_dense = dense("output_transform")

  def build(self, memory_depth: int | None = None) -> None:
    if isinstance(memory_depth, int):  # (Keras's automatic build passes an input shape)
      self.memory_depth = memory_depth
    self.q_dense.build((None, self.hidden_size))
    self.k_dense.build((None, self.memory_depth))
    self.v_dense.build((None, self.memory_depth))
    self.output_dense.build((None, self.hidden_size))
    self.built = True

  def _split(self, x: tf.Tensor) -> tf.Tensor:
    """[B, T, hidden] -> [B, heads, T, depth]."""
    batch, length = tf.shape(x)[0], tf.shape(x)[1]
    x = tf.reshape(x, [batch, length, self.num_heads, self.depth])
    return tf.transpose(x, [0, 2, 1, 3])

  def memory_kv(self, memory: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Keys and values [B, heads, S, depth] of the encoder outputs (once per sequence)."""
    memory = tf.cast(memory, self.compute_dtype)
    return self._split(self.k_dense(memory)), self._split(self.v_dense(memory))

  def call(self, x: tf.Tensor, memory_kv: tuple[tf.Tensor, tf.Tensor], allowed: tf.Tensor,
           training: bool | None = None) -> tuple[tf.Tensor, tf.Tensor]:
    """Queries [B, T, hidden]; ``allowed``: bool broadcastable to [B, heads, T, S].

    Returns the output [B, T, hidden] and the float32 weights [B, heads, T, S].
    """
    k, v = memory_kv
    q = self._split(self.q_dense(x)) * tf.cast(self.depth ** -0.5, self.compute_dtype)
    logits = tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32)
    weights = tf.nn.softmax(tf.where(allowed, logits, MASKED), axis=-1)
    attended = weights
    if training and self.attention_dropout > 0:
      attended = tf.nn.dropout(weights, rate=self.attention_dropout)
    out = tf.matmul(tf.cast(attended, v.dtype), v)  # [B, heads, T, depth]
    batch, length = tf.shape(out)[0], tf.shape(out)[2]
    out = tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [batch, length, self.hidden_size])
    return self.output_dense(out), weights


class AttentionBlock(keras.layers.Layer):
  """One Centaur decoder block (see the module docstring).

  Args:
    hidden_size, n_heads, memory_depth: the attention's sizes (the memory's depth may
      instead be given to :meth:`build`).
    attention_dropout: dropout on the attention weights.
    layer_postprocess_dropout: dropout on each sublayer's output before its residual.
    conv_params: a validated causal ``conv_layers`` entry (None: no convolution).
    cnn_dropout_prob: dropout of the convolution block.
    bn_momentum, bn_epsilon: its batch norm (OpenSeq2Seq fixed them at 0.95 and 1e-8).
    kernel_initializer: initializer of the kernels.
  """

  def __init__(self, hidden_size: int, n_heads: int, memory_depth: int | None = None,
               attention_dropout: float = 0.0, layer_postprocess_dropout: float = 0.0,
               conv_params: dict | None = None, cnn_dropout_prob: float = 0.0,
               bn_momentum: float = 0.95, bn_epsilon: float = 1e-8,
               kernel_initializer: Any = None, **kwargs: Any):
    super().__init__(**kwargs)
    policy = self.dtype_policy
    init = kernel_initializer or "glorot_uniform"
    self.hidden_size = hidden_size
    self.conv = None
    if conv_params:
      self.conv = ConvBlock(conv_params["num_channels"], conv_params["kernel_size"][0],
                            hidden_size, conv_params["activation_fn"], cnn_dropout_prob,
                            bn_momentum, bn_epsilon, conv_params["is_residual"],
                            conv_params["is_causal"], init, dtype=policy, name="conv")
    self.attention_norm = keras.layers.LayerNormalization(epsilon=1e-6, dtype=policy,
                                                          name="attention_norm")
    self.attention = CentaurAttention(hidden_size, n_heads, memory_depth, attention_dropout,
                                      init, dtype=policy, name="attention")
    self.feed_forward_norm = keras.layers.LayerNormalization(epsilon=1e-6, dtype=policy,
                                                             name="feed_forward_norm")
    self.feed_forward = keras.layers.Dense(hidden_size, kernel_initializer=fresh(init),
                                           dtype=policy, name="feed_forward")
    self.rate = layer_postprocess_dropout

  def build(self, memory_depth: int | None = None) -> None:
    if self.conv is not None:
      self.conv.build()
    for norm in (self.attention_norm, self.feed_forward_norm):
      norm.build((None, self.hidden_size))
    self.attention.build(memory_depth)
    self.feed_forward.build((None, self.hidden_size))
    self.built = True

  def _dropout(self, x: tf.Tensor, training: bool | None) -> tf.Tensor:
    return tf.nn.dropout(x, rate=self.rate) if training and self.rate > 0 else x

  def _sublayers(self, y: tf.Tensor, memory_kv: tuple, allowed: tf.Tensor,
                 training: bool | None) -> tuple[tf.Tensor, tf.Tensor]:
    attended, weights = self.attention(self.attention_norm(y), memory_kv, allowed,
                                       training=training)
    y = y + self._dropout(tf.cast(attended, y.dtype), training)
    y = y + self._dropout(tf.cast(self.feed_forward(self.feed_forward_norm(y)), y.dtype),
                          training)
    return y, weights

  def call(self, x: tf.Tensor, lengths: tf.Tensor, memory_kv: tuple, allowed: tf.Tensor,
           training: bool | None = None) -> tuple[tf.Tensor, tf.Tensor]:
    """A whole sequence [B, T, hidden] (``lengths`` in frames, for the convolution):
    (output [B, T, hidden], float32 weights [B, heads, T, S])."""
    y = self.conv(x, lengths, training=training) if self.conv is not None else x
    return self._sublayers(y, memory_kv, allowed, training)

  def initial_buffer(self, batch: Any, dtype: Any) -> tf.Tensor:
    if self.conv is None:
      return tf.zeros([batch, 0, self.hidden_size], dtype)
    return self.conv.initial_buffer(batch, dtype)

  def step(self, x: tf.Tensor, buffer: tf.Tensor, memory_kv: tuple, allowed: tf.Tensor
           ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """One frame [B, hidden] (inference): (output [B, hidden], float32 weights [B, heads,
    S], new convolution buffer)."""
    y = x
    if self.conv is not None:
      y, buffer = self.conv.step(x, buffer)
    y, weights = self._sublayers(y[:, None, :], memory_kv, allowed, training=False)
    return y[:, 0], weights[:, :, 0], buffer
