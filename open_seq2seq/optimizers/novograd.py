"""NovoGrad: momentum SGD on gradients normalised layer by layer (Ginsburg et al., 2019).

OpenSeq2Seq trained its Jasper and QuartzNet speech models with it. Per variable ``w``
(a "layer") with gradient ``g``, at each update::

    v = ||g||^2                                   on the variable's first non-zero gradient
    v = beta2 * v + (1 - beta2) * ||g||^2         afterwards    (one float32 scalar per variable)
    d = g / sqrt(v + epsilon) + weight_decay * w
    d = (1 - beta1) * d                           with grad_averaging
    m = beta1 * m + d
    w = w - lr * m

Parameter names, defaults and the rule follow ``open_seq2seq.optimizers.novograd.NovoGrad`` of
OpenSeq2Seq, with one difference: its TF 1 graph computed the moving average of ``v`` but
never wrote it back into its variable, so there ``v`` was the current ``||g||^2`` at every
step and ``beta2`` had no effect. Here ``v`` is the moving average its documentation and the
NovoGrad paper describe (as in NeMo and Apex); ``beta2=0`` gives OpenSeq2Seq's behaviour.

``weight_decay`` is added to the normalised gradient, so it goes through the momentum and is
multiplied by the learning rate -- unlike Keras' decoupled ``weight_decay`` of AdamW.
Optimizer state (``m`` and ``v``) is float32 whatever the weights' dtype, so it keeps its
precision under pure float16 too (under mixed precision the weights are float32 already).
"""

from __future__ import annotations

import contextlib
from typing import Any

import keras
import tensorflow as tf


class NovoGrad(keras.optimizers.Optimizer):
  """NovoGrad: SGD with momentum on layer-wise normalised gradients (OpenSeq2Seq's parameters).

  Args:
    learning_rate: Learning rate when no lr_policy is set (an lr_policy sets it otherwise).
    beta1: Momentum factor: m = beta1 * m + normalised gradient.
    beta2: Decay of each variable's moving average of its squared gradient norm.
    epsilon: Added to that average under the square root, for numerical stability.
    weight_decay: Adds weight_decay * w to the normalised gradient (inside the momentum,
      so it is multiplied by the learning rate).
    grad_averaging: Multiply the momentum's input by (1 - beta1): an average of past
      normalised gradients instead of a sum.
    name: Name of the optimizer (prefix of its variables).
  """

  def __init__(self, learning_rate: Any = 1.0, beta1: float = 0.95, beta2: float = 0.98,
               epsilon: float = 1e-8, weight_decay: float = 0.0, grad_averaging: bool = False,
               name: str | None = None, **kwargs: Any):
    # Keras' own ``weight_decay`` is decoupled (applied outside the update rule); NovoGrad's
    # is part of the rule, so Keras' stays off and the value is kept under another name.
    super().__init__(learning_rate=learning_rate, name=name, weight_decay=None, **kwargs)
    for key, value, low, high in (("beta1", beta1, 0.0, 1.0), ("beta2", beta2, 0.0, 1.0)):
      if not low <= value < high:
        raise ValueError(f"{key} must be in [0, 1), got {value!r}")
    if epsilon < 0 or weight_decay < 0:
      raise ValueError(f"epsilon and weight_decay must be >= 0, got {epsilon!r} and "
                       f"{weight_decay!r}")
    self.beta1 = float(beta1)
    self.beta2 = float(beta2)
    self.epsilon = float(epsilon)
    self.decay_rate = float(weight_decay)
    self.grad_averaging = bool(grad_averaging)

  def build(self, var_list: list) -> None:
    """Creates, per variable, a float32 momentum of its shape and a float32 scalar norm average."""
    if self.built:
      return
    super().build(var_list)
    self._momentums: list = []
    self._norm_averages: list = []
    for variable in var_list:
      if self._overwrite_variable_with_gradient(variable):
        self._momentums.append(None)
        self._norm_averages.append(None)
        continue
      prefix = _path(variable).replace("/", "_")
      with self._colocated_with(variable):
        self._momentums.append(self.add_variable(
            shape=variable.shape, dtype="float32", name=f"{prefix}_momentum"))
        self._norm_averages.append(self.add_variable(
            shape=(), dtype="float32", name=f"{prefix}_grad_norm_sq"))

  def _colocated_with(self, variable: Any):
    """Places a slot beside its variable under tf.distribute, as Keras' own slots are."""
    strategy = getattr(self, "_distribution_strategy", None)
    if strategy is None:
      return contextlib.nullcontext()
    value = variable.value if isinstance(variable, keras.Variable) else variable
    return strategy.extended.colocate_vars_with(value)

  def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
    """One NovoGrad update of ``variable`` (runs per variable, per device under towers)."""
    index = self._get_variable_index(variable)
    momentum, norm_average = self._momentums[index], self._norm_averages[index]
    grad = tf.cast(tf.convert_to_tensor(gradient), tf.float32)  # IndexedSlices -> dense
    norm_sq = tf.reduce_sum(tf.square(grad))
    previous = tf.convert_to_tensor(norm_average)
    # Starting from the first norm (not from 0) avoids a huge first step; a variable whose
    # gradients are still all zero keeps starting afresh, as in OpenSeq2Seq.
    average = tf.where(tf.equal(previous, 0.0), norm_sq,
                       self.beta2 * previous + (1.0 - self.beta2) * norm_sq)
    self.assign(norm_average, average)
    direction = grad * tf.math.rsqrt(average + self.epsilon)
    if self.decay_rate > 0 and self._use_weight_decay(variable):
      direction += self.decay_rate * tf.cast(tf.convert_to_tensor(variable), tf.float32)
    if self.grad_averaging:
      direction *= 1.0 - self.beta1
    new_momentum = self.beta1 * tf.convert_to_tensor(momentum) + direction
    self.assign(momentum, new_momentum)
    self.assign_sub(variable, tf.cast(learning_rate, tf.float32) * new_momentum)

  def get_config(self) -> dict:
    config = super().get_config()
    config.update({"beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon,
                   "weight_decay": self.decay_rate, "grad_averaging": self.grad_averaging})
    return config


def _path(variable: Any) -> str:
  path = getattr(variable, "path", None) or variable.name
  return path[:-2] if path.endswith(":0") else path


__all__ = ["NovoGrad"]
