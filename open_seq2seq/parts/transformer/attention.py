"""Multi-head scaled dot-product attention (self- and encoder-decoder attention).

Layout: heads are split once into ``[batch, heads, time, depth]`` so both attention
matmuls are plain batched matmuls. Self-attention projects queries, keys and values with one
fused Dense (one matmul instead of three); encoder-decoder attention fuses keys and values.
Logits are computed in the compute dtype, then the bias is added and the softmax taken in
float32 (half-precision softmax loses the small probabilities and overflows on masks).

Self-attention can add relative position representations (Shaw et al., 2018, as OpenNMT-tf's
``maximum_relative_position``): with ``max_relative_positions`` K > 0, position i's query also
meets a learned key vector for the distance j - i of each key j, clipped to [-K, K], and its
output adds the attention-weighted learned value vectors of those distances. The two tables
(``relative_position_keys``/``_values``, [2K + 1, depth]) are shared by the heads.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.parts.dropout import dropout, dropout_seed_generator


class _AttentionBase(keras.layers.Layer):
  """Shared head splitting, attention core and output projection."""

  def __init__(self, hidden_size: int, num_heads: int, attention_dropout: float = 0.0,
               kernel_initializer: Any = "glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    if hidden_size % num_heads:
      raise ValueError(f"hidden_size {hidden_size} is not a multiple of num_heads {num_heads}")
    self.hidden_size = hidden_size
    self.num_heads = num_heads
    self.depth = hidden_size // num_heads
    self.attention_dropout = attention_dropout
    self.kernel_initializer = kernel_initializer
    self.output_dense = self._dense(hidden_size, "output_transform")

  def _dense(self, units: int, name: str) -> keras.layers.Dense:
    return keras.layers.Dense(units, use_bias=False, kernel_initializer=self.kernel_initializer,
                              dtype=self.dtype_policy, name=name)

  def build(self, input_shape=None):
    # Shapes are known from the config: building eagerly (inside the parent's build, so
    # variable paths nest) means no variable is ever created inside a traced while_loop.
    for layer in self._projections():
      layer.build((None, self.hidden_size))
    self.seed_generator = dropout_seed_generator(self.attention_dropout)

  def _projections(self) -> list[keras.layers.Dense]:
    raise NotImplementedError

  def _split_heads(self, x: tf.Tensor, parts: int) -> tf.Tensor:
    """[batch, time, parts * hidden] -> [parts, batch, heads, time, depth] (one transpose)."""
    batch, length = tf.shape(x)[0], tf.shape(x)[1]
    x = tf.reshape(x, [batch, length, parts, self.num_heads, self.depth])
    return tf.transpose(x, [2, 0, 3, 1, 4])

  def _attend(self, q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, bias: tf.Tensor | None,
              training: bool | None) -> tf.Tensor:
    """q [B,N,Tq,D], k/v [B,N,Tk,D], bias broadcastable to [B,N,Tq,Tk] -> [B,Tq,H]."""
    q = q * tf.cast(self.depth ** -0.5, q.dtype)
    logits = tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32)
    if bias is not None:
      logits += tf.cast(bias, tf.float32)
    out = tf.matmul(self._weights(logits, v.dtype, training), v)
    return self._output(out)

  def _weights(self, logits: tf.Tensor, dtype: Any, training: bool | None) -> tf.Tensor:
    weights = tf.cast(tf.nn.softmax(logits), dtype)
    return dropout(weights, self.attention_dropout, training, self.seed_generator)

  def _output(self, out: tf.Tensor) -> tf.Tensor:
    """Heads [B, N, Tq, D] -> merged and projected [B, Tq, H]."""
    batch, length = tf.shape(out)[0], tf.shape(out)[2]
    out = tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [batch, length, self.hidden_size])
    return self.output_dense(out)


def relative_indices(query_positions: tf.Tensor, key_length: Any, max_distance: int
                     ) -> tf.Tensor:
  """Rows of the relative tables, int32 [queries, key_length]: clip(j - i, -K, K) + K for the
  query positions i and every key position j."""
  distance = tf.range(key_length)[None, :] - query_positions[:, None]
  return tf.clip_by_value(distance, -max_distance, max_distance) + max_distance


class SelfAttention(_AttentionBase):
  """Multi-head self-attention, with a key/value cache for incremental decoding.

  Call ``layer(x, bias, training=...)`` -> ``[batch, time, hidden]``; with ``cache``, a
  :class:`~open_seq2seq.parts.transformer.kv_store.StepCache` and ``x`` the one position
  being decoded (no bias: it may see every earlier position), it returns
  ``(outputs, next_cache)``: the position's keys and values are stored and it attends to
  every position decoded so far.
  """

  def __init__(self, hidden_size: int, num_heads: int, attention_dropout: float = 0.0,
               kernel_initializer: Any = "glorot_uniform", max_relative_positions: int = 0,
               **kwargs):
    super().__init__(hidden_size, num_heads, attention_dropout, kernel_initializer, **kwargs)
    self.qkv_dense = self._dense(3 * hidden_size, "qkv_transform")
    self.max_relative_positions = max_relative_positions

  def _projections(self) -> list[keras.layers.Dense]:
    return [self.qkv_dense, self.output_dense]

  def build(self, input_shape=None):
    super().build(input_shape)
    if self.max_relative_positions > 0:
      shape = (2 * self.max_relative_positions + 1, self.depth)
      self.relative_keys = self.add_weight(shape=shape, name="relative_position_keys",
                                           initializer=self.kernel_initializer)
      self.relative_values = self.add_weight(shape=shape, name="relative_position_values",
                                             initializer=self.kernel_initializer)

  def _relative(self, indices: tf.Tensor, dtype: Any) -> tuple[tf.Tensor, tf.Tensor]:
    """Key and value vectors [*indices.shape, depth] of the relative distances."""
    return (tf.gather(tf.cast(self.relative_keys, dtype), indices),
            tf.gather(tf.cast(self.relative_values, dtype), indices))

  def _attend_relative(self, q: tf.Tensor, k: tf.Tensor, v: tf.Tensor,
                       bias: tf.Tensor | None, training: bool | None) -> tf.Tensor:
    """:meth:`_attend` with the relative terms of every query i against every key j."""
    length = tf.shape(q)[2]
    rel_k, rel_v = self._relative(
        relative_indices(tf.range(length), length, self.max_relative_positions), q.dtype)
    q = q * tf.cast(self.depth ** -0.5, q.dtype)
    logits = tf.matmul(q, k, transpose_b=True) + tf.einsum("bnid,ijd->bnij", q, rel_k)
    logits = tf.cast(logits, tf.float32)
    if bias is not None:
      logits += tf.cast(bias, tf.float32)
    weights = self._weights(logits, v.dtype, training)
    return self._output(tf.matmul(weights, v) + tf.einsum("bnij,ijd->bnid", weights, rel_v))

  def call(self, x: tf.Tensor, bias: tf.Tensor | None = None, cache: Any = None,
           training: bool | None = None):
    q, k, v = tf.unstack(self._split_heads(self.qkv_dense(x), 3))
    relative = self.max_relative_positions > 0
    if cache is None:
      if relative:
        return self._attend_relative(q, k, v, bias, training)
      return self._attend(q, k, v, bias, training)
    if bias is not None:
      raise ValueError("SelfAttention: a cached step attends to every earlier position and "
                       "takes no bias")
    # The history's keys and values were read before this position's were computed (the
    # reads need not wait for this step's projections): the position attends to them and
    # to itself, one softmax over both.
    k_history, v_history, cache = cache.append(k, v)
    q = q * tf.cast(self.depth ** -0.5, q.dtype)
    history = tf.matmul(q, k_history, transpose_b=True)
    current = tf.reduce_sum(q * k, -1, keepdims=True)
    if relative:  # the position is cache.step; its keys lie at distances -step ... 0
      rel_k, rel_v = self._relative(relative_indices(
          tf.reshape(cache.step, [1]), cache.step + 1, self.max_relative_positions)[0], q.dtype)
      history += tf.einsum("bnid,jd->bnij", q, rel_k[:-1])
      current += tf.reduce_sum(q * rel_k[-1], -1, keepdims=True)
    logits = tf.cast(tf.concat([history, current], -1), tf.float32)
    weights = self._weights(logits, v.dtype, training)
    out = tf.matmul(weights[..., :-1], v_history) + weights[..., -1:] * v
    if relative:
      out += tf.einsum("bnij,jd->bnid", weights, rel_v)
    return self._output(out), cache


class Attention(_AttentionBase):
  """Multi-head attention of queries ``x`` over a memory (encoder outputs).

  Call ``layer(x, memory, bias, training=...)``. For decoding, :meth:`memory_kv` computes
  the memory's keys and values once; pass them as ``memory_kv`` instead of ``memory``.
  """

  def __init__(self, hidden_size: int, num_heads: int, attention_dropout: float = 0.0,
               kernel_initializer: Any = "glorot_uniform", **kwargs):
    super().__init__(hidden_size, num_heads, attention_dropout, kernel_initializer, **kwargs)
    self.q_dense = self._dense(hidden_size, "q_transform")
    self.kv_dense = self._dense(2 * hidden_size, "kv_transform")

  def _projections(self) -> list[keras.layers.Dense]:
    return [self.q_dense, self.kv_dense, self.output_dense]

  def memory_kv(self, memory: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Keys and values [batch, heads, memory_time, depth] of ``memory``."""
    memory = tf.cast(memory, self.compute_dtype)
    k, v = tf.unstack(self._split_heads(self.kv_dense(memory), 2))
    return k, v

  def call(self, x: tf.Tensor, memory: tf.Tensor | None = None, bias: tf.Tensor | None = None,
           memory_kv: tuple | None = None, training: bool | None = None) -> tf.Tensor:
    k, v = memory_kv if memory_kv is not None else self.memory_kv(memory)
    q = self._split_heads(self.q_dense(x), 1)[0]
    return self._attend(q, k, v, bias, training)
