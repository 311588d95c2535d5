"""The run's ``optimizers`` key: the settings of each update group of a model trained by
several optimizers (an adversarial model's discriminator and generator).

    "optimizer": "AdamW", "lr_policy": exp_decay, ...     # every group's, unless ...
    "optimizers": {"discriminator": {"optimizer_params": {"weight_decay": 0.0},
                                     "max_grad_norm": None}},

A group's settings are the top-level keys of :data:`GROUP_KEYS` with its own dict on top; they
are checked as the top-level ones are (the same slot validators, names under
``optimizers/<group>/``). Which groups exist is the model's (``Model.update_groups``), checked
when the trainer is built. Pure Python, no TensorFlow (the TF-free config checks run it too).
"""

from __future__ import annotations

from typing import Any, Mapping

from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.params import unknown_key_error

#: The run keys an update group may set for itself under ``optimizers/<group>``.
GROUP_KEYS = ("optimizer", "optimizer_params", "lr_policy", "lr_policy_params",
              "max_grad_norm", "larc_params", "loss_scaling", "loss_scaling_params")


def validate_optimizer_groups(params: Mapping[str, Any], slot_table, run_params: Mapping
                              ) -> dict[str, dict] | None:
  """``params["optimizers"]`` checked: each group a dict of :data:`GROUP_KEYS`, its plain
  keys against their run declarations and its slots (optimizer, lr policy, loss scaling)
  against the part the group chooses, with the top-level choice where it sets none.

  Args:
    params: the config, top-level keys validated and slots of the top level validated.
    slot_table: the schema's slots.
    run_params: the run's declarations, flat.
  """
  groups = params.get("optimizers")
  if groups is None:
    return None
  slots = {slot.name: slot for slot in slot_table if slot.name in GROUP_KEYS}
  result = {}
  for name, given in groups.items():
    where = f"optimizers/{name}"
    if not isinstance(given, Mapping):
      raise ConfigError(f"{where}: expected a dict of {', '.join(GROUP_KEYS)}, got "
                        f"{type(given).__name__}")
    checked = {}
    for key, value in given.items():
      if key not in GROUP_KEYS:
        raise unknown_key_error(key, {k: run_params[k] for k in GROUP_KEYS}, where,
                                "an update group")
      if key not in slots and not any(key == s.params_key for s in slots.values()):
        checked[key] = run_params[key].check(value, f"{where}/{key}")
    for slot in slots.values():
      if slot.name not in given and slot.params_key not in given:
        continue
      choice = given.get(slot.name, params.get(slot.name))
      options = given.get(slot.params_key, {} if slot.name in given
                          else params.get(slot.params_key))
      try:
        checked[slot.params_key] = slot.validate(choice, options)
      except ConfigError as e:
        raise ConfigError(f"{where}/{e}") from None
      if slot.name in given:
        checked[slot.name] = run_params[slot.name].check(given[slot.name], f"{where}/{slot.name}")
    result[name] = checked
  return result


__all__ = ["GROUP_KEYS", "validate_optimizer_groups"]
