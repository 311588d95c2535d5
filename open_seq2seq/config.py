"""Config files: loading, mode merging, command-line overrides and validation.

A config is a Python module defining ``base_model`` and ``base_params`` and optionally
``train_params``, ``eval_params``, ``infer_params`` and ``interactive_infer_params``. The dict
of the run's mode is deep-merged over ``base_params``; command-line overrides are applied
*after* that merge (so they always win), and the result is validated against the declarations
of the model and of every component before anything is built.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import inspect
import os
from types import ModuleType
from typing import Any, Mapping

from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.params import (AnyType, Param, join_path, signature_params,
                                       unknown_key_error, validate_params)

MODES = ("train", "eval", "train_eval", "infer", "interactive_infer")
_MODE_DICTS = {
    "train": ("train_params",),
    "eval": ("eval_params",),
    "infer": ("infer_params",),
    "interactive_infer": ("interactive_infer_params", "infer_params"),
}


def load_config_module(path: str) -> ModuleType:
  """Imports a config file as a module; user mistakes become :class:`ConfigError`."""
  if not os.path.isfile(path):
    raise ConfigError(f"--config_file: {path} does not exist or is not a file")
  if not os.access(path, os.R_OK):
    raise ConfigError(f"--config_file: {path} is not readable")
  spec = importlib.util.spec_from_file_location("open_seq2seq_user_config", path)
  module = importlib.util.module_from_spec(spec)
  try:
    spec.loader.exec_module(module)
  except SyntaxError as e:
    raise ConfigError(f"{path}:{e.lineno}: syntax error in config: {e.msg}") from None
  except Exception as e:  # the user's module failed to run: show where
    tb = e.__traceback__
    line = None
    while tb is not None:
      if tb.tb_frame.f_code.co_filename == path:
        line = tb.tb_lineno
      tb = tb.tb_next
    where = f"{path}:{line}" if line else path
    raise ConfigError(f"{where}: config failed to load: {type(e).__name__}: {e}") from None
  if not hasattr(module, "base_model"):
    raise ConfigError(f"{path}: config defines no base_model (e.g. base_model = Text2Text)")
  if not hasattr(module, "base_params"):
    raise ConfigError(f"{path}: config defines no base_params dict")
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


def mode_config(module: ModuleType, mode: str) -> dict:
  """``base_params`` with the dict of ``mode`` merged over it (unvalidated)."""
  if mode not in _MODE_DICTS:
    raise ConfigError(f"--mode: {mode!r} is not one of {', '.join(MODES)}")
  config = copy.deepcopy(module.base_params)
  for name in _MODE_DICTS[mode]:
    if hasattr(module, name):
      config = deep_merge(config, getattr(module, name))
      break
  return config


def parse_overrides(args: list[str]) -> list[tuple[str, str]]:
  """``["--encoder_params/num_layers=2", ...]`` -> ``[("encoder_params/num_layers", "2")]``."""
  overrides = []
  for arg in args:
    if not arg.startswith("--") or "=" not in arg:
      raise ConfigError(
          f"{arg}: unknown argument; config overrides look like --encoder_params/num_layers=2")
    key, value = arg[2:].split("=", 1)
    overrides.append((key, value))
  return overrides


def _declaration(base_model: type, config: Mapping, path: str) -> Param | None:
  """The declaration of ``path`` (``a/b/c``), or None for keys inside free-form dicts."""
  parts = path.split("/")
  declared = base_model.declared_params()
  owner = base_model.__name__
  for depth, key in enumerate(parts):
    prefix = "/".join(parts[:depth])
    if declared is None:
      return None
    if key not in declared:
      raise unknown_key_error(key, declared, prefix, owner)
    if depth == len(parts) - 1:
      return declared[key]
    declared, owner = _nested_declarations(config, prefix, key)
  return None


def _nested_declarations(config: Mapping, prefix: str, key: str):
  """Declarations of the dict at ``prefix/key`` if a component class defines them."""
  if prefix:  # deeper dicts (e.g. inside encoder_params) are free-form
    return None, None
  component = _component_of(key)
  if component is None:
    return None, None
  klass = config.get(component)
  if klass is None:
    return None, None
  return _declarations_of(component, klass), getattr(klass, "__name__", str(klass))


def _component_of(params_key: str) -> str | None:
  if params_key.endswith("_params"):
    return params_key[: -len("_params")]
  return None


def _declarations_of(component: str, klass: Any) -> dict[str, Param] | None:
  if hasattr(klass, "declared_params"):
    return klass.declared_params()
  if component == "optimizer":
    from open_seq2seq.optimizers import optimizer_declarations
    return optimizer_declarations(klass)
  if component == "regularizer" and callable(klass):
    from open_seq2seq.optimizers import regularizer_declarations
    return regularizer_declarations(klass)
  if component == "lr_policy" and callable(klass):
    return signature_params(klass, skip=("global_step",))
  return None


def parse_value(text: str, param: Param | None) -> Any:
  """Parses an override's text: a Python literal if it is one, else the string itself."""
  if param is not None and str in param.type_tuple() and AnyType not in param.type_tuple():
    if text == "None" and type(None) in param.type_tuple():
      return None
    return text
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text


