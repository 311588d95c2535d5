"""TDNNEncoder: fully convolutional encoder of Wave2Letter+, Jasper and QuartzNet."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.cnns.conv_blocks import (NORMALIZATIONS, ConvBlock1D, check_padding,
                                                 sequence_mask)
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS
from open_seq2seq.utils.params import Param, callable_or_class, int_list, list_of

def _widths(value: Any) -> bool:
  """Type predicate: ``[k]``, or ``[k, 1]`` (a conv2d layer over time only)."""
  return int_list(1)(value) or int_list(2)(value)


_widths.type_name = "list of 1 int >= 1 ([k]; [k, 1] for conv2d)"

#: Keys of one ``convnet_layers`` entry.
LAYER_PARAMS = {
    "type": Param(str, "conv1d", "conv1d or sep_conv1d (depthwise + pointwise); conv2d with "
                  "[k, 1] kernels (OpenSeq2Seq's speech-commands Jasper) is conv1d.",
                  choices=("conv1d", "sep_conv1d", "conv2d")),
    "repeat": Param(int, 1, "Number of identical layers in this block."),
    "kernel_size": Param(_widths, doc="[k]: kernel width in frames."),
    "stride": Param(_widths, [1],
                    "[s]: stride (only the block's layers with s > 1 subsample)."),
    "dilation": Param(_widths, [1], "[d]: dilation."),
    "num_channels": Param(int, doc="Output channels."),
    "padding": Param(str, "SAME", "SAME (length ceil(L/s)) or VALID (any case)."),
    "dropout_keep_prob": Param((float, None), None, "Keep probability (default: the encoder's)."),
    "residual": Param(bool, False, "Add a 1x1-projected residual from the block's input."),
    "residual_dense": Param(bool, False,
                            "Dense residual: add projections of every earlier residual block's input."),
}


def check_conv_widths(block: dict, path: str) -> dict:
  """``kernel_size``/``stride``/``dilation`` as ``[width]``: a conv2d layer whose kernels,
  strides and dilations are 1 across features becomes the conv1d layer it computes."""
  if block["type"] == "conv2d" and len(block["kernel_size"]) != 2:
    raise ConfigError(f"{path}/type: a conv2d layer here runs over time only: give its "
                      f"kernel_size as [k, 1], got {block['kernel_size']}")
  for key in ("kernel_size", "stride", "dilation"):
    value = block[key]
    if block["type"] != "conv2d" and len(value) != 1:
      raise ConfigError(f"{path}/{key}: a {block['type']} layer takes [width], got {value}")
    if block["type"] == "conv2d" and len(value) == 2 and value[1] != 1:
      raise ConfigError(f"{path}/{key}: conv2d layers here run over time only (the features "
                        f"are channels): give [{value[0]}, 1], got {value}")
    block[key] = value[:1]
  if block["type"] == "conv2d":
    block["type"] = "conv1d"
  return block


def _check_block(block: dict, path: str) -> dict:
  """Rules across one block's keys; upper-cases ``padding``; widths as
  :func:`check_conv_widths`."""
  block["padding"] = check_padding(block["padding"], f"{path}/padding")
  check_conv_widths(block, path)
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

  Block dropping (OpenSeq2Seq's): in training, each residual block's conv branch is dropped
  for the whole batch with probability ``drop_block_prob`` (kept branches are scaled by
  1 / (1 - p), so inference needs no rescaling); the decisions come from a seeded generator
  whose state is a variable saved in checkpoints, so a resumed run draws the same decisions
  as an uninterrupted one. At eval and inference, ``drop_block_index`` >= 0 drops that
  block's conv branch ("blockout": how much does the model need this block?).
  """

  PARAMS = {
      "convnet_layers": Param(list_of(LAYER_PARAMS, "a convnet_layers block", _check_block,
                                      min_items=1), doc="Blocks of conv layers."),
      "dropout_keep_prob": Param(float, 1.0, "Keep probability of dropout after each layer."),
      "activation_fn": Param(callable_or_class, tf.nn.relu, "Activation after each layer."),
      "normalization": Param((str, None), "batch_norm",
                             "batch_norm, layer_norm, instance_norm (per utterance over its "
                             "frames) or None.", choices=NORMALIZATIONS),
      "bn_momentum": Param(float, 0.9, "Batch-norm moving-average momentum."),
      "bn_epsilon": Param(float, 1e-3, "Batch-norm epsilon."),
      "use_conv_mask": Param(bool, True, "Ignored: padded frames are always zeroed before "
                             "every convolution."),
      "drop_block_prob": Param(float, 0.0, "Training: probability of dropping each residual "
                               "block's conv branch (one seeded draw per block and step)."),
      "drop_block_index": Param(int, -1, "Eval/infer: drop the conv branch of residual block "
                                "i (blockout); -1 keeps every block."),
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
    if not 0.0 <= p["drop_block_prob"] < 1.0:
      raise ConfigError(f"encoder_params/drop_block_prob: {p['drop_block_prob']} is not in "
                        "[0, 1)")
    residual_blocks = [b for b, spec in enumerate(p["convnet_layers"]) if spec["residual"]]
    index = p["drop_block_index"]
    if index != -1 and index not in residual_blocks:
      raise ConfigError(f"encoder_params/drop_block_index: {index} is not -1 nor the index of "
                        f"a residual block (residual blocks: {residual_blocks or 'none'})")
    self._residual_blocks = residual_blocks
    # the RNG state is a variable: checkpoints hold it, so a resumed run draws the same drops
    self.drop_block_seed = (keras.random.SeedGenerator(name="drop_block_seed")
                            if p["drop_block_prob"] > 0 and residual_blocks else None)
    num_residual_blocks = 0
    for b, spec in enumerate(p["convnet_layers"]):  # validated by LAYER_PARAMS
      keep = spec["dropout_keep_prob"]
      keep = p["dropout_keep_prob"] if keep is None else keep
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
            num_residuals=num_res if last else 0,
            dtype=self.dtype_policy, name=f"conv{b + 1}{r + 1}"))
      self.blocks.append(layers)
      self._block_specs.append(spec)

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    x, lengths = input_dict["source_tensors"]
    x = tf.cast(x, self.compute_dtype)
    lengths = tf.cast(lengths, tf.int32)
    scales = self.branch_scales(training)
    dense_inputs = []
    for b, (spec, layers) in enumerate(zip(self._block_specs, self.blocks)):
      residuals = None
      if spec["residual"] and spec["residual_dense"]:
        dense_inputs.append(x)
        residuals = list(dense_inputs)
      elif spec["residual"]:
        residuals = [x]
      for i, layer in enumerate(layers):
        last = i == len(layers) - 1
        x, lengths = layer(x, lengths, residuals=residuals if last else None,
                           training=training, branch_scale=scales.get(b) if last else None)
    x = x * sequence_mask(lengths, tf.shape(x)[1], x.dtype)[:, :, None]
    return {"outputs": x, "src_lengths": lengths}

  def branch_scales(self, training: bool | None) -> dict[int, tf.Tensor]:
    """Scale of each residual block's conv branch for this call, by block index: in
    training one seeded draw per block (0 = dropped, else 1 / (1 - p)); at eval 0 for the
    ``drop_block_index`` block. Blocks absent from the dict keep their branch."""
    p = self.params
    if training and self.drop_block_seed is not None:
      prob = p["drop_block_prob"]
      draws = keras.random.uniform([len(self._residual_blocks)], seed=self.drop_block_seed)
      kept = tf.cast(tf.convert_to_tensor(draws) >= prob, tf.float32) / (1.0 - prob)
      return dict(zip(self._residual_blocks, tf.unstack(kept)))
    if not training and p["drop_block_index"] >= 0:
      return {p["drop_block_index"]: tf.constant(0.0)}
    return {}
