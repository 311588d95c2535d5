"""Keras recurrent cells and layers from OpenSeq2Seq's cell configs, TF 1 spellings included.

OpenSeq2Seq configs name a cell class and its keyword arguments, e.g.
``"core_cell": tf.nn.rnn_cell.LSTMCell, "core_cell_params": {"num_units": 512,
"forget_bias": 1.0}``. Ported by renaming the class alone (``keras.layers.LSTMCell``), the
params keep TF 1's names; :func:`translate_cell_params` maps them onto the Keras ones:

* ``num_units`` -> ``units``; LSTMCell's ``initializer`` -> ``kernel_initializer``;
* ``forget_bias`` (TF 1 added it to the forget gate's pre-activation at every step, with the
  bias starting at 0) -> the forget-gate bias *starts* at that value (Keras'
  ``unit_forget_bias`` for 1.0): the same cell at initialisation, the bias then trains;
* GRU cells given TF 1 spellings keep TF 1's gate order (``reset_after=False``: the reset gate
  applies before the recurrent matmul), unless the params set ``reset_after``;
* ``state_is_tuple=True``, ``reuse``, ``num_unit_shards``/``num_proj_shards`` change nothing
  in Keras and are dropped; peepholes, ``cell_clip`` and projections (``num_proj``,
  ``proj_clip``) have no Keras equivalent and are one-line errors unless left at their
  TF 1 defaults.

Keras spellings pass through unchanged, so a config may use either.
"""

from __future__ import annotations

from typing import Any, Mapping

import keras
import numpy as np

from open_seq2seq.errors import ConfigError

#: TF 1 keyword -> Keras keyword.
_RENAMED = {"num_units": "units"}
#: TF 1 keywords that change nothing in Keras (at these values).
_DROPPED = {"state_is_tuple": True, "reuse": None, "num_unit_shards": None,
            "num_proj_shards": None}
#: TF 1 keywords without a Keras equivalent: only their TF 1 default is accepted.
_UNSUPPORTED = {"use_peepholes": False, "cell_clip": None, "num_proj": None,
                "proj_clip": None}
_LSTM = (keras.layers.LSTMCell, keras.layers.LSTM)
_GRU = (keras.layers.GRUCell, keras.layers.GRU)


class ForgetGateBias(keras.initializers.Initializer):
  """LSTM bias: zeros, and ``value`` on the forget gate (Keras gate order i, f, c, o)."""

  def __init__(self, value: float = 1.0):
    self.value = float(value)

  def __call__(self, shape, dtype=None):
    units = shape[0] // 4
    bias = np.zeros(shape, np.float32)
    bias[units:2 * units] = self.value
    return keras.ops.convert_to_tensor(bias, dtype=dtype)

  def get_config(self) -> dict:
    return {"value": self.value}


def translate_cell_params(cell: type, params: Mapping[str, Any] | None,
                          where: str = "cell_params") -> dict:
  """Keras keyword arguments for ``cell`` from OpenSeq2Seq (TF 1 or Keras) cell params.

  Raises:
    ConfigError: a TF 1 feature Keras cells lack (peepholes, clipping, projections), or a
      key given in both spellings.
  """
  result: dict[str, Any] = {}
  tf1 = False
  for key, value in dict(params or {}).items():
    path = f"{where}/{key}"
    if key in _RENAMED:
      tf1 = True
      target = _RENAMED[key]
      if target in params:
        raise ConfigError(f"{path}: given together with {target!r}, its Keras spelling; "
                          f"keep one")
      result[target] = value
    elif key in _DROPPED:
      tf1 = True
      if value != _DROPPED[key] and key == "state_is_tuple":
        raise ConfigError(f"{path}: Keras cells always keep their state as a list; remove "
                          f"it or set it to True")
    elif key in _UNSUPPORTED:
      if value != _UNSUPPORTED[key]:
        raise ConfigError(f"{path}: {cell.__name__} has no {key} (TF 1 LSTMCell only); "
                          f"remove it")
    elif key == "forget_bias" and _is(cell, _LSTM):
      tf1 = True
      result["unit_forget_bias"] = False
      result["bias_initializer"] = ForgetGateBias(value)
    elif key == "initializer" and _is(cell, _LSTM):
      result["kernel_initializer"] = value
    else:
      result[key] = value
  if tf1 and _is(cell, _GRU):
    result.setdefault("reset_after", False)
  return result


def _is(cell: Any, classes: tuple) -> bool:
  return isinstance(cell, type) and issubclass(cell, classes)


def make_cell(cell: type, params: Mapping[str, Any] | None, where: str = "cell_params",
              **extra: Any) -> keras.layers.Layer:
  """``cell(**translated params, **extra)`` with a one-line error if Keras rejects them.

  Args:
    cell: a Keras cell or recurrent layer class (``keras.layers.LSTMCell``, ``GRU`` ...).
    params: the config's cell params (TF 1 or Keras spellings).
    where: their config path, for errors.
    extra: keywords the component sets itself (``dtype``, ``name`` ...).
  """
  kwargs = {**translate_cell_params(cell, params, where), **extra}
  try:
    return cell(**kwargs)
  except (TypeError, ValueError) as e:
    raise ConfigError(f"{where}: {getattr(cell, '__name__', cell)} rejected the parameters: "
                      f"{e}") from None


__all__ = ["make_cell", "translate_cell_params", "ForgetGateBias"]
