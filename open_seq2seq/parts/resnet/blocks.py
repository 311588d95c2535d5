"""ResNet building blocks (He et al. 2015 v1, 2016 v2) in the TF-official models' style.

* Convolutions have no bias; a strided convolution pads explicitly by ``kernel - 1`` (half
  before, half after) and then runs VALID, so its output never depends on the input size
  being even ("fixed padding").
* v1 blocks: conv -> BN -> ReLU ..., BN on the projection shortcut, ReLU after the sum.
* v2 blocks (pre-activation): BN -> ReLU -> conv ..., the projection shortcut reads the
  pre-activated input, nothing after the sum.
* A basic block is two 3x3 convolutions; a bottleneck block is 1x1 (``filters``) -> 3x3
  (``filters``, strided) -> 1x1 (``4 * filters``).

The first block of a stage projects its shortcut with a strided 1x1 convolution when the
shape changes (stride > 1 or a new number of channels) and keeps the identity otherwise.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.parts.cnns.data_format import channel_axis
from open_seq2seq.utils.initializers import fresh

#: Output channels of a bottleneck block per ``filters``.
BOTTLENECK_EXPANSION = 4


class FixedPaddingConv2D(keras.layers.Layer):
  """A bias-free convolution; strided ones pad explicitly and run VALID."""

  def __init__(self, filters: int, kernel_size: int, strides: int, data_format: str,
               kernel_initializer: Any, **kwargs):
    super().__init__(**kwargs)
    self.kernel_size, self.strides, self.data_format = kernel_size, strides, data_format
    self.conv = keras.layers.Conv2D(
        filters, kernel_size, strides=strides, padding="same" if strides == 1 else "valid",
        use_bias=False, data_format=data_format, kernel_initializer=fresh(kernel_initializer),
        dtype=self.dtype_policy, name="conv2d")

  def call(self, x: tf.Tensor) -> tf.Tensor:
    if self.strides > 1:
      total = self.kernel_size - 1
      spatial = [[total // 2, total - total // 2]] * 2
      pads = ([[0, 0], [0, 0]] + spatial if self.data_format == "channels_first"
              else [[0, 0]] + spatial + [[0, 0]])
      x = tf.pad(x, pads)
    return self.conv(x)


class ResNetBlock(keras.layers.Layer):
  """One residual block.

  Args:
    filters: channels of the 3x3 convolutions (a bottleneck block outputs 4x as many).
    strides: stride of the block (on its 3x3 convolution and its projection).
    bottleneck: bottleneck (1x1-3x3-1x1) instead of basic (3x3-3x3) block.
    version: 1 (post-activation) or 2 (pre-activation).
    projection: project the shortcut with a strided 1x1 convolution.
    data_format: the layout the layers run in (``channels_last`` on CPUs).
    bn_momentum, bn_epsilon: batch-norm moving-average momentum and epsilon.
    kernel_initializer: initializer of every convolution (a fresh copy per layer).
  """

  def __init__(self, filters: int, strides: int, bottleneck: bool, version: int,
               projection: bool, data_format: str, bn_momentum: float, bn_epsilon: float,
               kernel_initializer: Any, **kwargs):
    super().__init__(**kwargs)
    self.version = version
    out_filters = filters * BOTTLENECK_EXPANSION if bottleneck else filters
    policy = self.dtype_policy

    def conv(f, k, s, name):
      return FixedPaddingConv2D(f, k, s, data_format, kernel_initializer, dtype=policy,
                                name=name)

    def norm(name):
      return keras.layers.BatchNormalization(
          axis=channel_axis(data_format), momentum=bn_momentum, epsilon=bn_epsilon,
          dtype=policy, name=name)

    if bottleneck:
      self.convs = [conv(filters, 1, 1, "conv1"), conv(filters, 3, strides, "conv2"),
                    conv(out_filters, 1, 1, "conv3")]
    else:
      self.convs = [conv(filters, 3, strides, "conv1"), conv(out_filters, 3, 1, "conv2")]
    # v1: a BN after every conv; v2: one before every conv (the first on the block input)
    self.norms = [norm(f"batch_norm{i + 1}") for i in range(len(self.convs))]
    self.projection = conv(out_filters, 1, strides, "projection") if projection else None
    self.projection_norm = norm("projection_batch_norm") if projection and version == 1 \
        else None

  def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    if self.version == 1:
      shortcut = x
      if self.projection is not None:
        shortcut = self.projection_norm(self.projection(x), training=training)
      for i, (conv, norm) in enumerate(zip(self.convs, self.norms)):
        x = norm(conv(x), training=training)
        if i < len(self.convs) - 1:
          x = tf.nn.relu(x)
      return tf.nn.relu(x + shortcut)
    shortcut = x
    for i, (conv, norm) in enumerate(zip(self.convs, self.norms)):
      x = tf.nn.relu(norm(x, training=training))
      if i == 0 and self.projection is not None:
        shortcut = self.projection(x)  # v2 projects the pre-activated input
      x = conv(x)
    return x + shortcut


class ResNetStage(keras.layers.Layer):
  """``blocks`` residual blocks; the first one strides and projects when needed.

  Args:
    in_channels: channels entering the stage (decides whether the first block projects).
    Other arguments as in :class:`ResNetBlock`.
  """

  def __init__(self, blocks: int, filters: int, strides: int, in_channels: int,
               bottleneck: bool, version: int, data_format: str, bn_momentum: float,
               bn_epsilon: float, kernel_initializer: Any, **kwargs):
    super().__init__(**kwargs)
    out_filters = filters * BOTTLENECK_EXPANSION if bottleneck else filters
    self.out_channels = out_filters
    self.blocks = [
        ResNetBlock(filters, strides if j == 0 else 1, bottleneck, version,
                    projection=j == 0 and (strides != 1 or in_channels != out_filters),
                    data_format=data_format, bn_momentum=bn_momentum, bn_epsilon=bn_epsilon,
                    kernel_initializer=kernel_initializer, dtype=self.dtype_policy,
                    name=f"block{j + 1}")
        for j in range(blocks)]

  def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    for block in self.blocks:
      x = block(x, training=training)
    return x
