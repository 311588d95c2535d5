"""The Transformer's normalization layers and their config, OpenSeq2Seq's ``norm_params``.

Three types, chosen by ``norm_params["type"]``:

* ``"layernorm_L2"`` (default): per position, ``(x - mean) / sqrt(var + epsilon)``, then
  ``gamma * . + beta`` (Keras' LayerNormalization; epsilon 1e-6).
* ``"layernorm_L1"``: per position, ``(x - mean) / (mean(|x - mean|) + epsilon)``, then
  ``gamma * . + beta`` (epsilon 1e-6).
* ``"batch_norm"``: per channel over the batch and time axes, ``(x - mu) / sqrt(s2 +
  epsilon)`` (times ``gamma`` plus ``beta`` when ``center_scale``). In training ``mu``/``s2``
  are the moments of the real (non-padding) positions of the batch, and the moving
  statistics follow ``m <- momentum * m + (1 - momentum) * batch value``; in eval and infer
  the moving statistics are used.

Statistics are computed in float32 under mixed precision; outputs are in the compute dtype.
Every layer is called as ``norm(x, padding_mask=None, training=None)`` (``padding_mask``:
bool [batch, time], True at real positions; only batch norm reads it).
"""

from __future__ import annotations

import sys
from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.regularizers import make_regularizer
from open_seq2seq.utils.params import Param, callable_or_class, dict_of

NORM_TYPES = ("layernorm_L2", "layernorm_L1", "batch_norm")

#: Each type's keys (besides ``type``) and their defaults (OpenSeq2Seq's values).
TYPE_DEFAULTS = {
    "layernorm_L2": {"epsilon": 1e-6},
    "layernorm_L1": {"epsilon": 1e-6},
    "batch_norm": {"epsilon": 1e-4, "momentum": 0.95, "center_scale": True,
                   "regularizer": None, "regularizer_params": None,
                   "data_format": None},
}

#: Keys of ``norm_params``. Defaults are None ("the type's default", see TYPE_DEFAULTS).
NORM_FIELDS = {
    "type": Param(str, "layernorm_L2", "Normalization of every residual sublayer and of the "
                  "final stack norm.", choices=NORM_TYPES),
    "epsilon": Param((float, None), None, "Added to the variance (layernorm_L2, batch_norm) or "
                     "to the mean absolute deviation (layernorm_L1); default 1e-6 for layer "
                     "norms, 1e-4 for batch_norm."),
    "momentum": Param((float, None), None, "batch_norm: decay of the moving mean and "
                      "variance used in eval and infer; default 0.95."),
    "center_scale": Param((bool, None), None, "batch_norm: learn beta and gamma; default "
                          "True."),
    "regularizer": Param((callable_or_class, None), None, "batch_norm with center_scale: "
                         "penalty on beta and gamma (a Keras regularizer class, instance or "
                         "factory, as the top-level regularizer); it is in the model's Keras "
                         "losses, which training does not add yet (a warning says so)."),
    "regularizer_params": Param((dict, None), None, "batch_norm: keyword arguments of "
                                "regularizer (e.g. {'scale': s}, TF 1's meaning)."),
    "data_format": Param((str, None), None, "Ignored: activations are [batch, time, "
                         "channels] and batch norm is per channel, OpenSeq2Seq's "
                         "'channels_last'; the only value accepted.",
                         choices=("channels_last",)),
}

_printed: set[str] = set()


def _warn_once(line: str) -> None:
  """One warning line per process (configs are validated once per mode)."""
  if line not in _printed:
    _printed.add(line)
    print(f"warning: {line}", file=sys.stdout, flush=True)


def _penalty(params: dict, path: str) -> Any:
  """The batch-norm beta/gamma regularizer as a per-weight function, or None."""
  try:
    return make_regularizer(params.get("regularizer"), params.get("regularizer_params"))
  except ConfigError as e:
    message = str(e)
    if not message.startswith("regularizer_params"):
      message = f"regularizer: {message}"
    raise ConfigError(f"{path}/{message}") from None
  except TypeError as e:  # a factory or class called with keywords it does not take
    raise ConfigError(f"{path}/regularizer_params: {e}") from None


