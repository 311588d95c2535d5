"""HiFi-GAN's convolutions: 1-D convolution and transposed convolution with explicit zero
padding, groups, and weight or spectral normalization of the kernel, reading padded batches
as if each utterance were alone.

**Padding rule.** ``call(x, lengths)`` multiplies the input by the sequence mask first, so
every frame past an utterance's length enters as the zero an unpadded utterance's own
padding would be; :meth:`output_lengths` gives the number of output frames the unpadded
utterance would have. Those frames are computed from exactly the same inputs, so a stack of
these layers (each masking its input) gives an utterance the same output in any batch.

**Normalization** (``normalization``):

* ``"weight"``: kernel ``= g * v / ||v||`` with the norm per output channel (Salimans &
  Kingma; for the transposed convolution too, where PyTorch's default normalizes per input
  channel); ``g`` starts at ``||v||``, so the initial kernel is the initializer's draw. The
  kernel is recomputed from ``(g, v)`` at every call; :meth:`kernel` folds it once (e.g. for
  an exported graph or a weight conversion).
* ``"spectral"``: kernel ``/ sigma``, ``sigma`` the kernel's largest singular value (as a
  matrix ``[out, k * in / groups]``) estimated by one power iteration per training call on a
  kept vector ``u`` (non-trainable); outside training ``u`` stays as it is.
* ``None``: the plain kernel.

The normalized kernel is computed in float32 from float32 variables and cast to the layer's
compute dtype, so mixed precision changes only the convolution itself.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.errors import ConfigError

NORMALIZATIONS = ("weight", "spectral", None)


def length_mask(lengths: tf.Tensor | None, x: tf.Tensor) -> tf.Tensor | None:
  """[B, T, 1] mask of x [B, T, C] in x's dtype (None without lengths)."""
  if lengths is None:
    return None
  return tf.sequence_mask(lengths, tf.shape(x)[1], dtype=x.dtype)[:, :, None]


def apply_mask(x: tf.Tensor, lengths: tf.Tensor | None) -> tf.Tensor:
  """x with the frames past ``lengths`` set to zero (x unchanged without lengths)."""
  mask = length_mask(lengths, x)
  return x if mask is None else x * mask


#: Compute dtypes whose dilated or grouped convolutions go through :func:`half_conv1d`.
HALF_DTYPES = (tf.float16, tf.bfloat16)


def dilated_conv1d(x: tf.Tensor, kernel: tf.Tensor, dilation: int) -> tf.Tensor:
  """``tf.nn.conv1d(x, kernel, 1, "VALID", dilations=dilation)`` as space-to-batch, an
  undilated convolution and batch-to-space: the same products and sums. TensorFlow's CPU
  kernels cannot take the gradient of a dilated convolution in half precision (oneDNN's
  cover float32, and half types only with AVX-512; Eigen's fallback refuses dilation > 1),
  so a mixed-precision HiFi-GAN could not train on most CPUs without this."""
  return tf.nn.with_space_to_batch(
      x, dilation_rate=[dilation], padding="VALID",
      op=lambda inputs, _, padding: tf.nn.conv1d(inputs, kernel, 1, padding))


def half_conv1d(x: tf.Tensor, kernel: tf.Tensor, strides: int, dilation: int,
                groups: int) -> tf.Tensor:
  """A "VALID" convolution ``[B, T, in] * [k, in / groups, out]`` made of what TensorFlow's
  CPU kernels can differentiate in half precision: Eigen's fallback has no grouped filter
  gradient either, so each group is its own convolution (outputs concatenated in order),
  and a dilation goes through :func:`dilated_conv1d`."""
  inputs = tf.split(x, groups, axis=-1) if groups > 1 else [x]
  kernels = tf.split(kernel, groups, axis=-1) if groups > 1 else [kernel]
  outputs = [dilated_conv1d(i, k, dilation) if dilation > 1 else
             tf.nn.conv1d(i, k, strides, "VALID") for i, k in zip(inputs, kernels)]
  return tf.concat(outputs, axis=-1) if groups > 1 else outputs[0]


def check_normalization(normalization: str | None, where: str) -> None:
  """Raises a ConfigError naming ``where`` unless ``normalization`` is a known one."""
  if normalization not in NORMALIZATIONS:
    raise ConfigError(f"{where}: {normalization!r} is not one of "
                      f"{', '.join(map(repr, NORMALIZATIONS))}")


