"""Convolution blocks over padded batches of sequences that never look at the padding.

Why a batch's padding cannot change an utterance's output here:

* every convolution's input is multiplied by the sequence mask first, so padded frames
  enter as zeros — exactly what an unpadded utterance sees past its end;
* "SAME" padding is explicit and fixed — ``(k - 1) * d // 2`` frames on the left — instead of
  TensorFlow's, whose left padding depends on the (batch-dependent) input length when the
  stride is above 1 and would shift the frame grid;
* batch normalization computes its training statistics over real frames only (Keras's
  ``mask`` argument), and uses moving averages at inference; instance normalization takes
  each utterance's statistics over its real frames only;
* lengths follow each layer: ``ceil(L / stride)`` for SAME, ``(L - span) // stride + 1``
  for VALID.
"""

from __future__ import annotations

from typing import Any, Callable

import keras
import tensorflow as tf

from open_seq2seq.errors import ConfigError

NORMALIZATIONS = (None, "batch_norm", "layer_norm", "instance_norm")


def sequence_mask(lengths: tf.Tensor, maxlen: tf.Tensor | int, dtype=tf.bool) -> tf.Tensor:
  return tf.sequence_mask(lengths, maxlen=maxlen, dtype=dtype)


def conv_output_lengths(lengths: tf.Tensor, kernel: int, stride: int, dilation: int,
                        padding: str) -> tf.Tensor:
  """Number of valid output frames of a conv over ``lengths`` valid input frames."""
  if padding == "SAME":
    return (lengths + stride - 1) // stride
  span = (kernel - 1) * dilation + 1
  return tf.maximum((lengths - span) // stride + 1, 0)


def check_padding(padding: str, where: str) -> str:
  padding = padding.upper()
  if padding not in ("SAME", "VALID"):
    raise ConfigError(f"{where}: padding must be 'SAME' or 'VALID', got {padding!r}")
  return padding


class MaskedConv1D(keras.layers.Layer):
  """``conv1d`` or ``sep_conv1d`` (depthwise + pointwise) on masked inputs.

  ``call(x, lengths)`` returns ``(y, new_lengths)``.
  """

  def __init__(self, layer_type: str, filters: int, kernel_size: int, stride: int = 1,
               dilation: int = 1, padding: str = "SAME", use_bias: bool = True,
               kernel_initializer: Any = None, **kwargs):
    super().__init__(**kwargs)
    if stride > 1 and dilation > 1:
      raise ConfigError(f"{self.name}: stride and dilation cannot both be above 1")
    self.kernel_size, self.stride, self.dilation = kernel_size, stride, dilation
    self.padding = padding
    common = dict(kernel_size=kernel_size, strides=stride, dilation_rate=dilation,
                  padding="valid", use_bias=use_bias, dtype=self.dtype_policy)
    if layer_type == "conv1d":
      self.conv = keras.layers.Conv1D(filters, kernel_initializer=kernel_initializer,
                                      name="conv", **common)
    elif layer_type == "sep_conv1d":
      self.conv = keras.layers.SeparableConv1D(
          filters, depthwise_initializer=kernel_initializer,
          pointwise_initializer=kernel_initializer, name="sep_conv", **common)
    else:
      raise ConfigError(f"{self.name}: layer type {layer_type!r} is not conv1d or sep_conv1d")

  def call(self, x: tf.Tensor, lengths: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    mask = sequence_mask(lengths, tf.shape(x)[1], x.dtype)
    x = x * mask[:, :, None]
    if self.padding == "SAME":
      total = (self.kernel_size - 1) * self.dilation
      x = tf.pad(x, [[0, 0], [total // 2, total - total // 2], [0, 0]])
    y = self.conv(x)
    return y, conv_output_lengths(lengths, self.kernel_size, self.stride, self.dilation,
                                  self.padding)


class MaskedInstanceNorm(keras.layers.Layer):
  """Instance norm over time: each sequence's channels normalised by their own mean and
  variance over its valid frames, then a learned per-channel scale and shift (as TF 1's
  ``tf.contrib.layers.instance_norm`` on [B, T, C], epsilon 1e-6, which saw no padding mask).
  """

  def __init__(self, epsilon: float = 1e-6, **kwargs):
    super().__init__(**kwargs)
    self.epsilon = epsilon

  def build(self, input_shape) -> None:
    channels = input_shape[-1]
    self.gamma = self.add_weight(shape=(channels,), name="gamma", initializer="ones")
    self.beta = self.add_weight(shape=(channels,), name="beta", initializer="zeros")
    self.built = True

  def call(self, x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    x32 = tf.cast(x, tf.float32)
    weights = tf.cast(mask, tf.float32)[:, :, None]  # [B, T, 1]
    count = tf.maximum(tf.reduce_sum(weights, axis=1, keepdims=True), 1.0)
    mean = tf.reduce_sum(x32 * weights, axis=1, keepdims=True) / count
    variance = tf.reduce_sum(tf.square(x32 - mean) * weights, axis=1, keepdims=True) / count
    y = (x32 - mean) * tf.math.rsqrt(variance + self.epsilon)
    y = y * tf.cast(self.gamma, tf.float32) + tf.cast(self.beta, tf.float32)
    return tf.cast(y, x.dtype)


class MaskedNorm(keras.layers.Layer):
  """Batch norm with statistics over valid frames only, layer norm, instance norm (over
  valid frames), or nothing."""

  def __init__(self, normalization: str | None, bn_momentum: float = 0.9,
               bn_epsilon: float = 1e-3, **kwargs):
    super().__init__(**kwargs)
    if normalization not in NORMALIZATIONS:
      raise ConfigError(f"normalization: {normalization!r} is not one of "
                        f"{', '.join(map(repr, NORMALIZATIONS))}")
    self.normalization = normalization
    if normalization == "batch_norm":
      self.norm = keras.layers.BatchNormalization(momentum=bn_momentum, epsilon=bn_epsilon,
                                                  dtype=self.dtype_policy, name="bn")
    elif normalization == "layer_norm":
      self.norm = keras.layers.LayerNormalization(epsilon=1e-5, dtype=self.dtype_policy,
                                                  name="ln")
    elif normalization == "instance_norm":
      self.norm = MaskedInstanceNorm(dtype=self.dtype_policy, name="in")

  def call(self, x: tf.Tensor, mask: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    if self.normalization == "batch_norm":
      return tf.cast(self.norm(x, training=training, mask=mask), x.dtype)
    if self.normalization == "layer_norm":
      return tf.cast(self.norm(x), x.dtype)
    if self.normalization == "instance_norm":
      return self.norm(x, mask)
    return x


class ConvBlock1D(keras.layers.Layer):
  """conv -> norm -> (+ residual projections) -> activation -> dropout.

  With ``residual``, each of the block inputs in ``call(..., residuals=[...])`` goes
  through its own 1x1 conv + norm and is added before the activation (Jasper; several
  inputs = dense residual). ``drop_block_prob`` drops the convolutional branch of a
  residual block for a whole batch with that probability in training (stochastic depth,
  rescaled so inference needs no change). A caller that draws its own decisions (seeded,
  or blockout at inference) passes ``branch_scale`` instead: the conv branch is multiplied
  by it (0 drops it) and ``drop_block_prob`` is not used.
  """

  def __init__(self, layer_type: str, filters: int, kernel_size: int, stride: int,
               dilation: int, padding: str, activation_fn: Callable, normalization: str | None,
               bn_momentum: float, bn_epsilon: float, dropout_rate: float,
               kernel_initializer: Any, num_residuals: int = 0,
               drop_block_prob: float = 0.0, **kwargs):
    super().__init__(**kwargs)
    policy = self.dtype_policy
    self.conv = MaskedConv1D(layer_type, filters, kernel_size, stride, dilation, padding,
                             use_bias=normalization is None,
                             kernel_initializer=kernel_initializer, dtype=policy, name="conv")
    self.norm = MaskedNorm(normalization, bn_momentum, bn_epsilon, dtype=policy, name="norm")
    self.res_convs = [MaskedConv1D("conv1d", filters, 1, use_bias=normalization is None,
                                   kernel_initializer=kernel_initializer, dtype=policy,
                                   name=f"res_conv{i}") for i in range(num_residuals)]
    self.res_norms = [MaskedNorm(normalization, bn_momentum, bn_epsilon, dtype=policy,
                                 name=f"res_norm{i}") for i in range(num_residuals)]
    self.activation_fn = activation_fn
    self.dropout = keras.layers.Dropout(dropout_rate, dtype=policy) if dropout_rate > 0 else None
    self.drop_block_prob = drop_block_prob

  def call(self, x: tf.Tensor, lengths: tf.Tensor, residuals: list | None = None,
           training: bool | None = None, branch_scale: tf.Tensor | None = None
           ) -> tuple[tf.Tensor, tf.Tensor]:
    y, lengths = self.conv(x, lengths)
    mask = sequence_mask(lengths, tf.shape(y)[1])
    y = self.norm(y, mask, training=training)
    if self.res_convs:
      if branch_scale is not None:
        y = y * tf.cast(branch_scale, y.dtype)
      elif training and self.drop_block_prob > 0:
        keep = tf.cast(tf.random.uniform([]) >= self.drop_block_prob, y.dtype)
        y = y * keep / (1.0 - self.drop_block_prob)
      for res, conv, norm in zip(residuals, self.res_convs, self.res_norms):
        r, _ = conv(res, lengths)
        y = y + norm(r, mask, training=training)
    y = self.activation_fn(y)
    if self.dropout is not None:
      y = self.dropout(y, training=training)
    return y, lengths
