"""Helpers shared by the Transformer encoder and decoder stacks.

Sinusoidal position encodings, attention biases (padding and causal masks) and the pre/post-norm
residual wrapper (its norm comes from :mod:`.normalization`, its dropout from
:mod:`open_seq2seq.parts.dropout`).

Attention biases are *additive*: 0 where attending is allowed and a large negative number
where it is not. The attention layer adds them to float32 logits, but a bias may be stored in
the compute dtype; :func:`large_negative` picks a value that does not overflow it (float16
tops out at 65504, so -1e9 would become -inf there).
"""

from __future__ import annotations

import math
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.dropout import dropout, dropout_seed_generator
from open_seq2seq.parts.transformer.normalization import NORM_PARAMS, make_norm
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS
from open_seq2seq.utils.params import Param

#: Config keys that the Transformer encoder and decoder share (OpenSeq2Seq names).
SHARED_PARAMS = {
    "hidden_size": Param(int, doc="Model width d_model (embeddings, attention, residuals)."),
    "num_heads": Param(int, doc="Number of attention heads; must divide hidden_size."),
    "filter_size": Param(int, doc="Inner width of the position-wise feed-forward network."),
    "attention_dropout": Param(float, 0.1, "Dropout on attention probabilities."),
    "relu_dropout": Param(float, 0.1, "Dropout after the feed-forward ReLU."),
    "layer_postprocess_dropout": Param(
        float, 0.1, "Dropout on each sublayer's output (and on the input embeddings)."),
    "norm_placement": Param(str, "pre", "Norm before each sublayer ('pre', with a final "
                            "norm) or after the residual addition ('post', the paper's).",
                            choices=("pre", "post")),
    "norm_params": NORM_PARAMS,
    "pad_embeddings_2_eight": Param(
        bool, False, "Pad the embedding matrix's vocabulary to a multiple of 8."),
    "scale_embeddings": Param(bool, True, "Multiply embeddings by sqrt(hidden_size)."),
    "max_relative_positions": Param(
        int, 0, "Self-attention relative position representations clipped at this distance "
        "(Shaw et al.; OpenNMT-tf's maximum_relative_position), instead of sinusoidal "
        "positions; 0: sinusoidal positions."),
    **INITIALIZER_PARAMS,
}


def check_shared_params(params: dict, where: str) -> None:
  """Cross-key checks of :data:`SHARED_PARAMS` values; raises ConfigError."""
  for key in ("hidden_size", "num_heads", "filter_size"):
    if params[key] <= 0:
      raise ConfigError(f"{where}/{key}: must be positive, got {params[key]}")
  if params["hidden_size"] % params["num_heads"]:
    raise ConfigError(f"{where}/num_heads: {params['num_heads']} does not divide "
                      f"hidden_size {params['hidden_size']}")
  if params["max_relative_positions"] < 0:
    raise ConfigError(f"{where}/max_relative_positions: must be 0 (sinusoidal positions) or "
                      f"a positive distance, got {params['max_relative_positions']}")
  for key in ("attention_dropout", "relu_dropout", "layer_postprocess_dropout"):
    if not 0.0 <= params[key] < 1.0:
      raise ConfigError(f"{where}/{key}: must be in [0, 1), got {params[key]}")


def large_negative(dtype: Any) -> float:
  """A masking value that is "minus infinity" for softmax but finite in ``dtype``."""
  dtype = tf.as_dtype(dtype)
  if dtype == tf.float16:
    # Half the range: two masked logits can still be added without reaching -inf.
    return -0.5 * float(np.finfo(np.float16).max)
  return -1e9


def get_position_encoding(length: Any, hidden_size: int, min_timescale: float = 1.0,
                          max_timescale: float = 1.0e4) -> tf.Tensor:
  """Sinusoidal position encodings (Vaswani et al. 2017), float32 [length, hidden_size].

  The first half of the channels holds sines and the second half cosines, with timescales
  in geometric progression from ``min_timescale`` to ``max_timescale``.
  """
  position = tf.cast(tf.range(length), tf.float32)
  num_timescales = hidden_size // 2
  log_increment = math.log(max_timescale / min_timescale) / max(num_timescales - 1, 1)
  inv_timescales = min_timescale * tf.exp(
      tf.range(num_timescales, dtype=tf.float32) * -log_increment)
  scaled_time = position[:, None] * inv_timescales[None, :]
  signal = tf.concat([tf.sin(scaled_time), tf.cos(scaled_time)], axis=1)
  if hidden_size % 2:
    signal = tf.pad(signal, [[0, 0], [0, 1]])
  return signal


def get_padding_mask(lengths: tf.Tensor, max_length: Any) -> tf.Tensor:
  """Boolean [batch, max_length]: True at real (non-padding) positions."""
  return tf.sequence_mask(lengths, maxlen=max_length)


def get_padding_bias(lengths: tf.Tensor, max_length: Any,
                     dtype: Any = tf.float32) -> tf.Tensor:
  """Attention bias [batch, 1, 1, max_length] hiding key positions past each length."""
  mask = get_padding_mask(lengths, max_length)
  bias = tf.where(mask, tf.zeros([], dtype), tf.constant(large_negative(dtype), dtype))
  return bias[:, None, None, :]


def get_decoder_self_attention_bias(length: Any, dtype: Any = tf.float32) -> tf.Tensor:
  """Causal bias [1, 1, length, length]: position t may attend to positions <= t only."""
  allowed = tf.linalg.band_part(tf.ones([length, length], tf.bool), -1, 0)
  bias = tf.where(allowed, tf.zeros([], dtype), tf.constant(large_negative(dtype), dtype))
  return bias[None, None, :, :]


class ResidualNorm(keras.layers.Layer):
  """Normalization, dropout and residual connection around one sublayer.

  Pre-norm (default): ``x + dropout(f(norm(x)))``; post-norm (the original paper):
  ``norm(x + dropout(f(x)))``. Call :meth:`pre` on the sublayer's input and :meth:`post`
  with the residual input and the sublayer's output. The norm is the one ``norm_params``
  chooses (:func:`~open_seq2seq.parts.transformer.normalization.make_norm`); batch norm
  reads ``padding_mask`` (bool [batch, time], True at real positions) in training.
  """

  def __init__(self, hidden_size: int, dropout_rate: float, norm_placement: str = "pre",
               norm_params: dict | None = None, **kwargs):
    super().__init__(**kwargs)
    self.dropout_rate = dropout_rate
    self.pre_norm = norm_placement == "pre"
    self.hidden_size = hidden_size
    self.norm = make_norm(norm_params, dtype=self.dtype_policy)

  def build(self, input_shape=None):
    self.norm.build((None, self.hidden_size))
    self.seed_generator = dropout_seed_generator(self.dropout_rate)

  def pre(self, x: tf.Tensor, training: bool | None = None,
          padding_mask: tf.Tensor | None = None) -> tf.Tensor:
    if not self.pre_norm:
      return x
    return self.norm(x, padding_mask=padding_mask, training=training)

  def post(self, x: tf.Tensor, y: tf.Tensor, training: bool | None,
           padding_mask: tf.Tensor | None = None) -> tf.Tensor:
    out = x + dropout(y, self.dropout_rate, training, self.seed_generator)
    if self.pre_norm:
      return out
    return self.norm(out, padding_mask=padding_mask, training=training)
