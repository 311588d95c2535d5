"""The ``summaries`` a config may ask for (OpenSeq2Seq's names) and how each is produced.

Run-level scalars (``learning_rate``, ``global_gradient_norm``, ``loss_scale``) are values
every step returns anyway; the Reporter writes them as ``train/<name>`` scalars (and to
``metrics.jsonl``). The per-variable ones are TensorBoard-only, under OpenSeq2Seq's tags with
the variable's Keras path:

=================  =======================================================================
``gradients``      histogram ``gradients/<path>`` of each gradient
``gradient_norm``  scalar ``gradient_norm/<path>``
``variables``      histogram ``variables/<path>`` of each weight
``variable_norm``  scalar ``variable_norm/<path>``
``larc_summaries`` scalars ``larc_grad_update/<path>`` (the LARC factor), ``larc_final_lr/
                   <path>`` (learning rate times it) and, in clip mode, ``larc_clip_on/<path>``
=================  =======================================================================

Gradients are taken where OpenSeq2Seq took them: unscaled, normalised, regularised and
clipped, before LARC; ``global_gradient_norm`` is measured before clipping, and with
``max_grad_norm`` the step also reports ``global_clipped_gradient_norm``.

Cost: nothing unless one of the per-variable names is asked for. Then the traced step also
returns the gradients (and the LARC factors), which keeps one extra copy of the gradients
alive between steps; histograms and norms are computed from them, and weights are read, only
at ``save_summaries_steps``, on the chief, after the step (so ``variables`` shows the weights
after the update of the step it is labelled with).
"""

from __future__ import annotations

from typing import Any, Sequence

import tensorflow as tf

# The names and their check need no TensorFlow (the parameter index uses them too).
from open_seq2seq.training.summary_names import SUMMARY_NAMES, SUMMARY_NAMES_TYPE, SummaryNames

#: Names written per variable (computed only when asked for).
PER_VARIABLE = ("gradients", "gradient_norm", "variables", "variable_norm", "larc_summaries")

#: Per-variable names that need tensors from inside the step.
_FROM_STEP = {"gradients", "gradient_norm", "larc_summaries"}


def step_tensors(names: Sequence[str], grads: Sequence[tf.Tensor],
                 larc_values: dict[str, list] | None) -> dict[str, list]:
  """What the traced step returns for the per-variable summaries in ``names``."""
  out: dict[str, list] = {}
  if {"gradients", "gradient_norm"} & set(names):
    out["gradients"] = list(grads)
  if "larc_summaries" in names and larc_values:
    out.update(larc_values)
  return out


def wants_step_tensors(names: Sequence[str]) -> bool:
  return bool(_FROM_STEP & set(names))


class VariableSummaries:
  """The per-variable summaries of one step, turned into tags and values when written.

  Args:
    names: the config's ``summaries``.
    variables: the trained variables, in the order of the step's gradients.
    paths: their Keras paths (the tags' suffixes).
    tensors: what the step returned (:func:`step_tensors`).
  """

  def __init__(self, names: Sequence[str], variables: Sequence[Any], paths: Sequence[str],
               tensors: dict[str, list]):
    self.names = set(names)
    self.variables = list(variables)
    self.paths = list(paths)
    self.tensors = tensors

  def histograms(self) -> dict[str, Any]:
    """``tag -> tensor`` of the histograms asked for."""
    out = {}
    if "gradients" in self.names:
      out.update(self._tagged("gradients", self.tensors["gradients"]))
    if "variables" in self.names:
      out.update(self._tagged("variables", [_read(v) for v in self.variables]))
    return out

  def scalars(self) -> dict[str, float]:
    """``tag -> float`` of the per-variable scalars asked for."""
    out: dict[str, float] = {}
    if "gradient_norm" in self.names:
      out.update(self._tagged("gradient_norm", [tf.norm(g) for g in self.tensors["gradients"]]))
    if "variable_norm" in self.names:
      out.update(self._tagged("variable_norm", [tf.norm(_read(v)) for v in self.variables]))
    for key in ("larc_grad_update", "larc_final_lr", "larc_clip_on"):
      if key in self.tensors:
        out.update(self._tagged(key, self.tensors[key]))
    return {tag: float(value) for tag, value in out.items()}

  def _tagged(self, name: str, values: Sequence[Any]) -> dict[str, Any]:
    return {f"{name}/{path}": value for path, value in zip(self.paths, values)}


def _read(variable: Any) -> tf.Tensor:
  return tf.cast(tf.convert_to_tensor(variable), tf.float32)


__all__ = ["SUMMARY_NAMES", "PER_VARIABLE", "SUMMARY_NAMES_TYPE", "SummaryNames",
           "VariableSummaries", "step_tensors", "wants_step_tensors"]
