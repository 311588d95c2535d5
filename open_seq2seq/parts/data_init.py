"""Data-dependent initialization (Salimans & Kingma 2016, section 2.2): one forward pass over
the first training batch sets each opted-in layer's scale and bias so that every output
channel of its pre-activation has zero mean and unit variance over the batch's real
positions.

How the pieces meet:

* a layer that supports it (e.g. the ConvS2S weight-normalized layers) asks
  :func:`active` during its call. Outside an initialization pass that is None and the layer
  runs as usual. Inside one, the layer computes its pre-activation with unit gain and zero
  bias, takes the masked moments with :meth:`InitPass.moments` (summed over every replica of
  every process by the pass's ``replica_sum``, so all replicas get the same values from the
  whole global batch), stores its new variable values with :meth:`InitPass.record` and goes
  on with the *initialized* output — so the layers above are initialized on the statistics
  they will actually see, in one pass;
* the model runs that pass (:meth:`open_seq2seq.models.model.Model.data_init_values`) inside
  :func:`recording`, and returns the recorded values in a fixed order;
* the trainer runs the model's pass once, on a fresh run's first batch, through its backend
  (which supplies ``replica_sum``), and assigns the values; a resumed run restores them from
  its checkpoint instead.

The pass is per thread: ``tf.distribute`` runs each tower's replica function in its own
thread, and each must record into its own pass.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator

import tensorflow as tf

#: Added to the variance before its square root: a channel that is constant over the batch
#: gets a large but finite gain instead of an infinite one.
VARIANCE_EPSILON = 1e-6

_local = threading.local()


class InitPass:
  """The values one initialization pass records, per layer.

  Args:
    replica_sum: sums a list of tensors over every replica of every process (identity for
      one replica); called inside the replica function.
  """

  def __init__(self, replica_sum: Callable[[list], list]):
    self.replica_sum = replica_sum
    self._values: dict[int, list[tf.Tensor]] = {}

  def recorded(self, layer) -> list[tf.Tensor] | None:
    """The values ``layer`` recorded in this pass, or None."""
    return self._values.get(id(layer))

  def record(self, layer, values: list[tf.Tensor]) -> None:
    """Stores ``layer``'s new values, one per variable of ``layer.data_init_variables()``."""
    self._values[id(layer)] = list(values)

  def moments(self, y: tf.Tensor, mask: tf.Tensor | None) -> tuple[tf.Tensor, tf.Tensor]:
    """Per-channel mean and variance (float32) of ``y`` [..., channels] over every replica's
    positions where ``mask`` (``y``'s shape without channels, True at real positions) holds;
    every position when ``mask`` is None."""
    y = tf.cast(y, tf.float32)
    channels = tf.shape(y)[-1]
    y = tf.reshape(y, [-1, channels])
    if mask is None:
      weight = tf.ones(tf.shape(y)[:1], tf.float32)
    else:
      weight = tf.reshape(tf.cast(mask, tf.float32), [-1])
    total, squares, count = self.replica_sum([
        tf.reduce_sum(y * weight[:, None], axis=0),
        tf.reduce_sum(tf.square(y) * weight[:, None], axis=0),
        tf.reduce_sum(weight)])
    count = tf.maximum(count, 1.0)
    mean = total / count
    variance = tf.maximum(squares / count - tf.square(mean), 0.0)
    return mean, variance

  def values_of(self, layers: list) -> list[tf.Tensor]:
    """The recorded values of ``layers``, flattened in order; a layer the pass never called
    keeps its current values."""
    flat: list[tf.Tensor] = []
    for layer in layers:
      values = self.recorded(layer)
      if values is None:
        values = [tf.convert_to_tensor(v) for v in layer.data_init_variables()]
      flat.extend(values)
    return flat


def active() -> InitPass | None:
  """The initialization pass running in this thread, or None."""
  return getattr(_local, "current", None)


@contextlib.contextmanager
def recording(replica_sum: Callable[[list], list]) -> Iterator[InitPass]:
  """Runs the body as an initialization pass (in this thread)."""
  previous = active()
  _local.current = InitPass(replica_sum)
  try:
    yield _local.current
  finally:
    _local.current = previous


def gain_and_bias(mean: tf.Tensor, variance: tf.Tensor, scale: float = 1.0
                  ) -> tuple[tf.Tensor, tf.Tensor]:
  """The gain and bias that map a channel of this mean and variance to mean 0 and standard
  deviation ``scale``."""
  gain = scale * tf.math.rsqrt(variance + VARIANCE_EPSILON)
  return gain, -mean * gain


__all__ = ["InitPass", "active", "recording", "gain_and_bias", "VARIANCE_EPSILON"]
