"""``run.py --help_params`` and config mistakes without TensorFlow.

A config file imports its model and components (``from open_seq2seq.models import
Text2Text``), which import TensorFlow: seconds before a typo in a key can be reported. This
module answers first, from the parameter index (``params_index.json``, written by
``scripts/gen_params_index.py``): it reads the config file without running it
(:mod:`open_seq2seq.config_static_eval`), merges the mode's dict and the overrides and
validates the result as :mod:`open_seq2seq.config` does, with the same functions of
:mod:`open_seq2seq.utils.params` and :mod:`open_seq2seq.overrides` on declarations read back
from the index. Then, as the normal path would:

* a mistake it is sure of (an unknown key with the closest valid one, a wrong type, a missing
  required key, an override of a key that does not exist ...) is raised as the same
  :class:`~open_seq2seq.errors.ConfigError`, word for word;
* ``--help_params`` gets the same text.

It answers None -- and the normal path runs -- whenever it is not sure: a config that does
something the reading does not follow (calls into TensorFlow, defines a class, ``try``), a
part the index does not describe (a class of the config's own, a user function as a
learning-rate policy), a run directory whose saved overrides apply, or an error found after
a check only the real code can run (a component's rules across its keys, a custom value
predicate): those checks are taken to pass, so such an error might not be the first one.
``--help_params`` still answers past them (:data:`HELP_PAST_ASSUMED_CHECKS`): the tables it
prints do not depend on them. An index written with other versions of TensorFlow or Keras
than those installed is not used. ``OPEN_SEQ2SEQ_STATIC_CONFIG=0`` turns this path off.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import os
from typing import Any, Mapping

from open_seq2seq import slots
from open_seq2seq.config_static_eval import read_config
from open_seq2seq.config_static_slots import StaticSlots
from open_seq2seq.errors import ConfigError
from open_seq2seq.overrides import (Parsed, _get, _Prefixed, _put, by_mode, parse_overrides,
                                    parse_value, read_overrides_file, replace_duration)
from open_seq2seq.params_index import Index, Unsure, load_index
from open_seq2seq.utils.params import (DeclaredDict, DeclaredList, Param, format_params_table,
                                       unknown_key_error, validate_params)

#: The name the config module runs under (config.load_config_module).
_MODULE_NAME = "open_seq2seq_user_config"
#: As config._MODE_DICTS: the dicts merged over base_params for each mode.
_MODE_DICTS = {
    "train": ("train_params",),
    "eval": ("eval_params",),
    "infer": ("infer_params", "eval_params"),
    "interactive_infer": ("interactive_infer_params", "infer_params"),
}
#: run_settings.OVERRIDES_FILE: a run's saved overrides, applied by commands that use it.
_RUN_OVERRIDES = "overrides.yaml"
#: --help_params answers past checks only the real code runs (taken to pass): the tables it
#: prints do not depend on them. False sends such configs (36 of the 57 example configs) to
#: the normal path, which prints the error instead when one of those checks fails.
HELP_PAST_ASSUMED_CHECKS = True


def static_answer(args: argparse.Namespace, overrides: list[str]) -> str | None:
  """What ``run.py`` would answer before it builds anything, if that is certain.

  Args:
    args, overrides: as :func:`open_seq2seq.cli_args.parse_args` returns them.

  Returns:
    The ``--help_params`` text, or None: not sure, or nothing to report (run normally).

  Raises:
    ConfigError: the error the normal path would report first.
  """
  if os.environ.get("OPEN_SEQ2SEQ_STATIC_CONFIG", "1") == "0":
    return None
  index = load_index()
  if index is None:
    return None
  try:
    return _StaticConfig(index).answer(args, overrides)
  except _Certain as certain:
    raise certain.error from None
  except Exception:  # pylint: disable=broad-except  (Unsure, or a gap in this reading)
    return None


class _Certain(Exception):
  """Carries the ConfigError the normal path would raise first."""

  def __init__(self, error: ConfigError):
    super().__init__(str(error))
    self.error = error


class _StaticConfig:
  """One command's config, loaded and validated as ``config.load_config`` does."""

  def __init__(self, index: Index):
    self.index = index
    self.slots = StaticSlots(index)
    self.run_params: dict[str, Param] = {}
    for _, table in index.data["run"]:
      self.run_params.update(index.table(table))

  def answer(self, args: argparse.Namespace, overrides: list[str]) -> str | None:
    mode = "interactive_infer" if args.mode == "export" else args.mode
    try:  # run_settings.load_with_the_runs_settings, then config.load_config
      given = (read_overrides_file(args.overrides_file) if args.overrides_file else []) + \
          parse_overrides(overrides)
      namespace = self.load(args.config_file)
      configs = self.configs(namespace, mode, given)
    except ConfigError as e:
      if self.index.assumed:  # an earlier check of the real code might have failed first
        return None
      raise _Certain(e) from None
    uses_a_run = mode not in ("train", "train_eval") or args.continue_learning
    logdir = next(iter(configs.values()))["logdir"]
    if not args.help_params or uses_a_run and \
        os.path.isfile(os.path.join(logdir, _RUN_OVERRIDES)) or \
        self.index.assumed and not HELP_PAST_ASSUMED_CHECKS:
      return None
    return self.help_params(namespace["base_model"], next(iter(configs.values())))

  # ------------------------------------------------------------------------- loading
  def load(self, path: str) -> dict:
    """The config module's variables (as config.load_config_module checks them)."""
    if not os.path.isfile(path):
      raise ConfigError(f"--config_file: {path} does not exist or is not a file")
    if not os.access(path, os.R_OK):
      raise ConfigError(f"--config_file: {path} is not readable")
    file = importlib.util.spec_from_file_location(_MODULE_NAME, path).origin
    try:
      namespace = read_config(path, self.index, file, _MODULE_NAME)
    except SyntaxError as e:
      raise ConfigError(f"{path}:{e.lineno}: syntax error in config: {e.msg}") from None
    if "base_model" not in namespace:
      raise ConfigError(f"{path}: config defines no base_model (e.g. base_model = Text2Text)")
    if "base_params" not in namespace:
      raise ConfigError(f"{path}: config defines no base_params dict")
    base_model = namespace["base_model"]
    if not isinstance(base_model, type) or not hasattr(base_model, "declared_params"):
      raise Unsure("a base_model the index does not describe")
    return namespace

  def configs(self, namespace: dict, mode: str, given: list) -> dict[str, dict]:
    """``{mode: validated config}`` as config.load_config builds them."""
    base_model = namespace["base_model"]
    common, per_mode = by_mode(given)
    configs = {}
    for m in ("train", "eval") if mode == "train_eval" else (mode,):
      mode_overrides = common + per_mode.get(m, [])
      merged = replace_duration(_mode_config(namespace, m), mode_overrides, None)
      merged = self.apply_mode_overrides(base_model, merged, mode_overrides)
      configs[m] = self.resolve(base_model, merged, mode if m == "train" else m)
    return configs

  # ------------------------------------------------------------------------- validation
  def top_level(self, base_model: type) -> dict[str, Param]:
    """As slots.top_level_declarations."""
    declared = base_model.declared_params()
    if set(declared) & set(self.run_params):
      raise Unsure("a model declaring a key of the run")
    return {**self.run_params, **declared}

  def resolve(self, base_model: type, config: Mapping, mode: str) -> dict:
    """As config.resolve_config."""
    params = validate_params(config, self.top_level(base_model), "", owner=base_model.__name__)
    params = self.slots.validate(params)
    # config._check_model_settings
    if mode in ("train", "train_eval") and params["loss"] is None:
      raise ConfigError("loss: training needs a loss class in the config")
    for key in ("batch_size_per_gpu", "eval_batch_size_per_gpu"):
      if params[key] is not None and params[key] < 1:
        raise ConfigError(f"{key}: must be at least 1, got {params[key]}")
    self.check_run_settings(params, mode)
    return params

  def check_run_settings(self, params: Mapping[str, Any], mode: str) -> None:
    """As run_params.check_run_settings."""
    if params["max_steps"] is not None and params["num_epochs"] is not None:
      raise ConfigError(f"max_steps={params['max_steps']} and num_epochs="
                        f"{params['num_epochs']}: give one of them, not both (from the command "
                        f"line, --max_steps=N alone replaces a config's num_epochs, and "
                        f"--num_epochs=N its max_steps)")
    if mode in ("train", "train_eval") and params["max_steps"] is None and \
        params["num_epochs"] is None:
      raise ConfigError("max_steps: training needs max_steps or num_epochs in the config")
    period_keys = self.index.data["period_keys"]
    for key in ("iter_size", "num_gpus", "num_checkpoints", "max_steps", "num_epochs",
                "eval_batches", *period_keys):
      if params[key] is not None and params[key] < 1:
        hint = " (None turns it off)" if key in period_keys else ""
        raise ConfigError(f"{key}: must be at least 1{hint}, got {params[key]}")
    if params["bench_start"] < 0:
      raise ConfigError(f"bench_start: must be at least 0, got {params['bench_start']}")

  # ------------------------------------------------------------------------- overrides
  def declaration(self, base_model: type, config: Mapping, path: str) -> Param | None:
    """As overrides._declaration."""
    parts = path.split("/")
    declared: Any = self.top_level(base_model)
    owner, param = base_model.__name__, None
    for depth, key in enumerate(parts):
      prefix = "/".join(parts[:depth])
      if isinstance(declared, DeclaredList):
        if not key.isdigit():
          raise ConfigError(f"--{path}: {prefix} is a list; expected an entry index, "
                            f"got {key!r}")
        param = Param(declared.item)
        declared, owner = declared.item.fields, declared.item.owner
        continue
      if declared is None:
        return None
      if key not in declared:
        raise unknown_key_error(key, declared, prefix, owner)
      param = declared[key]
      slot = self.slots.slot_of(key) if depth == 0 else None
      if slot is not None:
        declared, owner = slots.chosen_declarations(slot, config)
      else:
        nested = param.nested()
        declared = nested.fields if isinstance(nested, DeclaredDict) else nested
        owner = nested.owner if isinstance(nested, DeclaredDict) else owner
    return param

  def apply_overrides(self, base_model: type, config: dict, overrides: list) -> dict:
    """As overrides.apply_overrides."""
    config = copy.deepcopy(config)
    for path, text in overrides:
      param = self.declaration(base_model, config, path)
      value = text.value if isinstance(text, Parsed) else parse_value(text, param)
      *parents, last = path.split("/")
      target: Any = config
      for depth, key in enumerate(parents):
        child = _get(target, key, path, parents[:depth])
        if child is None:
          child = {}
          _put(target, key, child, path, parents[:depth])
        elif not isinstance(child, (dict, list)):
          raise ConfigError(f"--{path}: {'/'.join(parents[:depth + 1])} is not a dict in the "
                            f"config")
        target = child
      _put(target, last, value, path, parents)
    return config

  def apply_mode_overrides(self, base_model: type, config: dict, overrides: list) -> dict:
    """As overrides.apply_mode_overrides."""
    for path, value in overrides:
      if not isinstance(value, _Prefixed):
        config = self.apply_overrides(base_model, config, [(path, value)])
        continue
      try:
        config = self.apply_overrides(base_model, config, [(path, value.value)])
      except ConfigError as e:
        text = str(e)
        text = f"--{value.prefix}/{text[2:]}" if text.startswith("--") else \
            f"{value.prefix}/{text}"
        raise ConfigError(text) from None
    return config

  # ------------------------------------------------------------------------- help
  def help_params(self, base_model: type, config: Mapping[str, Any]) -> str:
    """As slots.help_params."""
    sections = [f"## {base_model.__name__} (top-level keys)\n",
                format_params_table(base_model.declared_params())]
    for title, table in self.index.data["run"]:
      sections += [f"\n## Run: {title} (top-level keys)\n",
                   format_params_table(self.index.table(table))]
    for slot in self.slots.slots:
      declared, owner = slots.chosen_declarations(slot, config)
      if declared is None:
        continue
      sections.append(f"\n## {slot.params_key}: {owner}\n")
      if slot.note:
        sections.append(slot.note + "\n")
      sections.append(format_params_table(declared))
    return "\n".join(sections)


def _mode_config(namespace: dict, mode: str) -> dict:
  """As config.mode_config, over the config's variables."""
  config = copy.deepcopy(namespace["base_params"])
  for name in _MODE_DICTS[mode]:
    if name in namespace:
      return _deep_merge(config, namespace[name])
  return config


def _deep_merge(base: Mapping, update: Mapping) -> dict:
  """As config.deep_merge."""
  result = copy.copy(dict(base))
  for key, value in update.items():
    if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
      result[key] = _deep_merge(result[key], value)
    else:
      result[key] = value
  return result


__all__ = ["static_answer"]
