"""Command-line and overrides-file values: parsed, addressed by key path, applied.

An override is ``path=value``: ``--encoder_params/num_layers=2`` on the command line, or a key
of an ``--overrides_file`` (YAML). A path may start with a mode's dict, ``train_params/``,
``eval_params/``, ``infer_params/`` or ``interactive_infer_params/``: the value then reaches
that mode's config only (:func:`by_mode`); an un-prefixed path reaches every mode the command
runs (both the train and the eval config of ``train_eval``). Overrides are applied after the
mode dict is merged over ``base_params``, so they always win; ``--max_steps`` given where the
config sets ``num_epochs`` (or the reverse) replaces it, with a notice
(:func:`replace_duration`).
"""

from __future__ import annotations

import ast
import copy
from typing import Any, Collection, Mapping

from open_seq2seq import slots
from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.params import (AnyType, DeclaredDict, DeclaredList, Param,
                                       unknown_key_error)

#: The mode dicts a path may start with, and the modes whose config each reaches (as in a
#: config file, interactive_infer takes infer_params' values unless its own dict says more).
MODE_PREFIXES = {"train_params": ("train",), "eval_params": ("eval",),
                 "infer_params": ("infer", "interactive_infer"),
                 "interactive_infer_params": ("interactive_infer",)}


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


def _declaration(base_model: type, config: Mapping, path: str, schema: slots.Schema
                 ) -> Param | None:
  """The declaration of ``path`` (``a/b/c``), or None for keys inside free-form dicts.

  A top-level ``<slot>_params`` key takes the declarations of the part the config chooses
  for the slot (:mod:`open_seq2seq.slots`); deeper keys those their ``Param`` declares
  (``dict_of``/``list_of``; a list's entries are addressed by index: ``convnet_layers/0``).
  """
  parts = path.split("/")
  declared: Any = schema.top_level(base_model)
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
    slot = schema.slot_of(key) if depth == 0 else None
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


def apply_overrides(base_model: type, config: dict, overrides: list[tuple[str, str]],
                    schema: slots.Schema = slots.CODE) -> dict:
  """Sets each ``path=value`` in ``config``, creating nested dicts as needed.

  A value is command-line text (parsed by :func:`parse_value`) or a :class:`Parsed` value
  from an overrides file. A path may index into a list
  (``encoder_params/convnet_layers/2/kernel_size``); the index must exist. ``schema`` says
  what the paths may name (the parameter index's, before TensorFlow is imported).
  """
  config = copy.deepcopy(config)
  for path, text in overrides:
    param = _declaration(base_model, config, path, schema)
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


def by_mode(overrides: list[tuple[str, Any]]) -> tuple[list, dict[str, list]]:
  """``(un-prefixed overrides, {mode: that mode's overrides, prefix removed})``, each list in
  the given order (apply the latter with :func:`apply_mode_overrides`)."""
  common: list = []
  per_mode: dict[str, list] = {}
  for path, value in overrides:
    head, _, rest = path.partition("/")
    if head in MODE_PREFIXES:
      if not rest:
        raise ConfigError(f"--{path}=...: name a key inside it, e.g. "
                          f"--{head}/batch_size_per_gpu=2")
      for mode in MODE_PREFIXES[head]:
        per_mode.setdefault(mode, []).append((rest, _Prefixed(head, value)))
    else:
      common.append((path, value))
  return common, per_mode


class _Prefixed:
  """An override value that came under a mode prefix (for error messages)."""

  def __init__(self, prefix: str, value: Any):
    self.prefix, self.value = prefix, value

  def __repr__(self) -> str:
    return f"{self.prefix}/{self.value!r}"


def apply_mode_overrides(base_model: type, config: dict, overrides: list,
                         schema: slots.Schema = slots.CODE) -> dict:
  """:func:`apply_overrides` for a mode's list from :func:`by_mode` (un-prefixed entries and
  prefixed ones); errors name the key path as the user wrote it."""
  for path, value in overrides:
    if not isinstance(value, _Prefixed):
      config = apply_overrides(base_model, config, [(path, value)], schema)
      continue
    try:
      config = apply_overrides(base_model, config, [(path, value.value)], schema)
    except ConfigError as e:
      text = str(e)
      text = f"--{value.prefix}/{text[2:]}" if text.startswith("--") else \
          f"{value.prefix}/{text}"
      raise ConfigError(text) from None
  return config


#: Two ways to say how long training lasts: a value given for one replaces the other.
_DURATION = ("max_steps", "num_epochs")


def replace_duration(config: dict, overrides: list[tuple[str, Any]], notices: list[str] | None,
                     announced: Collection[str] | None = None) -> dict:
  """``config`` (a mode's merged config, before overrides) without the duration key that an
  override's other duration key replaces: ``--max_steps=10`` on a config that sets
  ``num_epochs`` trains 10 steps. A notice names what was replaced when the replacing key is
  in ``announced`` (None: any key); a run's own remembered ``--max_steps`` replaces silently
  when it is evaluated or inferred from: its training said so."""
  given = {path: _plain_value(value) for path, value in overrides if path in _DURATION}
  for key, other in (_DURATION, _DURATION[::-1]):
    replaced = config.get(other)
    if key in given and other not in given and replaced is not None and \
        given[key] not in (None, "None"):
      config = dict(config, **{other: None})
      line = f"--{key}={given[key]} replaces the config's {other}={replaced}"
      if notices is not None and line not in notices and (announced is None or
                                                          key in announced):
        notices.append(line)
  return config


def _plain_value(value: Any) -> Any:
  value = value.value if isinstance(value, _Prefixed) else value
  return value.value if isinstance(value, Parsed) else value
