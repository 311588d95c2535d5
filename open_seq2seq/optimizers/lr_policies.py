"""Learning-rate policies: functions of the global step, as in OpenSeq2Seq.

A policy is a function ``policy(global_step, **lr_policy_params)`` returning the learning
rate at ``global_step`` (the number of optimizer updates already applied, 0 for the first
update) as a float32 scalar. ``global_step`` may be a Python int or an integer tensor (e.g.
the optimizer's int64 ``iterations``), inside or outside ``tf.function``. Only pure TF ops
depend on the step, so one traced function serves every step.

:data:`POLICIES` is the set of policies (the config reference lists exactly these; a config
may also name its own function). Each parameter carries a plain type annotation and a
one-line description in the docstring's ``Args:`` so that :func:`policy_declarations` can
check ``lr_policy_params`` and document it. ``float = None`` annotations mean "float or None"
(the loader does not read unions).

:func:`complete_lr_policy_params` fills in ``decay_steps`` and ``steps_per_epoch`` from the
run's length, as OpenSeq2Seq's model did, and :class:`LRPolicySchedule` turns a policy into a
Keras ``LearningRateSchedule`` for :func:`open_seq2seq.optimizers.get_optimizer`.

This module deliberately has no ``from __future__ import annotations``: the loader needs the
annotations as real types.
"""

import importlib
import inspect
import math
from typing import Any, Callable

import keras
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.params import Param
from open_seq2seq.utils.signatures import signature_params

_PREFIX = "lr_policy_params"


def _step(global_step: Any) -> tf.Tensor:
  """The global step as an int64 scalar tensor."""
  return tf.cast(tf.convert_to_tensor(global_step), tf.int64)


def _lr(value: float) -> tf.Tensor:
  return tf.constant(value, tf.float32)


def _require_positive(name: str, value: float, policy: str) -> None:
  if value <= 0:
    raise ConfigError(f"{_PREFIX}/{name}: {policy} needs a positive value, got {value!r}")


def _linear_warmup(step: tf.Tensor, learning_rate: float, warmup_steps: int) -> tf.Tensor:
  """``learning_rate * step / warmup_steps`` while ``step < warmup_steps``, then constant."""
  lr = _lr(learning_rate)
  if warmup_steps <= 0:
    return lr
  ramp = lr * tf.cast(step, tf.float32) / float(warmup_steps)
  return tf.where(step < warmup_steps, ramp, lr)


def _steps_since(step: tf.Tensor, begin: int, limit: int | None = None) -> tf.Tensor:
  """``clip(step - begin, 0, limit)`` as float32."""
  elapsed = tf.maximum(step - begin, 0)
  if limit is not None:
    elapsed = tf.minimum(elapsed, limit)
  return tf.cast(elapsed, tf.float32)


def fixed_lr(global_step, learning_rate: float) -> tf.Tensor:
  """Constant learning rate: ``lr(step) = learning_rate``.

  Args:
    global_step: ignored.
    learning_rate: the learning rate.
  """
  del global_step
  return _lr(learning_rate)


def piecewise_constant(global_step, learning_rate: float, boundaries: list, decay_rates: list,
                       steps_per_epoch: int = None) -> tf.Tensor:
  """Piecewise constant learning rate.

  ``lr(step) = learning_rate * r[k]`` where ``r = [1.0] + decay_rates`` and ``k`` is the
  number of boundaries ``b`` with ``step > b`` (TF 1 ``piecewise_constant``: a boundary step
  still uses the previous value).

  Args:
    global_step: the global step.
    learning_rate: learning rate before the first boundary.
    boundaries: increasing steps, or epochs if ``steps_per_epoch`` is given.
    decay_rates: multiplier of ``learning_rate`` after each boundary (same length).
    steps_per_epoch: if given, boundaries are in epochs and multiplied by it.
  """
  if len(decay_rates) != len(boundaries):
    raise ConfigError(f"{_PREFIX}/decay_rates: piecewise_constant needs one rate per boundary "
                      f"({len(boundaries)}), got {len(decay_rates)}")
  if any(b2 <= b1 for b1, b2 in zip(boundaries, boundaries[1:])):
    raise ConfigError(f"{_PREFIX}/boundaries: must be strictly increasing, got {boundaries}")
  if steps_per_epoch is not None:
    boundaries = [steps_per_epoch * b for b in boundaries]
  values = tf.constant([learning_rate] + [learning_rate * r for r in decay_rates], tf.float32)
  if not boundaries:
    return values[0]
  # float64 holds integer steps exactly up to 2**53 and allows fractional epochs.
  step = tf.cast(_step(global_step), tf.float64)
  index = tf.reduce_sum(tf.cast(step > tf.constant(boundaries, tf.float64), tf.int32))
  return tf.gather(values, index)


