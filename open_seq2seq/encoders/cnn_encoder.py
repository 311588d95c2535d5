"""CNNEncoder: a stack of Keras layers given in the config (OpenSeq2Seq's ``cnn_layers``)."""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable

import keras
import tensorflow as tf

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.cnns.data_format import (DATA_FORMATS, channel_axis, from_layout,
                                                 internal_data_format, to_layout)
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS, fresh
from open_seq2seq.utils.params import Param


def _layer_list(value: Any) -> bool:
  return isinstance(value, (list, tuple)) and all(
      isinstance(entry, (list, tuple)) and len(entry) == 2 and callable(entry[0])
      and isinstance(entry[1], dict) for entry in value)


_layer_list.type_name = "list of (Keras layer class or function, params dict) pairs"


def _accepts(layer_class: type, keyword: str) -> bool:
  try:
    parameters = inspect.signature(layer_class).parameters
  except (TypeError, ValueError):
    return False
  return keyword in parameters


def _snake(name: str) -> str:
  return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class FunctionLayer(keras.layers.Layer):
  """A plain function of a ``cnn_layers`` entry (``tf.nn.relu``), called with its params."""

  def __init__(self, function: Callable, function_params: dict, **kwargs):
    super().__init__(**kwargs)
    self.function, self.function_params = function, dict(function_params)

  def call(self, x: tf.Tensor) -> tf.Tensor:
    return self.function(x, **self.function_params)


class CNNEncoder(Encoder):
  """Applies ``cnn_layers`` to the images, flattens, then applies ``fc_layers``.

  Each entry is ``(layer, params)``: a Keras layer class (``keras.layers.Conv2D``,
  ``MaxPooling2D``, ``BatchNormalization``, ``Dropout`` ...) is built once with ``params``,
  and a plain function (``tf.nn.relu``) is called as ``function(x, **params)``. As in
  OpenSeq2Seq, the encoder adds ``data_format`` to the layers that take one (and the
  channel ``axis`` to batch normalization), and the model's kernel initializer to layers
  that take a ``kernel_initializer`` and set none. The feature maps are flattened in
  height-width-channel order whatever the layout, so ``fc_layers`` (e.g. ``keras.layers.Dense``)
  see the same features on CPUs and GPUs. Returns ``{"outputs": [batch, features]}``.
  """

  PARAMS = {
      "cnn_layers": Param(_layer_list, doc="(layer class or function, params) pairs applied "
                          "to the [batch, height, width, channels] images."),
      "fc_layers": Param(_layer_list, [], "(layer class or function, params) pairs applied "
                         "after flattening."),
      "data_format": Param(str, "channels_first", "Layout on GPUs; CPUs always run "
                           "channels_last (same variables and results).", choices=DATA_FORMATS),
      **INITIALIZER_PARAMS,
  }

  def __init__(self, params: dict[str, Any], *, mode: str = "train", name: str = "encoder",
               dtype: Any = "float32", initializer: Any = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    self.data_format = internal_data_format(p["data_format"])
    self._initializer = None
    if p["initializer"] is not None or self._default_initializer is not None:
      self._initializer = self.kernel_initializer()
    self.cnn = [self._build(entry, f"cnn_layers/{i}", spatial=True)
                for i, entry in enumerate(p["cnn_layers"])]
    self.fc = [self._build(entry, f"fc_layers/{i}", spatial=False)
               for i, entry in enumerate(p["fc_layers"])]

  def _build(self, entry: tuple, where: str, spatial: bool) -> keras.layers.Layer:
    """A Keras layer built from ``(class, params)``, or a function wrapped in a layer."""
    layer, layer_params = entry
    layer_params = dict(layer_params)
    name = where.replace("/", "_")
    if not (isinstance(layer, type) and issubclass(layer, keras.layers.Layer)):
      return FunctionLayer(layer, layer_params, dtype=self.dtype_policy,
                           name=f"{getattr(layer, '__name__', 'function')}_{name}")
    if spatial and _accepts(layer, "data_format"):
      layer_params.setdefault("data_format", self.data_format)
    if spatial and issubclass(layer, keras.layers.BatchNormalization):
      layer_params.setdefault("axis", channel_axis(self.data_format))
    if self._initializer is not None and _accepts(layer, "kernel_initializer"):
      layer_params.setdefault("kernel_initializer", fresh(self._initializer))
    layer_params.setdefault("dtype", self.dtype_policy)
    layer_params.setdefault("name", f"{_snake(layer.__name__)}_{name}")
    try:
      return layer(**layer_params)
    except (TypeError, ValueError) as e:
      raise ConfigError(f"encoder_params/{where}: {layer.__name__} rejects its params: "
                        f"{e}") from None

  @staticmethod
  def _apply(layer: keras.layers.Layer, x: tf.Tensor, training: bool | None) -> tf.Tensor:
    if "training" in inspect.signature(layer.call).parameters:
      return layer(x, training=training)
    return layer(x)

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    x = tf.cast(input_dict["source_tensors"][0], self.compute_dtype)
    x = to_layout(x, self.data_format)
    for layer in self.cnn:
      x = self._apply(layer, x, training)
    x = from_layout(x, self.data_format)
    x = tf.reshape(x, [-1, x.shape[1] * x.shape[2] * x.shape[3]])
    for layer in self.fc:
      x = self._apply(layer, x, training)
    return {"outputs": x}
