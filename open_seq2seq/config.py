"""Config files: loading, mode merging, command-line overrides and validation.

A config is a Python module defining ``base_model`` and ``base_params`` and optionally
``train_params``, ``eval_params``, ``infer_params`` and ``interactive_infer_params``. The dict
of the run's mode is deep-merged over ``base_params``; command-line overrides are applied
*after* that merge (so they always win), and the result is validated against the declarations
of the model and of every part the config chooses (the slot table of
:mod:`open_seq2seq.slots`) before anything is built.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import inspect
import os
from types import ModuleType
from typing import Any, Mapping

from open_seq2seq import slots
from open_seq2seq.errors import ConfigError
from open_seq2seq.training.run_params import PERIOD_KEYS, check_run_settings
from open_seq2seq.utils.params import (AnyType, DeclaredDict, DeclaredList, Param,
                                       unknown_key_error, validate_params)

MODES = ("train", "eval", "train_eval", "infer", "interactive_infer")
_MODE_DICTS = {
    "train": ("train_params",),
    "eval": ("eval_params",),
    # A config without infer_params infers on the eval data (OpenSeq2Seq users expect it).
    "infer": ("infer_params", "eval_params"),
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
          f"{arg}: unknown argument; config overrides look like --batch_size_per_gpu=32 or "
          f"--encoder_params/<key>=<value>")
    key, value = arg[2:].split("=", 1)
    overrides.append((key, value))
  return overrides


class Parsed:
  """An override value that is already a Python value (from YAML), not command-line text."""

  def __init__(self, value: Any):
    self.value = value

  def __repr__(self) -> str:
    return f"Parsed({self.value!r})"


def read_overrides_file(path: str) -> list[tuple[str, Parsed]]:
  """Overrides from a YAML mapping, as ``(key/path, Parsed(value))`` in file order.

  Nested mappings address nested keys (``encoder_params: {num_layers: 2}`` is
  ``encoder_params/num_layers``), so a file sets single keys the way ``--a/b=v`` does and
  never replaces a whole dict; a key may also be written as a path (``encoder_params/num_layers``).
  An empty mapping (``{}``) sets a dict to empty.

  Raises:
    ConfigError: unreadable file, YAML syntax error, or a document that is not a mapping.
  """
  import yaml  # declared dependency; imported here so config loading stays light
  try:
    with open(path, encoding="utf-8") as f:
      document = yaml.safe_load(f)
  except OSError as e:
    raise ConfigError(f"--overrides_file: cannot read {path}: {e.strerror}") from None
  except yaml.YAMLError as e:
    mark = getattr(e, "problem_mark", None)
    where = f"{path}:{mark.line + 1}" if mark is not None else path
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    raise ConfigError(f"{where}: YAML syntax error: {problem}") from None
  if document is None:
    return []
  if not isinstance(document, Mapping):
    raise ConfigError(f"{path}: expected a mapping of config keys to values, got "
                      f"{type(document).__name__}")
  overrides: list[tuple[str, Parsed]] = []

  def walk(mapping: Mapping, prefix: str) -> None:
    for key, value in mapping.items():
      path_key = f"{prefix}/{key}" if prefix else str(key)
      if isinstance(value, Mapping) and value:
        walk(value, path_key)
      else:
        overrides.append((path_key, Parsed(value)))

  walk(document, "")
  return overrides


def _declaration(base_model: type, config: Mapping, path: str) -> Param | None:
  """The declaration of ``path`` (``a/b/c``), or None for keys inside free-form dicts.

  A top-level ``<slot>_params`` key takes the declarations of the part the config chooses
  for the slot (:mod:`open_seq2seq.slots`); deeper keys those their ``Param`` declares
  (``dict_of``/``list_of``; a list's entries are addressed by index: ``convnet_layers/0``).
  """
  parts = path.split("/")
  declared: Any = slots.top_level_declarations(base_model)
  owner, param = base_model.__name__, None
  for depth, key in enumerate(parts):
    prefix = "/".join(parts[:depth])
    if isinstance(declared, DeclaredList):
      if not key.isdigit():
        raise ConfigError(f"--{path}: {prefix} is a list; expected an entry index, got {key!r}")
      param = Param(declared.item)
      declared, owner = declared.item.fields, declared.item.owner
      continue
    if declared is None:
      return None
    if key not in declared:
      raise unknown_key_error(key, declared, prefix, owner)
    param = declared[key]
    slot = slots.slot_of(key) if depth == 0 else None
    if slot is not None:
      declared, owner = slots.chosen_declarations(slot, config)
    else:
      nested = param.nested()
      declared = nested.fields if isinstance(nested, DeclaredDict) else nested
      owner = nested.owner if isinstance(nested, DeclaredDict) else owner
  return param


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
  """Sets each ``path=value`` in ``config``, creating nested dicts as needed.

  A value is command-line text (parsed by :func:`parse_value`) or a :class:`Parsed` value
  from an overrides file. A path may index into a list
  (``encoder_params/convnet_layers/2/kernel_size``); the index must exist.
  """
  config = copy.deepcopy(config)
  for path, text in overrides:
    param = _declaration(base_model, config, path)
    value = text.value if isinstance(text, Parsed) else parse_value(text, param)
    *parents, last = path.split("/")
    target: Any = config
    for depth, key in enumerate(parents):
      child = _get(target, key, path, parents[:depth])
      if child is None:  # absent, or None like an unset augmentation dict
        child = {}
        _put(target, key, child, path, parents[:depth])
      elif not isinstance(child, (dict, list)):
        raise ConfigError(f"--{path}: {'/'.join(parents[:depth + 1])} is not a dict in the "
                          f"config")
      target = child
    _put(target, last, value, path, parents)
  return config


def _index(container: list, key: str, path: str, where: list[str]) -> int:
  if not key.isdigit() or int(key) >= len(container):
    raise ConfigError(f"--{path}: {'/'.join(where)} is a list of {len(container)} entries; "
                      f"{key!r} is not one of its indices")
  return int(key)


def _get(container: Any, key: str, path: str, where: list[str]) -> Any:
  if isinstance(container, list):
    return container[_index(container, key, path, where)]
  return container.get(key)


def _put(container: Any, key: str, value: Any, path: str, where: list[str]) -> None:
  if isinstance(container, list):
    container[_index(container, key, path, where)] = value
  else:
    container[key] = value


def resolve_config(base_model: type, config: Mapping, mode: str) -> dict:
  """Validates a merged config and returns it with every default filled in.

  The model class checks the top-level keys; the slot table (:mod:`open_seq2seq.slots`)
  checks the params of every part the config chooses, nested lists of dicts included.

  Raises:
    ConfigError: naming the full key path of the first problem found.
  """
  params = slots.validate_slots(validate_top_level(base_model, config))
  _check_model_settings(params, mode)
  check_run_settings(params, mode)
  return params


def validate_top_level(base_model: type, config: Mapping | None) -> dict:
  """The top-level keys of a flat config checked against the model class's declarations and
  the run's (:mod:`open_seq2seq.training.run_params`), defaults filled in; the params of
  the chosen parts are checked by :func:`resolve_config`.

  Raises:
    ConfigError: naming the key, with the closest valid key for a typo.
  """
  if not inspect.isclass(base_model) or not hasattr(base_model, "declared_params"):
    raise ConfigError(f"base_model: expected a model class such as Text2Text, got {base_model!r}")
  return validate_params(config, slots.top_level_declarations(base_model), "",
                         owner=base_model.__name__)


def _check_model_settings(params: Mapping, mode: str) -> None:
  if mode in ("train", "train_eval") and params["loss"] is None:
    raise ConfigError("loss: training needs a loss class in the config")
  for key in ("batch_size_per_gpu", "eval_batch_size_per_gpu"):
    if params[key] is not None and params[key] < 1:
      raise ConfigError(f"{key}: must be at least 1, got {params[key]}")


def load_config(path: str, mode: str, overrides: list[str] | None = None,
                overrides_file: str | None = None, notices: list[str] | None = None
                ) -> tuple[type, dict[str, dict]]:
  """Loads ``path`` and returns ``(base_model, {mode: validated params})``.

  ``train_eval`` yields both a ``train`` and an ``eval`` config; overrides apply to each,
  those of ``overrides_file`` (YAML, :func:`read_overrides_file`) first, then the
  command-line ones, which win. When ``notices`` is a list, a line is appended for every
  key the config sets that is accepted but changes nothing
  (:func:`open_seq2seq.slots.ignored_settings`).
  """
  module = load_config_module(path)
  parsed: list = read_overrides_file(overrides_file) if overrides_file else []
  parsed += parse_overrides(overrides or [])
  modes = ("train", "eval") if mode == "train_eval" else (mode,)
  configs = {}
  for m in modes:
    merged = apply_overrides(module.base_model, mode_config(module, m), parsed)
    configs[m] = resolve_config(module.base_model, merged, mode if m == "train" else m)
    if notices is not None:
      notices += [line for line in slots.ignored_settings(module.base_model, merged)
                  if line not in notices]
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


def _plain(value: Any) -> Any:
  """A resolved config value as plain YAML data (classes and functions by import path)."""
  if isinstance(value, Mapping):
    return {str(k): _plain(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_plain(v) for v in value]
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
  return yaml.safe_dump({mode: _plain(params) for mode, params in configs.items()},
                        sort_keys=True, default_flow_style=False, allow_unicode=True, width=100)


__all__ = ["MODES", "PERIOD_KEYS", "load_config", "load_config_module", "mode_config",
           "apply_overrides", "parse_overrides", "read_overrides_file", "Parsed",
           "resolve_config", "validate_top_level", "deep_merge",
           "config_to_text", "config_to_yaml"]