def exp_decay(global_step, learning_rate: float, decay_steps: int, decay_rate: float,
              use_staircase_decay: bool = False, begin_decay_at: int = 0,
              min_lr: float = 0.0) -> tf.Tensor:
  """Exponential decay starting at ``begin_decay_at``, floored at ``min_lr``.

  With ``p = max(step - begin_decay_at, 0) / decay_steps`` (``floor(p)`` if
  ``use_staircase_decay``): ``lr(step) = max(min_lr, learning_rate * decay_rate ** p)``.

  Args:
    global_step: the global step.
    learning_rate: initial learning rate.
    decay_steps: steps over which the rate is multiplied by ``decay_rate`` once.
    decay_rate: the decay factor.
    use_staircase_decay: decay in discrete jumps every ``decay_steps``.
    begin_decay_at: first step of the decay.
    min_lr: lower bound of the learning rate.
  """
  _require_positive("decay_steps", decay_steps, "exp_decay")
  progress = _steps_since(_step(global_step), begin_decay_at) / float(decay_steps)
  if use_staircase_decay:
    progress = tf.floor(progress)
  lr = _lr(learning_rate) * tf.pow(tf.constant(decay_rate, tf.float32), progress)
  return tf.maximum(_lr(min_lr), lr)


def poly_decay(global_step, learning_rate: float, decay_steps: int, power: float = 1.0,
               begin_decay_at: int = 0, min_lr: float = 0.0, warmup_steps: int = 0) -> tf.Tensor:
  """Linear warm-up, then polynomial decay from ``learning_rate`` to ``min_lr``.

  With ``b = max(warmup_steps, begin_decay_at)``:

  * ``step < warmup_steps``: ``learning_rate * step / warmup_steps``;
  * ``warmup_steps <= step < b``: ``learning_rate``;
  * ``step >= b``: with ``s = min(step - b, decay_steps)``,
    ``(learning_rate - min_lr) * (1 - s / decay_steps) ** power + min_lr``.

  Args:
    global_step: the global step.
    learning_rate: peak learning rate.
    decay_steps: length of the decay (filled in from the run length when absent).
    power: exponent of the polynomial (1.0: linear).
    begin_decay_at: first step of the decay (at least ``warmup_steps``).
    min_lr: learning rate at the end of the decay and after it.
    warmup_steps: length of the linear warm-up from 0.
  """
  _require_positive("decay_steps", decay_steps, "poly_decay")
  step = _step(global_step)
  begin = max(warmup_steps, begin_decay_at)
  remaining = 1.0 - _steps_since(step, begin, decay_steps) / float(decay_steps)
  decayed = (learning_rate - min_lr) * tf.pow(remaining, power) + min_lr
  return tf.where(step < begin, _linear_warmup(step, learning_rate, warmup_steps), decayed)


def cosine_decay(global_step, learning_rate: float, decay_steps: int, power: float = 1.0,
                 begin_decay_at: int = 0, min_lr: float = 0.0, warmup_steps: int = 0) -> tf.Tensor:
  """Linear warm-up, then cosine decay (TF 1 ``cosine_decay`` with ``alpha=min_lr``).

  With ``b = max(warmup_steps, begin_decay_at)``:

  * ``step < warmup_steps``: ``learning_rate * step / warmup_steps``;
  * ``warmup_steps <= step < b``: ``learning_rate``;
  * ``step >= b``: with ``s = min(step - b, decay_steps)`` and
    ``c = 0.5 * (1 + cos(pi * s / decay_steps))``,
    ``learning_rate * ((1 - min_lr) * c + min_lr)``.

  Note: as in OpenSeq2Seq (which passed ``min_lr`` as TF's ``alpha``), ``min_lr`` here is a
  *fraction* of ``learning_rate``, not an absolute rate: the final rate is
  ``learning_rate * min_lr``.

  Args:
    global_step: the global step.
    learning_rate: peak learning rate.
    decay_steps: length of the decay (filled in from the run length when absent).
    power: accepted for OpenSeq2Seq compatibility; unused.
    begin_decay_at: first step of the decay (at least ``warmup_steps``).
    min_lr: final learning rate as a fraction of ``learning_rate``.
    warmup_steps: length of the linear warm-up from 0.
  """
  del power
  _require_positive("decay_steps", decay_steps, "cosine_decay")
  step = _step(global_step)
  begin = max(warmup_steps, begin_decay_at)
  progress = _steps_since(step, begin, decay_steps) / float(decay_steps)
  cosine = 0.5 * (1.0 + tf.cos(math.pi * progress))
  decayed = learning_rate * ((1.0 - min_lr) * cosine + min_lr)
  return tf.where(step < begin, _linear_warmup(step, learning_rate, warmup_steps), decayed)


