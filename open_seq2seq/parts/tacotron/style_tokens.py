"""Global style tokens (Wang et al., 2018): what a reference recording sounds like, as a vector.

* The **reference encoder** (Skerry-Ryan et al., 2018) reads a reference spectrogram
  [B, T, F]: 2-D convolutions with stride (batch norm + activation; padded frames zeroed and
  left out of the statistics) shrink time and frequency, the frequency axis and channels are
  flattened, and a recurrent layer's final state over the valid frames goes through a tanh
  projection.
* The **style token layer** attends from that summary to a bank of ``num_tokens`` token
  embeddings (tanh of a randomly initialized table) with multi-head additive attention; the
  weighted sum of the tokens' values is the style embedding, which the Tacotron encoder
  appends to every text position. Nothing tells a token what to mean: the tokens become a
  basis of speaking styles because the decoder needs the reference to predict the frames.

At inference the reference can be any recording: the same text is spoken in its style. The
token weights are float32 under mixed precision, like every attention softmax here.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import keras
import tensorflow as tf

from open_seq2seq.parts.cnns.conv_blocks import sequence_mask
from open_seq2seq.utils.initializers import fresh


def strided_lengths(lengths: tf.Tensor, stride: int, kernel: int, padding: str) -> tf.Tensor:
  """Frames left after a strided convolution with ``SAME`` or ``VALID`` padding."""
  if padding == "VALID":
    return tf.maximum((lengths - kernel) // stride + 1, 0)
  return (lengths + stride - 1) // stride


class ReferenceEncoder(keras.layers.Layer):
  """Reference spectrogram [B, T, F] -> summary vector [B, ``reference_size``].

  Args:
    conv_layers: entries with ``kernel_size`` [time, freq], ``stride`` [time, freq],
      ``num_channels`` and ``padding`` (OpenSeq2Seq's ``style_embedding_params/conv_layers``).
    rnn_cell_dim, num_rnn_layers, rnn_unidirectional, rnn_class: the recurrent layers
      (``keras.layers.GRU`` or ``keras.layers.LSTM``); the last layer's final state
      (both directions concatenated when bidirectional) is the summary.
    activation: activation after each convolution's batch norm.
    reference_size: units of the tanh projection of the final state (OpenSeq2Seq: 128).
  """

  def __init__(self, conv_layers: Sequence[dict], rnn_cell_dim: int, num_rnn_layers: int = 1,
               rnn_unidirectional: bool = True, rnn_class: type = keras.layers.GRU,
               activation: Callable = tf.nn.relu, reference_size: int = 128,
               bn_momentum: float = 0.1, bn_epsilon: float = 1e-5,
               kernel_initializer: Any = None, **kwargs: Any):
    super().__init__(**kwargs)
    policy = self.dtype_policy
    init = kernel_initializer or "glorot_uniform"
    self.specs = [dict(layer) for layer in conv_layers]
    self.activation = activation
    self.convs, self.norms = [], []
    for i, spec in enumerate(self.specs):
      self.convs.append(keras.layers.Conv2D(
          spec["num_channels"], tuple(spec["kernel_size"]), strides=tuple(spec["stride"]),
          padding=spec["padding"].lower(), use_bias=False, kernel_initializer=fresh(init),
          dtype=policy, name=f"conv{i + 1}"))
      # Keras' momentum is the share of the old average: 1 - the TF 1 momentum.
      self.norms.append(keras.layers.BatchNormalization(
          momentum=1.0 - bn_momentum, epsilon=bn_epsilon, dtype=policy, name=f"bn{i + 1}"))
    self.rnns = []
    for i in range(num_rnn_layers):
      rnn = rnn_class(rnn_cell_dim, return_sequences=i < num_rnn_layers - 1,
                      kernel_initializer=fresh(init), dtype=policy, name=f"rnn{i + 1}")
      if not rnn_unidirectional:
        rnn = keras.layers.Bidirectional(rnn, dtype=policy, name=f"birnn{i + 1}")
      self.rnns.append(rnn)
    self.projection = keras.layers.Dense(reference_size, activation="tanh",
                                         kernel_initializer=fresh(init), dtype=policy,
                                         name="reference_activation")

  def call(self, frames: tf.Tensor, lengths: tf.Tensor, training: bool | None = None
           ) -> tf.Tensor:
    x = tf.cast(frames, self.compute_dtype)[..., None]  # [B, T, F, 1]
    lengths = tf.cast(lengths, tf.int32)
    for spec, conv, norm in zip(self.specs, self.convs, self.norms):
      valid = sequence_mask(lengths, tf.shape(x)[1])
      x = x * tf.cast(valid, x.dtype)[:, :, None, None]
      x = conv(x)
      lengths = strided_lengths(lengths, spec["stride"][0], spec["kernel_size"][0],
                                spec["padding"])
      valid = sequence_mask(lengths, tf.shape(x)[1])
      mask = valid[:, :, None] & tf.ones(tf.shape(x)[:3], tf.bool)
      x = self.activation(tf.cast(norm(x, training=training, mask=mask), x.dtype))
    shape = tf.shape(x)
    x = tf.reshape(x, [shape[0], shape[1], x.shape[2] * x.shape[3]])
    # A reference shorter than the convolutions' stride product keeps one frame.
    mask = sequence_mask(tf.maximum(lengths, 1), tf.shape(x)[1])
    for rnn in self.rnns:
      x = rnn(x, mask=mask, training=training)
    return self.projection(x)


class StyleTokenLayer(keras.layers.Layer):
  """Multi-head additive attention from a reference summary to ``num_tokens`` style tokens.

  Args:
    num_tokens: tokens in the bank.
    token_size: size of each token embedding (OpenSeq2Seq's ``emb_size``).
    attention_size: depth of queries, keys and values, and of the style embedding
      (OpenSeq2Seq's ``attention_layer_size``); a multiple of ``num_heads``.
    num_heads: attention heads (each attends to all tokens with its own weights).
    trainable_tokens: train the token table (the paper) or keep its random initial values
      (OpenSeq2Seq; the projections still learn).

  ``call`` returns (style embedding [B, attention_size], token weights [B, heads, tokens]
  float32).
  """

  def __init__(self, num_tokens: int, token_size: int, attention_size: int, num_heads: int,
               trainable_tokens: bool = False, kernel_initializer: Any = None, **kwargs: Any):
    super().__init__(**kwargs)
    if attention_size % num_heads:
      raise ValueError(f"attention_layer_size {attention_size} is not a multiple of num_heads "
                       f"{num_heads}")
    policy = self.dtype_policy
    init = kernel_initializer or "glorot_uniform"
    self.num_tokens, self.token_size = num_tokens, token_size
    self.attention_size, self.num_heads = attention_size, num_heads
    self.trainable_tokens = trainable_tokens
    dense = lambda name: keras.layers.Dense(  # noqa: E731
        attention_size, use_bias=False, kernel_initializer=fresh(init), dtype=policy, name=name)
    self.query, self.key, self.value = dense("query"), dense("key"), dense("value")
    self.output_layer = dense("output_transform")

  def build(self, input_shape=None):
    self.tokens = self.add_weight(
        name="token_embeddings", shape=(self.num_tokens, self.token_size),
        initializer=keras.initializers.RandomUniform(-1.0, 1.0),
        trainable=self.trainable_tokens)
    self.v = self.add_weight(name="attention_v", shape=(self.num_heads,
                                                        self.attention_size // self.num_heads),
                             initializer="glorot_uniform", autocast=False)  # float32 scores
    if input_shape is not None:
      self.query.build(input_shape)
    for layer in (self.key, self.value):
      layer.build((None, self.token_size))
    self.output_layer.build((None, self.attention_size))
    self.built = True

  def _heads(self, x: tf.Tensor) -> tf.Tensor:
    """[..., attention_size] -> [..., heads, depth]."""
    depth = self.attention_size // self.num_heads
    return tf.reshape(x, tf.concat([tf.shape(x)[:-1], [self.num_heads, depth]], 0))

  def token_values(self) -> tf.Tensor:
    """Each token's value vectors [tokens, heads, depth] (what a weight of 1 contributes)."""
    return self._heads(self.value(tf.tanh(tf.cast(self.tokens, self.compute_dtype))))

  def call(self, reference: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    tokens = tf.tanh(tf.cast(self.tokens, self.compute_dtype))
    q = tf.cast(self._heads(self.query(reference)), tf.float32)  # [B, H, D]
    k = tf.cast(self._heads(self.key(tokens)), tf.float32)  # [N, H, D]
    scores = tf.einsum("bnhd,hd->bhn", tf.tanh(q[:, None] + k[None]), self.v)
    weights = tf.nn.softmax(scores, axis=-1)  # [B, H, N], float32
    return self.mix(weights), weights

  def mix(self, weights: tf.Tensor) -> tf.Tensor:
    """Style embedding [B, attention_size] of given token weights [B, heads, tokens] (the
    paper's style control: pick tokens instead of a reference)."""
    mixed = tf.einsum("bhn,nhd->bhd", tf.cast(weights, self.compute_dtype), self.token_values())
    shape = tf.shape(mixed)
    return self.output_layer(tf.reshape(mixed, [shape[0], self.attention_size]))