def check_norm_params(params: dict, path: str) -> dict:
  """Cross-key check of a validated ``norm_params``; returns only the keys that were set.

  Keys of batch_norm given with a layer norm (OpenSeq2Seq read only its type's keys, and its
  configs set ``momentum`` with layer norm) get a one-line warning and are dropped.
  """
  norm_type = params["type"]
  valid = TYPE_DEFAULTS[norm_type]
  result = {"type": norm_type}
  for key, value in params.items():
    if key == "type" or value is None:
      continue
    if key not in valid:
      _warn_once(f"{path}/{key}: ignored: only batch_norm uses it, type is {norm_type!r} "
                 f"(its keys: type, {', '.join(valid)})")
      continue
    result[key] = value
  if result.get("epsilon", 1.0) <= 0:
    raise ConfigError(f"{path}/epsilon: must be positive, got {result['epsilon']}")
  if norm_type == "batch_norm":
    if not 0.0 <= result.get("momentum", 0.0) <= 1.0:
      raise ConfigError(f"{path}/momentum: must be in [0, 1], got {result['momentum']}")
    if result.get("regularizer_params") and result.get("regularizer") is None:
      raise ConfigError(f"{path}/regularizer_params: given without regularizer; set "
                        f"regularizer or remove regularizer_params")
    if _penalty(result, path) is not None:
      if not result.get("center_scale", True):
        _warn_once(f"{path}/regularizer: ignored: center_scale is False, so batch norm has "
                   f"no beta or gamma to regularize")
  return result


#: The ``norm_params`` declaration shared by the Transformer encoder and decoder.
NORM_PARAMS = Param(dict_of(NORM_FIELDS, "norm_params", check_norm_params), {},
                    "Normalization (OpenSeq2Seq's): layernorm_L2 (default), layernorm_L1 or "
                    "batch_norm, with each type's keys (see below).")


def resolve_norm_params(norm_params: dict | None) -> dict:
  """``norm_params`` (validated) with the defaults of its type filled in."""
  norm_params = dict(norm_params or {})
  norm_type = norm_params.pop("type", "layernorm_L2")
  return {"type": norm_type, **TYPE_DEFAULTS[norm_type], **norm_params}


def make_norm(norm_params: dict | None, name: str | None = None,
              **kwargs) -> keras.layers.Layer:
  """The (unbuilt) normalization layer ``norm_params`` asks for.

  ``name`` defaults to ``"layer_norm"`` / ``"batch_norm"``; ``kwargs`` go to the layer
  (``dtype=``). Build it in the owner's ``build`` (``layer.build((None, hidden_size))``) so
  that its variables' paths nest under the owner's.
  """
  p = resolve_norm_params(norm_params)
  if p["type"] == "batch_norm":
    penalty = _penalty(p, "norm_params") if p["center_scale"] else None
    return MaskedBatchNorm(p["momentum"], p["epsilon"], p["center_scale"], penalty,
                           name=name or "batch_norm", **kwargs)
  if p["type"] == "layernorm_L1":
    return LayerNormL1(p["epsilon"], name=name or "layer_norm", **kwargs)
  return LayerNormL2(epsilon=p["epsilon"], name=name or "layer_norm", **kwargs)


class LayerNormL2(keras.layers.LayerNormalization):
  """Keras layer normalization over the last axis, with the common norm call signature."""

  def call(self, x: tf.Tensor, padding_mask: tf.Tensor | None = None,
           training: bool | None = None) -> tf.Tensor:
    return super().call(x)


