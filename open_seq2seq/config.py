"""Config files: loading, mode merging, command-line overrides and validation.

A config is a Python module defining ``base_model`` and ``base_params`` and optionally
``train_params``, ``eval_params``, ``infer_params`` and ``interactive_infer_params``. The dict
of the run's mode is deep-merged over ``base_params``; command-line overrides are applied
*after* that merge (so they always win), and the result is validated against the declarations
of the model and of every part the config chooses (the slot table of
:mod:`open_seq2seq.slots`) before anything is built.

Nothing here imports TensorFlow: :mod:`open_seq2seq.config_static` runs these very checks,
on declarations read from the parameter index, before TensorFlow is imported.
"""

from __future__ import annotations

import copy
import importlib.util
import inspect
import os
from types import ModuleType
from typing import Any, Container, Mapping

from open_seq2seq import slots
from open_seq2seq.errors import ConfigError
from open_seq2seq.overrides import (MODE_PREFIXES, Parsed, apply_mode_overrides,
                                    apply_overrides, by_mode, parse_overrides,
                                    read_overrides_file, replace_duration)
from open_seq2seq.training.run_rules import PERIOD_KEYS, check_run_settings
from open_seq2seq.utils.params import validate_params

MODES = ("train", "eval", "train_eval", "infer", "interactive_infer")
#: The name a config file runs under.
CONFIG_MODULE_NAME = "open_seq2seq_user_config"
_MODE_DICTS = {
    "train": ("train_params",),
    "eval": ("eval_params",),
    # A config without infer_params infers on the eval data (OpenSeq2Seq users expect it).
    "infer": ("infer_params", "eval_params"),
    "interactive_infer": ("interactive_infer_params", "infer_params"),
}


def check_config_file(path: str) -> None:
  """Raises ConfigError unless ``path`` is a readable file."""
  if not os.path.isfile(path):
    raise ConfigError(f"--config_file: {path} does not exist or is not a file")
  if not os.access(path, os.R_OK):
    raise ConfigError(f"--config_file: {path} is not readable")


def syntax_error(path: str, error: SyntaxError) -> ConfigError:
  """The error for a config file Python cannot compile."""
  return ConfigError(f"{path}:{error.lineno}: syntax error in config: {error.msg}")


def check_config_variables(path: str, variables: Container[str]) -> None:
  """Raises ConfigError unless a config file's ``variables`` name the two it must define."""
  if "base_model" not in variables:
    raise ConfigError(f"{path}: config defines no base_model (e.g. base_model = Text2Text)")
  if "base_params" not in variables:
    raise ConfigError(f"{path}: config defines no base_params dict")


def load_config_module(path: str) -> ModuleType:
  """Imports a config file as a module; user mistakes become :class:`ConfigError`."""
  check_config_file(path)
  spec = importlib.util.spec_from_file_location(CONFIG_MODULE_NAME, path)
  module = importlib.util.module_from_spec(spec)
  try:
    spec.loader.exec_module(module)
  except SyntaxError as e:
    raise syntax_error(path, e) from None
  except Exception as e:  # the user's module failed to run: show where
    tb = e.__traceback__
    line = None
    target = os.path.abspath(path)  # the loader may make the code's file name absolute
    while tb is not None:
      if os.path.abspath(tb.tb_frame.f_code.co_filename) == target:
        line = tb.tb_lineno
      tb = tb.tb_next
    where = f"{path}:{line}" if line else path
    raise ConfigError(f"{where}: config failed to load: {type(e).__name__}: {e}") from None
  check_config_variables(path, vars(module))
  return module


def deep_merge(base: Mapping, update: Mapping) -> dict:
  """Recursively merges ``update`` over ``base`` (dicts merge, anything else replaces)."""
  result = copy.copy(dict(base))
  for key, value in update.items():
    if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
      result[key] = deep_merge(result[key], value)
    else:
      result[key] = value
  return result


