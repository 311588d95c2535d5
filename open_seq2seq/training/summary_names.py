"""The names ``summaries`` accepts, and their check (:mod:`open_seq2seq.training.step_summaries`
produces them).

Pure Python, no TensorFlow: the parameter index (:mod:`open_seq2seq.params_index`) checks
``summaries`` with the same class, on the names it records, when config mistakes are
answered before TensorFlow is imported.
"""

from __future__ import annotations

from typing import Any, Iterable

from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.params import _Declared, closest_key

#: Every name ``summaries`` accepts, with what it writes.
SUMMARY_NAMES = {
    "learning_rate": "the learning rate of each update",
    "global_gradient_norm": "global gradient norm before clipping (and global_clipped_"
                            "gradient_norm after it, with max_grad_norm)",
    "loss_scale": "the loss scale (with loss_scaling)",
    "gradients": "a histogram of each variable's gradient",
    "gradient_norm": "each variable's gradient norm",
    "variables": "a histogram of each variable",
    "variable_norm": "each variable's norm",
    "larc_summaries": "each variable's LARC factor and final learning rate (with larc_params)",
}


class SummaryNames(_Declared):
  """Param type of ``summaries``: a list of names from :data:`SUMMARY_NAMES`.

  Args:
    names: the valid names (the index passes those it recorded).
  """

  type_name = "list of summary names"

  def __init__(self, names: Iterable[str] = tuple(SUMMARY_NAMES)):
    self.names = list(names)

  def accepts(self, value: Any) -> bool:
    return isinstance(value, (list, tuple))

  def validate(self, value: Any, path: str) -> list:
    for name in value:
      if name not in self.names:
        hint = closest_key(str(name), self.names)
        raise ConfigError(f"{path}: unknown summary {name!r}; "
                          + (f"did you mean {hint!r}? " if hint else "")
                          + f"valid names are {', '.join(self.names)}")
    return list(value)

  def __contains__(self, key: Any) -> bool:
    # A key path below `summaries` (--summaries/0=...): the list is set as a whole.
    raise ConfigError(f"summaries/{key}: summaries is a list of names; set it whole, e.g. "
                      f"--summaries=\"['learning_rate', 'gradients']\"")


SUMMARY_NAMES_TYPE = SummaryNames()

__all__ = ["SUMMARY_NAMES", "SUMMARY_NAMES_TYPE", "SummaryNames"]
