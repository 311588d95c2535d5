"""Centaur's convolution block: conv -> batch norm -> activation -> dropout (+ residual).

The block runs over a whole padded sequence (``call``) or, when causal, one frame at a time
(``step``), which is how the Centaur decoder synthesizes without recomputing the past:

* **non-causal** (the encoder): "SAME" output length, ``(k - 1) // 2`` frames of explicit
  padding on the left; the input is multiplied by the sequence mask first, so padding never
  reaches a real frame;
* **causal** (the decoder): ``k - 1`` frames of zeros on the left and none on the right, so
  frame ``t`` reads frames ``t - k + 1 .. t`` only. ``step`` keeps those ``k - 1`` previous
  inputs in a buffer and gives exactly the frame ``call`` would give at that position (batch
  norm uses its moving statistics outside training).

Batch-norm statistics in training cover real frames only (``parts/cnns/conv_blocks.py``'s
``MaskedNorm``).
"""

from __future__ import annotations

from typing import Any, Callable

import keras
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.cnns.conv_blocks import MaskedNorm, sequence_mask
from open_seq2seq.utils.initializers import fresh
from open_seq2seq.utils.params import Param, callable_or_class, int_list

#: Keys of one ``conv_layers`` entry (OpenSeq2Seq's names).
CONV_PARAMS = {
    "kernel_size": Param(int_list(1), doc="[width] of the 1-D kernel."),
    "stride": Param(int_list(1), [1], "[stride]; must be [1] (Centaur keeps every length)."),
    "num_channels": Param(int, doc="Output channels (-1 in the decoder: the predicted "
                          "features times the reduction factor)."),
    "padding": Param(str, "SAME", "'SAME' (non-causal) or 'VALID' (causal: the k - 1 zero "
                     "frames on the left are the padding)."),
    "activation_fn": Param((callable_or_class, None), tf.nn.relu,
                           "Activation after batch norm (None: linear)."),
    "is_causal": Param((bool, None), None, "Frame t reads no later frame (None: the "
                       "component's default, causal in the decoder only)."),
    "is_residual": Param(bool, True, "Add the block's input to its output (needs as many "
                         "output as input channels)."),
}


def check_conv_layer(layer: dict, path: str, causal_default: bool) -> dict:
  """Validates one ``conv_layers`` entry across its keys; fills ``is_causal``."""
  layer = dict(layer)
  if layer["stride"] != [1]:
    raise ConfigError(f"{path}/stride: Centaur's convolutions keep the sequence length; use [1]")
  if layer["is_causal"] is None:
    layer["is_causal"] = causal_default
  padding = layer["padding"].upper()
  expected = "VALID" if layer["is_causal"] else "SAME"
  if padding != expected:
    raise ConfigError(f"{path}/padding: a {'causal' if layer['is_causal'] else 'non-causal'} "
                      f"convolution takes padding {expected!r}, got {layer['padding']!r}")
  layer["padding"] = padding
  if layer["num_channels"] == 0 or layer["num_channels"] < -1:
    raise ConfigError(f"{path}/num_channels: must be positive (or -1), got "
                      f"{layer['num_channels']}")
  return layer


class ConvBlock(keras.layers.Layer):
  """One Centaur convolution block (OpenSeq2Seq's ``parts/centaur/ConvBlock``).

  Args:
    filters: output channels.
    kernel_size: kernel width.
    in_channels: input channels (the block's variables are built from it).
    activation_fn: activation after batch norm (None: linear).
    dropout_rate: dropout after the activation (training only).
    bn_momentum, bn_epsilon: batch norm (moving = momentum * moving + (1 - momentum) * batch).
    is_residual: add the input to the output (``in_channels`` must equal ``filters``).
    is_causal: left padding only (see the module docstring).
    kernel_initializer: initializer of the kernel.
  """

  def __init__(self, filters: int, kernel_size: int, in_channels: int,
               activation_fn: Callable | None = tf.nn.relu, dropout_rate: float = 0.0,
               bn_momentum: float = 0.95, bn_epsilon: float = 1e-8, is_residual: bool = True,
               is_causal: bool = False, kernel_initializer: Any = None, **kwargs: Any):
    super().__init__(**kwargs)
    if is_residual and in_channels != filters:
      raise ConfigError(f"is_residual: a residual block needs as many output as input "
                        f"channels ({in_channels} in, {filters} out); set is_residual False "
                        f"or num_channels {in_channels}")
    self.filters, self.kernel_size, self.in_channels = filters, kernel_size, in_channels
    self.activation_fn = activation_fn
    self.is_residual, self.is_causal = is_residual, is_causal
    policy = self.dtype_policy
    self.conv = keras.layers.Conv1D(filters, kernel_size, padding="valid", dtype=policy,
                                    kernel_initializer=fresh(kernel_initializer or
                                                             "glorot_uniform"), name="conv")
    self.norm = MaskedNorm("batch_norm", bn_momentum, bn_epsilon, dtype=policy, name="norm")
    self.dropout_rate = dropout_rate

  def build(self, input_shape: Any = None) -> None:
    self.conv.build((None, None, self.in_channels))
    self.norm.norm.build((None, None, self.filters))
    self.built = True

  @property
  def buffer_frames(self) -> int:
    """Previous input frames a causal ``step`` keeps."""
    return self.kernel_size - 1

  def _finish(self, x: tf.Tensor, y: tf.Tensor, mask: tf.Tensor,
              training: bool | None) -> tf.Tensor:
    # The mask goes positionally: as mask= Keras would take it for a propagated mask.
    y = self.norm(y, mask, training=training)
    if self.activation_fn is not None:
      y = self.activation_fn(y)
    if training and self.dropout_rate > 0:
      y = tf.nn.dropout(y, rate=self.dropout_rate)
    return x + y if self.is_residual else y

  def call(self, x: tf.Tensor, lengths: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    """[B, T, in_channels] -> [B, T, filters]; frames past ``lengths`` are read as zeros."""
    mask = sequence_mask(lengths, tf.shape(x)[1])
    x = x * tf.cast(mask, x.dtype)[:, :, None]
    total = self.kernel_size - 1
    left = total if self.is_causal else total // 2
    y = self.conv(tf.pad(x, [[0, 0], [left, total - left], [0, 0]]))
    return self._finish(x, y, mask, training)

  def initial_buffer(self, batch: Any, dtype: Any) -> tf.Tensor:
    """The zeros a causal sequence starts with, [B, k - 1, in_channels]."""
    return tf.zeros([batch, self.buffer_frames, self.in_channels], dtype)

  def step(self, x: tf.Tensor, buffer: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """One frame [B, in_channels] of a causal block (inference): (output frame, new buffer)."""
    if not self.is_causal:
      raise ValueError(f"{self.name}: only a causal block runs frame by frame")
    window = tf.concat([buffer, tf.cast(x, buffer.dtype)[:, None, :]], axis=1)
    y = self.conv(window)  # [B, 1, filters]: "valid" over exactly k frames
    y = self._finish(window[:, -1:], y, tf.ones(tf.shape(y)[:2], tf.bool), training=False)
    return y[:, 0], window[:, 1:]
