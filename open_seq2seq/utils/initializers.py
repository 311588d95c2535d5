"""Kernel initializers from config values, and the model-wide default.

OpenSeq2Seq configs set an initializer in two places: a component's own
``initializer`` / ``initializer_params`` and the model's top-level ones, which TF 1 applied as
the variable scope's default to every variable created without its own. Here the model
resolves its top-level pair once (:func:`make_initializer`) and hands the result to each
component it builds; :func:`kernel_initializer` picks the component's own setting if it has
one, else the model's, else Glorot uniform (the Keras and TF 1 ``get_variable`` default).
"""

from __future__ import annotations

from typing import Any, Mapping

import keras

from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.params import AnyType, Param

#: The two keys of every component that creates kernels (spread into its ``PARAMS``).
INITIALIZER_PARAMS = {
    "initializer": Param(AnyType, None,
                         "Kernel initializer: Keras name, class or instance (None: the model's "
                         "top-level initializer, else Glorot uniform)."),
    "initializer_params": Param(dict, {}, "Keyword arguments of the initializer class."),
}


def make_initializer(initializer: Any, initializer_params: Mapping | None = None,
                     where: str = "initializer") -> Any:
  """A Keras initializer from a config value, or None when ``initializer`` is None.

  Args:
    initializer: None, a Keras initializer name (``"he_normal"``), a class (called with
      ``initializer_params``, e.g. ``keras.initializers.GlorotUniform``), or an instance /
      callable used as is.
    initializer_params: keyword arguments of the class or the named initializer.
    where: config path of ``initializer`` for error messages.

  Raises:
    ConfigError: unknown name, parameters the initializer rejects, or parameters given
      with an instance (they would be ignored).
  """
  params = dict(initializer_params or {})
  params_path = where.rsplit("/", 1)[0] + "/initializer_params" if "/" in where \
      else "initializer_params"
  initializer = _glorot_spelling(initializer, params)
  if initializer is None:
    if params:
      raise ConfigError(f"{params_path}: given, but no initializer is set beside it")
    return None
  try:
    if isinstance(initializer, str):
      try:
        resolved = keras.initializers.get(initializer)
      except ValueError:
        raise ConfigError(f"{where}: unknown Keras initializer {initializer!r}; e.g. "
                          f"'glorot_uniform', 'he_normal' or a keras.initializers class"
                          ) from None
      return type(resolved)(**params) if params else resolved
    if isinstance(initializer, type):
      return initializer(**params)
  except TypeError as e:
    raise ConfigError(f"{params_path}: rejected by {initializer!r}: {e}") from None
  if params:
    raise ConfigError(f"{params_path}: given, but {where} is an instance, not a class; pass "
                      f"the class or drop the params")
  return initializer


_GLOROT = (keras.initializers.GlorotUniform, keras.initializers.GlorotNormal)


def _glorot_spelling(initializer: Any, params: dict) -> Any:
  """TF 1's ``xavier_initializer(uniform=...)`` ported as a Glorot class: ``uniform`` picks
  GlorotUniform or GlorotNormal (the same fan-average scaling; TF 1's normal variant was a
  truncated normal too). Pops ``uniform`` from ``params``."""
  if "uniform" not in params:
    return initializer
  klass = initializer_class(initializer) if isinstance(initializer, (str, type)) else None
  if klass not in _GLOROT:
    return initializer
  return _GLOROT[0] if params.pop("uniform") else _GLOROT[1]


#: The initializers the config reference documents (any Keras initializer works).
DOCUMENTED = ("GlorotUniform", "GlorotNormal", "HeUniform", "HeNormal", "LecunUniform",
              "LecunNormal", "RandomUniform", "RandomNormal", "TruncatedNormal",
              "VarianceScaling", "Orthogonal", "Constant", "Zeros", "Ones")


def initializer_class(initializer: Any) -> type | None:
  """The class a config's ``initializer`` names (a class or a Keras name), else None."""
  if isinstance(initializer, type):
    return initializer
  if isinstance(initializer, str):
    try:
      return type(keras.initializers.get(initializer))
    except ValueError:
      raise ConfigError(f"initializer: unknown Keras initializer {initializer!r}; e.g. "
                        f"'glorot_uniform', 'he_normal' or a keras.initializers class") from None
  return None


def fresh(initializer: Any) -> Any:
  """A new instance of a Keras initializer (one per layer: instances share no state)."""
  if isinstance(initializer, keras.initializers.Initializer):
    return type(initializer).from_config(initializer.get_config())
  return initializer


def kernel_initializer(params: Mapping[str, Any], default: Any, where: str) -> Any:
  """The initializer a component's kernels use.

  Args:
    params: the component's params (``initializer`` / ``initializer_params`` keys, if any).
    default: the model-level initializer (already built), or None.
    where: the params' config key, e.g. ``"encoder_params"``.

  Returns:
    The component's own initializer if its params set one, else ``default``, else Glorot
    uniform.
  """
  own = make_initializer(params.get("initializer"), params.get("initializer_params"),
                         f"{where}/initializer")
  if own is not None:
    return own
  if default is not None:
    return fresh(default)
  return keras.initializers.GlorotUniform()


__all__ = ["INITIALIZER_PARAMS", "DOCUMENTED", "initializer_class", "make_initializer", "kernel_initializer", "fresh"]
