"""The Conformer block (Gulati et al. 2020, section 2 and figures 1-4) and its modules.

One block, on frames x [B, T, d_model] (every sub-module pre-normed, with a residual):

    x = x + 1/2 * Dropout(FFN(LayerNorm(x)))          macaron half-step feed-forward
    x = x + Dropout(MHSA(LayerNorm(x), rel. positions))
    x = x + Dropout(Conv(LayerNorm(x)))
    x = x + 1/2 * Dropout(FFN(LayerNorm(x)))
    x = LayerNorm(x)

* FFN: Linear(d, e * d) -> Swish -> Dropout -> Linear(e * d, d) (expansion e = 4).
* Conv: pointwise conv to 2d channels -> GLU -> depthwise conv (kernel k, "same", or causal:
  k - 1 frames of zeros on the left and none on the right, so frame t sees t-k+1 ... t;
  frames past each length zeroed first) -> BatchNorm (statistics over real frames only) or
  LayerNorm -> Swish -> pointwise conv to d.
* MHSA: :class:`~open_seq2seq.parts.conformer.attention.RelPositionMultiHeadAttention`.

The residual dropouts, the order of the modules and the final norm are as in NeMo's
``ConformerLayer``; pointwise convs are Dense layers (the same map on [B, T, C]).

Streaming (``stream`` methods, inference only): a chunk of frames runs through the block
with the attention's cached keys and values of earlier frames and the causal conv's last
``k - 1`` inputs, and returns the updated caches; every other part works frame by frame
(batch norm with its frozen statistics included).
Stochastic depth (Huang et al. 2016, as NeMo applies it to Conformer layers) is the
encoder's: :func:`stochastic_depth_probs` gives each block's drop probability.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.parts.conformer.attention import RelPositionMultiHeadAttention
from open_seq2seq.parts.dropout import dropout, dropout_seed_generator

CONV_NORMS = ("batch_norm", "layer_norm")
#: torch.nn.LayerNorm's epsilon, which NeMo's and ESPnet's Conformers use.
LAYER_NORM_EPSILON = 1e-5


def stochastic_depth_probs(num_layers: int, drop_prob: float, mode: str = "linear",
                           start_layer: int = 1) -> list[float]:
  """Drop probability of each block: 0 for the first ``start_layer`` blocks, then either
  rising linearly to ``drop_prob`` at the last block (``linear``: block ``start_layer + l``
  gets ``l / (num_layers - start_layer) * drop_prob``) or ``drop_prob`` for each
  (``uniform``). NeMo's ``compute_stochastic_depth_drop_probs``."""
  if not 0.0 <= drop_prob < 1.0:
    raise ValueError(f"stochastic depth drop probability {drop_prob} is not in [0, 1)")
  if not 1 <= start_layer <= num_layers:
    raise ValueError(f"stochastic depth start layer {start_layer} is not in [1, {num_layers}]")
  rest = num_layers - start_layer
  if mode == "linear":
    tail = [l / rest * drop_prob for l in range(1, rest + 1)]
  elif mode == "uniform":
    tail = [drop_prob] * rest
  else:
    raise ValueError(f"stochastic depth mode {mode!r} is not 'linear' or 'uniform'")
  return [0.0] * start_layer + tail


def _layer_norm(name: str, policy: Any) -> keras.layers.LayerNormalization:
  return keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, dtype=policy, name=name)


