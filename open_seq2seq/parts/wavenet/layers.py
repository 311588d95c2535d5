"""WaveNet's layers: the stack of gated causal dilated convolutions, and one-step versions
of its operations for fast autoregressive generation (``encoders/wavenet_encoder.py``)."""

from __future__ import annotations

import keras
import tensorflow as tf


class _PerLayerInitializer:
  """Initializes a stacked [layers, ...] weight one layer at a time, so that each layer's
  slice gets the fan-in/fan-out scaling of its own shape (and its own random values)."""

  def __init__(self, initializers: list):
    self.initializers = initializers

  def __call__(self, shape, dtype=None):
    return tf.stack([init(shape[1:], dtype=dtype) for init in self.initializers])


class DilatedStack(keras.layers.Layer):
  """The ``blocks x layers_per_block`` gated layers, their weights stacked along a leading
  layer axis.

  Layer l: the filter and gate causal convolutions (dilation ``dilations[l]``) of the two
  channel halves of its input, batch norm of [filter | gate] (per channel, so one over the
  concatenation), the conditioning added, ``tanh(filter) * sigmoid(gate)``, and one 1x1
  convolution giving [residual | skip] (no bias, as OpenSeq2Seq's 1x1 convolutions).

  Why stacked: the trainer's optimizer and regularizer cost graph-tracing time per variable
  (about 0.1 s each on this machine); five stacked variables instead of 150 make the first
  training step of the published 30-layer model start tens of seconds sooner. Batch norm is
  written out for the same reason (Keras' BatchNormalization would hold four variables per
  layer); it follows Keras' semantics: masked batch moments in training, moving averages
  ``moving = momentum * moving + (1 - momentum) * batch`` updated in training, moving
  statistics otherwise.
  """

  def __init__(self, filters: int, kernel_size: int, dilations: list[int], bn_momentum: float,
               bn_epsilon: float, initializer_fn, **kwargs):
    super().__init__(**kwargs)
    self.supports_masking = True  # the padding mask arrives as `valid`
    self.filters, self.kernel_size, self.dilations = filters, kernel_size, list(dilations)
    self.half = filters // 2
    self.momentum, self.epsilon = bn_momentum, bn_epsilon
    self._initializer_fn = initializer_fn

  def build(self, input_shape=None):
    n, k, f, half = len(self.dilations), self.kernel_size, self.filters, self.half

    def stacked(name, shape):
      init = _PerLayerInitializer([self._initializer_fn() for _ in range(n)])
      return self.add_weight(shape=(n, *shape), name=name, initializer=init)

    self.filter_kernels = stacked("filter_kernels", (k, half, f))
    self.gate_kernels = stacked("gate_kernels", (k, f - half, f))
    self.residual_skip_kernels = stacked("residual_skip_kernels", (f, 2 * f))

    def norm(name, value, trainable):
      return self.add_weight(shape=(n, 2 * f), name=name, initializer=value,
                             trainable=trainable, autocast=False)

    self.bn_gamma, self.bn_beta = norm("bn_gamma", "ones", True), norm("bn_beta", "zeros", True)
    self.moving_mean = norm("moving_mean", "zeros", False)
    self.moving_variance = norm("moving_variance", "ones", False)
    super().build(input_shape)

  def queue_length(self, layer: int) -> int:
    return (self.kernel_size - 1) * self.dilations[layer]

  def weights_by_layer(self, dtype) -> list[tuple]:
    """Per layer: (filter kernel, gate kernel, residual/skip kernel) in ``dtype``, and the
    batch-norm (gamma, beta, moving mean, moving variance) in float32."""
    kernels = [tf.unstack(tf.cast(v, dtype)) for v in
               (self.filter_kernels, self.gate_kernels, self.residual_skip_kernels)]
    norms = [tf.unstack(tf.cast(v, tf.float32)) for v in
             (self.bn_gamma, self.bn_beta, self.moving_mean, self.moving_variance)]
    return list(zip(*kernels, *norms))

  def _gated(self, z, weights, cond):
    """Normalized [filter | gate] -> (residual, skip)."""
    if cond is not None:
      z += cond
    f = self.filters
    out = tf.matmul(tf.tanh(z[..., :f]) * tf.sigmoid(z[..., f:]), weights[2])
    return out[..., :f], out[..., f:]

  def _normalize(self, z, mean, variance, gamma, beta):
    scale = tf.math.rsqrt(variance + self.epsilon) * gamma
    return tf.cast((tf.cast(z, tf.float32) - mean) * scale + beta, z.dtype)

  def call(self, x, cond=None, valid=None, training=None):
    """x [B, T, filters], cond [B, T, 2 * filters], valid [B, T] (the padding mask) ->
    (residual stream, summed skips), both [B, T, filters]."""
    weight = None if valid is None else tf.cast(valid, tf.float32)[..., None]
    skips, moments = tf.zeros_like(x), []
    for layer, weights in enumerate(self.weights_by_layer(x.dtype)):
      pad, dilation = self.queue_length(layer), self.dilations[layer]

      def causal(inputs, kernel):
        # tf.nn.convolution dilates through space_to_batch, which has CPU gradients
        return tf.nn.convolution(tf.pad(inputs, [[0, 0], [pad, 0], [0, 0]]), kernel,
                                 padding="VALID", dilations=dilation)

      z = tf.concat([causal(x[..., :self.half], weights[0]),
                     causal(x[..., self.half:], weights[1])], axis=-1)
      if training:
        mean, variance = _moments(tf.cast(z, tf.float32), weight)
        moments.append((mean, variance))
      else:
        mean, variance = weights[5], weights[6]
      residual, skip = self._gated(self._normalize(z, mean, variance, *weights[3:5]),
                                   weights, cond)
      x, skips = x + residual, skips + skip
    if moments:
      means, variances = (tf.stack(m) for m in zip(*moments))
      self.moving_mean.assign(self.momentum * self.moving_mean + (1 - self.momentum) * means)
      self.moving_variance.assign(self.momentum * self.moving_variance +
                                  (1 - self.momentum) * variances)
    return x, skips

  def step(self, layer: int, weights: tuple, x, queue, cond=None):
    """Layer ``layer`` at one time step: x [B, filters], queue [B, queue_length, filters] of
    its past inputs. Returns (x + residual, skip, the next queue)."""
    taps = tf.concat([queue[:, ::self.dilations[layer]], x[:, None]], axis=1)  # [B, k, f]
    z = tf.concat([conv_step(weights[0], taps[..., :self.half]),
                   conv_step(weights[1], taps[..., self.half:])], axis=-1)
    residual, skip = self._gated(self._normalize(z, *weights[5:7], *weights[3:5]), weights,
                                 cond)
    return x + residual, skip, tf.concat([queue[:, 1:], x[:, None]], axis=1)


