"""1-D convolution of ConvS2S: dropout on the input, a normalized kernel, then the
activation (gated linear units by default). Non-causal ("SAME") in the encoder; causal in the
decoder, with a one-position :meth:`Conv1DNetworkNormalized.step` for incremental decoding."""

from __future__ import annotations

import math
from typing import Any, Callable

import tensorflow as tf

from open_seq2seq.parts.convs2s.ffn_wn_layer import NormalizedLayer
from open_seq2seq.parts.convs2s.utils import gated_linear_units, is_glu
from open_seq2seq.parts.dropout import dropout, dropout_seed_generator


def shifted_conv1d(x: tf.Tensor, kernel: tf.Tensor, causal: bool) -> tf.Tensor:
  """Stride-1 convolution ``[batch, time, in] * [width, in, out] -> [batch, time, out]`` as
  a sum of one matmul per tap over the time-shifted input.

  Equal to ``tf.nn.conv1d`` with causal (left-only) or "SAME" padding, but forward plus
  backward is 2.2x faster than conv1d's on an AVX2 CPU (oneDNN; 512 -> 1,024 channels,
  width 3: scripts/bench_conv1d.py, docs/benchmarks.md). Not measured on a GPU.
  """
  width = kernel.shape[0]
  left = width - 1 if causal else (width - 1) // 2
  padded = tf.pad(x, [[0, 0], [left, width - 1 - left], [0, 0]])
  length = tf.shape(x)[1]
  out = tf.einsum("bti,io->bto", padded[:, :length], kernel[0])
  for tap in range(1, width):
    out += tf.einsum("bti,io->bto", padded[:, tap:tap + length], kernel[tap])
  return out


class Conv1DNetworkNormalized(NormalizedLayer):
  """Convolution ``[batch, time, in_dim] -> [batch, time, out_dim]``.

  Args:
    in_dim, out_dim: input and output channels (the conv itself produces ``2 * out_dim``
      when the activation is :func:`gated_linear_units`, which halves them).
    kernel_width: taps along time.
    keep_prob: keep probability of the dropout on the input (training only); it also sets
      the initialization scale ``sqrt(4 * keep_prob / (kernel_width * in_dim))``.
    causal: pad ``kernel_width - 1`` zeros on the left only, so position t sees inputs
      t - kernel_width + 1 .. t (decoder); else "SAME" padding (encoder).
    activation: applied after the normalization; None for none.
    normalization_type, init_var, data_init_scale: see
      :class:`~.ffn_wn_layer.FeedForwardNetworkNormalized`.
  """

  def __init__(self, in_dim: int, out_dim: int, kernel_width: int, keep_prob: float = 1.0,
               causal: bool = False, activation: Callable | None = gated_linear_units,
               normalization_type: str | None = "weight_norm", init_var: float | None = None,
               **kwargs):
    conv_out = 2 * out_dim if is_glu(activation) else out_dim
    std = init_var if init_var is not None else math.sqrt(
        4.0 * keep_prob / (kernel_width * in_dim))
    super().__init__(conv_out, normalization_type, std, **kwargs)
    self.in_dim, self.out_dim, self.conv_out = in_dim, out_dim, conv_out
    self.kernel_width, self.keep_prob, self.causal = kernel_width, keep_prob, causal
    self.activation = activation

  def build(self, input_shape=None):
    self.build_kernel((self.kernel_width, self.in_dim, self.conv_out))
    self.seed_generator = dropout_seed_generator(1.0 - self.keep_prob)

  def _finish(self, y: tf.Tensor, training: bool | None,
              padding_mask: tf.Tensor | None) -> tf.Tensor:
    y = self.normalize(y, training, padding_mask)
    return self.activation(y) if self.activation is not None else y

  def call(self, x: tf.Tensor, training: bool | None = None,
           padding_mask: tf.Tensor | None = None) -> tf.Tensor:
    """Whole sequences. The encoder zeroes padding positions of ``x`` before the call, so
    "SAME" padding sees the zeros a shorter batch would have."""
    x = dropout(x, 1.0 - self.keep_prob, training, self.seed_generator)
    return self._finish(shifted_conv1d(x, self.compute_kernel(), self.causal), training,
                        padding_mask)

  # ----------------------------------------------------------------- incremental decoding
  def empty_cache(self, batch_size: Any, dtype: Any) -> tf.Tensor | None:
    """The last ``kernel_width - 1`` inputs before the first step: zeros (the causal
    padding); None when the kernel has width 1."""
    if self.kernel_width == 1:
      return None
    return tf.zeros([batch_size, self.kernel_width - 1, self.in_dim], dtype)

  def step(self, x: tf.Tensor, cache: tf.Tensor | None) -> tuple[tf.Tensor, tf.Tensor | None]:
    """One causal position at inference: ``x`` [batch, 1, in_dim] -> ([batch, 1, out_dim],
    new cache). The cache holds the previous ``kernel_width - 1`` inputs, so a step costs
    one kernel application, not a pass over the prefix."""
    kernel = self.compute_kernel()
    if cache is None:
      window, new_cache = x, None
    else:
      window = tf.concat([cache, x], axis=1)  # [batch, kernel_width, in_dim]
      new_cache = window[:, 1:]
    flat = tf.reshape(window, [-1, self.kernel_width * self.in_dim])
    y = tf.matmul(flat, tf.reshape(kernel, [self.kernel_width * self.in_dim, self.conv_out]))
    return self._finish(y[:, None, :], False, None), new_cache


__all__ = ["Conv1DNetworkNormalized", "shifted_conv1d"]
