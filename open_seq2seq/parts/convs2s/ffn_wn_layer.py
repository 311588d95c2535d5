"""Linear layers of ConvS2S with weight normalization (Salimans & Kingma 2016) or another of
OpenSeq2Seq's ``normalization_type`` values, and the base class the conv layer shares.

Weight normalization: the kernel is ``w = g * v / ||v||`` with one norm per output channel
(over every other axis). As in OpenSeq2Seq, ``v`` is drawn from a normal distribution and ``g``
starts at the norm of that draw (so ``w == v`` at the start); there is no data-dependent
initialization.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from open_seq2seq.parts.transformer.normalization import make_norm


class NormalizedLayer(keras.layers.Layer):
  """A kernel followed by its normalization: weight norm + bias, batch norm, layer norm, or
  a plain bias (``normalization_type`` None).

  Variables are float32 (read as such, then cast to the compute dtype), so the weight
  norm's ``||v||`` is exact under mixed precision. Subclasses call :meth:`build_kernel` in
  ``build`` and :meth:`normalize` on the kernel's output.

  Args:
    out_channels: channels the kernel produces (what the norm or bias applies to).
    normalization_type: "weight_norm", "batch_norm", "layer_norm" or None.
    init_std: standard deviation of the kernel's normal initialization.
  """

  def __init__(self, out_channels: int, normalization_type: str | None = "weight_norm",
               init_std: float = 0.1, **kwargs):
    super().__init__(**kwargs)
    self.out_channels = out_channels
    self.normalization_type = normalization_type
    self.init_std = init_std
    self.norm = None
    if normalization_type == "batch_norm":
      # OpenSeq2Seq's momentum 0.95 and epsilon 1e-4 are the batch_norm defaults there.
      self.norm = make_norm({"type": "batch_norm"}, dtype=self.dtype_policy)
    elif normalization_type == "layer_norm":
      self.norm = make_norm({"type": "layernorm_L2"}, dtype=self.dtype_policy)
    elif normalization_type not in ("weight_norm", None):
      raise ValueError(f"normalization_type: unknown value {normalization_type!r}")

  @property
  def weight_normalized(self) -> bool:
    return self.normalization_type == "weight_norm"

  def build_kernel(self, shape: tuple[int, ...]) -> None:
    """Creates the kernel (``V`` and ``g`` under weight norm, else ``W``) and the bias."""
    init = keras.initializers.RandomNormal(0.0, self.init_std)
    if self.weight_normalized:
      self.v = self.add_weight(name="V", shape=shape, initializer=init, autocast=False)
      axes = list(range(len(shape) - 1))
      # g starts at ||v||: the effective kernel equals the initial draw of v.
      self.g = self.add_weight(
          name="g", shape=(shape[-1],), autocast=False,
          initializer=lambda shape, dtype=None: tf.sqrt(tf.reduce_sum(
              tf.square(tf.convert_to_tensor(self.v)), axis=axes)))
    else:
      self.v = self.add_weight(name="W", shape=shape, initializer=init, autocast=False)
      self.g = None
    self.b = None
    if self.normalization_type in ("weight_norm", None):
      self.b = self.add_weight(name="b", shape=(shape[-1],), initializer="zeros",
                               autocast=False)
    if self.norm is not None:
      self.norm.build((None, shape[-1]))

  @property
  def kernel(self) -> tf.Tensor:
    """The effective kernel, float32: ``g * v / ||v||`` under weight norm, else ``W``."""
    v = tf.convert_to_tensor(self.v)
    if self.g is None:
      return v
    axes = list(range(v.shape.rank - 1))
    return v * (self.g * tf.math.rsqrt(tf.reduce_sum(tf.square(v), axis=axes)))

  def compute_kernel(self) -> tf.Tensor:
    """The effective kernel in the compute dtype."""
    return tf.cast(self.kernel, self.compute_dtype)

  def normalize(self, y: tf.Tensor, training: bool | None = None,
                padding_mask: tf.Tensor | None = None) -> tf.Tensor:
    """Bias or normalization of the kernel's output ``y`` [..., out_channels].

    ``padding_mask`` (bool, ``y``'s shape without channels, True at real positions) keeps
    padding out of batch norm's training statistics.
    """
    if self.b is not None:
      return y + tf.cast(self.b, y.dtype)
    return self.norm(y, padding_mask=padding_mask, training=training)


class FeedForwardNetworkNormalized(NormalizedLayer):
  """Linear map ``[..., in_dim] -> [..., out_dim]`` with a normalized kernel.

  Args:
    in_dim, out_dim: input and output channels.
    keep_prob: keep probability of the dropout applied before this layer (it sets the
      initialization scale ``sqrt(keep_prob / in_dim)``; no dropout happens here).
    normalization_type: see :class:`NormalizedLayer`.
    init_var: standard deviation of the initialization, overriding the scale above.
  """

  def __init__(self, in_dim: int, out_dim: int, keep_prob: float = 1.0,
               normalization_type: str | None = "weight_norm", init_var: float | None = None,
               **kwargs):
    std = init_var if init_var is not None else math.sqrt(keep_prob / in_dim)
    super().__init__(out_dim, normalization_type, std, **kwargs)
    self.in_dim, self.out_dim = in_dim, out_dim

  def build(self, input_shape=None):
    self.build_kernel((self.in_dim, self.out_dim))

  def call(self, x: tf.Tensor, training: bool | None = None,
           padding_mask: tf.Tensor | None = None) -> tf.Tensor:
    y = tf.matmul(x, self.compute_kernel())
    return self.normalize(y, training, padding_mask)


# OpenSeq2Seq's (misspelled) name, kept so ported code importing it still works.
FeedFowardNetworkNormalized = FeedForwardNetworkNormalized

__all__ = ["NormalizedLayer", "FeedForwardNetworkNormalized", "FeedFowardNetworkNormalized"]
