"""Loss scaling for half-precision training (OpenSeq2Seq's static, Backoff and LogMax).

A scaler multiplies the loss before back-propagation so that small gradients survive the
half-precision backward pass, and the trainer divides the gradients by the same factor before
using them. After each step the trainer calls :meth:`LossScaler.update` with the largest
absolute *unscaled* gradient and whether every gradient is finite; a step with non-finite
gradients is skipped (weights, optimizer state and global step untouched).

All state (the scale, counters, moving averages) lives in float32/int64 ``tf.Variable`` s of
a ``tf.Module``, so the trainer checkpoints it and ``--continue_learning`` resumes it.

Config (the model's top-level keys, as in OpenSeq2Seq)::

    "loss_scaling": 512.0            # static scale
    "loss_scaling": "Backoff",       # or "LogMax" (case-insensitive)
    "loss_scaling_params": {"step_window": 1000},
"""

from __future__ import annotations

import math
from typing import Any

import tensorflow as tf

from open_seq2seq.errors import ConfigError
# The rules that need no scaler class need no TensorFlow either (config_static runs them too).
from open_seq2seq.training.loss_scaling_rules import (STATIC, check_params_have_a_scaler,
                                                      scaler_kind, static_scale)
from open_seq2seq.utils.params import Configurable, Param

#: Smallest positive normal float32: LogMax takes log2 of the gradient maximum, and an
#: all-zero gradient must not turn its moving averages into -inf/NaN.
_MIN_AMAX = 2.0 ** -126


class LossScaler(Configurable, tf.Module):
  """A constant scale (the ``loss_scaling: <number>`` case); 1 disables scaling.

  Args:
    scale: the loss scale.
  """

  def __init__(self, scale: float = 1.0, name: str = "loss_scaler"):
    tf.Module.__init__(self, name=name)
    self._scale = tf.Variable(float(scale), trainable=False, dtype=tf.float32, name="scale")

  @property
  def scale(self) -> tf.Tensor:
    """The current scale (float32 scalar tensor)."""
    return tf.convert_to_tensor(self._scale)

  def update(self, grad_amax: tf.Tensor, all_finite: tf.Tensor) -> tf.Tensor:
    """Adapts the scale after a step and returns the new scale (unchanged when static).

    Args:
      grad_amax: max |g| over every unscaled gradient (float32 scalar; inf/NaN on overflow).
      all_finite: whether every gradient is finite (bool scalar).
    """
    del grad_amax, all_finite
    return self.scale

  def describe(self) -> str:
    return f"static loss scale {float(self._scale.numpy()):g}"


StaticLossScaler = LossScaler


def _overflow(grad_amax: tf.Tensor, all_finite: tf.Tensor) -> tf.Tensor:
  grad_amax = tf.cast(grad_amax, tf.float32)
  return tf.logical_or(tf.logical_not(tf.cast(all_finite, tf.bool)),
                       tf.logical_not(tf.math.is_finite(grad_amax)))


class BackoffScaler(LossScaler):
  """OpenSeq2Seq's Backoff: halve on overflow, double after a window without one.

  Starts at ``scale_max``. On a step with non-finite gradients the scale is divided by
  ``step_factor``; otherwise it is multiplied by ``step_factor`` whenever the number of steps
  since the last overflow (or since the start) is a multiple of ``step_window``. Both are
  clipped to ``[scale_min, scale_max]``.
  """

  PARAMS = {
      "scale_min": Param(float, 1.0, "Lower bound of the scale."),
      "scale_max": Param(float, 2.0 ** 14, "Upper bound of the scale, and its start value."),
      "step_factor": Param(float, 2.0, "Factor the scale is divided/multiplied by."),
      "step_window": Param(int, 2000, "Steps without overflow before the scale grows."),
  }

  def __init__(self, params: dict[str, Any] | None = None, name: str = "loss_scaler"):
    self.params = _validated(type(self), params)
    p = self.params
    super().__init__(p["scale_max"], name=name)
    # step counter of the scaler itself (it counts skipped steps too); -1: no overflow yet
    self._iteration = tf.Variable(0, trainable=False, dtype=tf.int64, name="iteration")
    self._last_overflow = tf.Variable(-1, trainable=False, dtype=tf.int64,
                                      name="last_overflow_iteration")

  def update(self, grad_amax: tf.Tensor, all_finite: tf.Tensor) -> tf.Tensor:
    p = self.params
    overflow = _overflow(grad_amax, all_finite)
    iteration = self._iteration.read_value()
    since = iteration - self._last_overflow.read_value()
    grow = tf.equal(since % p["step_window"], 0)
    factor = tf.where(overflow, 1.0 / p["step_factor"],
                      tf.where(grow, p["step_factor"], 1.0))
    new_scale = tf.clip_by_value(self._scale * factor, p["scale_min"], p["scale_max"])
    self._scale.assign(new_scale)
    self._last_overflow.assign(tf.where(overflow, iteration, self._last_overflow))
    self._iteration.assign_add(1)
    return tf.identity(new_scale)

  def describe(self) -> str:
    p = self.params
    return (f"Backoff loss scaling (start {p['scale_max']:g}, range [{p['scale_min']:g}, "
            f"{p['scale_max']:g}], factor {p['step_factor']:g}, window {p['step_window']})")