def apply_overrides(base_model: type, config: dict, overrides: list[tuple[str, str]]) -> dict:
  """Sets each ``path=value`` in ``config`` (creating nested dicts as needed)."""
  config = copy.deepcopy(config)
  for path, text in overrides:
    param = _declaration(base_model, config, path)
    value = parse_value(text, param)
    target = config
    parts = path.split("/")
    for key in parts[:-1]:
      if not isinstance(target.get(key, {}), dict):
        raise ConfigError(f"--{path}: {key} is not a dict in the config")
      target = target.setdefault(key, {})
    target[parts[-1]] = value
  return config


def resolve_config(base_model: type, config: Mapping, mode: str) -> dict:
  """Validates a merged config and returns it with every default filled in.

  Raises:
    ConfigError: naming the full key path of the first problem found.
  """
  if not inspect.isclass(base_model) or not hasattr(base_model, "declared_params"):
    raise ConfigError(f"base_model: expected a model class such as Text2Text, got {base_model!r}")
  params = base_model.validate_params(config)
  for component, params_key in (("data_layer", "data_layer_params"),
                                ("encoder", "encoder_params"), ("decoder", "decoder_params"),
                                ("loss", "loss_params"), ("optimizer", "optimizer_params"),
                                ("lr_policy", "lr_policy_params"),
                                ("regularizer", "regularizer_params")):
    klass = params.get(component)
    if klass is None:
      continue
    if component == "optimizer":
      from open_seq2seq.optimizers import validate_optimizer_params
      validate_optimizer_params(klass, params[params_key], params_key)
      continue
    declared = _declarations_of(component, klass)
    if declared is None:
      continue
    owner = getattr(klass, "__name__", component)
    if component in ("regularizer", "lr_policy"):
      # keyword arguments: unknown keys and wrong types are errors; missing ones may be
      # filled in by the trainer (e.g. decay_steps from max_steps)
      for key, value in params[params_key].items():
        if key not in declared:
          raise unknown_key_error(key, declared, params_key, owner)
        declared[key].check(value, join_path(params_key, key))
      continue
    params[params_key] = validate_params(params[params_key], declared, params_key, owner)
  _check_consistency(params, mode)
  return params


def _check_consistency(params: Mapping, mode: str) -> None:
  if params["max_steps"] is not None and params["num_epochs"] is not None:
    raise ConfigError("max_steps and num_epochs: give one of them, not both")
  if mode in ("train", "train_eval"):
    if params["max_steps"] is None and params["num_epochs"] is None:
      raise ConfigError("max_steps: training needs max_steps or num_epochs in the config")
    if params["loss"] is None:
      raise ConfigError("loss: training needs a loss class in the config")
  for key in ("batch_size_per_gpu", "iter_size", "num_gpus", "num_checkpoints"):
    if params[key] is not None and params[key] < 1:
      raise ConfigError(f"{key}: must be at least 1, got {params[key]}")


def load_config(path: str, mode: str, overrides: list[str] | None = None
                ) -> tuple[type, dict[str, dict]]:
  """Loads ``path`` and returns ``(base_model, {mode: validated params})``.

  ``train_eval`` yields both a ``train`` and an ``eval`` config; overrides apply to each.
  """
  module = load_config_module(path)
  parsed = parse_overrides(overrides or [])
  modes = ("train", "eval") if mode == "train_eval" else (mode,)
  configs = {}
  for m in modes:
    merged = apply_overrides(module.base_model, mode_config(module, m), parsed)
    configs[m] = resolve_config(module.base_model, merged, mode if m == "train" else m)
  return module.base_model, configs


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


__all__ = ["MODES", "load_config", "load_config_module", "mode_config", "apply_overrides",
           "parse_overrides", "resolve_config", "deep_merge", "config_to_text"]
