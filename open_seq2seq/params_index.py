"""The parameter index (``params_index.json``): every declaration a config can reach, readable
without importing TensorFlow.

``scripts/gen_params_index.py`` imports the whole package once and writes, for each public
class, function and constant a config may import (by every import path: the package's
``open_seq2seq.encoders.TransformerEncoder`` and the defining module's), what validation and
``--help_params`` need: the ``PARAMS`` tables, each slot's declarations for the part, the
run's key groups, the optimizer names and the Keras names a config may use
(``keras.initializers.GlorotUniform``, ``tf.float32``). A unit test fails when the committed
file is not what the generator writes now.

This module turns the JSON back into real :class:`~open_seq2seq.utils.params.Param` objects,
so that the very functions of :mod:`open_seq2seq.utils.params` validate and format them, and
into stand-ins for the classes and values (:func:`Index.object`), which behave as the real
ones do wherever validation looks at them (``callable``, ``isinstance(x, type)``, ``__name__``,
``repr`` when it is reproducible). A check only the real code can run (a component's
cross-key rule, a custom predicate) is *assumed* to pass and :attr:`Index.assumed` says so;
anything a stand-in cannot answer faithfully raises :class:`Unsure`.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import sys
from typing import Any, Callable

from open_seq2seq.training.summary_names import SummaryNames
from open_seq2seq.utils.params import (REQUIRED, AnyType, DeclaredDict, DeclaredList, Param,
                                       _Declared, callable_or_class, int_list, non_negative_int)

INDEX_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "params_index.json")
FORMAT = 1


class Unsure(Exception):
  """The static reading cannot be sure of the answer: the normal path (with TensorFlow)
  decides."""


#: Predicates of utils.params, by their name in the index.
_PREDICATES = {"callable": callable_or_class, "non_negative_int": non_negative_int}


# ----------------------------------------------------------------------------- stand-ins
class Shown:
  """A value whose repr is known (help prints it); compared only with itself."""

  def __init__(self, text: str | None):
    self._text = text

  def __repr__(self) -> str:
    if self._text is None:
      raise Unsure("a value that prints with its address")
    return self._text

  def __str__(self) -> str:  # str(tf.float32) is not its repr
    raise Unsure("the text of an imported value")

  def __format__(self, spec: str) -> str:
    raise Unsure("the text of an imported value")

  def __eq__(self, other: Any) -> bool:
    if other is self:
      return True
    raise Unsure("a value known only by its repr")

  __hash__ = object.__hash__

  def __deepcopy__(self, memo: dict) -> "Shown":
    return self

  def __copy__(self) -> "Shown":
    return self


class Printed(Shown):
  """A default known only by how it prints (a function shown by its name): any other
  question about it (its attributes, whether it is callable) is not answered."""

  def __getattr__(self, name: str) -> Any:
    raise Unsure(f"attribute {name} of a default known only by its text")


class _ValueStub(Shown):
  """A module-level object of TensorFlow, Keras or the package (``tf.float32``, an enum
  member): it prints as the real one does; comparing it with anything but itself, or asking
  its truth, is not answered."""

  def __init__(self, info: dict):
    super().__init__(info.get("repr"))
    self.static_info = info

  def __bool__(self) -> bool:
    raise Unsure("the truth of an imported value")


class _FunctionStub(_ValueStub):
  """A function of TensorFlow, Keras or the package: callable; its repr (an address) is not
  reproducible."""

  def __init__(self, info: dict):
    super().__init__(info)
    self.__name__ = info["name"]

  def __call__(self, *args: Any, **kwargs: Any) -> Any:
    raise Unsure(f"a call of {self.__name__}")

  def __bool__(self) -> bool:
    return True


class _PoisonedClass:
  """Mixin of stand-ins of values that are instances of a builtin type (an IntEnum member):
  ``isinstance`` cannot be answered for them."""

  @property
  def __class__(self):  # type: ignore[override]
    raise Unsure("the type of an imported value")


class _StubMeta(type):
  """Metaclass of the stand-ins of classes: ``repr`` as the real class's."""

  def __repr__(cls) -> str:
    return f"<class '{cls.__module__}.{cls.__qualname__}'>"


