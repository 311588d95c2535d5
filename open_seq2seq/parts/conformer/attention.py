"""Multi-head self-attention with Transformer-XL relative positions, as the Conformer uses it.

Definitions (Dai et al. 2019, section 3.3 and appendix B; Gulati et al. 2020, section 2.1;
the same as ESPnet's and NeMo's ``RelPositionMultiHeadAttention``):

* ``R[r]`` is a sinusoidal encoding of the relative distance ``r = i - j`` between query
  frame ``i`` and key frame ``j``, for ``r = T-1, T-2, ..., -(T-1)`` (2T - 1 rows);
* the score of query ``i`` on key ``j``, per head, is
  ``((q_i + u) . k_j + (q_i + v) . (W_pos R[i - j])) / sqrt(d_k)``
  with learned ``u`` (``pos_bias_u``) and ``v`` (``pos_bias_v``) per head and ``W_pos`` a
  bias-free projection shared by the heads;
* the position term is computed for every (i, r) pair with one matmul and moved to (i, j)
  by :func:`rel_shift` (pad one zero column, reshape, drop a row), not gathered.

Scores depend on ``i - j`` only, so a padded batch gives each utterance the scores it gets
alone; padded keys get a large negative bias. Streaming
(:meth:`RelPositionMultiHeadAttention.stream`) prepends cached keys and values of ``M``
earlier frames (Transformer-XL's memory): the encoding then covers distances
``M+T-1, ..., -(T-1)`` and :func:`rel_shift` keeps ``M + T`` key columns.

Logits are taken in the compute dtype with the scale folded into the queries, then the bias
is added and the softmax taken in float32 (as :mod:`open_seq2seq.parts.transformer.attention`
does: a half-precision softmax loses the small probabilities and overflows on masks).
"""

from __future__ import annotations

import math
from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.parts.dropout import dropout, dropout_seed_generator


def relative_position_encoding(length: Any, depth: int, memory: Any = 0) -> tf.Tensor:
  """Float32 [2 * length + memory - 1, depth]: row ``k`` encodes the distance
  ``length + memory - 1 - k``, for ``length`` queries over ``memory + length`` keys (the
  queries are the last ``length`` keys).

  Transformer-XL's sinusoids: ``[sin(r * w), cos(r * w)]`` (concatenated halves) with
  ``w_i = 10000 ** (-2 i / depth)``, ``i < depth // 2`` (a zero column pads an odd depth).
  """
  distances = tf.cast(tf.range(length + memory - 1, -length, -1), tf.float32)
  half = depth // 2
  inv_freq = tf.exp(tf.range(half, dtype=tf.float32) * (-2.0 * math.log(10000.0) / depth))
  angles = distances[:, None] * inv_freq[None, :]
  encoding = tf.concat([tf.sin(angles), tf.cos(angles)], axis=1)
  if depth % 2:
    encoding = tf.pad(encoding, [[0, 0], [0, 1]])
  return encoding


def rel_shift(scores: tf.Tensor) -> tf.Tensor:
  """[..., T, P] scores by (query i, position row k) -> [..., T, K] by (query i, key j), with
  K = P - T + 1 keys of which the queries are the last T (P = 2T - 1 without a memory).

  Row ``k`` holds distance ``K-1-k`` and query ``i`` is key ``K-T+i``, so the (i, j) entry is
  the input's (i, T-1-i+j). One zero column on the left, then a reshape to [P+1, T] and
  dropping the first row shifts row i left by T-1-i; reshaped back, the first K columns are
  the answer (Transformer-XL's trick).
  """
  shape = tf.shape(scores)
  length, positions = shape[-2], shape[-1]
  lead = shape[:-2]
  padded = tf.pad(scores, [[0, 0]] * (len(scores.shape) - 1) + [[1, 0]])
  padded = tf.reshape(padded, tf.concat([lead, [positions + 1, length]], 0))
  shifted = tf.reshape(padded[..., 1:, :], tf.concat([lead, [length, positions]], 0))
  return shifted[..., :positions - length + 1]


