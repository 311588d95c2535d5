"""Position-wise feed-forward network of a Transformer layer."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.parts.dropout import dropout, dropout_seed_generator


class FeedForwardNetwork(keras.layers.Layer):
  """``Dense(filter_size, relu) -> dropout(relu_dropout) -> Dense(hidden_size)``.

  Applied to every position independently, so padding never leaks into real positions.
  """

  def __init__(self, hidden_size: int, filter_size: int, relu_dropout: float = 0.0,
               kernel_initializer: Any = "glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.relu_dropout = relu_dropout
    self.filter_dense = keras.layers.Dense(
        filter_size, activation="relu", kernel_initializer=kernel_initializer,
        dtype=self.dtype_policy, name="filter_layer")
    self.output_dense = keras.layers.Dense(
        hidden_size, kernel_initializer=kernel_initializer, dtype=self.dtype_policy,
        name="output_layer")
    self.hidden_size, self.filter_size = hidden_size, filter_size

  def build(self, input_shape=None):
    self.filter_dense.build((None, self.hidden_size))
    self.output_dense.build((None, self.filter_size))
    self.seed_generator = dropout_seed_generator(self.relu_dropout)

  def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    hidden = dropout(self.filter_dense(x), self.relu_dropout, training, self.seed_generator)
    return self.output_dense(hidden)


# OpenSeq2Seq's (misspelled) name, kept so ported code importing it still works.
FeedFowardNetwork = FeedForwardNetwork