def _moments(z: tf.Tensor, weight: tf.Tensor | None) -> tuple[tf.Tensor, tf.Tensor]:
  """Per-channel mean and (biased) variance of z [B, T, C] over the valid positions."""
  if weight is None:
    return tf.nn.moments(z, axes=[0, 1])
  count = tf.maximum(tf.reduce_sum(weight), 1.0)
  mean = tf.reduce_sum(z * weight, axis=[0, 1]) / count
  variance = tf.reduce_sum(tf.square(z - mean) * weight, axis=[0, 1]) / count
  return mean, variance


def conv_step(kernel, taps: tf.Tensor) -> tf.Tensor:
  """A causal convolution's output at the newest tap: taps [B, k, C_in], oldest first;
  kernel [k, C_in, C_out] in taps' dtype."""
  return tf.einsum("bkc,kcf->bf", taps, tf.cast(kernel, taps.dtype))


def bn_step(bn: keras.layers.BatchNormalization, x: tf.Tensor) -> tf.Tensor:
  """Batch norm with the moving statistics (inference), in float32, back in x's dtype."""
  scale = tf.math.rsqrt(tf.cast(bn.moving_variance, tf.float32) + bn.epsilon)
  scale *= tf.cast(bn.gamma, tf.float32)
  shift = tf.cast(bn.beta, tf.float32) - tf.cast(bn.moving_mean, tf.float32) * scale
  return tf.cast(tf.cast(x, tf.float32) * scale + shift, x.dtype)
