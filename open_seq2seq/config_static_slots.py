"""The schema of a config (:class:`open_seq2seq.slots.Schema`: the run's keys and the slot
table) read from the parameter index instead of the code that imports TensorFlow.

The component slots (data layer, encoder, decoder, loss) need nothing else: the stand-in of
a component class answers ``declared_params()`` from the index. The others get their
declarations here, as ``optimizers/optimizers.py`` and ``training/loss_scaling.py`` compute
them; the optimizer's and the loss scaler's rules on those declarations are the very
functions the code runs (:mod:`open_seq2seq.optimizer_params`,
:mod:`open_seq2seq.training.loss_scaling_rules`), so the errors have the same words. A choice
the index does not describe raises :class:`~open_seq2seq.params_index.Unsure`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from open_seq2seq import slots
from open_seq2seq.optimizer_params import canonical_name, check_optimizer_params
from open_seq2seq.params_index import Index, Printed, Unsure
from open_seq2seq.training.loss_scaling_rules import (STATIC, check_params_have_a_scaler,
                                                      scaler_kind)
from open_seq2seq.utils.params import Param, validate_params

Declarations = dict[str, Param]


class StaticSchema(slots.Schema):
  """The schema the code declares (:class:`open_seq2seq.slots.Schema`), answered from the
  index."""

  def __init__(self, index: Index):
    self.index = index
    self.strings = index.data["strings"]
    self.groups = {title: index.table(table) for title, table in index.data["run"]}
    replaced = {
        "optimizer": dict(declarations=_known(self._optimizer_declarations),
                          validator=_known(self._validate_optimizer)),
        "lr_policy": dict(declarations=_known(lambda c: self._callable(c, "lr_policy"))),
        "regularizer": dict(declarations=_known(lambda c: self._callable(c, "regularizer"))),
        "initializer": dict(declarations=_known(self._initializer_declarations)),
        "loss_scaling": dict(declarations=_known(self._loss_scaling_declarations),
                             validator=_known(self._validate_loss_scaling)),
    }
    self.slots = tuple(dataclasses.replace(slot, **replaced[slot.name])
                       if slot.name in replaced else slot for slot in slots.SLOTS)
    components = {"data_layer", "encoder", "decoder", "loss"}
    unknown = {slot.name for slot in slots.SLOTS} - components - set(replaced)
    if unknown:  # a slot added since: its declarations come from code this module lacks
      raise Unsure(f"slots {sorted(unknown)}")

  def run_groups(self) -> dict[str, Declarations]:
    return self.groups

  def slot_table(self) -> tuple[slots.Slot, ...]:
    return self.slots

  def _choice_table(self, choice: Any, slot_name: str) -> Declarations:
    info = Index.info(choice)
    table = (info or {}).get("slots", {}).get(slot_name)
    if table is None:
      raise Unsure(f"{slot_name}: a choice the index does not describe")
    return self.index.table(table)

  def _callable(self, choice: Any, slot_name: str) -> Declarations | None:
    """lr_policy, regularizer: declarations of a callable, None for anything else."""
    return self._choice_table(choice, slot_name) if callable(choice) else None

  # ------------------------------------------------------------------------- initializer
  def _initializer_declarations(self, choice: Any) -> Declarations | None:
    if isinstance(choice, str):
      table = self.strings["initializer"].get(choice)
      if table is None:
        raise Unsure(f"initializer name {choice!r}")
      return self.index.table(table)
    if isinstance(choice, type):
      return self._choice_table(choice, "initializer")
    return None  # an instance or a function: used as it is

  # ------------------------------------------------------------------------- optimizer
  def _optimizer(self, optimizer: Any) -> tuple[Declarations, dict]:
    """The declarations and TF 1 aliases of an optimizer name or class."""
    if isinstance(optimizer, str):
      entry = self.strings["optimizer"][canonical_name(optimizer, self.strings["optimizer"])]
    else:
      entry = (Index.info(optimizer) or {}).get("slots", {}).get("optimizer")
      if entry is None:
        raise Unsure("an optimizer the index does not describe")
    return self.index.table(entry["decls"]), entry["aliases"]

  def _optimizer_declarations(self, optimizer: Any) -> Declarations:
    return self._optimizer(optimizer)[0]

  def _validate_optimizer(self, optimizer: Any, optimizer_params: Mapping | None) -> dict:
    """As ``optimizers.validate_optimizer_params``."""
    declared, aliases = self._optimizer(optimizer)
    return check_optimizer_params(optimizer, optimizer_params, declared, aliases,
                                  self.strings["optimizer_redirects"])

  # ------------------------------------------------------------------------- loss scaling
  def _scaler(self, loss_scaling: Any) -> str | None:
    """As ``loss_scaling.scaler_class``: None, ``"static"`` or an algorithm's key."""
    return scaler_kind(loss_scaling, self.strings["loss_scaling_classes"])

  def _loss_scaling_declarations(self, loss_scaling: Any) -> Declarations | None:
    kind = self._scaler(loss_scaling)
    return None if kind is None else self.index.table(self.strings["loss_scaling"][kind])

  def _validate_loss_scaling(self, loss_scaling: Any, params: Mapping | None) -> dict:
    """As ``loss_scaling.validate_loss_scaling_params``; the scalers' range checks are left to
    the real code (taken to pass)."""
    kind = self._scaler(loss_scaling)
    check_params_have_a_scaler(kind, params)
    if kind is None or kind == STATIC:
      return {}
    owner = self.strings["loss_scaling_classes"][kind]
    result = validate_params(params, self.index.table(self.strings["loss_scaling"][kind]),
                             "loss_scaling_params", owner=owner)
    self.index.assumed = True
    return result


def _known(function: Any) -> Any:
  """``function(choice, ...)``, but not for a default known only by its text (a function
  shown by its name): what the real choice declares is not known."""

  def wrapped(choice: Any, *args: Any) -> Any:
    if isinstance(choice, Printed):
      raise Unsure("a choice known only by its text")
    return function(choice, *args)

  return wrapped


__all__ = ["StaticSchema"]
