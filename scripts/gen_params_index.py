#!/usr/bin/env python
"""Writes open_seq2seq/params_index.json: the declarations a config can reach, by import path.

``run.py --help_params`` and config errors read it to answer without importing TensorFlow
(open_seq2seq/config_static.py). Run it after changing any ``PARAMS``, slot or run key
(``scripts/gen_config_reference.py`` runs it too); tests/unit/test_config_static.py fails
while the committed file differs from what this writes.
"""

from __future__ import annotations

import argparse
import ast
import enum
import hashlib
import importlib
import inspect
import json
import os
import pkgutil
import sys
from typing import Any, Callable, Mapping

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# These import no TensorFlow (--help answers without it); what does is imported where used.
from open_seq2seq import params_index  # noqa: E402
from open_seq2seq.utils.params import (REQUIRED, AnyType, DeclaredDict,  # noqa: E402
                                       DeclaredList, Param, _Declared, format_params_table,
                                       int_list)

#: Namespaces of TensorFlow and Keras whose names a config may use as values
#: (``tf.float32``, ``tf.nn.relu``, ``keras.initializers.GlorotUniform``...).
EXTERNAL = ("tensorflow", "tensorflow.nn", "tensorflow.math", "tensorflow.dtypes",
            "tensorflow.keras", "keras")
KERAS_PARTS = ("activations", "initializers", "regularizers", "layers", "optimizers")
#: Modules read by the static path itself: nothing a config imports.
SKIPPED = ("open_seq2seq.config_static", "open_seq2seq.config_static_env",
           "open_seq2seq.config_static_eval", "open_seq2seq.config_static_slots",
           "open_seq2seq.params_index", "open_seq2seq.test_utils")


# ----------------------------------------------------------------------------- encoding
# The reverse of params_index.Index.value / _param / _type.
_BUILTIN_TYPES = ("int", "float", "str", "bool", "list", "dict", "tuple", "set", "type",
                  "bytes", "NoneType")


def encode_value(value: Any, object_id: Callable[[Any], str | None]) -> dict:
  """A default or choice as JSON: ``{"v": plain}``, ``{"py": literal}``, ``{"ref": id}`` of an
  indexed class, ``{"name": n}`` (shown by name only) or ``{"repr": text}`` (shown only)."""
  if value is REQUIRED:
    return {"required": True}
  if _json_exact(value):
    return {"v": value}
  try:
    if type(ast.literal_eval(repr(value))) is type(value) and \
        ast.literal_eval(repr(value)) == value:
      return {"py": repr(value)}
  except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
    pass
  found = object_id(value) if isinstance(value, type) else None
  if found is not None:
    return {"ref": found}
  if isinstance(value, type) or callable(value) and hasattr(value, "__name__"):
    return {"name": value.__name__}
  text = repr(value)
  return {"repr": None if " at 0x" in text else text}


def _json_exact(value: Any) -> bool:
  if value is None or type(value) in (bool, int, str):
    return True
  if type(value) is float:
    return value == value  # NaN does not compare equal to itself after a round trip
  if type(value) is list:
    return all(_json_exact(v) for v in value)
  if type(value) is dict:
    return all(type(k) is str and _json_exact(v) for k, v in value.items())
  return False


def encode_type(t: Any, table_id: Callable[[Mapping[str, Param]], str]) -> Any:
  """One accepted type of a Param as JSON (see :meth:`Index._type` for the reverse)."""
  if t is None or t is type(None):
    return "NoneType"
  if t is AnyType:
    return "any"
  for name, predicate in params_index._PREDICATES.items():  # pylint: disable=protected-access
    if t is predicate:
      return name
  if isinstance(t, type) and t.__module__ == "builtins" and t.__name__ in _BUILTIN_TYPES:
    return t.__name__
  if getattr(t, "__qualname__", "") == "int_list.<locals>.predicate":
    cells = dict(zip(t.__code__.co_freevars, (c.cell_contents for c in t.__closure__)))
    if int_list(cells["length"], cells["minimum"]).type_name == t.type_name:
      return {"int_list": [cells["length"], cells["minimum"]]}
  from open_seq2seq.training.step_summaries import SUMMARY_NAMES, SummaryNames
  if type(t) is SummaryNames:  # read by params_index (summary_names.SummaryNames)
    return {"summary_names": list(SUMMARY_NAMES)}
  if type(t) is DeclaredDict:
    return {"dict": table_id(t.fields), "owner": t.owner, "check": _check_name(t.check)}
  if type(t) is DeclaredList and type(t.item) is DeclaredDict:
    return {"list": table_id(t.item.fields), "owner": t.item.owner,
            "check": _check_name(t.item.check), "min_items": t.min_items}
  name = getattr(t, "type_name", getattr(t, "__name__", str(t)))
  return {"opaque": name, "declared": isinstance(t, _Declared)}


def _check_name(check: Any) -> str | None:
  return None if check is None else f"{check.__module__}.{check.__qualname__}"