class LayerNormL1(keras.layers.Layer):
  """``gamma * (x - mean) / (mean(|x - mean|) + epsilon) + beta`` over the last axis.

  Args:
    epsilon: added to the mean absolute deviation.
  """

  def __init__(self, epsilon: float = 1e-6, **kwargs):
    super().__init__(**kwargs)
    self.epsilon = epsilon

  def build(self, input_shape):
    shape = (input_shape[-1],)
    # float32 master weights, read as such in call (autocast off): the math is float32.
    self.gamma = self.add_weight(shape=shape, initializer="ones", name="gamma",
                                 autocast=False)
    self.beta = self.add_weight(shape=shape, initializer="zeros", name="beta",
                                autocast=False)

  def call(self, x: tf.Tensor, padding_mask: tf.Tensor | None = None,
           training: bool | None = None) -> tf.Tensor:
    x32 = tf.cast(x, tf.float32)
    centered = x32 - tf.reduce_mean(x32, axis=-1, keepdims=True)
    deviation = tf.reduce_mean(tf.abs(centered), axis=-1, keepdims=True)
    y = centered / (deviation + self.epsilon) * self.gamma + self.beta
    return tf.cast(y, self.compute_dtype)


def masked_moments(x: tf.Tensor, padding_mask: tf.Tensor | None) -> tuple[tf.Tensor, tf.Tensor]:
  """Per-channel mean and (biased) variance of float32 ``x`` over its real positions.

  Args:
    x: [..., channels].
    padding_mask: bool of ``x``'s shape without the channel axis (True: real), or None.
  """
  axes = list(range(x.shape.rank - 1))
  if padding_mask is None:
    return tf.nn.moments(x, axes)
  mask = tf.cast(padding_mask, tf.bool)[..., None]
  count = tf.maximum(tf.reduce_sum(tf.cast(mask, tf.float32)), 1.0)
  mean = tf.reduce_sum(tf.where(mask, x, 0.0), axes) / count
  variance = tf.reduce_sum(tf.where(mask, tf.square(x - mean), 0.0), axes) / count
  return mean, variance


class MaskedBatchNorm(keras.layers.Layer):
  """Batch norm over every axis but the last, whose batch statistics skip padding.

  Padding never changes a real position's output: in training the moments come from the
  real positions only; in eval/infer the moving statistics are used. The moving statistics
  are float32 variables updated in ``call(training=True)`` (inside a ``tf.function`` train
  step too) and averaged across replicas, so every tower keeps the same ones.

  Args:
    momentum: decay of the moving statistics.
    epsilon: added to the variance.
    center_scale: learn ``beta`` and ``gamma``.
    regularizer: penalty on ``beta`` and ``gamma`` (a function of the weight), or None.
  """

  def __init__(self, momentum: float = 0.95, epsilon: float = 1e-4, center_scale: bool = True,
               regularizer: Any = None, **kwargs):
    super().__init__(**kwargs)
    self.momentum, self.epsilon = momentum, epsilon
    self.center_scale, self.regularizer = center_scale, regularizer

  def build(self, input_shape):
    shape = (input_shape[-1],)
    if self.center_scale:
      self.gamma = self.add_weight(shape=shape, initializer="ones", name="gamma",
                                   regularizer=self.regularizer, autocast=False)
      self.beta = self.add_weight(shape=shape, initializer="zeros", name="beta",
                                  regularizer=self.regularizer, autocast=False)
    # "mean" aggregation: an update inside a replica context is averaged over the replicas
    # (with the default, each tower would drift to the statistics of its own shard).
    stats = dict(shape=shape, trainable=False, autocast=False, aggregation="mean")
    self.moving_mean = self.add_weight(initializer="zeros", name="moving_mean", **stats)
    self.moving_variance = self.add_weight(initializer="ones", name="moving_variance",
                                           **stats)

  def call(self, x: tf.Tensor, padding_mask: tf.Tensor | None = None,
           training: bool | None = None) -> tf.Tensor:
    x32 = tf.cast(x, tf.float32)
    if training and self.trainable:
      mean, variance = masked_moments(x32, padding_mask)
      keep = self.momentum
      self.moving_mean.assign(self.moving_mean * keep + mean * (1.0 - keep))
      self.moving_variance.assign(self.moving_variance * keep + variance * (1.0 - keep))
    else:
      mean, variance = self.moving_mean, self.moving_variance
    y = (x32 - mean) * tf.math.rsqrt(variance + self.epsilon)
    if self.center_scale:
      y = y * self.gamma + self.beta
    return tf.cast(y, self.compute_dtype)
