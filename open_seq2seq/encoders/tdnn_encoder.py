"""TDNNEncoder: fully convolutional encoder of Wave2Letter+, Jasper and QuartzNet."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.cnns.conv_blocks import (NORMALIZATIONS, ConvBlock1D, check_padding,
                                                 sequence_mask)
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS
from open_seq2seq.utils.params import Param, callable_or_class, int_list, list_of

#: Keys of one ``convnet_layers`` entry.
LAYER_PARAMS = {
    "type": Param(str, "conv1d", "conv1d or sep_conv1d (depthwise + pointwise).",
                  choices=("conv1d", "sep_conv1d")),
    "repeat": Param(int, 1, "Number of identical layers in this block."),
    "kernel_size": Param(int_list(1), doc="[k]: kernel width in frames."),
    "stride": Param(int_list(1), [1],
                    "[s]: stride (only the block's layers with s > 1 subsample)."),
    "dilation": Param(int_list(1), [1], "[d]: dilation."),
    "num_channels": Param(int, doc="Output channels."),
    "padding": Param(str, "SAME", "SAME (length ceil(L/s)) or VALID (any case)."),
    "dropout_keep_prob": Param((float, None), None, "Keep probability (default: the encoder's)."),
    "residual": Param(bool, False, "Add a 1x1-projected residual from the block's input."),
    "residual_dense": Param(bool, False,
                            "Dense residual: add projections of every earlier residual block's input."),
}


def _check_block(block: dict, path: str) -> dict:
  """Rules across one block's keys; upper-cases ``padding``."""
  block["padding"] = check_padding(block["padding"], f"{path}/padding")
  if block["residual"] and block["stride"][0] > 1:
    raise ConfigError(f"{path}: a residual block cannot have stride > 1")
  return block


class TDNNEncoder(Encoder):
  """Time-delay (1-D convolutional) encoder with padding masks.

  ``convnet_layers`` is a list of blocks; each block repeats a conv -> norm -> activation ->
  dropout layer; in a residual block the last layer adds the projected block input (Jasper)
  or the projected inputs of every earlier residual block too (``residual_dense``).
  Padding never changes a sequence's outputs (see ``open_seq2seq.parts.cnns.conv_blocks``).
  Returns ``outputs`` [B, T', C] (zero past each length) and ``src_lengths``.
  """

  PARAMS = {
      "convnet_layers": Param(list_of(LAYER_PARAMS, "a convnet_layers block", _check_block,
                                      min_items=1), doc="Blocks of conv layers."),
      "dropout_keep_prob": Param(float, 1.0, "Keep probability of dropout after each layer."),
      "activation_fn": Param(callable_or_class, tf.nn.relu, "Activation after each layer."),
      "normalization": Param((str, None), "batch_norm", "batch_norm, layer_norm or None.",
                             choices=NORMALIZATIONS),
      "bn_momentum": Param(float, 0.9, "Batch-norm moving-average momentum."),
      "bn_epsilon": Param(float, 1e-3, "Batch-norm epsilon."),
      "use_conv_mask": Param(bool, True, "Ignored: padded frames are always zeroed before "
                             "every convolution."),
      "drop_block_prob": Param(float, 0.0,
                               "Probability of dropping a residual block's conv branch in training."),
      "drop_block_index": Param(int, -1,
                                "-1: drop_block_prob applies to every residual block; i: only block i."),
      **INITIALIZER_PARAMS,
      "data_format": Param(str, "channels_last", "Ignored: the layout is internal (channels "
                           "last).", choices=("channels_first", "channels_last")),
  }

  def __init__(self, params: dict[str, Any], *, mode: str = "train", name: str = "encoder",
               dtype: Any = "float32", initializer: Any = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    init = self.kernel_initializer()
    self.blocks: list[list[ConvBlock1D]] = []
    self._block_specs = []
    num_residual_blocks = 0
    for b, spec in enumerate(p["convnet_layers"]):  # validated by LAYER_PARAMS
      keep = spec["dropout_keep_prob"]
      keep = p["dropout_keep_prob"] if keep is None else keep
      drop_block = 0.0
      if spec["residual"] and p["drop_block_index"] in (-1, b):
        drop_block = p["drop_block_prob"]
      num_res = 0
      if spec["residual"] and spec["residual_dense"]:
        num_residual_blocks += 1
        num_res = num_residual_blocks  # inputs of every dense residual block so far
      elif spec["residual"]:
        num_res = 1
      layers = []
      for r in range(spec["repeat"]):
        last = r == spec["repeat"] - 1
        layers.append(ConvBlock1D(
            spec["type"], spec["num_channels"], spec["kernel_size"][0], spec["stride"][0],
            spec["dilation"][0], spec["padding"], p["activation_fn"], p["normalization"],
            p["bn_momentum"], p["bn_epsilon"], 1.0 - keep, init,
            num_residuals=num_res if last else 0, drop_block_prob=drop_block if last else 0.0,
            dtype=self.dtype_policy, name=f"conv{b + 1}{r + 1}"))
      self.blocks.append(layers)
      self._block_specs.append(spec)

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    x, lengths = input_dict["source_tensors"]
    x = tf.cast(x, self.compute_dtype)
    lengths = tf.cast(lengths, tf.int32)
    dense_inputs = []
    for spec, layers in zip(self._block_specs, self.blocks):
      residuals = None
      if spec["residual"] and spec["residual_dense"]:
        dense_inputs.append(x)
        residuals = list(dense_inputs)
      elif spec["residual"]:
        residuals = [x]
      for i, layer in enumerate(layers):
        x, lengths = layer(x, lengths, residuals=residuals if i == len(layers) - 1 else None,
                           training=training)
    x = x * sequence_mask(lengths, tf.shape(x)[1], x.dtype)[:, :, None]
    return {"outputs": x, "src_lengths": lengths, "src_length": lengths}
