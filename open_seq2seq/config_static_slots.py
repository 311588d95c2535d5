"""The slot table (:data:`open_seq2seq.slots.SLOTS`) with each slot's declarations read from
the parameter index instead of the code that imports TensorFlow.

The component slots (data layer, encoder, decoder, loss) need nothing else: the stand-in of
a component class answers ``declared_params()`` from the index. The others get their
declarations (and, for the optimizer and the loss scaler, their validators) here, as the
functions of ``optimizers/optimizers.py`` and ``training/loss_scaling.py`` compute them,
words of their errors included (tests/unit/test_config_static.py compares both paths). A
choice the index does not describe raises :class:`~open_seq2seq.params_index.Unsure`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from open_seq2seq import slots
from open_seq2seq.errors import ConfigError
from open_seq2seq.params_index import Index, Printed, Unsure
from open_seq2seq.utils.params import Param, join_path, unknown_key_error, validate_params

Declarations = dict[str, Param]


class StaticSlots:
  """The slots of :data:`open_seq2seq.slots.SLOTS`, answering from ``index``."""

  def __init__(self, index: Index):
    self.index = index
    self.strings = index.data["strings"]
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

  def slot_of(self, params_key: str) -> slots.Slot | None:
    return next((slot for slot in self.slots if slot.params_key == params_key), None)

  def validate(self, params: Mapping[str, Any]) -> dict:
    """As :func:`open_seq2seq.slots.validate_slots`."""
    result = dict(params)
    for slot in self.slots:
      if slot.name in result or slot.params_key in result:
        result[slot.params_key] = slot.validate(result.get(slot.name),
                                                result.get(slot.params_key))
    return result

  def _slot_table(self, choice: Any, slot_name: str) -> Declarations:
    info = Index.info(choice)
    table = (info or {}).get("slots", {}).get(slot_name)
    if table is None:
      raise Unsure(f"{slot_name}: a choice the index does not describe")
    return self.index.table(table)

  def _callable(self, choice: Any, slot_name: str) -> Declarations | None:
    """lr_policy, regularizer: declarations of a callable, None for anything else."""
    return self._slot_table(choice, slot_name) if callable(choice) else None

  # ------------------------------------------------------------------------- initializer
  def _initializer_declarations(self, choice: Any) -> Declarations | None:
    if isinstance(choice, str):
      table = self.strings["initializer"].get(choice)
      if table is None:
        raise Unsure(f"initializer name {choice!r}")
      return self.index.table(table)
    if isinstance(choice, type):
      return self._slot_table(choice, "initializer")
    return None  # an instance or a function: used as it is

  # ------------------------------------------------------------------------- optimizer
  def _optimizer(self, optimizer: Any) -> tuple[Declarations, dict]:
    """The declarations and TF 1 aliases of an optimizer name or class."""
    if isinstance(optimizer, str):
      names = self.strings["optimizer"]
      for known, entry in names.items():
        if known.lower() == optimizer.lower():
          return self.index.table(entry["decls"]), entry["aliases"]
      raise ConfigError(f"optimizer: unknown optimizer {optimizer!r}; valid names are "
                        f"{', '.join(names)} (or an optimizer class)")
    info = Index.info(optimizer)
    entry = (info or {}).get("slots", {}).get("optimizer")
    if entry is None:
      raise Unsure("an optimizer the index does not describe")
    return self.index.table(entry["decls"]), entry["aliases"]

  def _optimizer_declarations(self, optimizer: Any) -> Declarations:
    return self._optimizer(optimizer)[0]

  def _validate_optimizer(self, optimizer: Any, optimizer_params: Mapping | None) -> dict:
    """As ``optimizers.validate_optimizer_params``."""
    prefix = "optimizer_params"
    declared, aliases = self._optimizer(optimizer)
    owner = optimizer if isinstance(optimizer, str) else \
        getattr(optimizer, "__name__", "optimizer")
    redirects = self.strings["optimizer_redirects"]
    params = dict(optimizer_params or {})
    for key, value in params.items():
      if key in redirects:
        raise ConfigError(f"{join_path(prefix, key)}: the trainer handles this; set the "
                          f"top-level '{redirects[key]}' instead")
      if key not in declared:
        raise unknown_key_error(key, declared, prefix, owner)
      params[key] = declared[key].check(value, join_path(prefix, key))
      if key in aliases and aliases[key] in params:
        raise ConfigError(f"{join_path(prefix, key)}: given together with {aliases[key]!r}, "
                          f"its Keras spelling; keep one")
    spelled = set(params) | {aliases[k] for k in params if k in aliases}
    for key, param in declared.items():
      if param.required and key != "learning_rate" and key not in spelled:
        raise ConfigError(f"{join_path(prefix, key)}: required by {owner} but missing")
    return params

  # ------------------------------------------------------------------------- loss scaling
  def _scaler(self, loss_scaling: Any) -> str | None:
    """As ``loss_scaling.scaler_class``: None, ``"static"`` or an algorithm's key."""
    if loss_scaling is None:
      return None
    scalers = self.strings["loss_scaling"]
    if isinstance(loss_scaling, str) and loss_scaling.strip().lower() in scalers and \
        loss_scaling.strip().lower() != "static":
      return loss_scaling.strip().lower()
    if isinstance(loss_scaling, str):
      try:
        loss_scaling = float(loss_scaling.strip().lower())
      except ValueError:
        raise ConfigError(f"loss_scaling: {loss_scaling!r} is not a number, 'Backoff' or "
                          f"'LogMax'") from None
    if isinstance(loss_scaling, bool) or not isinstance(loss_scaling, (int, float)):
      raise ConfigError(f"loss_scaling: expected a number, 'Backoff' or 'LogMax', got "
                        f"{type(loss_scaling).__name__} {loss_scaling!r}")
    if not 0 < loss_scaling < math.inf:
      raise ConfigError(f"loss_scaling: a static scale must be a positive finite number, "
                        f"got {loss_scaling!r}")
    return "static"

  def _loss_scaling_declarations(self, loss_scaling: Any) -> Declarations | None:
    kind = self._scaler(loss_scaling)
    return None if kind is None else self.index.table(self.strings["loss_scaling"][kind])

  def _validate_loss_scaling(self, loss_scaling: Any, params: Mapping | None) -> dict:
    """As ``loss_scaling.validate_loss_scaling_params``; the scalers' range checks are left to
    the real code (taken to pass)."""
    kind = self._scaler(loss_scaling)
    if kind is None and params:
      raise ConfigError("loss_scaling_params: given, but loss_scaling is None; set "
                        "loss_scaling to 'Backoff' or 'LogMax', or remove loss_scaling_params")
    if kind in (None, "static"):
      if params:
        raise ConfigError(f"loss_scaling_params: a static loss_scaling takes no parameters, "
                          f"got {', '.join(sorted(params))}; use 'Backoff' or 'LogMax' to "
                          f"adapt it")
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


__all__ = ["StaticSlots"]
