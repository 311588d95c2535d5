"""Linear layers of ConvS2S with weight normalization (Salimans & Kingma 2016) or another of
OpenSeq2Seq's ``normalization_type`` values, and the base class the conv layer shares.

Weight normalization: the kernel is ``w = g * v / ||v||`` with one norm per output channel
(over every other axis). As in OpenSeq2Seq, ``v`` is drawn from a normal distribution and ``g``
starts at the norm of that draw (so ``w == v`` at the start). With ``data_init`` the layer
also takes part in a data-dependent initialization pass (:mod:`open_seq2seq.parts.data_init`):
``g`` and ``b`` are then set from the first training batch so that each output channel of
``x . w + b`` has zero mean and standard deviation ``data_init_scale`` over the real positions
(Salimans & Kingma 2016, section 2.2).
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from open_seq2seq.parts import data_init as data_init_pass
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
    data_init_scale: the standard deviation each output channel starts at when the layer
      takes part in data-dependent initialization passes (weight norm only); None: it
      does not.
  """

  def __init__(self, out_channels: int, normalization_type: str | None = "weight_norm",
               init_std: float = 0.1, data_init_scale: float | None = None, **kwargs):
    super().__init__(**kwargs)
    self.out_channels = out_channels
    self.normalization_type = normalization_type
    self.init_std = init_std
    if data_init_scale is not None and normalization_type != "weight_norm":
      raise ValueError(f"data-dependent initialization needs normalization_type "
                       f"'weight_norm', not {normalization_type!r}")
    self.data_init_scale = data_init_scale
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
  def data_init(self) -> bool:
    """Whether this layer takes part in data-dependent initialization passes."""
    return self.data_init_scale is not None

  def data_init_variables(self) -> list:
    """The variables a data-dependent initialization sets: ``[g, b]``."""
    return [self.g, self.b]

  def _init_pass(self) -> data_init_pass.InitPass | None:
    return data_init_pass.active() if self.data_init else None

  @property
  def kernel(self) -> tf.Tensor:
    """The effective kernel, float32: ``g * v / ||v||`` under weight norm, else ``W``.

    In an initialization pass, ``g`` is 1 until this layer has recorded its new value (so
    the first call measures the statistics of ``x . v / ||v||``), then the recorded one."""
    v = tf.convert_to_tensor(self.v)
    if self.g is None:
      return v
    g = tf.convert_to_tensor(self.g)
    init = self._init_pass()
    if init is not None:
      recorded = init.recorded(self)
      g = recorded[0] if recorded is not None else tf.ones_like(g)
    axes = list(range(v.shape.rank - 1))
    return v * (g * tf.math.rsqrt(tf.reduce_sum(tf.square(v), axis=axes)))

  def compute_kernel(self) -> tf.Tensor:
    """The effective kernel in the compute dtype."""
    return tf.cast(self.kernel, self.compute_dtype)

  def normalize(self, y: tf.Tensor, training: bool | None = None,
                padding_mask: tf.Tensor | None = None) -> tf.Tensor:
    """Bias or normalization of the kernel's output ``y`` [..., out_channels].

    ``padding_mask`` (bool, ``y``'s shape without channels, True at real positions) keeps
    padding out of batch norm's training statistics (and out of a data-dependent
    initialization's).
    """
    init = self._init_pass()
    if init is not None:
      recorded = init.recorded(self)
      if recorded is None:  # y was computed with unit gain: measure it, set g and b
        mean, variance = init.moments(y, padding_mask)
        recorded = data_init_pass.gain_and_bias(mean, variance, self.data_init_scale)
        init.record(self, recorded)
        return y * tf.cast(recorded[0], y.dtype) + tf.cast(recorded[1], y.dtype)
      return y + tf.cast(recorded[1], y.dtype)
    if self.b is not None:
      return y + tf.cast(self.b, y.dtype)
    return self.norm(y, padding_mask=padding_mask, training=training)


class FeedForwardNetworkNormalized(NormalizedLayer):
  """Linear map ``[..., in_dim] -> [..., out_dim]`` with a normalized kernel.

  Args:
    in_dim, out_dim: input and output channels.
    keep_prob: keep probability of the dropout applied before this layer (it sets the
      initialization scale ``sqrt(keep_prob / in_dim)``; no dropout happens here).
    normalization_type, data_init_scale: see :class:`NormalizedLayer`.
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
