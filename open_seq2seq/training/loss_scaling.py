"""Loss scaling for half-precision training.

A scaler multiplies the loss before back-propagation so that small gradients survive in
float16, and the trainer divides the gradients by the same factor before using them. The
trainer calls :meth:`LossScaler.update` once per step with the largest absolute unscaled
gradient and whether all gradients are finite; a step with non-finite gradients is skipped.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from open_seq2seq.errors import ConfigError


class LossScaler(tf.Module):
  """Constant scale (1 disables scaling). State lives in tf.Variables so it is checkpointed."""

  def __init__(self, scale: float = 1.0, name: str = "loss_scaler"):
    super().__init__(name=name)
    self._scale = tf.Variable(float(scale), trainable=False, dtype=tf.float32, name="scale")

  @property
  def scale(self) -> tf.Tensor:
    return tf.convert_to_tensor(self._scale)

  def update(self, grad_amax: tf.Tensor, all_finite: tf.Tensor) -> Any:
    """Adapts the scale after a step (no-op for a static scale)."""
    del grad_amax, all_finite
    return tf.no_op()


StaticLossScaler = LossScaler


def make_loss_scaler(loss_scaling: Any, params: dict | None = None) -> LossScaler | None:
  """The scaler for a config's ``loss_scaling`` value (None: no scaling)."""
  params = params or {}
  if loss_scaling is None:
    return None
  if isinstance(loss_scaling, (int, float)) and not isinstance(loss_scaling, bool):
    if params:
      raise ConfigError("loss_scaling_params: a static loss_scaling takes no parameters")
    return StaticLossScaler(float(loss_scaling))
  raise ConfigError(f"loss_scaling: {loss_scaling!r} is not a number, 'Backoff' or 'LogMax'")