def encode_param(param: Param, table_id: Callable[[Mapping[str, Param]], str],
                 object_id: Callable[[Any], str | None]) -> dict:
  """A Param as JSON."""
  result: dict[str, Any] = {}
  if isinstance(param.types, tuple):
    result["types"] = [encode_type(t, table_id) for t in param.types]
  else:
    result["type"] = encode_type(param.types, table_id)
  result["default"] = encode_value(param.default, object_id)
  result["doc"] = param.doc
  if param.choices is not None:
    result["choices"] = [encode_value(c, object_id) for c in param.choices]
  return result


class _Builder:
  """Collects modules, names, objects and declaration tables."""

  def __init__(self):
    from open_seq2seq import slots
    self.slots = {slot.name: slot for slot in slots.SLOTS}
    self.modules: dict[str, bool] = {}
    self.names: dict[str, Any] = {}
    self.objects: dict[str, dict] = {}
    self.tables: dict[str, dict] = {}
    self.originals: dict[str, Mapping[str, Param]] = {}
    self._ids: dict[int, str] = {}
    self._keep: list = []  # objects whose id() is a key of _ids stay alive

  # --- declarations
  def table(self, declared: Mapping[str, Param]) -> str:
    encoded = {key: encode_param(param, self.table, self.class_id)
               for key, param in declared.items()}
    digest = hashlib.sha1(json.dumps(encoded).encode("utf-8")).hexdigest()[:12]
    self.tables.setdefault(digest, encoded)
    self.originals.setdefault(digest, dict(declared))
    return digest

  # --- objects
  def class_id(self, value: Any) -> str | None:
    return self.add(value, f"{value.__module__}.{value.__qualname__}") \
        if inspect.isclass(value) else None

  def add(self, obj: Any, path: str) -> str | None:
    """Registers ``obj`` (first seen at ``path``); returns its id, or None for what the index
    does not describe (modules)."""
    if inspect.ismodule(obj):
      return None
    if id(obj) in self._ids:
      return self._ids[id(obj)]
    if inspect.isclass(obj) or (callable(obj) and hasattr(obj, "__qualname__")
                                and hasattr(obj, "__module__") and obj.__module__):
      object_id = f"{obj.__module__}.{obj.__qualname__}"
    else:
      object_id = path
    while object_id in self.objects:  # another object of the same name (a wrapper)
      object_id += "'"
    self._ids[id(obj)] = object_id
    self._keep.append(obj)
    info: dict[str, Any] = {}
    self.objects[object_id] = info
    info.update(self._describe(obj))
    return object_id

  def _describe(self, obj: Any) -> dict:
    if inspect.isclass(obj):
      info: dict[str, Any] = {"kind": "class", "name": obj.__name__, "module": obj.__module__,
                              "qualname": obj.__qualname__, "meta": type(obj).__name__}
      if callable(getattr(obj, "declared_params", None)):
        info["params"] = self.table(obj.declared_params())
      if issubclass(obj, enum.Enum):
        info["attrs"] = {m.name: self.add(m, f"{obj.__module__}.{obj.__qualname__}.{m.name}")
                         for m in obj}
    elif callable(obj) and hasattr(obj, "__name__"):
      info = {"kind": "function", "name": obj.__name__, "type": type(obj).__name__}
    else:
      text = repr(obj)
      info = {"kind": "value", "type": type(obj).__name__,
              "repr": None if " at 0x" in text else text, "callable": callable(obj),
              "builtin": isinstance(obj, (int, float, str, bytes, list, dict, tuple, set,
                                          frozenset))}
      if isinstance(obj, enum.Enum):
        info["attrs"] = {"name": {"v": obj.name},
                         "value": encode_value(obj.value, self.class_id)}
    slots = self._slot_declarations(obj)
    if slots:
      info["slots"] = slots
    return info

  def _slot_declarations(self, obj: Any) -> dict:
    import keras
    from open_seq2seq.optimizers import lr_policies, optimizers
    found: dict[str, Any] = {}
    if inspect.isclass(obj) and issubclass(obj, keras.optimizers.Optimizer):
      aliases = optimizers._aliases_of(obj)  # pylint: disable=protected-access
      found["optimizer"] = {"decls": self.table(optimizers.optimizer_declarations(obj)),
                            "aliases": aliases}
    if inspect.isfunction(obj) and obj.__module__ == lr_policies.__name__:
      found["lr_policy"] = self.table(self.slots["lr_policy"].declarations(obj))
    module = getattr(obj, "__module__", "") or ""
    if callable(obj) and module.startswith("keras.src.regularizers"):
      found["regularizer"] = self.table(self.slots["regularizer"].declarations(obj))
    if inspect.isclass(obj) and module.startswith("keras.src.initializers"):
      declared = self.slots["initializer"].declarations(obj)
      if declared is not None:
        found["initializer"] = self.table(declared)
    return found

  # --- namespaces
  def add_module(self, dotted: str, module: Any, importable: bool, external: bool) -> None:
    self.modules[dotted] = importable
    for name, value in sorted(vars(module).items()):
      if name.startswith("_") or inspect.ismodule(value):
        continue
      path = f"{dotted}.{name}"
      if _json_exact(value):
        self.names[path] = {"v": value}
      elif isinstance(value, (list, dict, tuple, set, frozenset)):
        continue  # a table of TensorFlow's: not a config value (its repr may vary by run)
      elif external or getattr(value, "__module__", "").startswith("open_seq2seq") and (
          inspect.isclass(value) or inspect.isfunction(value)):
        object_id = self.add(value, path)
        if object_id is not None:
          self.names[path] = object_id


