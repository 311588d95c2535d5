"""ConformerEncoder: convolution-augmented Transformer for speech (Gulati et al. 2020), with
NeMo's Fast Conformer subsampling (Rekesh et al. 2023) and stochastic depth as options."""

from __future__ import annotations

import math
from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.conformer.attention import relative_position_encoding
from open_seq2seq.parts.conformer.modules import (CONV_NORMS, ConformerBlock,
                                                  stochastic_depth_probs)
from open_seq2seq.parts.conformer.subsampling import KINDS, ConvSubsampling
from open_seq2seq.parts.dropout import dropout, dropout_seed_generator
from open_seq2seq.parts.transformer.utils import get_padding_bias
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS
from open_seq2seq.utils.params import Param


class ConformerEncoder(Encoder):
  """Conformer encoder with padding masks.

  Input features [B, T, F] go through a convolutional subsampling (``subsampling``:
  ``conv2d4``, two 3x3 stride-2 conv2d + ReLU as in the paper, or ``dw_striding8``, Fast
  Conformer's depthwise-separable x8; see :mod:`open_seq2seq.parts.conformer.subsampling`)
  and a linear projection to ``d_model``, are scaled by sqrt(d_model) (``xscaling``, as
  NeMo and ESPnet do), then through ``num_layers`` Conformer blocks
  (:mod:`open_seq2seq.parts.conformer.modules`: macaron half feed-forwards, relative-position
  self-attention, the convolution module, a final LayerNorm). Returns ``outputs``
  [B, T', d_model] (zero past each length) and ``src_lengths`` [B] int32, what the CTC
  decoder reads.

  Padding never changes an utterance's outputs: frames past each length are zeroed before
  every convolution, attention masks padded keys, batch norm takes its statistics over real
  frames, and the lengths follow the conv arithmetic (``ceil(L / 2)`` per stride-2 stage).

  Stochastic depth (NeMo's ``stochastic_depth_*``): in training, block ``l`` is skipped
  (output = input) with probability ``p_l`` and otherwise its change is scaled by
  ``1 / (1 - p_l)``, so inference runs every block unscaled. One draw per block and step
  from a seeded generator whose state is a checkpointed variable, as ``TDNNEncoder``'s
  block dropping.
  """

  PARAMS = {
      "d_model": Param(int, 144, "Width of the frames through the blocks (144: Conformer-S; "
                       "256: M; 512: L)."),
      "num_layers": Param(int, 16, "Number of Conformer blocks."),
      "num_heads": Param(int, 4, "Attention heads; must divide d_model."),
      "ff_expansion_factor": Param(int, 4, "Feed-forward inner width = factor * d_model."),
      "conv_kernel_size": Param(int, 31, "Depthwise conv kernel of the convolution module "
                                "(odd: centred)."),
      "conv_norm_type": Param(str, "batch_norm", "Norm after the depthwise conv (batch_norm: "
                              "statistics over real frames only).", choices=CONV_NORMS),
      "subsampling": Param(str, "conv2d4", "conv2d4 (two 3x3 stride-2 conv2d + ReLU, time "
                           "x4) or dw_striding8 (Fast Conformer's depthwise-separable, x8).",
                           choices=tuple(KINDS)),
      "subsampling_channels": Param((int, None), None, "Filters of the subsampling convs "
                                    "(None: d_model)."),
      "xscaling": Param(bool, True, "Multiply the projected frames by sqrt(d_model)."),
      "dropout": Param(float, 0.1, "Dropout on the subsampled frames, inside the feed-forward "
                       "modules and on every module's output before its residual add."),
      "attention_dropout": Param(float, 0.1, "Dropout on the attention probabilities."),
      "stochastic_depth_drop_prob": Param(float, 0.0, "Training: probability of skipping the "
                                          "last block (linear) or of each block (uniform); 0 "
                                          "disables stochastic depth."),
      "stochastic_depth_mode": Param(str, "linear", "linear: probabilities rise from 0 to "
                                     "stochastic_depth_drop_prob over the blocks; uniform: "
                                     "the same for each.", choices=("linear", "uniform")),
      "stochastic_depth_start_layer": Param(int, 1, "Blocks before this 1-based index are "
                                            "never skipped."),
      "use_bias": Param(bool, True, "Biases in the linear and conv layers of the blocks."),
      "bn_momentum": Param(float, 0.9, "Batch-norm moving-average momentum (PyTorch's 0.1)."),
      "bn_epsilon": Param(float, 1e-5, "Batch-norm epsilon."),
      **INITIALIZER_PARAMS,
  }

  def __init__(self, params: dict[str, Any], *, mode: str = "train", name: str = "encoder",
               dtype: Any = "float32", initializer: Any = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    self._check(p)
    policy, init = self.dtype_policy, self.kernel_initializer()
    self.subsampling = ConvSubsampling(p["subsampling"], p["d_model"],
                                       p["subsampling_channels"] or p["d_model"],
                                       kernel_initializer=init, dtype=policy,
                                       name="subsampling")
    self.blocks = [
        ConformerBlock(p["d_model"], p["num_heads"], p["ff_expansion_factor"],
                       p["conv_kernel_size"], p["conv_norm_type"], p["dropout"],
                       p["attention_dropout"], p["bn_momentum"], p["bn_epsilon"],
                       use_bias=p["use_bias"], kernel_initializer=init, dtype=policy,
                       name=f"block{i + 1}")
        for i in range(p["num_layers"])]
    self.drop_probs = stochastic_depth_probs(
        p["num_layers"], p["stochastic_depth_drop_prob"], p["stochastic_depth_mode"],
        p["stochastic_depth_start_layer"])
    # the RNG state is a variable: checkpoints hold it, so a resumed run draws the same skips
    self.stochastic_depth_seed = (keras.random.SeedGenerator(name="stochastic_depth_seed")
                                  if any(self.drop_probs) else None)
    # blocks built now (their sizes are known): variables exist before the first trace; the
    # subsampling builds on its first call, when the number of features is known
    self.build()

  @staticmethod
  def _check(p: dict) -> None:
    where = "encoder_params"
    for key in ("d_model", "num_layers", "num_heads", "ff_expansion_factor",
                "conv_kernel_size"):
      if p[key] <= 0:
        raise ConfigError(f"{where}/{key}: must be positive, got {p[key]}")
    if p["d_model"] % p["num_heads"]:
      raise ConfigError(f"{where}/num_heads: {p['num_heads']} does not divide d_model "
                        f"{p['d_model']}")
    if p["conv_kernel_size"] % 2 == 0:
      raise ConfigError(f"{where}/conv_kernel_size: {p['conv_kernel_size']} is even; the "
                        "centred depthwise conv needs an odd kernel (e.g. 31)")
    if p["subsampling_channels"] is not None and p["subsampling_channels"] <= 0:
      raise ConfigError(f"{where}/subsampling_channels: must be positive or None, got "
                        f"{p['subsampling_channels']}")
    for key in ("dropout", "attention_dropout", "stochastic_depth_drop_prob"):
      if not 0.0 <= p[key] < 1.0:
        raise ConfigError(f"{where}/{key}: must be in [0, 1), got {p[key]}")
    if not 1 <= p["stochastic_depth_start_layer"] <= p["num_layers"]:
      raise ConfigError(f"{where}/stochastic_depth_start_layer: must be in [1, num_layers="
                        f"{p['num_layers']}], got {p['stochastic_depth_start_layer']}")

  def build(self, input_shape=None):
    for block in self.blocks:
      block.build()
    self.seed_generator = dropout_seed_generator(self.params["dropout"])

  def embed(self, x: tf.Tensor, lengths: tf.Tensor, training: bool | None = None
            ) -> tuple[tf.Tensor, tf.Tensor]:
    """Features [B, T, F] -> the blocks' input [B, T', d_model] and lengths T'."""
    x, lengths = self.subsampling(tf.cast(x, self.compute_dtype), tf.cast(lengths, tf.int32))
    if self.params["xscaling"]:
      x = x * tf.cast(math.sqrt(self.params["d_model"]), x.dtype)
    return dropout(x, self.params["dropout"], training, self.seed_generator), lengths

  def layer_scales(self, training: bool | None) -> tf.Tensor | None:
    """Training with stochastic depth: float32 [num_layers], per block 0 (skipped) or
    1 / (1 - p_l) (kept), one seeded draw per block; otherwise None (every block runs)."""
    if not training or self.stochastic_depth_seed is None:
      return None
    probs = tf.constant(self.drop_probs, tf.float32)
    draws = tf.convert_to_tensor(keras.random.uniform([len(self.drop_probs)],
                                                      seed=self.stochastic_depth_seed))
    return tf.cast(draws >= probs, tf.float32) / (1.0 - probs)

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    features, lengths = input_dict["source_tensors"]
    x, lengths = self.embed(features, lengths, training)
    length = tf.shape(x)[1]
    mask = tf.sequence_mask(lengths, length)
    bias = get_padding_bias(lengths, length, tf.float32)
    positions = tf.cast(relative_position_encoding(length, self.params["d_model"]), x.dtype)
    scales = self.layer_scales(training)
    for i, block in enumerate(self.blocks):
      y = block(x, positions, mask, bias, training=training)
      if scales is not None and self.drop_probs[i] > 0:
        y = x + tf.cast(scales[i], x.dtype) * (y - x)
      x = y
    x = x * tf.cast(mask, x.dtype)[:, :, None]
    return {"outputs": x, "src_lengths": lengths}
