"""The rules of ``loss_scaling`` and ``loss_scaling_params`` that need no scaler class
(:mod:`open_seq2seq.training.loss_scaling` holds the scalers).

Pure Python, no TensorFlow: the config checks that answer before TensorFlow is imported
(:mod:`open_seq2seq.config_static_slots`) run these same functions, on the algorithm names the
parameter index records, so both paths report the same words.
"""

from __future__ import annotations

import math
from typing import Any, Container, Mapping

from open_seq2seq.errors import ConfigError

#: What :func:`scaler_kind` answers for a number: a constant scale.
STATIC = "static"


def static_scale(loss_scaling: Any) -> float:
  """A static ``loss_scaling`` (a number, or its text from the command line) as a float.

  Raises:
    ConfigError: not a number, or not a positive finite one.
  """
  if isinstance(loss_scaling, str):
    try:
      loss_scaling = float(loss_scaling.strip().lower())
    except ValueError:
      raise ConfigError(
          f"loss_scaling: {loss_scaling!r} is not a number, 'Backoff' or 'LogMax'") from None
  if isinstance(loss_scaling, bool) or not isinstance(loss_scaling, (int, float)):
    raise ConfigError(f"loss_scaling: expected a number, 'Backoff' or 'LogMax', got "
                      f"{type(loss_scaling).__name__} {loss_scaling!r}")
  if not 0 < loss_scaling < math.inf:
    raise ConfigError(f"loss_scaling: a static scale must be a positive finite number, "
                      f"got {loss_scaling!r}")
  return float(loss_scaling)


def scaler_kind(loss_scaling: Any, algorithms: Container[str]) -> str | None:
  """What a config's ``loss_scaling`` asks for: None (no scaling), :data:`STATIC` (a number)
  or the name in ``algorithms`` (lower case: ``"backoff"``, ``"logmax"``) of an automatic
  scaler.

  Raises:
    ConfigError: for an unknown algorithm or a bad static scale.
  """
  if loss_scaling is None:
    return None
  if isinstance(loss_scaling, str) and loss_scaling.strip().lower() in algorithms:
    return loss_scaling.strip().lower()
  static_scale(loss_scaling)
  return STATIC


def check_params_have_a_scaler(kind: str | None, params: Mapping | None) -> None:
  """``loss_scaling_params`` are given only to an automatic scaler (``kind`` as
  :func:`scaler_kind` answers it).

  Raises:
    ConfigError: parameters without a scaler, or for a static one.
  """
  if kind is None and params:
    raise ConfigError("loss_scaling_params: given, but loss_scaling is None; set loss_scaling "
                      "to 'Backoff' or 'LogMax', or remove loss_scaling_params")
  if kind == STATIC and params:
    raise ConfigError(f"loss_scaling_params: a static loss_scaling takes no parameters, got "
                      f"{', '.join(sorted(params))}; use 'Backoff' or 'LogMax' to adapt it")


__all__ = ["STATIC", "static_scale", "scaler_kind", "check_params_have_a_scaler"]