class RelPositionMultiHeadAttention(keras.layers.Layer):
  """Self-attention with relative positional scores (see the module docstring).

  ``call(x, positions, bias, training)``: ``x`` [B, T, d_model]; ``positions`` the
  :func:`relative_position_encoding` of T in the compute dtype [2T-1, d_model]; ``bias``
  additive float32, broadcastable to [B, heads, T, T] (padded keys). Returns [B, T, d_model].
  """

  def __init__(self, d_model: int, num_heads: int, attention_dropout: float = 0.0,
               use_bias: bool = True, kernel_initializer: Any = "glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    if d_model % num_heads:
      raise ValueError(f"d_model {d_model} is not a multiple of num_heads {num_heads}")
    self.d_model, self.num_heads = d_model, num_heads
    self.depth = d_model // num_heads
    self.attention_dropout = attention_dropout
    dense = dict(kernel_initializer=kernel_initializer, dtype=self.dtype_policy)
    self.qkv_dense = keras.layers.Dense(3 * d_model, use_bias=use_bias, name="qkv", **dense)
    self.pos_dense = keras.layers.Dense(d_model, use_bias=False, name="pos", **dense)
    self.output_dense = keras.layers.Dense(d_model, use_bias=use_bias, name="output", **dense)

  def build(self, input_shape=None):
    for layer in (self.qkv_dense, self.pos_dense, self.output_dense):
      layer.build((None, self.d_model))
    # Zeros, as in NeMo and ESPnet: at the start only content decides. Named "*_bias": biases,
    # left out of weight regularization (utils/regularizers.is_regularized).
    self.pos_bias_u = self.add_weight(shape=(self.num_heads, self.depth), name="u_bias",
                                      initializer="zeros")
    self.pos_bias_v = self.add_weight(shape=(self.num_heads, self.depth), name="v_bias",
                                      initializer="zeros")
    self.seed_generator = dropout_seed_generator(self.attention_dropout)

  def _heads(self, x: tf.Tensor) -> tf.Tensor:
    """[B, T, d_model] -> [B, heads, T, depth]."""
    batch, length = tf.shape(x)[0], tf.shape(x)[1]
    x = tf.reshape(x, [batch, length, self.num_heads, self.depth])
    return tf.transpose(x, [0, 2, 1, 3])

  def _project(self, x: tf.Tensor, positions: tf.Tensor):
    q, k, v = tf.split(self.qkv_dense(x), 3, axis=-1)
    p = tf.reshape(self.pos_dense(positions), [-1, self.num_heads, self.depth])
    return self._heads(q), self._heads(k), self._heads(v), tf.transpose(p, [1, 0, 2])

  def _logits(self, q, k, p) -> tf.Tensor:
    """Scaled scores, float32 [B, heads, T, T], before any mask."""
    scale = tf.cast(self.depth ** -0.5, q.dtype)
    u = tf.cast(self.pos_bias_u, q.dtype)[None, :, None, :]
    v = tf.cast(self.pos_bias_v, q.dtype)[None, :, None, :]
    content = tf.matmul((q + u) * scale, k, transpose_b=True)
    position = rel_shift(tf.einsum("bhtd,hpd->bhtp", (q + v) * scale, p))
    return tf.cast(content, tf.float32) + tf.cast(position, tf.float32)

  def scores(self, x: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
    """The float32 scores [B, heads, T, T] the softmax sees, without the padding bias."""
    q, k, _, p = self._project(x, positions)
    return self._logits(q, k, p)

  def _attend(self, q, k, v, p, bias, training) -> tf.Tensor:
    """Output [B, T, d_model] of queries [B, heads, T, depth] over keys/values."""
    logits = self._logits(q, k, p)
    if bias is not None:
      logits += tf.cast(bias, tf.float32)
    weights = tf.cast(tf.nn.softmax(logits), v.dtype)
    weights = dropout(weights, self.attention_dropout, training, self.seed_generator)
    out = tf.transpose(tf.matmul(weights, v), [0, 2, 1, 3])
    out = tf.reshape(out, [tf.shape(q)[0], tf.shape(q)[2], self.d_model])
    return self.output_dense(out)

  def call(self, x: tf.Tensor, positions: tf.Tensor, bias: tf.Tensor | None = None,
           training: bool | None = None) -> tf.Tensor:
    q, k, v, p = self._project(x, positions)
    return self._attend(q, k, v, p, bias, training)

  def stream(self, x: tf.Tensor, positions: tf.Tensor, bias: tf.Tensor, keys: tf.Tensor,
             values: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Inference on a chunk ``x`` [B, T, d_model] after ``M`` cached frames.

    ``keys``/``values`` [B, heads, M, depth] are the earlier frames' projections,
    ``positions`` the :func:`relative_position_encoding` of T with memory M, ``bias``
    float32 broadcastable to [B, heads, T, M + T]. Returns the output and the caches of the
    last M of the M + T frames.
    """
    q, k, v, p = self._project(x, positions)
    k, v = tf.concat([keys, k], axis=2), tf.concat([values, v], axis=2)
    chunk = tf.shape(x)[1]
    return self._attend(q, k, v, p, bias, False), k[:, :, chunk:], v[:, :, chunk:]