def mode_config(module: ModuleType | Mapping[str, Any], mode: str) -> dict:
  """``base_params`` with the dict of ``mode`` merged over it (unvalidated).

  Args:
    module: the config module, or its variables (as ``config_static`` reads them).
  """
  variables = module if isinstance(module, Mapping) else vars(module)
  if mode not in _MODE_DICTS:
    raise ConfigError(f"--mode: {mode!r} is not one of {', '.join(MODES)}")
  config = copy.deepcopy(variables["base_params"])
  for name in _MODE_DICTS[mode]:
    if name in variables:
      config = deep_merge(config, variables[name])
      break
  return config


def resolve_config(base_model: type, config: Mapping, mode: str,
                   schema: slots.Schema = slots.CODE) -> dict:
  """Validates a merged config and returns it with every default filled in.

  The model class checks the top-level keys; the slot table (:mod:`open_seq2seq.slots`)
  checks the params of every part the config chooses, nested lists of dicts included.
  ``schema`` says where the declarations come from (the parameter index's, before
  TensorFlow is imported: ``config_static``).

  Raises:
    ConfigError: naming the full key path of the first problem found.
  """
  params = slots.validate_slots(validate_top_level(base_model, config, schema), schema)
  _check_model_settings(params, mode)
  check_run_settings(params, mode)
  return params


def validate_top_level(base_model: type, config: Mapping | None,
                       schema: slots.Schema = slots.CODE) -> dict:
  """The top-level keys of a flat config checked against the model class's declarations and
  the run's (:mod:`open_seq2seq.training.run_params`), defaults filled in; the params of
  the chosen parts are checked by :func:`resolve_config`.

  Raises:
    ConfigError: naming the key, with the closest valid key for a typo.
  """
  if not inspect.isclass(base_model) or not hasattr(base_model, "declared_params"):
    raise ConfigError(f"base_model: expected a model class such as Text2Text, got {base_model!r}")
  return validate_params(config, schema.top_level(base_model), "", owner=base_model.__name__)


def _check_model_settings(params: Mapping, mode: str) -> None:
  if mode in ("train", "train_eval") and params["loss"] is None:
    raise ConfigError("loss: training needs a loss class in the config")
  for key in ("batch_size_per_gpu", "eval_batch_size_per_gpu"):
    if params[key] is not None and params[key] < 1:
      raise ConfigError(f"{key}: must be at least 1, got {params[key]}")


def load_config(path: str, mode: str, overrides: list[str] | None = None,
                overrides_file: str | None = None, notices: list[str] | None = None,
                run_overrides: list | None = None) -> tuple[type, dict[str, dict]]:
  """Loads ``path`` and returns ``(base_model, {mode: validated params})``.

  ``train_eval`` yields both a ``train`` and an ``eval`` config. Overrides apply in this
  order, later ones winning: ``run_overrides`` (what the run being resumed or evaluated was
  made with, :mod:`open_seq2seq.run_settings`), those of ``overrides_file`` (YAML,
  :func:`read_overrides_file`), then the command-line ones. An un-prefixed key reaches every
  mode's config; ``train_params/...``, ``eval_params/...``, ``infer_params/...`` and
  ``interactive_infer_params/...`` reach that mode's only (a prefix for a mode the command
  does not run gets a notice). ``max_steps`` given where the config sets ``num_epochs``
  replaces it, and the reverse. When ``notices`` is a list, a line is appended for each such
  replacement, each unused prefix and every key the config sets that is accepted but changes
  nothing (:func:`open_seq2seq.slots.ignored_settings`).
  """
  module = load_config_module(path)
  given: list = read_overrides_file(overrides_file) if overrides_file else []
  given += parse_overrides(overrides or [])
  parsed = list(run_overrides or []) + given
  common, per_mode = by_mode(parsed)
  modes = ("train", "eval") if mode == "train_eval" else (mode,)
  notices = notices if notices is not None else []
  for prefix, reached in MODE_PREFIXES.items():
    given_here = any(path.startswith(prefix + "/") for path, _ in given)
    if given_here and not set(reached) & set(modes):
      notices.append(f"--{prefix}/...: ignored: --mode={mode} builds no {reached[0]} config")
  if mode == "train_eval":
    notices += _shared_overrides_of_split_keys(module, by_mode(given)[0])
  configs = {}
  given_common, given_per_mode = by_mode(given)
  for m in modes:
    mode_overrides = common + per_mode.get(m, [])
    # only this command's own duration key gets a notice, not the run's remembered one
    announced = {path for path, _ in given_common + given_per_mode.get(m, [])}
    merged = replace_duration(mode_config(module, m), mode_overrides, notices, announced)
    merged = apply_mode_overrides(module.base_model, merged, mode_overrides)
    configs[m] = resolve_config(module.base_model, merged, mode if m == "train" else m)
    notices += [line for line in slots.ignored_settings(module.base_model, merged)
                if line not in notices]
  return module.base_model, configs