def _project_modules() -> list[str]:
  import open_seq2seq
  names = ["open_seq2seq"]
  for info in pkgutil.walk_packages(open_seq2seq.__path__, "open_seq2seq."):
    if not any(info.name == s or info.name.startswith(s + ".") for s in SKIPPED):
      names.append(info.name)
  return sorted(names)


def _string_choices(builder: _Builder) -> dict:
  import keras
  from open_seq2seq.optimizers import optimizers
  from open_seq2seq.training import loss_scaling
  names = {}
  for name in optimizers.OPTIMIZERS:
    klass = optimizers.OPTIMIZERS[name]
    names[name] = {"decls": builder.table(optimizers.optimizer_declarations(name)),
                   "aliases": optimizers._aliases_of(klass)}  # pylint: disable=protected-access
  initializers = {}
  for name in sorted(dir(keras.initializers)):
    candidates = {name, "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")}
    for candidate in sorted(candidates):
      try:
        declared = builder.slots["initializer"].declarations(candidate)
      except Exception:  # pylint: disable=broad-except  (not a name Keras resolves)
        continue
      if declared is not None:
        initializers[candidate] = builder.table(declared)
  scalers = {key: builder.table(klass.declared_params())
             for key, klass in loss_scaling.ALGORITHMS.items()}
  scalers["static"] = builder.table(loss_scaling.StaticLossScaler.declared_params())
  return {"optimizer": names,
          "optimizer_redirects": dict(optimizers._REDIRECTS),  # pylint: disable=protected-access
          "initializer": initializers, "loss_scaling": scalers,
          "loss_scaling_classes": {key: klass.__name__
                                   for key, klass in loss_scaling.ALGORITHMS.items()}}


def build_index() -> dict:
  """The whole index as a JSON-ready dict (imports the package and TensorFlow)."""
  import keras
  import tensorflow as tf
  from open_seq2seq.training.run_params import GROUPS, PERIOD_KEYS
  builder = _Builder()
  for dotted in _project_modules():
    try:
      module = importlib.import_module(dotted)
    except ImportError:  # an optional dependency: configs importing it take the slow path
      continue
    builder.add_module(dotted, module, True, external=False)
  for root in EXTERNAL + tuple(f"{ns}.{part}" for ns in ("keras", "tensorflow.keras")
                               for part in KERAS_PARTS):
    module = importlib.import_module(root.split(".")[0])
    for part in root.split(".")[1:]:
      module = getattr(module, part)
    try:
      importlib.import_module(root)
      importable = True
    except ImportError:
      importable = False
    builder.add_module(root, module, importable, external=True)
  index = {
      "format": params_index.FORMAT,
      "generated_with": _versions(tf.__version__, keras.__version__),
      "run": [[title, builder.table(declared)] for title, declared in GROUPS.items()],
      "period_keys": list(PERIOD_KEYS),
      "strings": _string_choices(builder),
      "modules": builder.modules,
      "names": builder.names,
      "objects": builder.objects,
      "tables": builder.tables,
  }
  _check_round_trip(index, builder)
  return index


def _versions(tensorflow: str, keras: str) -> dict:
  """The installed versions as the static path reads them (it refuses an index written with
  others); they must be the ones imported here."""
  found = params_index.installed_versions()
  if found != {"tensorflow": [tensorflow], "keras": [keras]}:
    raise SystemExit(f"the wheels on sys.path ({found}) are not the imported TensorFlow "
                     f"{tensorflow} and Keras {keras}: the index could not be checked")
  return found


def _check_round_trip(index: dict, builder: _Builder) -> None:
  """Every table reads back as the same help text (type names, defaults, docs, choices)."""
  reader = params_index.Index(json.loads(json.dumps(index)))
  for table_id, declared in builder.originals.items():
    if format_params_table(reader.table(table_id)) != format_params_table(declared):
      raise SystemExit(f"table {table_id} ({sorted(declared)[:3]}...) does not read back "
                       f"as written; extend open_seq2seq/params_index.py")


def index_text() -> str:
  """The file's content (stable: same declarations, same bytes)."""
  return json.dumps(build_index(), indent=0, sort_keys=False, ensure_ascii=False) + "\n"


def write_index() -> None:
  from open_seq2seq.utils.io import atomic_write_text
  atomic_write_text(params_index.INDEX_PATH, index_text())
  print(f"wrote {params_index.INDEX_PATH}")


def main(argv: list[str] | None = None) -> int:
  argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0]).parse_args(argv)
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()
  write_index()
  return 0


if __name__ == "__main__":
  sys.exit(main())