class LogMaxScaler(LossScaler):
  """OpenSeq2Seq's LogMax: keeps the largest gradient ``overflow_std_dev`` sigmas below 2^log_max.

  Each step takes x = log2(max |g|), or 2^log_max when the gradients are not finite (a large
  value that makes sigma jump and the scale drop). Bias-corrected moving averages give
  mu = E[x] (decay ``beta1``) and sigma = sqrt(E[x^2] - E[x]^2) (both with decay ``beta2``);
  the new scale is clip(2^(log_max - (mu + overflow_std_dev * sigma)), scale_min, scale_max).
  Starts at 1.
  """

  PARAMS = {
      "scale_min": Param(float, 1.0, "Lower bound of the scale."),
      "scale_max": Param(float, 2.0 ** 14, "Upper bound of the scale."),
      "log_max": Param(float, 16.0, "log2 of the gradient magnitude to stay below (fp16: 16)."),
      "beta1": Param(float, 0.99, "Decay of the moving average of x that gives mu."),
      "beta2": Param(float, 0.999, "Decay of the moving averages that give sigma."),
      "overflow_std_dev": Param(float, 3.09, "Safety margin in sigmas (3.09: 99.9%)."),
  }

  def __init__(self, params: dict[str, Any] | None = None, name: str = "loss_scaler"):
    self.params = _validated(type(self), params)
    super().__init__(1.0, name=name)

    def zero(var_name: str, value: float = 0.0) -> tf.Variable:
      return tf.Variable(value, trainable=False, dtype=tf.float32, name=var_name)

    self._iteration = tf.Variable(0, trainable=False, dtype=tf.int64, name="iteration")
    self._x_hat = zero("x_hat")                  # EMA of x, decay beta1
    self._slow_x_hat = zero("slow_x_hat")        # EMA of x, decay beta2
    self._xsquared_hat = zero("xsquared_hat")    # EMA of x^2, decay beta2
    self._b1_correction = zero("b1_correction", 1.0)  # beta1^t
    self._b2_correction = zero("b2_correction", 1.0)  # beta2^t

  def update(self, grad_amax: tf.Tensor, all_finite: tf.Tensor) -> tf.Tensor:
    p = self.params
    beta1, beta2 = p["beta1"], p["beta2"]
    overflow = _overflow(grad_amax, all_finite)
    safe_amax = tf.where(overflow, 1.0, tf.maximum(tf.cast(grad_amax, tf.float32), _MIN_AMAX))
    x = tf.where(overflow, tf.constant(2.0 ** p["log_max"], tf.float32),
                 tf.math.log(safe_amax) / math.log(2.0))
    self._x_hat.assign(beta1 * self._x_hat + (1.0 - beta1) * x)
    self._b1_correction.assign(self._b1_correction * beta1)
    self._slow_x_hat.assign(beta2 * self._slow_x_hat + (1.0 - beta2) * x)
    self._xsquared_hat.assign(beta2 * self._xsquared_hat + (1.0 - beta2) * x * x)
    self._b2_correction.assign(self._b2_correction * beta2)
    mu = self._x_hat / (1.0 - self._b1_correction)
    slow_mu = self._slow_x_hat / (1.0 - self._b2_correction)
    e_xsquared = self._xsquared_hat / (1.0 - self._b2_correction)
    sigma = tf.sqrt(tf.maximum(e_xsquared - slow_mu * slow_mu, 0.0))
    log_cutoff = mu + p["overflow_std_dev"] * sigma
    new_scale = tf.clip_by_value(tf.pow(2.0, p["log_max"] - log_cutoff),
                                 p["scale_min"], p["scale_max"])
    self._scale.assign(new_scale)
    self._iteration.assign_add(1)
    return tf.identity(new_scale)

  def describe(self) -> str:
    p = self.params
    return (f"LogMax loss scaling (start 1, range [{p['scale_min']:g}, {p['scale_max']:g}], "
            f"log_max {p['log_max']:g}, {p['overflow_std_dev']:g} sigmas)")