class _NormalizedKernel(keras.layers.Layer):
  """A layer holding one kernel ``[k, in, out]`` (``out`` on ``out_axis``) and a bias, with
  the normalization of the module docstring."""

  def __init__(self, normalization: str | None, kernel_initializer: Any, use_bias: bool,
               **kwargs: Any):
    super().__init__(**kwargs)
    check_normalization(normalization, f"{self.name}/normalization")
    self.normalization = normalization
    self.kernel_initializer = kernel_initializer
    self.use_bias = use_bias

  def _build_kernel(self, shape: tuple, out_axis: int) -> None:
    self.out_axis = out_axis % len(shape)
    out = shape[self.out_axis]
    self.kernel_v = self.add_weight(
        shape=shape, name="kernel", autocast=False,
        initializer=keras.initializers.get(self.kernel_initializer or "glorot_uniform"))
    if self.normalization == "weight":
      # g = ||v|| of v's initial draw, so that the initial kernel is that draw
      self.kernel_g = self.add_weight(
          shape=(out,), name="kernel_g", autocast=False,
          initializer=lambda *_, **__: self._norm(tf.convert_to_tensor(self.kernel_v)))
    elif self.normalization == "spectral":
      self.spectral_u = self.add_weight(shape=(out,), name="spectral_u", autocast=False,
                                        trainable=False,
                                        initializer=keras.initializers.RandomNormal())
    self.bias = (self.add_weight(shape=(out,), name="bias", initializer="zeros",
                                 autocast=False) if self.use_bias else None)

  def _norm(self, kernel: tf.Tensor) -> tf.Tensor:
    axes = [a for a in range(len(kernel.shape)) if a != self.out_axis]
    return tf.sqrt(tf.reduce_sum(tf.square(kernel), axis=axes))

  def _as_matrix(self, kernel: tf.Tensor) -> tf.Tensor:
    """[out, everything else]."""
    rank = len(kernel.shape)
    perm = [self.out_axis] + [a for a in range(rank) if a != self.out_axis]
    return tf.reshape(tf.transpose(kernel, perm), [kernel.shape[self.out_axis], -1])

  def kernel(self, training: bool | None = None) -> tf.Tensor:
    """The normalized float32 kernel (a spectral norm's ``u`` advances when training)."""
    v = tf.convert_to_tensor(self.kernel_v)
    if self.normalization == "weight":
      shape = [1] * len(v.shape)
      shape[self.out_axis] = -1
      scale = tf.convert_to_tensor(self.kernel_g) / tf.maximum(self._norm(v), 1e-12)
      return v * tf.reshape(scale, shape)
    if self.normalization == "spectral":
      matrix = self._as_matrix(v)
      frozen = tf.stop_gradient(matrix)
      u = tf.math.l2_normalize(tf.convert_to_tensor(self.spectral_u))
      right = tf.math.l2_normalize(tf.linalg.matvec(frozen, u, transpose_a=True))
      if training:
        u = tf.math.l2_normalize(tf.linalg.matvec(frozen, right))
        self.spectral_u.assign(u)
      # sigma = u' W v with u, v held fixed: the gradient of W / sigma as PyTorch's.
      sigma = tf.tensordot(tf.stop_gradient(u), tf.linalg.matvec(matrix, right), 1)
      return v / sigma
    return v

  def _finish(self, y: tf.Tensor) -> tf.Tensor:
    if self.bias is None:
      return y
    return y + tf.cast(self.bias, y.dtype)