def _shared_overrides_of_split_keys(module: ModuleType, common: list) -> list[str]:
  """Notices for un-prefixed overrides of data layer keys the config file sets differently
  for train and eval (data files ...): in train_eval they reach both, so the in-training eval
  would read what training reads."""
  lines = []
  train, evaluation = mode_config(module, "train"), mode_config(module, "eval")
  for path, _ in common:
    if path.startswith("data_layer_params/") and \
        _lookup(train, path) != _lookup(evaluation, path):
      lines.append(f"--{path}=... reaches both the train and the eval config of train_eval "
                   f"(the config file gives them different values); write "
                   f"--train_params/{path}=... or --eval_params/{path}=... to set one")
  return lines


def _lookup(config: Any, path: str) -> Any:
  for key in path.split("/"):
    if isinstance(config, Mapping):
      config = config.get(key)
    elif isinstance(config, list) and key.isdigit() and int(key) < len(config):
      config = config[int(key)]
    else:
      return None
  return config


def config_to_text(params: Mapping[str, Any]) -> str:
  """Readable dump of a resolved config (classes and functions by their import path)."""

  def render(value: Any, indent: int) -> str:
    pad = "  " * indent
    if isinstance(value, Mapping):
      if not value:
        return "{}"
      items = [f"{pad}  {k!r}: {render(v, indent + 1)}," for k, v in sorted(value.items())]
      return "{\n" + "\n".join(items) + f"\n{pad}}}"
    if inspect.isclass(value) or inspect.isfunction(value):
      return f"{value.__module__}.{value.__qualname__}"
    return repr(value)

  return render(params, 0) + "\n"


def plain(value: Any) -> Any:
  """A resolved config value as plain YAML data (classes and functions by import path)."""
  if isinstance(value, Mapping):
    return {str(k): plain(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [plain(v) for v in value]
  if value is None or isinstance(value, (bool, int, float, str)):
    return value
  if inspect.isclass(value) or inspect.isfunction(value) or inspect.isbuiltin(value):
    return f"{value.__module__}.{value.__qualname__}"
  return repr(value)


def config_to_yaml(configs: Mapping[str, Mapping[str, Any]]) -> str:
  """The resolved configs of a run (``{mode: params}``) as one YAML document.

  Values that are classes or functions appear as their import path (``open_seq2seq.models.
  text2text.Text2Text``); other objects as their ``repr``. Meant for reading and tooling
  (the run's Python config stays the source of truth).
  """
  import yaml
  return yaml.safe_dump({mode: plain(params) for mode, params in configs.items()},
                        sort_keys=True, default_flow_style=False, allow_unicode=True, width=100)


__all__ = ["MODES", "PERIOD_KEYS", "CONFIG_MODULE_NAME", "load_config", "load_config_module",
           "check_config_file", "check_config_variables", "syntax_error", "mode_config",
           "apply_overrides", "parse_overrides", "read_overrides_file", "Parsed",
           "resolve_config", "validate_top_level", "deep_merge",
           "config_to_text", "config_to_yaml"]