class _OpaqueDeclared(_Declared):
  """A ``_Declared`` type only the real code can check: assumed to accept."""

  def __init__(self, index: "Index", type_name: str):
    self._index, self.type_name = index, type_name

  def accepts(self, value: Any) -> bool:
    self._index.assumed = True
    return True

  def validate(self, value: Any, path: str) -> Any:
    return value

  def __contains__(self, key: Any) -> bool:
    raise Unsure("a key path below a value of its own type")


# ----------------------------------------------------------------------------- reading
class Index:
  """The parsed index; builds Params and stand-ins on demand (each once)."""

  def __init__(self, data: dict):
    self.data = data
    self.assumed = False  # a check only the real code can run was taken to pass
    self._tables: dict[str, dict[str, Param]] = {}
    self._objects: dict[str, Any] = {}
    self._metas: dict[str, type] = {}
    self._value_classes: dict[tuple, type] = {}

  # --- names
  def is_module(self, dotted: str) -> bool:
    return dotted in self.data["modules"]

  def importable(self, dotted: str) -> bool:
    return self.data["modules"].get(dotted, False)

  def name(self, dotted: str) -> Any:
    """The object or constant at ``dotted`` (an import path).

    Raises:
      Unsure: a name the index does not hold.
    """
    entry = self.data["names"].get(dotted)
    if entry is None:
      raise Unsure(f"{dotted} is not in the index")
    return self.object(entry) if isinstance(entry, str) else self.value(entry)

  def attribute(self, stub: Any, attr: str) -> Any:
    """``stub.attr`` for the attributes the index records (enum members, ``.value``)."""
    info = self.info(stub)
    if info is None or attr not in info.get("attrs", {}):
      raise Unsure(f"attribute {attr} of an imported object")
    entry = info["attrs"][attr]
    return self.object(entry) if isinstance(entry, str) else self.value(entry)

  @staticmethod
  def info(obj: Any) -> dict | None:
    """The index entry of a stand-in (None for anything else)."""
    if isinstance(obj, _StubMeta):
      return obj.static_info
    if isinstance(obj, _ValueStub):
      return obj.static_info
    return None

  # --- objects
  def object(self, object_id: str) -> Any:
    if object_id not in self._objects:
      self._objects[object_id] = self._make_object(self.data["objects"][object_id])
    return self._objects[object_id]

  def _make_object(self, info: dict) -> Any:
    if info["kind"] == "class":
      meta = self._metas.get(info["meta"])
      if meta is None:
        meta = self._metas[info["meta"]] = type(info["meta"], (_StubMeta,), {})
      namespace: dict[str, Any] = {"__module__": info["module"], "__qualname__": info["qualname"],
                                   "static_info": info}
      if "params" in info:
        table = info["params"]
        namespace["declared_params"] = classmethod(lambda cls: dict(self.table(table)))
      return meta(info["name"], (), namespace)
    if info["kind"] == "function":
      return _FunctionStub(info)
    key = (info["type"], bool(info.get("callable")), bool(info.get("builtin")))
    if key not in self._value_classes:
      bases: tuple = (_FunctionStub,) if key[1] else (_ValueStub,)
      if key[2]:
        bases = (_PoisonedClass,) + bases
      self._value_classes[key] = type(info["type"], bases, {})
    stub = self._value_classes[key].__new__(self._value_classes[key])
    _ValueStub.__init__(stub, info)
    if key[1]:
      stub.__name__ = info.get("name", info["type"])
    return stub

  def value(self, encoded: dict) -> Any:
    """A default or choice as scripts/gen_params_index.py writes it (``encode_value``)."""
    if "v" in encoded:
      return encoded["v"]
    if "required" in encoded:
      return REQUIRED
    if "py" in encoded:
      return ast.literal_eval(encoded["py"])
    if "ref" in encoded:
      return self.object(encoded["ref"])
    return Printed(encoded["name"] if "name" in encoded else encoded["repr"])

  # --- declarations
  def table(self, table_id: str) -> dict[str, Param]:
    """The declarations of a table (a fresh dict each time; the Params are shared)."""
    if table_id not in self._tables:
      self._tables[table_id] = {key: self._param(p)
                                for key, p in self.data["tables"][table_id].items()}
    return dict(self._tables[table_id])

  def _param(self, encoded: dict) -> Param:
    if "types" in encoded:
      types: Any = tuple(self._type(t) for t in encoded["types"])
    else:
      types = self._type(encoded["type"])
    choices = encoded.get("choices")
    return Param(types, self.value(encoded["default"]), encoded["doc"],
                 None if choices is None else tuple(self.value(c) for c in choices))

  def _type(self, encoded: Any) -> Any:
    if isinstance(encoded, str):
      if encoded == "any":
        return AnyType
      if encoded in _PREDICATES:
        return _PREDICATES[encoded]
      return type(None) if encoded == "NoneType" else getattr(builtins, encoded)
    if "int_list" in encoded:
      return int_list(*encoded["int_list"])
    if "summary_names" in encoded:
      return SummaryNames(encoded["summary_names"])
    if "dict" in encoded:
      return DeclaredDict(self.table(encoded["dict"]), encoded["owner"],
                          self._check(encoded["check"]))
    if "list" in encoded:
      item = DeclaredDict(self.table(encoded["list"]), encoded["owner"],
                          self._check(encoded["check"]))
      return DeclaredList(item, encoded["min_items"])
    if encoded.get("declared"):
      return _OpaqueDeclared(self, encoded["opaque"])
    return self._predicate(encoded["opaque"])

  def _predicate(self, type_name: str) -> Callable[[Any], bool]:
    def predicate(value: Any) -> bool:
      self.assumed = True
      return True

    predicate.type_name = type_name
    return predicate

  def _check(self, name: str | None) -> Callable[[dict, str], dict] | None:
    if name is None:
      return None

    def check(value: dict, path: str) -> dict:
      self.assumed = True
      return value

    return check


