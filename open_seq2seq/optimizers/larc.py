"""LARC: layer-wise adaptive rate control of the gradients, as OpenSeq2Seq applied it.

Each variable's gradient is multiplied by a factor from its trust ratio
``eta * ||w|| / ||g||`` before the optimizer sees it (``lr`` is the learning rate of the
update)::

    clip:   factor = min(max(eta * ||w|| / (lr * (||g|| + epsilon)), min_update), 1)
    scale:  factor = max(eta * ||w|| / (||g|| + epsilon), min_update)

"clip" keeps each variable's step ``lr * factor * ||g||`` at most ``eta * ||w||``; "scale"
replaces the global learning rate by a per-variable one. Norms are float32 L2 norms of the
whole variable. The trainer applies LARC to the gradients of the whole step (after the loss
scale and the batch weight are divided out, the regularization gradients added and
``max_grad_norm`` clipping), as OpenSeq2Seq's ``post_process_gradients`` did.

Config (a top-level key of the run, OpenSeq2Seq's names and defaults)::

    "larc_params": {"larc_eta": 0.001, "larc_mode": "clip", "min_update": 1e-7}
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.params import Param, dict_of

#: The keys of ``larc_params``.
LARC_PARAMS = {
    "larc_eta": Param(float, doc="Trust coefficient eta of the ratio eta * ||w|| / ||g||."),
    "larc_mode": Param(str, "clip", "'clip': cap each variable's step at eta * ||w|| "
                       "(factor <= 1); 'scale': per-variable rate eta * ||w|| / ||g||.",
                       choices=("clip", "scale")),
    "min_update": Param(float, 1e-7, "Lower bound of the factor applied to a gradient."),
    "epsilon": Param(float, 1e-7, "Added to ||g|| in the ratio's denominator."),
}


def _check_larc(params: dict, path: str) -> dict:
  for key in ("larc_eta", "epsilon"):
    if not 0 < params[key] < math.inf:
      raise ConfigError(f"{path}/{key}: must be a positive number, got {params[key]!r}")
  if not 0 <= params["min_update"] < math.inf:
    raise ConfigError(f"{path}/min_update: must be a non-negative number, "
                      f"got {params['min_update']!r}")
  return params


#: The Param type of the model's ``larc_params`` (None: no LARC).
LARC_PARAMS_TYPE = dict_of(LARC_PARAMS, "larc_params", _check_larc)


def apply_larc(grads: Sequence[tf.Tensor], variables: Sequence[Any], learning_rate: Any,
               larc_eta: float, larc_mode: str = "clip", min_update: float = 1e-7,
               epsilon: float = 1e-7) -> tuple[list[tf.Tensor], dict[str, list[tf.Tensor]]]:
  """Rescales each gradient by its LARC factor.

  Args:
    grads: float32 gradients of ``variables`` (already unscaled and normalised).
    variables: the variables, read as float32 for their norms.
    learning_rate: the learning rate of this update (float32 scalar; "clip" mode).
    larc_eta, larc_mode, min_update, epsilon: as in ``larc_params``.

  Returns:
    ``(grads, values)``: the rescaled gradients, and per-variable float32 lists for
    ``larc_summaries``: ``larc_grad_update`` (the factor), ``larc_final_lr`` (learning rate
    times the factor) and, in clip mode, ``larc_clip_on`` (1.0 where the cap applied).
  """
  if larc_mode not in ("clip", "scale"):
    raise ConfigError(f"larc_params/larc_mode: {larc_mode!r} is not one of 'clip', 'scale'")
  lr = tf.cast(learning_rate, tf.float32)
  scaled, factors, clipped = [], [], []
  for grad, variable in zip(grads, variables):
    grad = tf.cast(grad, tf.float32)
    w_norm = tf.norm(tf.cast(tf.convert_to_tensor(variable), tf.float32))
    g_norm = tf.norm(grad)
    if larc_mode == "clip":
      factor = tf.maximum(larc_eta * w_norm / (lr * (g_norm + epsilon)), min_update)
      clipped.append(tf.cast(factor < 1.0, tf.float32))
      factor = tf.minimum(factor, 1.0)
    else:
      factor = tf.maximum(larc_eta * w_norm / (g_norm + epsilon), min_update)
    factors.append(factor)
    scaled.append(grad * factor)
  values = {"larc_grad_update": factors, "larc_final_lr": [lr * f for f in factors]}
  if larc_mode == "clip":
    values["larc_clip_on"] = clipped
  return scaled, values


__all__ = ["LARC_PARAMS", "LARC_PARAMS_TYPE", "apply_larc"]