def transformer_policy(global_step, learning_rate: float, d_model: int, warmup_steps: int,
                       max_lr: float = None, coefficient: float = 1.0,
                       dtype=tf.float32) -> tf.Tensor:
  """The Transformer ("noam") schedule of Vaswani et al. 2017, with an optional cap.

  ``lr(step) = learning_rate * coefficient * d_model ** -0.5
  * min((step + 1) * warmup_steps ** -1.5, (step + 1) ** -0.5)``, then
  ``min(max_lr, lr)`` if ``max_lr`` is given.

  Args:
    global_step: the global step.
    learning_rate: overall multiplier.
    d_model: model width.
    warmup_steps: step at which the rate peaks.
    max_lr: upper bound of the learning rate.
    coefficient: extra multiplier (OpenSeq2Seq suggested 0.002 with Adam).
    dtype: accepted for OpenSeq2Seq compatibility; the schedule is always float32.
  """
  del dtype
  _require_positive("d_model", d_model, "transformer_policy")
  _require_positive("warmup_steps", warmup_steps, "transformer_policy")
  step = tf.cast(_step(global_step), tf.float32) + 1.0
  scale = tf.minimum(step * float(warmup_steps) ** -1.5, tf.math.rsqrt(step))
  lr = (learning_rate * coefficient * float(d_model) ** -0.5) * scale
  if max_lr is not None:
    lr = tf.minimum(_lr(max_lr), lr)
  return lr


def inv_poly_decay(global_step, learning_rate: float, decay_steps: int, min_lr: float,
                   power: float = 1.0, begin_decay_at: int = 0, warmup_steps: int = 0,
                   name: str = "learning_rate") -> tf.Tensor:
  """Inverse polynomial decay reaching ``min_lr`` after ``decay_steps``.

  With ``m = min(max(min_lr, 1e-8), learning_rate)``,
  ``scale = ((learning_rate / m) ** (1 / power) - 1) / decay_steps``,
  ``b = max(warmup_steps, begin_decay_at)`` and ``s = min(step - b, decay_steps)``:
  ``lr(step) = learning_rate / (1 + scale * s) ** power`` for ``step >= b`` (so
  ``lr = m`` at ``s = decay_steps``), linear warm-up before ``warmup_steps`` and
  ``learning_rate`` in between.

  OpenSeq2Seq accepted but ignored ``begin_decay_at`` and ``warmup_steps`` and kept decaying
  past ``decay_steps``; here they act as in :func:`poly_decay`. With their defaults and
  ``decay_steps`` equal to the run length (the default) both agree on every step.

  Args:
    global_step: the global step.
    learning_rate: initial learning rate.
    decay_steps: steps to reach ``min_lr`` (filled in from the run length when absent).
    min_lr: learning rate at the end of the decay.
    power: exponent (> 0).
    begin_decay_at: first step of the decay (at least ``warmup_steps``).
    warmup_steps: length of the linear warm-up from 0.
    name: accepted for OpenSeq2Seq compatibility; unused.
  """
  del name
  _require_positive("decay_steps", decay_steps, "inv_poly_decay")
  _require_positive("power", power, "inv_poly_decay")
  floor = min(max(min_lr, 1e-8), learning_rate)
  scale = (math.pow(learning_rate / floor, 1.0 / power) - 1.0) / decay_steps
  step = _step(global_step)
  begin = max(warmup_steps, begin_decay_at)
  decayed = learning_rate / tf.pow(1.0 + scale * _steps_since(step, begin, decay_steps), power)
  return tf.where(step < begin, _linear_warmup(step, learning_rate, warmup_steps), decayed)


