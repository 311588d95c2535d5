"""FastPitch's layers: FFT blocks, the duration/pitch predictors and the aligner.

Every layer takes a boolean ``mask`` [B, T] (True at real positions) and zeroes padded
positions before each convolution and at its output, so a sequence gives the same values
alone and batched with longer ones (convolutions read zeros past the end either way, and
attention never reads padded keys).
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.dropout import dropout, dropout_seed_generator
from open_seq2seq.parts.transformer.utils import get_padding_bias, get_position_encoding
from open_seq2seq.utils.params import Param


def masked(x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
  """``x`` [B, T, D] with zeros where ``mask`` [B, T] is False."""
  return tf.where(mask[:, :, None], x, tf.zeros([], x.dtype))


def conv1d(filters: int, kernel_size: int, policy: Any, name: str, initializer: Any,
           activation: Any = None) -> keras.layers.Conv1D:
  return keras.layers.Conv1D(filters, kernel_size, padding="same", activation=activation,
                             kernel_initializer=initializer, dtype=policy, name=name)


class FFTSelfAttention(keras.layers.Layer):
  """Multi-head self-attention with its own head size (FastPitch: 1 head of 64 channels in a
  384-wide model), softmax in float32, padded keys masked."""

  def __init__(self, hidden_size: int, num_heads: int, head_size: int, attention_dropout: float,
               initializer: Any = "glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.hidden_size, self.num_heads, self.head_size = hidden_size, num_heads, head_size
    self.attention_dropout = attention_dropout
    self.qkv = keras.layers.Dense(3 * num_heads * head_size, kernel_initializer=initializer,
                                  dtype=self.dtype_policy, name="qkv")
    self.out = keras.layers.Dense(hidden_size, use_bias=False, kernel_initializer=initializer,
                                  dtype=self.dtype_policy, name="output")

  def build(self, input_shape=None):
    self.qkv.build((None, self.hidden_size))
    self.out.build((None, self.num_heads * self.head_size))
    self.seed_generator = dropout_seed_generator(self.attention_dropout)

  def call(self, x: tf.Tensor, mask: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    batch, length = tf.shape(x)[0], tf.shape(x)[1]
    qkv = tf.reshape(self.qkv(x), [batch, length, 3, self.num_heads, self.head_size])
    q, k, v = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))  # each [B, H, T, D]
    logits = tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32) * self.head_size ** -0.5
    logits += get_padding_bias(tf.reduce_sum(tf.cast(mask, tf.int32), 1), length)
    weights = tf.cast(tf.nn.softmax(logits), v.dtype)
    weights = dropout(weights, self.attention_dropout, training, self.seed_generator)
    heads = tf.transpose(tf.matmul(weights, v), [0, 2, 1, 3])
    return self.out(tf.reshape(heads, [batch, length, self.num_heads * self.head_size]))


class FFTBlock(keras.layers.Layer):
  """A feed-forward Transformer block (FastSpeech): self-attention, then a two-convolution
  feed-forward network (ReLU between), each with dropout and a post-norm residual
  (``LayerNorm(x + dropout(f(x)))``, as FastPitch)."""

  def __init__(self, hidden_size: int, num_heads: int, head_size: int, filter_size: int,
               kernel_size: int, dropout_rate: float, attention_dropout: float,
               initializer: Any = "glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    policy = self.dtype_policy
    self.hidden_size, self.filter_size = hidden_size, filter_size
    self.dropout_rate = dropout_rate
    self.attention = FFTSelfAttention(hidden_size, num_heads, head_size, attention_dropout,
                                      initializer, dtype=policy, name="attention")
    self.conv_in = conv1d(filter_size, kernel_size, policy, "conv_in", initializer, "relu")
    self.conv_out = conv1d(hidden_size, kernel_size, policy, "conv_out", initializer)
    self.norm_attention = keras.layers.LayerNormalization(epsilon=1e-5, dtype=policy,
                                                          name="norm_attention")
    self.norm_ff = keras.layers.LayerNormalization(epsilon=1e-5, dtype=policy, name="norm_ff")

  def build(self, input_shape=None):
    self.attention.build()
    self.conv_in.build((None, None, self.hidden_size))
    self.conv_out.build((None, None, self.filter_size))
    self.norm_attention.build((None, self.hidden_size))
    self.norm_ff.build((None, self.hidden_size))
    self.seed_generator = dropout_seed_generator(self.dropout_rate)

  def _drop(self, x: tf.Tensor, training: bool | None) -> tf.Tensor:
    return dropout(x, self.dropout_rate, training, self.seed_generator)

  def call(self, x: tf.Tensor, mask: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    x = masked(self.norm_attention(x + self._drop(self.attention(x, mask, training=training), training)),
               mask)
    hidden = self.conv_out(masked(self.conv_in(x), mask))
    return masked(self.norm_ff(x + self._drop(hidden, training)), mask)


class FFTStack(keras.layers.Layer):
  """Sinusoidal positions added to the inputs, then ``num_layers`` :class:`FFTBlock`."""

  def __init__(self, num_layers: int, hidden_size: int, num_heads: int, head_size: int,
               filter_size: int, kernel_size: int, dropout_rate: float,
               attention_dropout: float, initializer: Any = "glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.blocks = [FFTBlock(hidden_size, num_heads, head_size, filter_size, kernel_size,
                            dropout_rate, attention_dropout, initializer,
                            dtype=self.dtype_policy, name=f"block_{i}")
                   for i in range(num_layers)]

  def build(self, input_shape=None):
    for block in self.blocks:
      block.build()

  def call(self, x: tf.Tensor, mask: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    positions = get_position_encoding(tf.shape(x)[1], self.hidden_size)
    x = masked(x + tf.cast(positions, x.dtype)[None], mask)
    for block in self.blocks:
      x = block(x, mask, training=training)
    return x


class TemporalPredictor(keras.layers.Layer):
  """FastPitch's duration / pitch predictor: ``num_layers`` x (conv + ReLU, LayerNorm,
  dropout), then a linear map to one value per position (float32, 0 at padding)."""

  def __init__(self, input_size: int, filter_size: int, kernel_size: int, dropout_rate: float,
               num_layers: int = 2, initializer: Any = "glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    policy = self.dtype_policy
    self.input_size, self.filter_size = input_size, filter_size
    self.dropout_rate = dropout_rate
    self.convs = [conv1d(filter_size, kernel_size, policy, f"conv_{i}", initializer, "relu")
                  for i in range(num_layers)]
    self.norms = [keras.layers.LayerNormalization(epsilon=1e-5, dtype=policy, name=f"norm_{i}")
                  for i in range(num_layers)]
    self.projection = keras.layers.Dense(1, kernel_initializer=initializer, dtype=policy,
                                         name="projection")

  def build(self, input_shape=None):
    width = self.input_size
    for conv, norm in zip(self.convs, self.norms):
      conv.build((None, None, width))
      norm.build((None, self.filter_size))
      width = self.filter_size
    self.projection.build((None, self.filter_size))
    self.seed_generator = dropout_seed_generator(self.dropout_rate)

  def call(self, x: tf.Tensor, mask: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    for conv, norm in zip(self.convs, self.norms):
      x = norm(conv(masked(x, mask)))
      x = dropout(x, self.dropout_rate, training, self.seed_generator)
    out = tf.cast(self.projection(masked(x, mask))[:, :, 0], tf.float32)
    return tf.where(mask, out, 0.0)


class Aligner(keras.layers.Layer):
  """The alignment encoder of Badlani et al.: keys from the symbol embeddings (conv k3 +
  ReLU, conv k1), queries from the mel frames (conv k3 + ReLU, conv k1 + ReLU, conv k1); the
  soft alignment's log-probabilities are ``log_softmax`` over symbols of ``-temperature`` x
  the squared L2 distance between each frame's query and each symbol's key (float32).
  Returns log-probabilities [B, T, N] (-inf at padded symbols); the caller adds the prior in
  float32 (Keras would cast a float32 prior passed in to the half compute dtype)."""

  def __init__(self, text_channels: int, mel_channels: int, attention_channels: int,
               temperature: float, initializer: Any = "glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    policy = self.dtype_policy
    self.text_channels, self.mel_channels = text_channels, mel_channels
    self.temperature = temperature
    self.keys = [conv1d(2 * text_channels, 3, policy, "key_0", initializer, "relu"),
                 conv1d(attention_channels, 1, policy, "key_1", initializer)]
    self.queries = [conv1d(2 * mel_channels, 3, policy, "query_0", initializer, "relu"),
                    conv1d(mel_channels, 1, policy, "query_1", initializer, "relu"),
                    conv1d(attention_channels, 1, policy, "query_2", initializer)]

  def build(self, input_shape=None):
    for stack, width in ((self.keys, self.text_channels), (self.queries, self.mel_channels)):
      for conv in stack:
        conv.build((None, None, width))
        width = conv.filters

  @staticmethod
  def _project(stack: list, x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    for conv in stack:
      x = conv(masked(x, mask))
    return tf.cast(x, tf.float32)

  def call(self, embeddings: tf.Tensor, text_mask: tf.Tensor, mel: tf.Tensor,
           mel_mask: tf.Tensor) -> tf.Tensor:
    keys = self._project(self.keys, embeddings, text_mask)  # [B, N, C]
    queries = self._project(self.queries, tf.cast(mel, self.compute_dtype), mel_mask)
    distance = (tf.reduce_sum(tf.square(queries), -1)[:, :, None]
                - 2.0 * tf.matmul(queries, keys, transpose_b=True)
                + tf.reduce_sum(tf.square(keys), -1)[:, None, :])
    logits = tf.where(text_mask[:, None, :], -self.temperature * distance, -float("inf"))
    return tf.nn.log_softmax(logits, axis=-1)


#: The FFT stack's keys, shared by the encoder and the decoder.
FFT_PARAMS = {
    "d_model": Param(int, 384, "Model width (embeddings, attention, residuals)."),
    "num_layers": Param(int, 6, "FFT blocks."),
    "num_heads": Param(int, 1, "Attention heads per block."),
    "head_size": Param(int, 64, "Channels of each attention head."),
    "filter_size": Param(int, 1536, "Channels of the convolutional feed-forward network."),
    "kernel_size": Param(int, 3, "Kernel of both feed-forward convolutions."),
    "dropout": Param(float, 0.1, "Dropout on each sublayer's output (training)."),
    "attention_dropout": Param(float, 0.1, "Dropout on the attention probabilities."),
}


def check_fft_params(p: dict, where: str) -> None:
  """One-line ConfigErrors for sizes that are not positive and rates outside [0, 1)."""
  for key in ("d_model", "num_layers", "num_heads", "head_size", "filter_size", "kernel_size"):
    if p[key] <= 0:
      raise ConfigError(f"{where}/{key}: must be positive, got {p[key]}")
  for key in ("dropout", "attention_dropout"):
    if not 0.0 <= p[key] < 1.0:
      raise ConfigError(f"{where}/{key}: must be in [0, 1), got {p[key]}")


def fft_stack(p: dict, policy: Any, initializer: Any, name: str) -> FFTStack:
  return FFTStack(p["num_layers"], p["d_model"], p["num_heads"], p["head_size"],
                  p["filter_size"], p["kernel_size"], p["dropout"], p["attention_dropout"],
                  initializer, dtype=policy, name=name)