class HiFiConv1D(_NormalizedKernel):
  """``[B, T, in_channels] -> [B, T', filters]`` convolution over zero-padded, masked input.

  Args:
    filters: output channels.
    kernel_size, strides, dilation, groups: as ``tf.nn.conv1d`` (``in_channels`` and
      ``filters`` divisible by ``groups``).
    in_channels: input channels (the variables are built from it).
    padding: zeros on each side, an int or ``(left, right)``; None: ``"same"`` for stride 1,
      ``(span - 1) // 2`` on the left and the rest of ``span - 1`` on the right.
    normalization: "weight", "spectral" or None (module docstring).
    kernel_initializer: initializer of the kernel (``v`` under weight norm).
    use_bias: add a bias.
  """

  def __init__(self, filters: int, kernel_size: int, in_channels: int, strides: int = 1,
               dilation: int = 1, groups: int = 1, padding: int | tuple | None = None,
               normalization: str | None = "weight", kernel_initializer: Any = None,
               use_bias: bool = True, **kwargs: Any):
    super().__init__(normalization, kernel_initializer, use_bias, **kwargs)
    if in_channels % groups or filters % groups:
      raise ConfigError(f"{self.name}: groups {groups} must divide the input channels "
                        f"{in_channels} and the output channels {filters}")
    if strides > 1 and dilation > 1:
      raise ConfigError(f"{self.name}: strides and dilation cannot both be above 1")
    self.filters, self.kernel_size, self.in_channels = filters, kernel_size, in_channels
    self.strides, self.dilation, self.groups = strides, dilation, groups
    span = (kernel_size - 1) * dilation + 1
    if padding is None:
      padding = ((span - 1) // 2, span - 1 - (span - 1) // 2)
    elif isinstance(padding, int):
      padding = (padding, padding)
    self.padding, self.span = tuple(padding), span

  def build(self, input_shape: Any = None) -> None:
    self._build_kernel((self.kernel_size, self.in_channels // self.groups, self.filters), -1)
    self.built = True

  def output_lengths(self, lengths: tf.Tensor) -> tf.Tensor:
    """Output frames of an utterance of ``lengths`` input frames alone."""
    padded = lengths + sum(self.padding)
    return tf.maximum((padded - self.span) // self.strides + 1, 0)

  def call(self, x: tf.Tensor, lengths: tf.Tensor | None = None,
           training: bool | None = None) -> tf.Tensor:
    x = tf.pad(apply_mask(x, lengths), [[0, 0], list(self.padding), [0, 0]])
    kernel = tf.cast(self.kernel(training), x.dtype)
    if x.dtype in HALF_DTYPES and (self.dilation > 1 or self.groups > 1):
      y = half_conv1d(x, kernel, self.strides, self.dilation, self.groups)
    else:
      y = tf.nn.conv1d(x, kernel, self.strides, "VALID", dilations=self.dilation)
    return self._finish(y)


class HiFiConv1DTranspose(_NormalizedKernel):
  """``[B, T, in_channels] -> [B, T * strides, filters]`` transposed convolution.

  The full output, ``(T - 1) * strides + kernel_size`` frames, is cropped to ``T * strides``
  starting at frame ``(kernel_size - strides) // 2`` (PyTorch's ``padding = (k - u) // 2``
  for even ``k - u``), so output frame ``n`` reads input frames ``i`` with
  ``0 <= n + crop - i * strides < kernel_size``; ``kernel_size >= strides``.
  """

  def __init__(self, filters: int, kernel_size: int, strides: int, in_channels: int,
               normalization: str | None = "weight", kernel_initializer: Any = None,
               use_bias: bool = True, **kwargs: Any):
    super().__init__(normalization, kernel_initializer, use_bias, **kwargs)
    if kernel_size < strides:
      raise ConfigError(f"{self.name}: upsampling kernel size {kernel_size} is below its "
                        f"rate {strides}; use a kernel of at least the rate (e.g. 2x)")
    self.filters, self.kernel_size, self.strides = filters, kernel_size, strides
    self.in_channels = in_channels
    self.crop = (kernel_size - strides) // 2

  def build(self, input_shape: Any = None) -> None:
    # tf.nn.conv1d_transpose's kernel layout: [k, out, in]
    self._build_kernel((self.kernel_size, self.filters, self.in_channels), 1)
    self.built = True

  def output_lengths(self, lengths: tf.Tensor) -> tf.Tensor:
    return lengths * self.strides

  def call(self, x: tf.Tensor, lengths: tf.Tensor | None = None,
           training: bool | None = None) -> tf.Tensor:
    x = apply_mask(x, lengths)
    batch, frames = tf.shape(x)[0], tf.shape(x)[1]
    full = (frames - 1) * self.strides + self.kernel_size
    kernel = tf.cast(self.kernel(training), x.dtype)
    y = tf.nn.conv1d_transpose(x, kernel, tf.stack([batch, full, self.filters]), self.strides,
                               "VALID")
    y = y[:, self.crop:self.crop + frames * self.strides]
    return self._finish(y)
