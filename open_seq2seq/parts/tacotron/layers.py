"""Tacotron 2's prenet and convolutional postnet.

* The **prenet** (fully connected layers with ReLU) reads the previous frame; its dropout is
  on at inference too, as Tacotron 2 prescribes: the noise keeps the free-running decoder from
  copying its own input and is what makes it attend to the text.
* The **postnet** (1-D convolutions + batch norm + tanh, the last one linear) predicts a
  residual that sharpens the decoder's spectrogram; padded frames are zeroed before every
  convolution and excluded from the batch-norm statistics (``parts/cnns/conv_blocks.py``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import keras
import tensorflow as tf

from open_seq2seq.parts.cnns.conv_blocks import MaskedConv1D, MaskedNorm, sequence_mask
from open_seq2seq.utils.initializers import fresh


class Prenet(keras.layers.Layer):
  """``num_layers`` Dense + activation layers, each followed by always-on dropout.

  Args:
    units: units per layer.
    num_layers: number of layers.
    activation: activation (default ReLU).
    dropout_rate: rate of the always-on dropout (Tacotron 2: 0.5).
    seed: seed of the dropout masks (None: unseeded).
  """

  def __init__(self, units: int, num_layers: int, activation: Callable | None = None,
               dropout_rate: float = 0.5, kernel_initializer: Any = None,
               seed: int | None = None, **kwargs: Any):
    super().__init__(**kwargs)
    self.dense = [keras.layers.Dense(units, activation=activation or tf.nn.relu,
                                     kernel_initializer=fresh(kernel_initializer or
                                                              "glorot_uniform"),
                                     dtype=self.dtype_policy, name=f"prenet_{i + 1}")
                  for i in range(num_layers)]
    self.dropout_rate = dropout_rate
    self.seed = seed
    self.units = units

  def call(self, x: tf.Tensor) -> tf.Tensor:
    for dense in self.dense:
      x = dense(x)
      if self.dropout_rate > 0:
        x = tf.nn.dropout(x, rate=self.dropout_rate, seed=self.seed)
    return x


class Postnet(keras.layers.Layer):
  """Masked 1-D conv + batch norm + activation + dropout layers.

  Args:
    conv_layers: OpenSeq2Seq's ``postnet_conv_layers`` entries (``kernel_size``, ``stride``,
      ``num_channels`` (-1: ``out_channels``), ``padding``, ``activation_fn``).
    out_channels: channels of a ``num_channels: -1`` layer (the spectrogram's features).
    dropout_rate: dropout after every layer in training.
    bn_momentum, bn_epsilon: batch norm (Keras's momentum convention, as TF 1's).
    enable_bn: batch norm after each convolution (else a bias).
  """

  def __init__(self, conv_layers: Sequence[dict], out_channels: int, dropout_rate: float,
               bn_momentum: float, bn_epsilon: float, enable_bn: bool = True,
               kernel_initializer: Any = None, **kwargs: Any):
    super().__init__(**kwargs)
    policy = self.dtype_policy
    self.convs, self.norms, self.activations = [], [], []
    for i, spec in enumerate(conv_layers):
      channels = out_channels if spec["num_channels"] == -1 else spec["num_channels"]
      self.convs.append(MaskedConv1D("conv1d", channels, spec["kernel_size"][0],
                                     spec["stride"][0], 1, spec["padding"],
                                     use_bias=not enable_bn,
                                     kernel_initializer=fresh(kernel_initializer or
                                                              "glorot_uniform"),
                                     dtype=policy, name=f"conv{i + 1}"))
      self.norms.append(MaskedNorm("batch_norm" if enable_bn else None, bn_momentum,
                                   bn_epsilon, dtype=policy, name=f"norm{i + 1}"))
      self.activations.append(spec.get("activation_fn"))
    self.dropout = keras.layers.Dropout(dropout_rate, dtype=policy) if dropout_rate > 0 else None

  def call(self, x: tf.Tensor, lengths: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    for conv, norm, activation in zip(self.convs, self.norms, self.activations):
      x, _ = conv(x, lengths)
      x = norm(x, sequence_mask(lengths, tf.shape(x)[1]), training=training)
      if activation is not None:
        x = activation(x)
      if self.dropout is not None:
        x = self.dropout(x, training=training)
    return x