def _validated(klass: type, params: dict[str, Any] | None) -> dict[str, Any]:
  """Checks ``loss_scaling_params`` for ``klass``: known keys, types and sane ranges."""
  owner = f"{klass.__name__} (loss_scaling: {klass.__name__[:-len('Scaler')]!r})"
  p = klass.validate_params(params, prefix="loss_scaling_params")

  def bad(key: str, why: str) -> ConfigError:
    return ConfigError(f"loss_scaling_params/{key}: {why}, got {p[key]!r} ({owner})")

  if not 0 < p["scale_min"] < math.inf:
    raise bad("scale_min", "must be a positive finite number")
  if not p["scale_min"] <= p["scale_max"] < math.inf:
    raise bad("scale_max", f"must be finite and at least scale_min ({p['scale_min']:g})")
  if "step_factor" in p and not p["step_factor"] > 1:
    raise bad("step_factor", "must be greater than 1")
  if "step_window" in p and p["step_window"] < 1:
    raise bad("step_window", "must be at least 1")
  for key in ("beta1", "beta2"):
    if key in p and not 0 < p[key] < 1:
      raise bad(key, "must be in (0, 1)")
  if "log_max" in p and not 0 < p["log_max"] <= 127:
    raise bad("log_max", "must be in (0, 127]")
  if "overflow_std_dev" in p and p["overflow_std_dev"] < 0:
    raise bad("overflow_std_dev", "must be non-negative")
  return p


#: ``loss_scaling`` names (lower case) -> scaler class.
ALGORITHMS = {"backoff": BackoffScaler, "logmax": LogMaxScaler}


def scaler_class(loss_scaling: Any) -> type | None:
  """The class :func:`make_loss_scaler` builds for a config's ``loss_scaling`` value.

  Returns:
    None (no scaling), :class:`StaticLossScaler` for a number, or the automatic scaler.

  Raises:
    ConfigError: for an unknown algorithm or a bad static scale.
  """
  kind = scaler_kind(loss_scaling, ALGORITHMS)
  return None if kind is None else ALGORITHMS.get(kind, StaticLossScaler)


def loss_scaling_declarations(loss_scaling: Any) -> dict[str, Param] | None:
  """The ``loss_scaling_params`` keys the scaler chosen by ``loss_scaling`` declares."""
  klass = scaler_class(loss_scaling)
  return None if klass is None else klass.declared_params()


def validate_loss_scaling_params(loss_scaling: Any, params: dict | None) -> dict:
  """``loss_scaling_params`` checked for ``loss_scaling``, defaults filled in.

  Raises:
    ConfigError: as :func:`make_loss_scaler`, before anything is built; also for parameters
      given without an automatic scaler to take them.
  """
  kind = scaler_kind(loss_scaling, ALGORITHMS)
  check_params_have_a_scaler(kind, params)
  if kind is None or kind == STATIC:
    return {}
  return _validated(ALGORITHMS[kind], params)


def make_loss_scaler(loss_scaling: Any, params: dict | None = None) -> LossScaler | None:
  """The scaler for a config's ``loss_scaling`` value.

  Args:
    loss_scaling: None (no scaling), a positive number (static scale; a numeric string from
      a command-line override also works), or "Backoff"/"LogMax" in any case.
    params: ``loss_scaling_params``; only the automatic scalers take any.

  Raises:
    ConfigError: for an unknown algorithm, a bad scale, or an unknown/invalid parameter.
  """
  klass = scaler_class(loss_scaling)
  if klass is None:
    return None
  if klass is StaticLossScaler:
    validate_loss_scaling_params(loss_scaling, params)
    return StaticLossScaler(static_scale(loss_scaling))
  return klass(dict(params or {}))
