"""Optimizers by name and variable freezing (weight regularization: ``utils/regularizers.py``).

OpenSeq2Seq configs name TF 1 optimizers ("Adam", "Momentum", ...) with TF 1 keyword names
(``beta1``, ``use_nesterov``, RMSProp's ``decay``). :func:`get_optimizer` builds the Keras 3
equivalent and translates those names, so a ported config keeps its meaning; the Keras
spellings work too. The parameters an optimizer accepts are declared by
:func:`optimizer_declarations`, which the config loader uses (through
:func:`validate_optimizer_params`) to reject unknown keys before anything is built.

Differences from TF 1 worth knowing:

* ``Adam``/``LazyAdam`` default ``epsilon`` to TF 1's 1e-8 (Keras: 1e-7); the update rule is
  the same. ``LazyAdam`` (sparse updates of embedding rows) is plain Adam here: Keras has no
  lazy variant, and on dense gradients they agree.
* ``Momentum`` is Keras SGD with momentum: ``v = m v - lr g; w += v`` versus TF 1's
  ``a = m a + g; w -= lr a`` -- identical while the learning rate is constant.
* ``RMSProp`` starts its mean square at 0 (TF 1: at 1).
* ``weight_decay`` is Keras' decoupled decay ``w -= lr * weight_decay * w`` for every Keras
  optimizer (tf.contrib's AdamW did not multiply by ``lr``: divide such a value by the rate).
  ``NovoGrad`` (:mod:`open_seq2seq.optimizers.novograd`) keeps OpenSeq2Seq's meaning: the
  decay is added to the normalised gradient, inside the momentum.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any, Callable, Iterable, Mapping

import keras

from open_seq2seq.errors import ConfigError
# The checks on the declarations need no Keras (config_static runs them on the index's).
from open_seq2seq.optimizer_params import canonical_name, check_optimizer_params
from open_seq2seq.optimizers.novograd import NovoGrad
from open_seq2seq.utils.params import REQUIRED, Param
from open_seq2seq.utils.signatures import signature_params
from open_seq2seq.utils.regularizers import variable_path

#: Display name -> Keras class. Lookup is case-insensitive.
OPTIMIZERS: dict[str, type] = {
    "Adam": keras.optimizers.Adam,
    "AdamW": keras.optimizers.AdamW,
    "LazyAdam": keras.optimizers.Adam,
    "SGD": keras.optimizers.SGD,
    "Momentum": keras.optimizers.SGD,
    "RMSProp": keras.optimizers.RMSprop,
    "Adagrad": keras.optimizers.Adagrad,
    "Ftrl": keras.optimizers.Ftrl,
    "NovoGrad": NovoGrad,
}

#: TF 1 keyword -> Keras keyword, per Keras class (subclasses included).
_TF1_ALIASES: dict[type, dict[str, str]] = {
    keras.optimizers.Adam: {"beta1": "beta_1", "beta2": "beta_2"},
    keras.optimizers.AdamW: {"beta1": "beta_1", "beta2": "beta_2"},
    keras.optimizers.SGD: {"use_nesterov": "nesterov"},
    keras.optimizers.RMSprop: {"decay": "rho"},
}

#: TF 1 defaults that differ from Keras' and change results, per display name.
_TF1_DEFAULTS: dict[str, dict[str, Any]] = {
    "Adam": {"epsilon": 1e-8},
    "LazyAdam": {"epsilon": 1e-8},
}

#: Keys accepted and dropped: TF 1 only, no effect in Keras.
_IGNORED = {"use_locking": Param(bool, False, "TF 1 only; ignored.")}

#: Keras keys that the trainer owns: set at the top level instead.
_REDIRECTS = {
    "global_clipnorm": "max_grad_norm",
    "gradient_accumulation_steps": "iter_size",
    "loss_scale_factor": "loss_scaling",
}

#: One-line descriptions of the Keras keywords (their docstrings run to paragraphs).
_DOCS = {
    "learning_rate": "Learning rate when no lr_policy is set (an lr_policy sets it otherwise).",
    "beta_1": "Decay rate of the first-moment (mean) estimates.",
    "beta_2": "Decay rate of the second-moment (variance) estimates.",
    "epsilon": "Small constant added to the denominator for numerical stability.",
    "amsgrad": "Use the AMSGrad variant (maximum of past second moments).",
    "weight_decay": "Decoupled weight decay: w -= lr * weight_decay * w each update.",
    "clipnorm": "Clip each weight's gradient to this norm (max_grad_norm clips globally).",
    "clipvalue": "Clip each gradient element to [-clipvalue, clipvalue].",
    "use_ema": "Keep an exponential moving average of the weights.",
    "ema_momentum": "Momentum of the weights' moving average (with use_ema).",
    "ema_overwrite_frequency": "Overwrite the weights by their average every N steps (use_ema).",
    "name": "Name of the optimizer (prefix of its variables).",
    "momentum": "Momentum factor (0: plain gradient descent).",
    "nesterov": "Use Nesterov momentum.",
    "rho": "Decay of the moving average of squared gradients.",
    "centered": "Normalise by the centred second moment (variance) instead.",
    "initial_accumulator_value": "Start value of the accumulators (>= 0).",
    "learning_rate_power": "Power of the learning-rate decrease (<= 0; 0: fixed rate).",
    "l1_regularization_strength": "L1 regularization strength (>= 0).",
    "l2_regularization_strength": "Stabilization L2 strength (>= 0), not plain L2 decay.",
    "l2_shrinkage_regularization_strength": "Magnitude-penalty L2 strength (>= 0).",
    "beta": "Ftrl's beta (1.0 in the FTRL paper).",
}

#: One-line description of each optimizer name, for the reference and ``--help_params``.
SUMMARIES = {
    "Adam": "keras.optimizers.Adam with TF 1's epsilon 1e-8.",
    "AdamW": "keras.optimizers.AdamW: Adam with decoupled weight decay.",
    "LazyAdam": "Plain Adam (Keras has no lazy sparse variant; the two agree on dense gradients).",
    "SGD": "keras.optimizers.SGD: gradient descent, momentum optional.",
    "Momentum": "keras.optimizers.SGD with a required momentum (TF 1 MomentumOptimizer).",
    "RMSProp": "keras.optimizers.RMSprop (mean square starts at 0; TF 1: at 1).",
    "Adagrad": "keras.optimizers.Adagrad.",
    "Ftrl": "keras.optimizers.Ftrl.",
    "NovoGrad": "OpenSeq2Seq's NovoGrad: momentum SGD on layer-wise normalised gradients "
                "(open_seq2seq.optimizers.novograd.NovoGrad).",
}

#: Types of Keras keys whose default (None) does not tell the type.
_NONE_DEFAULT_TYPES = {
    "weight_decay": (float, None), "clipnorm": (float, None), "clipvalue": (float, None),
    "ema_overwrite_frequency": (int, None), "name": (str, None),
}


def _aliases_of(klass: Any) -> dict[str, str]:
  aliases: dict[str, str] = {}
  if isinstance(klass, type):
    for base, table in _TF1_ALIASES.items():
      if issubclass(klass, base):
        aliases.update(table)
  return aliases


def optimizer_declarations(optimizer: str | Callable) -> dict[str, Param]:
  """The ``optimizer_params`` keys ``optimizer`` accepts, Keras and TF 1 spellings both.

  Args:
    optimizer: a name from :data:`OPTIMIZERS` (any case) or an optimizer class / factory.

  Raises:
    ConfigError: for an unknown optimizer name.
  """
  if isinstance(optimizer, str):
    name = canonical_name(optimizer, OPTIMIZERS)
    klass = OPTIMIZERS[name]
  else:
    name, klass = None, optimizer
  declared = signature_params(klass)
  if isinstance(klass, type) and issubclass(klass, keras.optimizers.Optimizer):
    for key in _REDIRECTS:
      declared.pop(key, None)
    # Keras' docstrings run to paragraphs: use the one-liners; optimizers of this project
    # document their own keys (NovoGrad's weight_decay is not Keras' decoupled one).
    own_docs = klass.__module__.startswith("open_seq2seq.")
    for key in declared:
      if key in _DOCS and not (own_docs and declared[key].doc):
        declared[key] = dataclasses.replace(declared[key], doc=_DOCS[key])
    for key, types in _NONE_DEFAULT_TYPES.items():
      if key in declared and declared[key].default is None:
        declared[key] = dataclasses.replace(declared[key], types=types)
    for key, value in _TF1_DEFAULTS.get(name, {}).items():
      declared[key] = dataclasses.replace(
          declared[key], default=value,
          doc=f"{declared[key].doc} TF 1 default {value} (Keras differs).".lstrip())
    declared.update(_IGNORED)
  for alias, target in _aliases_of(klass).items():
    if target in declared:
      declared[alias] = dataclasses.replace(declared[target],
                                            doc=f"TF 1 spelling of {target}.")
  if name == "Momentum":
    # TF 1's MomentumOptimizer had no default momentum; plain SGD is "SGD".
    declared["momentum"] = dataclasses.replace(declared["momentum"], default=REQUIRED,
                                               doc="Momentum factor (required, as in TF 1).")
  return declared


def validate_optimizer_params(optimizer: str | Callable, optimizer_params: Mapping | None,
                              prefix: str = "optimizer_params") -> dict:
  """Checks each given key and value; returns a copy (no defaults added).

  Raises:
    ConfigError: unknown key (with the closest valid one), a key the trainer owns, a value of
      the wrong type, both spellings of one key, or a required key missing
      (:func:`open_seq2seq.optimizer_params.check_optimizer_params`).
  """
  declared = optimizer_declarations(optimizer)
  klass = OPTIMIZERS[canonical_name(optimizer, OPTIMIZERS)] if isinstance(optimizer, str) \
      else optimizer
  return check_optimizer_params(optimizer, optimizer_params, declared, _aliases_of(klass),
                                _REDIRECTS, prefix)


def get_optimizer(optimizer: str | Callable, optimizer_params: Mapping | None = None,
                  learning_rate: float | Callable | None = None) -> keras.optimizers.Optimizer:
  """Builds a Keras optimizer from an OpenSeq2Seq-style name (or class) and parameters.

  Args:
    optimizer: "Adam", "AdamW", "LazyAdam" (= Adam), "SGD", "Momentum" (SGD with momentum),
      "RMSProp", "Adagrad", "Ftrl" or "NovoGrad" (any case), or a ``keras.optimizers.Optimizer``
      subclass (or a factory returning an optimizer).
    optimizer_params: keyword arguments; TF 1 names (``beta1``, ``beta2``,
      ``use_nesterov``, RMSProp's ``decay``) are translated to Keras ones.
    learning_rate: a float, a zero-argument callable or a ``LearningRateSchedule`` (e.g.
      :class:`~open_seq2seq.optimizers.lr_policies.LRPolicySchedule`). If None,
      ``optimizer_params["learning_rate"]`` or the Keras default is used.

  Raises:
    ConfigError: for an unknown name or key, or a learning rate given twice.
  """
  params = validate_optimizer_params(optimizer, optimizer_params)
  if isinstance(optimizer, str):
    name = canonical_name(optimizer, OPTIMIZERS)
    klass = OPTIMIZERS[name]
    params = {**_TF1_DEFAULTS.get(name, {}), **params}
    if name == "LazyAdam":
      logging.getLogger(__name__).info(
          "optimizer: LazyAdam runs as Adam (Keras has no lazy sparse variant; the two agree "
          "on dense gradients)")
  else:
    klass = optimizer
  for alias, target in _aliases_of(klass).items():
    if alias in params:
      params[target] = params.pop(alias)
  for key in _IGNORED:
    params.pop(key, None)
  if learning_rate is not None:
    if "learning_rate" in params:
      raise ConfigError("optimizer_params/learning_rate: the learning rate is already set by "
                        "lr_policy_params; give it in one place")
    params["learning_rate"] = learning_rate
  try:
    result = klass(**params)
  except (TypeError, ValueError) as e:
    raise ConfigError(f"optimizer_params: {getattr(klass, '__name__', klass)} rejected "
                      f"the parameters: {e}") from None
  if not isinstance(result, keras.optimizers.Optimizer):
    raise ConfigError(f"optimizer: {optimizer!r} did not build a keras.optimizers.Optimizer "
                      f"(got {type(result).__name__})")
  return result


# ----------------------------------------------------------------------------- freezing
def freeze_filter(variables: Iterable, regex: str | None) -> list:
  """The trainable ``variables`` whose path does not match ``regex`` at its start.

  Paths are Keras variable paths such as ``"transformer_encoder/layer_0/dense/kernel"``;
  matching uses ``re.match`` as OpenSeq2Seq's ``freeze_variables_regex`` did.
  """
  trainable = [v for v in variables if getattr(v, "trainable", True)]
  if not regex:
    return trainable
  try:
    pattern = re.compile(regex)
  except re.error as e:
    raise ConfigError(f"freeze_variables_regex: {regex!r} is not a valid regular "
                      f"expression: {e}") from None
  return [v for v in trainable if not pattern.match(variable_path(v))]


__all__ = ["OPTIMIZERS", "SUMMARIES", "get_optimizer", "optimizer_declarations",
           "validate_optimizer_params", "freeze_filter"]