#: What the index describes besides the package: their names and signatures change with them.
DEPENDENCIES = ("tensorflow", "keras")


def installed_versions() -> dict[str, list[str]]:
  """The version of each of :data:`DEPENDENCIES` installed on ``sys.path``, read from the
  wheels' ``*.dist-info`` directories (importing them would take seconds)."""
  found: dict[str, list[str]] = {name: [] for name in DEPENDENCIES}
  for folder in sys.path:
    try:
      entries = [e for e in os.scandir(folder or ".") if e.name.endswith(".dist-info")
                 and e.name.lower().startswith(("tensorflow", "tf", "keras"))]
    except OSError:
      continue
    for entry in entries:
      try:
        with open(os.path.join(entry.path, "top_level.txt"), encoding="utf-8") as f:
          top_level = f.read().split()
      except OSError:
        continue
      for name in DEPENDENCIES:
        if name in top_level:
          found[name].append(entry.name[:-len(".dist-info")].split("-")[-1])
  return {name: sorted(versions) for name, versions in found.items()}


def load_index(path: str = INDEX_PATH) -> Index | None:
  """The index, or None when the file is missing, unreadable, of another format or written
  with other versions of TensorFlow or Keras than those installed."""
  try:
    with open(path, encoding="utf-8") as f:
      data = json.load(f)
  except (OSError, ValueError):
    return None
  if not isinstance(data, dict) or data.get("format") != FORMAT or \
      data.get("generated_with") != installed_versions():
    return None
  return Index(data)


__all__ = ["Index", "Unsure", "Shown", "Printed", "load_index", "installed_versions",
           "INDEX_PATH", "FORMAT", "DEPENDENCIES"]
