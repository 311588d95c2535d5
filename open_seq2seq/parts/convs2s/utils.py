"""Pieces shared by the ConvS2S encoder and decoder: the GLU activation, the config keys
both take, and how their conv stack is described.

``conv_nchannels_kwidth`` lists one ``(channels, kernel_width)`` pair per conv layer; the
number of layers is its length (OpenSeq2Seq's ``encoder_layers`` / ``decoder_layers``, when
set, must agree).
"""

from __future__ import annotations

import math
from typing import Any

import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.convs2s.embedding_layer import EMBEDDING_STD
from open_seq2seq.utils.params import Param, callable_or_class


def gated_linear_units(inputs: tf.Tensor) -> tf.Tensor:
  """Gated linear units (Dauphin et al. 2017) over the last axis: ``a * sigmoid(b)``.

  Args:
    inputs: [..., 2 * d]; ``a`` is the first half of the channels, ``b`` the second.

  Returns:
    [..., d] in the dtype of ``inputs``.
  """
  channels = inputs.shape[-1]
  if channels is not None and channels % 2:
    raise ValueError(f"gated_linear_units: needs an even number of channels, got {channels}")
  value, gate = tf.split(inputs, 2, axis=-1)
  return value * tf.sigmoid(gate)


def is_glu(activation: Any) -> bool:
  """Whether ``activation`` halves the channels (the conv then produces twice as many)."""
  return activation is gated_linear_units


def conv_layers_spec(value: Any) -> bool:
  """Type predicate of ``conv_nchannels_kwidth``: a non-empty list of
  ``(channels, kernel_width)`` pairs (tuples or lists) of positive ints."""
  if not isinstance(value, (list, tuple)) or not value:
    return False
  for pair in value:
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
      return False
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in pair):
      return False
  return True


conv_layers_spec.type_name = "non-empty list of (channels, kernel_width) pairs of positive ints"

NORMALIZATION_TYPES = ("weight_norm", "batch_norm", "layer_norm", None)
WEIGHT_NORM_INITS = ("norm", "data")

#: Keys the ConvS2S encoder and decoder share (OpenSeq2Seq's names and defaults).
SHARED_PARAMS = {
    "conv_nchannels_kwidth": Param(
        conv_layers_spec, doc="One (channels, kernel_width) pair per conv layer, e.g. "
        "[(512, 3)] * 9 + [(1024, 3)] * 4 + [(2048, 1)] * 2; its length is the layer count."),
    "pad_embeddings_2_eight": Param(
        bool, False, "Pad the token embedding's vocabulary to a multiple of 8."),
    "embedding_dropout_keep_prob": Param(
        float, 0.8, "Keep probability of dropout on the embeddings (and the fan-in scale "
        "of the first linear layer's initialization)."),
    "hidden_dropout_keep_prob": Param(
        float, 0.8, "Keep probability of dropout on each conv layer's input (and its "
        "initialization scale)."),
    "max_input_length": Param(
        int, 128, "Rows of the learned position embedding; positions at or beyond it get a "
        "zero position embedding (as OpenSeq2Seq's out-of-range lookups on GPU)."),
    "conv_activation": Param(
        (callable_or_class, None), gated_linear_units,
        "Activation after each conv; open_seq2seq.parts.convs2s.utils.gated_linear_units "
        "(default) makes the conv produce 2 x channels and halves them; None: linear."),
    "normalization_type": Param(
        (str, None), "weight_norm", "Normalization of every conv and linear layer: "
        "'weight_norm' (w = g * v / ||v||, plus bias), 'batch_norm', 'layer_norm' (no bias) "
        "or None (plain weights and bias).", choices=NORMALIZATION_TYPES),
    "scaling_factor": Param(float, math.sqrt(0.5),
                            "Scale of every residual sum (sqrt(0.5) keeps the variance)."),
    "init_var": Param((float, None), None, "Standard deviation of every conv/linear weight's "
                      "normal initialization (None: OpenSeq2Seq's sqrt(keep_prob / fan-in), "
                      "times 4 inside the root for convs)."),
    "weight_norm_init": Param(
        str, "norm", "How weight norm's g and b start: 'norm' (OpenSeq2Seq: g = ||v||, b = 0) "
        "or 'data' (Salimans & Kingma: set on a fresh run's first training batch so each "
        "channel's pre-activation has mean 0 and standard deviation weight_norm_init_scale "
        "over the real positions of the global batch; a resumed run keeps its checkpoint's).",
        choices=WEIGHT_NORM_INITS),
    "weight_norm_init_scale": Param(
        float, EMBEDDING_STD, "Standard deviation of every channel after weight_norm_init "
        "'data': the embeddings' 0.1 keeps the residual sums and the unscaled attention dot "
        "products at the scale OpenSeq2Seq's initialization gives them."),
}


def conv_layers(params: dict, where: str, count_key: str) -> list[tuple[int, int]]:
  """The validated ``(channels, kernel_width)`` list; checks ``count_key`` and dropouts.

  Args:
    params: the component's validated params.
    where: "encoder_params" or "decoder_params" (for errors).
    count_key: "encoder_layers" or "decoder_layers".

  Raises:
    ConfigError: a layer count that disagrees with the list, or a keep probability
      outside (0, 1].
  """
  layers = [(int(c), int(k)) for c, k in params["conv_nchannels_kwidth"]]
  count = params.get(count_key)
  if count is not None and count != len(layers):
    raise ConfigError(f"{where}/{count_key}: {count} disagrees with the {len(layers)} "
                      f"layers of {where}/conv_nchannels_kwidth; drop it or make them equal")
  for key, value in params.items():
    if key.endswith("_keep_prob") and not 0.0 < value <= 1.0:
      raise ConfigError(f"{where}/{key}: must be in (0, 1], got {value}")
  if params["max_input_length"] <= 0:
    raise ConfigError(f"{where}/max_input_length: must be positive, "
                      f"got {params['max_input_length']}")
  if params["init_var"] is not None and params["init_var"] <= 0:
    raise ConfigError(f"{where}/init_var: must be positive, got {params['init_var']}")
  if params["weight_norm_init_scale"] <= 0:
    raise ConfigError(f"{where}/weight_norm_init_scale: must be positive, "
                      f"got {params['weight_norm_init_scale']}")
  if params["weight_norm_init"] == "data" and params["normalization_type"] != "weight_norm":
    raise ConfigError(f"{where}/weight_norm_init: 'data' initializes weight norm's g and b, "
                      f"but normalization_type is {params['normalization_type']!r}; set "
                      f"normalization_type='weight_norm' or weight_norm_init='norm'")
  return layers


def normalized_layer_kwargs(params: dict, dtype: Any) -> dict[str, Any]:
  """Keyword arguments of every normalized (conv, linear, attention) layer of a stack."""
  data = params["weight_norm_init"] == "data"
  return dict(normalization_type=params["normalization_type"], init_var=params["init_var"],
              data_init_scale=params["weight_norm_init_scale"] if data else None, dtype=dtype)


def residual_scale(x: tf.Tensor, factor: float) -> tf.Tensor:
  """``x * factor`` in ``x``'s dtype."""
  return x * tf.cast(factor, x.dtype)


__all__ = ["gated_linear_units", "is_glu", "conv_layers_spec", "conv_layers",
           "normalized_layer_kwargs", "SHARED_PARAMS", "NORMALIZATION_TYPES",
           "WEIGHT_NORM_INITS", "residual_scale"]
