"""Weight regularization: which weights are penalised, and the penalty from the config.

A component's ``regularizer`` / ``regularizer_params`` (see ``utils/component.py``) and the
trainer's regularization loss both build their penalty with :func:`make_regularizer`; the
slot table documents the keys through :func:`regularizer_declarations`. This module sits in
``utils/`` (below components and optimizers) so that any layer may use it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Iterable, Mapping

import keras
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.params import Param, validate_params
from open_seq2seq.utils.signatures import signature_params


def variable_path(variable: Any) -> str:
  """A variable's Keras path (``"encoder/dense/kernel"``), or its TF name without ``:0``.

  What decides whether a weight is regularized; variable freezing matches it too.
  """
  path = getattr(variable, "path", None) or variable.name
  return path[:-2] if path.endswith(":0") else path


_NOT_REGULARIZED = re.compile(r"(^|_)(bias|beta|gamma|scale|moving_mean|moving_variance)$")


def is_regularized(variable: Any) -> bool:
  """Kernels and embeddings: trainable weights of rank >= 2 that are not biases or norms."""
  if not getattr(variable, "trainable", True):
    return False
  path = variable_path(variable)
  parts = path.split("/")
  if _NOT_REGULARIZED.search(parts[-1]):
    return False
  if any("norm" in part.lower() for part in parts[:-1]):
    return False  # layer/batch/group normalization parameters
  return len(variable.shape) >= 2


# TF 1's l2_regularizer(scale) was scale * sum(w**2) / 2; l1_regularizer(scale) was
# scale * sum(|w|). Keras' L2(l2) is l2 * sum(w**2).
_SCALE_SPELLING = {keras.regularizers.L2: ("l2", 0.5), keras.regularizers.L1: ("l1", 1.0)}

#: The regularizers the reference documents (any Keras regularizer or factory works).
REGULARIZERS = (keras.regularizers.L2, keras.regularizers.L1, keras.regularizers.L1L2)

_REGULARIZER_DOCS = {"l1": "L1 factor: the penalty adds l1 * sum(abs(w)).",
                     "l2": "L2 factor: the penalty adds l2 * sum(w ** 2)."}


def regularizer_declarations(regularizer: Any) -> dict[str, Param]:
  """The ``regularizer_params`` keys ``regularizer`` accepts (L1/L2 also take ``scale``)."""
  if regularizer is None or isinstance(regularizer, keras.regularizers.Regularizer):
    return {}
  declared = signature_params(regularizer)
  if regularizer in REGULARIZERS:
    for key in declared:
      if key in _REGULARIZER_DOCS:
        declared[key] = dataclasses.replace(declared[key], doc=_REGULARIZER_DOCS[key])
  if regularizer in _SCALE_SPELLING:
    key = _SCALE_SPELLING[regularizer][0]
    declared["scale"] = Param(
        (float, None), None, f"OpenSeq2Seq spelling: TF 1 {key}_regularizer's scale"
        + (" (scale * sum(w**2) / 2, i.e. l2 = scale / 2)." if key == "l2" else "."))
  return declared


def make_regularizer(regularizer: Any, regularizer_params: Mapping | None = None,
                     where: str = "regularizer_params") -> Callable | None:
  """A per-weight function ``f(w) -> scalar`` from the config's regularizer entries.

  ``regularizer`` may be None, a ``keras.regularizers`` class (``L2``/``L1`` accept
  OpenSeq2Seq's ``{"scale": x}`` with TF 1's meaning as well as ``{"l2": x}``), a Keras
  regularizer instance, a factory called with ``regularizer_params`` that returns such a
  function (like TF 1's ``l2_regularizer(scale)``), or -- with no params -- a function of the
  weight itself.
  """
  params = dict(regularizer_params or {})
  if regularizer is None:
    return None
  owner = getattr(regularizer, "__name__", type(regularizer).__name__)
  params = validate_params(params, regularizer_declarations(regularizer), where,
                           owner, partial=True)
  if isinstance(regularizer, keras.regularizers.Regularizer):
    return regularizer
  if regularizer in _SCALE_SPELLING:
    key, factor = _SCALE_SPELLING[regularizer]
    if "scale" in params:
      if key in params:
        raise ConfigError(f"{where}/scale: given together with {key!r}; keep one")
      params[key] = params.pop("scale") * factor
    return regularizer(**params)
  if isinstance(regularizer, type) or params:
    return regularizer(**params)
  return regularizer


def regularization_loss(variables: Iterable, regularizer: Any,
                        regularizer_params: Mapping | None = None) -> tf.Tensor:
  """float32 sum of the regularizer over the kernels and embeddings among ``variables``.

  Reads the float32 master weights: call it outside layer calls (as the trainer does), where
  Keras does not autocast variables to the compute dtype.

  Args:
    variables: typically the model's trainable variables.
    regularizer, regularizer_params: as in the config (see :func:`make_regularizer`).
  """
  penalty = make_regularizer(regularizer, regularizer_params)
  if penalty is None:
    return tf.constant(0.0, tf.float32)
  terms = [tf.cast(penalty(tf.cast(tf.convert_to_tensor(v), tf.float32)), tf.float32)
           for v in variables if is_regularized(v)]
  return tf.add_n(terms) if terms else tf.constant(0.0, tf.float32)


__all__ = ["REGULARIZERS", "is_regularized", "make_regularizer", "regularization_loss",
           "regularizer_declarations", "variable_path"]