class ConformerFeedForward(keras.layers.Layer):
  """Linear -> Swish -> Dropout -> Linear, on each frame."""

  def __init__(self, d_model: int, inner: int, dropout_rate: float = 0.0,
               use_bias: bool = True, kernel_initializer: Any = "glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.d_model, self.inner, self.dropout_rate = d_model, inner, dropout_rate
    dense = dict(use_bias=use_bias, kernel_initializer=kernel_initializer,
                 dtype=self.dtype_policy)
    self.inner_dense = keras.layers.Dense(inner, name="linear1", **dense)
    self.output_dense = keras.layers.Dense(d_model, name="linear2", **dense)

  def build(self, input_shape=None):
    self.inner_dense.build((None, self.d_model))
    self.output_dense.build((None, self.inner))
    self.seed_generator = dropout_seed_generator(self.dropout_rate)

  def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    hidden = tf.nn.silu(self.inner_dense(x))
    hidden = dropout(hidden, self.dropout_rate, training, self.seed_generator)
    return self.output_dense(hidden)


class ConformerConvolution(keras.layers.Layer):
  """Pointwise -> GLU -> depthwise (masked input) -> BatchNorm/LayerNorm -> Swish -> pointwise.

  ``call(x, mask, training)``: ``mask`` bool [B, T], True on real frames: padded frames are
  zeroed before the depthwise conv and left out of batch-norm statistics. ``causal``: the
  depthwise conv sees the current and the ``kernel_size - 1`` previous frames only.
  """

  def __init__(self, d_model: int, kernel_size: int, norm_type: str = "batch_norm",
               bn_momentum: float = 0.9, bn_epsilon: float = 1e-5, use_bias: bool = True,
               kernel_initializer: Any = "glorot_uniform", causal: bool = False, **kwargs):
    super().__init__(**kwargs)
    if kernel_size % 2 == 0 and not causal:
      raise ValueError(f"conv kernel size {kernel_size} is even: a centred ('same') "
                       "depthwise conv needs an odd one")
    if norm_type not in CONV_NORMS:
      raise ValueError(f"conv norm {norm_type!r} is not one of {', '.join(CONV_NORMS)}")
    self.d_model, self.kernel_size, self.norm_type = d_model, kernel_size, norm_type
    self.causal = causal
    # zeros before / after each utterance: what the depthwise conv reads past its ends
    self.left_pad = kernel_size - 1 if causal else (kernel_size - 1) // 2
    self.right_pad = kernel_size - 1 - self.left_pad
    policy = self.dtype_policy
    self.pointwise1 = keras.layers.Dense(2 * d_model, use_bias=use_bias, dtype=policy,
                                         kernel_initializer=kernel_initializer,
                                         name="pointwise1")
    self.depthwise = keras.layers.DepthwiseConv1D(
        kernel_size, padding="valid", use_bias=use_bias, dtype=policy,
        depthwise_initializer=kernel_initializer, name="depthwise")
    if norm_type == "batch_norm":
      self.norm = keras.layers.BatchNormalization(momentum=bn_momentum, epsilon=bn_epsilon,
                                                  dtype=policy, name="batch_norm")
    else:
      self.norm = _layer_norm("layer_norm", policy)
    self.pointwise2 = keras.layers.Dense(d_model, use_bias=use_bias, dtype=policy,
                                         kernel_initializer=kernel_initializer,
                                         name="pointwise2")

  def build(self, input_shape=None):
    self.pointwise1.build((None, self.d_model))
    self.depthwise.build((None, None, self.d_model))
    self.norm.build((None, None, self.d_model))
    self.pointwise2.build((None, self.d_model))

  def _gated(self, x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    content, gate = tf.split(self.pointwise1(x), 2, axis=-1)
    y = content * tf.sigmoid(gate)  # GLU over the channels
    return y * tf.cast(mask, y.dtype)[:, :, None]

  def _finish(self, y: tf.Tensor, mask: tf.Tensor, dtype: Any, training: bool | None
              ) -> tf.Tensor:
    if self.norm_type == "batch_norm":
      y = self.norm(y, training=training, mask=mask)
    else:
      y = self.norm(y)
    return self.pointwise2(tf.nn.silu(tf.cast(y, dtype)))

  def call(self, x: tf.Tensor, mask: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    y = tf.pad(self._gated(x, mask), [[0, 0], [self.left_pad, self.right_pad], [0, 0]])
    return self._finish(self.depthwise(y), mask, x.dtype, training)

  def stream(self, x: tf.Tensor, mask: tf.Tensor, cache: tf.Tensor
             ) -> tuple[tf.Tensor, tf.Tensor]:
    """Inference on a chunk of a causal conv: ``cache`` [B, kernel_size - 1, d_model] holds
    the depthwise conv's (masked) inputs of the frames before ``x``; returns the output and
    the cache for the next chunk."""
    y = tf.concat([cache, self._gated(x, mask)], axis=1)
    return (self._finish(self.depthwise(y), mask, x.dtype, False),
            y[:, tf.shape(x)[1]:])


class ConformerBlock(keras.layers.Layer):
  """One Conformer block (see the module docstring).

  ``call(x, positions, mask, bias, training)``: ``positions`` the relative encodings of the
  batch's length, ``mask`` bool [B, T] (True on real frames), ``bias`` the attention's
  additive padding bias.
  """

  def __init__(self, d_model: int, num_heads: int, ff_expansion_factor: int = 4,
               conv_kernel_size: int = 31, conv_norm_type: str = "batch_norm",
               dropout_rate: float = 0.1, attention_dropout: float = 0.1,
               bn_momentum: float = 0.9, bn_epsilon: float = 1e-5, use_bias: bool = True,
               kernel_initializer: Any = "glorot_uniform", conv_causal: bool = False,
               **kwargs):
    super().__init__(**kwargs)
    policy = self.dtype_policy
    self.d_model, self.dropout_rate = d_model, dropout_rate
    ffn = dict(d_model=d_model, inner=ff_expansion_factor * d_model, dropout_rate=dropout_rate,
               use_bias=use_bias, kernel_initializer=kernel_initializer, dtype=policy)
    self.ff1_norm = _layer_norm("ff1_norm", policy)
    self.ff1 = ConformerFeedForward(**ffn, name="ff1")
    self.attention_norm = _layer_norm("attention_norm", policy)
    self.attention = RelPositionMultiHeadAttention(
        d_model, num_heads, attention_dropout, use_bias=use_bias,
        kernel_initializer=kernel_initializer, dtype=policy, name="self_attention")
    self.conv_norm = _layer_norm("conv_norm", policy)
    self.conv = ConformerConvolution(
        d_model, conv_kernel_size, conv_norm_type, bn_momentum, bn_epsilon, use_bias=use_bias,
        kernel_initializer=kernel_initializer, causal=conv_causal, dtype=policy, name="conv")
    self.ff2_norm = _layer_norm("ff2_norm", policy)
    self.ff2 = ConformerFeedForward(**ffn, name="ff2")
    self.output_norm = _layer_norm("output_norm", policy)

  def build(self, input_shape=None):
    for norm in (self.ff1_norm, self.attention_norm, self.conv_norm, self.ff2_norm,
                 self.output_norm):
      norm.build((None, self.d_model))
    for layer in (self.ff1, self.attention, self.conv, self.ff2):
      layer.build()
    self.seed_generator = dropout_seed_generator(self.dropout_rate)

  def _drop(self, x: tf.Tensor, training: bool | None) -> tf.Tensor:
    return dropout(x, self.dropout_rate, training, self.seed_generator)

  def call(self, x: tf.Tensor, positions: tf.Tensor, mask: tf.Tensor,
           bias: tf.Tensor | None = None, training: bool | None = None) -> tf.Tensor:
    half = tf.constant(0.5, x.dtype)
    x = x + half * self._drop(self.ff1(self.ff1_norm(x), training=training), training)
    y = self.attention(self.attention_norm(x), positions, bias, training=training)
    x = x + self._drop(y, training)
    y = self.conv(self.conv_norm(x), mask, training=training)
    x = x + self._drop(y, training)
    x = x + half * self._drop(self.ff2(self.ff2_norm(x), training=training), training)
    return self.output_norm(x)

  def stream(self, x: tf.Tensor, positions: tf.Tensor, mask: tf.Tensor, bias: tf.Tensor,
             cache: dict[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """Inference on a chunk (module doc). ``cache``: ``keys``, ``values`` (the attention's,
    see :meth:`RelPositionMultiHeadAttention.stream`) and ``conv`` (see
    :meth:`ConformerConvolution.stream`); ``positions`` and ``bias`` cover the cached and the
    chunk's frames. Returns the output and the new cache."""
    half = tf.constant(0.5, x.dtype)
    x = x + half * self.ff1(self.ff1_norm(x), training=False)
    y, keys, values = self.attention.stream(self.attention_norm(x), positions, bias,
                                            cache["keys"], cache["values"])
    x = x + y
    y, conv = self.conv.stream(self.conv_norm(x), mask, cache["conv"])
    x = x + y
    x = x + half * self.ff2(self.ff2_norm(x), training=False)
    return self.output_norm(x), {"keys": keys, "values": values, "conv": conv}