# ----------------------------------------------------------------------------- plumbing
def complete_lr_policy_params(lr_policy: Callable, lr_policy_params: dict | None,
                              last_step: int | None = None,
                              steps_per_epoch: int | None = None) -> dict:
  """``lr_policy_params`` with the values OpenSeq2Seq's model filled in automatically.

  * ``decay_steps`` = ``last_step - max(begin_decay_at, warmup_steps)`` -- the updates left
    after the warm-up and the constant phase, so that the decay ends exactly at the run's last
    update -- when the policy takes ``decay_steps`` and the config does not give it (at
    least 1);
  * ``steps_per_epoch`` when the policy takes it, the config does not give it and the run is
    measured in epochs (the caller passes ``steps_per_epoch`` only then).

  Raises:
    ConfigError: if a parameter the policy requires is still missing.
  """
  params = dict(lr_policy_params or {})
  accepted = inspect.signature(lr_policy).parameters
  if "decay_steps" in accepted and "decay_steps" not in params and last_step is not None:
    params["decay_steps"] = max(int(last_step) - _decay_start(accepted, params), 1)
  if ("steps_per_epoch" in accepted and "steps_per_epoch" not in params
      and steps_per_epoch is not None):
    params["steps_per_epoch"] = int(steps_per_epoch)
  policy_name = getattr(lr_policy, "__name__", str(lr_policy))
  for key, p in accepted.items():
    if key == "global_step" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
      continue
    if p.default is inspect.Parameter.empty and key not in params:
      raise ConfigError(f"{_PREFIX}/{key}: required by lr_policy {policy_name} but missing")
  return params


def _decay_start(accepted: Any, params: dict) -> int:
  """The first step of the decay: ``max(begin_decay_at, warmup_steps)`` of the policy."""

  def value(key: str) -> int:
    if key in params:
      return int(params[key] or 0)
    default = accepted[key].default if key in accepted else 0
    return 0 if default is inspect.Parameter.empty or default is None else int(default)

  return max(value("begin_decay_at"), value("warmup_steps"))


@keras.saving.register_keras_serializable(package="open_seq2seq")
class LRPolicySchedule(keras.optimizers.schedules.LearningRateSchedule):
  """A learning-rate policy bound to its parameters, as a Keras schedule.

  ``schedule(step) == lr_policy(step, **lr_policy_params)``; Keras optimizers call it with
  their ``iterations`` counter.

  Args:
    lr_policy: a policy function such as :func:`poly_decay`.
    lr_policy_params: its keyword arguments (see :func:`complete_lr_policy_params`).
  """

  def __init__(self, lr_policy: Callable, lr_policy_params: dict | None = None):
    self.lr_policy = lr_policy
    self.lr_policy_params = dict(lr_policy_params or {})
    # Build once eagerly so a bad parameter fails at start-up, not inside the train step.
    self(0)

  def __call__(self, step):
    return tf.cast(self.lr_policy(step, **self.lr_policy_params), tf.float32)

  def get_config(self) -> dict:
    return {"lr_policy": f"{self.lr_policy.__module__}.{self.lr_policy.__qualname__}",
            "lr_policy_params": self.lr_policy_params}

  @classmethod
  def from_config(cls, config: dict) -> "LRPolicySchedule":
    module_name, _, func_name = config["lr_policy"].rpartition(".")
    module = importlib.import_module(module_name)
    return cls(getattr(module, func_name), config["lr_policy_params"])


#: The learning-rate policies, by name: what the config reference and ``--help_params`` list.
POLICIES: dict[str, Callable] = {
    f.__name__: f for f in (fixed_lr, piecewise_constant, exp_decay, poly_decay, cosine_decay,
                            transformer_policy, inv_poly_decay)}


def policy_declarations(lr_policy: Callable) -> dict[str, Param]:
  """The ``lr_policy_params`` keys ``lr_policy`` takes: its signature and ``Args:`` docs.

  Required keys may be left out of a config: :func:`complete_lr_policy_params` fills
  ``decay_steps`` and ``steps_per_epoch`` from the run and reports what is still missing.
  """
  return signature_params(lr_policy, skip=("global_step",))


__all__ = ["fixed_lr", "piecewise_constant", "exp_decay", "poly_decay", "cosine_decay",
           "transformer_policy", "inv_poly_decay", "complete_lr_policy_params",
           "LRPolicySchedule", "POLICIES", "policy_declarations"]
