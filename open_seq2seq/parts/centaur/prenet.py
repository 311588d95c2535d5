"""Centaur's decoder prenet: fully connected layers, each followed by dropout.

Unlike Tacotron 2's prenet (``parts/tacotron/layers.py``), whose dropout is always on,
Centaur's drops out in training only unless ``inference_dropout`` (OpenSeq2Seq's
``prenet_use_inference_dropout``) keeps it on in eval and inference too.
"""

from __future__ import annotations

from typing import Any, Callable

import keras
import tensorflow as tf

from open_seq2seq.utils.initializers import fresh


class Prenet(keras.layers.Layer):
  """``n_layers`` x (Dense(hidden_size, activation) -> dropout).

  Args:
    n_layers: number of layers.
    hidden_size: units per layer.
    in_features: input width (the variables are built from it).
    activation_fn: activation of every layer (default ReLU).
    dropout: dropout rate after every layer.
    inference_dropout: keep the dropout on outside training.
    kernel_initializer: initializer of the kernels.
    seed: seed of the dropout masks (None: unseeded).
  """

  def __init__(self, n_layers: int, hidden_size: int, in_features: int,
               activation_fn: Callable | None = tf.nn.relu, dropout: float = 0.5,
               inference_dropout: bool = False, kernel_initializer: Any = None,
               seed: int | None = None, **kwargs: Any):
    super().__init__(**kwargs)
    self.dense = [keras.layers.Dense(hidden_size, activation=activation_fn, dtype=self.dtype_policy,
                                     kernel_initializer=fresh(kernel_initializer or
                                                              "glorot_uniform"),
                                     name=f"layer_{i}") for i in range(n_layers)]
    self.in_features, self.hidden_size = in_features, hidden_size
    self.rate, self.inference_dropout, self.seed = dropout, inference_dropout, seed

  @property
  def output_size(self) -> int:
    return self.hidden_size if self.dense else self.in_features

  def build(self, input_shape: Any = None) -> None:
    size = self.in_features
    for dense in self.dense:
      dense.build((None, size))
      size = dense.units
    self.built = True

  def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    drop = self.rate > 0 and (bool(training) or self.inference_dropout)
    for dense in self.dense:
      x = dense(x)
      if drop:
        x = tf.nn.dropout(x, rate=self.rate, seed=self.seed)
    return x
