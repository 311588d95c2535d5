"""ResNetEncoder: ResNet v1/v2 image encoder (OpenSeq2Seq's parameters, TF-official style)."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.cnns.data_format import (DATA_FORMATS, channel_axis,
                                                 internal_data_format, to_layout)
from open_seq2seq.parts.resnet.blocks import FixedPaddingConv2D, ResNetStage
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS
from open_seq2seq.utils.params import Param

#: Blocks per stage of the ImageNet ResNets (basic blocks below 50 layers, bottleneck from 50).
IMAGENET_BLOCKS = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3], 50: [3, 4, 6, 3], 101: [3, 4, 23, 3],
                   152: [3, 8, 36, 3], 200: [3, 24, 36, 3]}

#: What each ``style`` means for the keys left at None.
STYLE_DEFAULTS = {
    "imagenet": {"first_num_filters": 64, "first_kernel_size": 7, "first_conv_stride": 2,
                 "first_pool_size": 3, "first_pool_stride": 2, "block_strides": [1, 2, 2, 2]},
    "cifar": {"first_num_filters": 16, "first_kernel_size": 3, "first_conv_stride": 1,
              "first_pool_size": None, "first_pool_stride": 2, "block_strides": [1, 2, 2]},
}


def _int_list(value: Any) -> bool:
  return isinstance(value, list) and bool(value) and all(
      isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)


_int_list.type_name = "non-empty list of positive ints"


class ResNetEncoder(Encoder):
  """ResNet image encoder: stem, residual stages, global average pool.

  ``style: "imagenet"`` (default) is the ImageNet network: a 7x7/2 convolution, a 3x3/2 max
  pool and four stages of 64, 128, 256 and 512 filters; ``resnet_size`` 18, 34, 50, 101, 152
  or 200 (basic blocks below 50, bottleneck blocks from 50). ``style: "cifar"`` is He et al.'s
  network for 32-pixel images: a 3x3/1 convolution, no pool, three stages of 16, 32 and 64
  filters with ``n`` basic blocks each, ``resnet_size = 6n + 2`` (20, 32, 44, 56, 110);
  ResNet-20 has 0.27 M parameters. Any ``first_*`` key or ``block_strides`` set explicitly
  overrides the style's value; ``block_sizes`` (with ``bottleneck``) replaces ``resnet_size``.

  Filters double at every stage. v2 ends with batch norm and ReLU before the pool. Returns
  ``{"outputs": [batch, final_size]}``. Kernels default to TF-official's variance-scaling
  initializer (fan-in, truncated normal) unless the config sets one.
  """

  PARAMS = {
      "style": Param(str, "imagenet", "imagenet (7x7/2 stem, max pool, 4 stages) or cifar "
                     "(3x3/1 stem, no pool, 3 stages of 16-64 filters, resnet_size = 6n+2).",
                     choices=tuple(STYLE_DEFAULTS)),
      "resnet_size": Param((int, None), None, "Layers: 18, 34, 50, 101, 152, 200 (imagenet) "
                           "or 6n+2 (cifar). Or give block_sizes."),
      "block_sizes": Param((_int_list, None), None, "Blocks per stage (instead of resnet_size)."),
      "block_strides": Param((_int_list, None), None,
                             "Stride of each stage (default: [1, 2, 2, 2] / cifar [1, 2, 2])."),
      "version": Param(int, 2, "1: post-activation (He 2015); 2: pre-activation (He 2016).",
                       choices=(1, 2)),
      "bottleneck": Param((bool, None), None,
                          "Bottleneck blocks (default: resnet_size >= 50)."),
      "final_size": Param((int, None), None, "Output features; checked against the network "
                          "(default: what the network gives, 2048 for ResNet-50)."),
      "first_num_filters": Param((int, None), None, "Filters of the stem and the first stage "
                                 "(default 64 / cifar 16)."),
      "first_kernel_size": Param((int, None), None, "Stem kernel size (default 7 / cifar 3)."),
      "first_conv_stride": Param((int, None), None, "Stem stride (default 2 / cifar 1)."),
      "first_pool_size": Param((int, None), None,
                               "Max pool after the stem (0 or None: none; default 3 / cifar none)."),
      "first_pool_stride": Param((int, None), None, "Stride of that max pool (default 2)."),
      "data_format": Param(str, "channels_first", "Layout on GPUs; CPUs always run "
                           "channels_last (same variables and results).", choices=DATA_FORMATS),
      "regularize_bn": Param(bool, True, "Accepted for OpenSeq2Seq configs: the trainer's "
                             "regularizer never applies to batch-norm parameters."),
      "bn_momentum": Param(float, 0.997, "Batch-norm moving-average momentum."),
      "bn_epsilon": Param(float, 1e-5, "Batch-norm epsilon."),
      **INITIALIZER_PARAMS,
  }

  def __init__(self, params: dict[str, Any], *, mode: str = "train", name: str = "encoder",
               dtype: Any = "float32", initializer: Any = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    arch = self.architecture(p)
    self.version = p["version"]
    self.data_format = internal_data_format(p["data_format"])
    policy = self.dtype_policy
    init = self._initializer()
    self.stem = FixedPaddingConv2D(arch["first_num_filters"], arch["first_kernel_size"],
                                   arch["first_conv_stride"], self.data_format, init,
                                   dtype=policy, name="initial_conv")
    axis = channel_axis(self.data_format)
    self.stem_norm = None
    if self.version == 1:
      self.stem_norm = keras.layers.BatchNormalization(
          axis=axis, momentum=p["bn_momentum"], epsilon=p["bn_epsilon"], dtype=policy,
          name="initial_batch_norm")
    self.pool = None
    if arch["first_pool_size"]:
      self.pool = keras.layers.MaxPooling2D(arch["first_pool_size"], arch["first_pool_stride"],
                                            padding="same", data_format=self.data_format,
                                            dtype=policy, name="initial_max_pool")
    self.stages, channels = [], arch["first_num_filters"]
    for i, (blocks, stride) in enumerate(zip(arch["block_sizes"], arch["block_strides"])):
      stage = ResNetStage(blocks, arch["first_num_filters"] * 2 ** i, stride, channels,
                          arch["bottleneck"], self.version, self.data_format, p["bn_momentum"],
                          p["bn_epsilon"], init, dtype=policy, name=f"block_layer{i + 1}")
      self.stages.append(stage)
      channels = stage.out_channels
    if p["final_size"] is not None and p["final_size"] != channels:
      raise ConfigError(f"encoder_params/final_size: {p['final_size']}, but the network "
                        f"outputs {channels} features; drop final_size or fix the blocks")
    self.final_size = channels
    self.final_norm = None
    if self.version == 2:
      self.final_norm = keras.layers.BatchNormalization(
          axis=axis, momentum=p["bn_momentum"], epsilon=p["bn_epsilon"], dtype=policy,
          name="final_batch_norm")

  def _initializer(self) -> Any:
    if self.params["initializer"] is None and self._default_initializer is None:
      # TF-official ResNet: tf.variance_scaling_initializer() (fan-in, truncated normal)
      return keras.initializers.VarianceScaling(scale=1.0, mode="fan_in",
                                                distribution="truncated_normal")
    return self.kernel_initializer()

  @staticmethod
  def architecture(p: dict[str, Any]) -> dict[str, Any]:
    """Stem and stage settings from ``resnet_size``/``block_sizes``, the style and overrides.

    Raises:
      ConfigError: neither or both of resnet_size and block_sizes, an unknown size, or
        block_strides not matching the stages.
    """
    style = p["style"]
    arch = {key: p[key] if p[key] is not None else default
            for key, default in STYLE_DEFAULTS[style].items()}
    if (p["resnet_size"] is None) == (p["block_sizes"] is None):
      raise ConfigError("encoder_params: set exactly one of resnet_size (e.g. 50) and "
                        "block_sizes")
    size = p["resnet_size"]
    if size is not None:
      if style == "imagenet":
        if size not in IMAGENET_BLOCKS:
          raise ConfigError(f"encoder_params/resnet_size: {size} is not one of "
                            f"{', '.join(map(str, IMAGENET_BLOCKS))} (or use style: cifar)")
        arch["block_sizes"] = IMAGENET_BLOCKS[size]
      else:
        if size < 8 or (size - 2) % 6:
          raise ConfigError(f"encoder_params/resnet_size: a cifar-style ResNet has 6n+2 "
                            f"layers (20, 32, 44, 56, 110), got {size}")
        arch["block_sizes"] = [(size - 2) // 6] * 3
      default_bottleneck = style == "imagenet" and size >= 50
    else:
      arch["block_sizes"] = p["block_sizes"]
      default_bottleneck = False
    arch["bottleneck"] = default_bottleneck if p["bottleneck"] is None else p["bottleneck"]
    if p["block_strides"] is None:
      strides = STYLE_DEFAULTS[style]["block_strides"]
      arch["block_strides"] = (strides + [2] * len(arch["block_sizes"]))[
          :len(arch["block_sizes"])]
    if len(arch["block_strides"]) != len(arch["block_sizes"]):
      raise ConfigError(f"encoder_params/block_strides: {len(arch['block_strides'])} strides "
                        f"for {len(arch['block_sizes'])} stages")
    for key in ("first_num_filters", "first_kernel_size", "first_conv_stride"):
      if arch[key] < 1:
        raise ConfigError(f"encoder_params/{key}: must be at least 1, got {arch[key]}")
    return arch

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    x = tf.cast(input_dict["source_tensors"][0], self.compute_dtype)
    x = self.stem(to_layout(x, self.data_format))
    if self.stem_norm is not None:
      x = tf.nn.relu(self.stem_norm(x, training=training))
    if self.pool is not None:
      x = self.pool(x)
    for stage in self.stages:
      x = stage(x, training=training)
    if self.final_norm is not None:
      x = tf.nn.relu(self.final_norm(x, training=training))
    axes = [2, 3] if self.data_format == "channels_first" else [1, 2]
    return {"outputs": tf.reduce_mean(x, axes)}
