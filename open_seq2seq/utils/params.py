"""Parameter declarations: every component says, in one place, which keys it takes.

A component (model, data layer, encoder, decoder, loss) sets a class attribute ``PARAMS``
mapping each key to a :class:`Param` (type, default, one-line doc). Declarations are
inherited: a subclass adds to or overrides its parents'. A key holding a dict or a list of
dicts with keys of their own declares them too: ``Param(list_of(LAYER_PARAMS, "a block"))``
or ``Param(dict_of(AUGMENTATION_PARAMS, "augmentation"))``. The same declarations drive

* validation of a config before anything is built (:func:`validate_params`), with errors
  that name the full key path and suggest the closest valid key for typos;
* ``run.py --help_params`` and the generated reference page ``docs/config_reference.md``.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import inspect
from typing import Any, Callable, ClassVar, Iterable, Mapping

from open_seq2seq.errors import ConfigError


class _Required:
  """Sentinel default of a required parameter."""

  def __repr__(self) -> str:
    return "REQUIRED"


REQUIRED = _Required()


class AnyType:
  """Type marker accepting any value (classes, functions, initializers ...)."""


@dataclasses.dataclass(frozen=True)
class Param:
  """Declaration of one config key.

  Attributes:
    types: accepted type or tuple of types. ``float`` also accepts ``int``; ``int`` never
      accepts ``bool``; ``None`` in the tuple (or ``type(None)``) allows ``None``;
      :class:`AnyType` accepts anything; a predicate with a ``type_name`` (such as
      :func:`int_list`) accepts what it returns True for; :func:`dict_of` and
      :func:`list_of` accept a dict / list of dicts and validate their keys in turn.
    default: value used when the key is absent, or :data:`REQUIRED`.
    doc: one-line description shown in the reference and in ``--help_params``.
    choices: if given, the value must be one of these.
  """

  types: Any
  default: Any = REQUIRED
  doc: str = ""
  choices: tuple | None = None

  @property
  def required(self) -> bool:
    return self.default is REQUIRED

  @property
  def ignored(self) -> str:
    """Why setting this key changes nothing, or "" for a key that works.

    A key kept only so that OpenSeq2Seq configs load says so in its doc, which starts with
    ``"Ignored: "`` and the reason; a config that sets it gets a one-line notice
    (:func:`open_seq2seq.slots.ignored_settings`).
    """
    prefix = "Ignored: "
    return self.doc[len(prefix):].strip() if self.doc.startswith(prefix) else ""

  def type_tuple(self) -> tuple:
    types = self.types if isinstance(self.types, tuple) else (self.types,)
    return tuple(type(None) if t is None else t for t in types)

  def type_name(self) -> str:
    names = []
    for t in self.type_tuple():
      if t is type(None):
        names.append("None")
      elif t is AnyType:
        names.append("any")
      elif isinstance(t, type):
        names.append(t.__name__)
      else:  # a predicate such as callable_or_class
        names.append(getattr(t, "type_name", getattr(t, "__name__", str(t))))
    return " or ".join(names)

  def check(self, value: Any, path: str) -> Any:
    """Returns ``value`` (ints widened to float where a float is declared) or raises."""
    types = self.type_tuple()
    ok = False
    for t in types:
      if isinstance(t, _Declared):
        if t.accepts(value):
          value, ok = t.validate(value, path), True
      elif t is AnyType:
        ok = True
      elif t is float and isinstance(value, int) and not isinstance(value, bool):
        if int not in types:
          value = float(value)
        ok = True
      elif t is int and isinstance(value, bool):
        continue
      elif isinstance(t, type) and isinstance(value, t):
        ok = True
      elif callable(t) and not isinstance(t, type) and t(value):
        ok = True
      if ok:
        break
    if not ok:
      raise ConfigError(
          f"{path}: expected {self.type_name()}, got {type(value).__name__} {value!r}")
    if self.choices is not None and value not in self.choices:
      raise ConfigError(
          f"{path}: {value!r} is not one of {', '.join(repr(c) for c in self.choices)}")
    return value

  def nested(self) -> "DeclaredDict | DeclaredList | None":
    """The declared dict or list of dicts among the accepted types, if any."""
    for t in self.type_tuple():
      if isinstance(t, _Declared):
        return t
    return None


class _Declared:
  """Base of the types whose values have declared keys of their own."""

  type_name = "declared"

  def accepts(self, value: Any) -> bool:
    raise NotImplementedError

  def validate(self, value: Any, path: str) -> Any:
    raise NotImplementedError


@dataclasses.dataclass(frozen=True, eq=False)
class DeclaredDict(_Declared):
  """Type of a dict whose keys are declared (e.g. ``data_layer_params/augmentation``).

  Attributes:
    fields: the declarations of its keys.
    owner: what the dict is, for error messages ("unknown parameter of <owner>").
    check: optional ``check(filled_dict, path) -> dict`` for rules across keys; it may
      normalise the dict (resolve an alias) and must accept its own output again.
  """

  fields: Mapping[str, Param]
  owner: str = "this dict"
  check: Callable[[dict, str], dict] | None = None
  type_name = "dict"

  def accepts(self, value: Any) -> bool:
    return isinstance(value, Mapping)

  def validate(self, value: Any, path: str) -> dict:
    result = validate_params(value, self.fields, path, self.owner)
    return self.check(result, path) if self.check is not None else result


@dataclasses.dataclass(frozen=True, eq=False)
class DeclaredList(_Declared):
  """Type of a list of dicts whose keys are declared (e.g. an encoder's conv layers).

  Each entry is validated as :attr:`item` under the path ``<key>/<index>``.
  """

  item: DeclaredDict
  min_items: int = 0
  type_name = "list of dicts"

  def accepts(self, value: Any) -> bool:
    return isinstance(value, list)

  def validate(self, value: Any, path: str) -> list:
    if len(value) < self.min_items:
      raise ConfigError(f"{path}: needs at least {self.min_items} "
                        f"entr{'y' if self.min_items == 1 else 'ies'}, got {len(value)}")
    result = []
    for i, entry in enumerate(value):
      if not isinstance(entry, Mapping):
        raise ConfigError(f"{path}/{i}: expected a dict, got {type(entry).__name__} {entry!r}")
      result.append(self.item.validate(entry, f"{path}/{i}"))
    return result


def dict_of(fields: Mapping[str, Param], owner: str = "this dict",
            check: Callable[[dict, str], dict] | None = None) -> DeclaredDict:
  """A Param type: a dict with the keys ``fields`` declares (defaults filled in)."""
  return DeclaredDict(fields, owner, check)


def list_of(fields: Mapping[str, Param], owner: str = "a list entry",
            check: Callable[[dict, str], dict] | None = None,
            min_items: int = 0) -> DeclaredList:
  """A Param type: a list of dicts, each with the keys ``fields`` declares."""
  return DeclaredList(DeclaredDict(fields, owner, check), min_items)


def callable_or_class(value: Any) -> bool:
  """Type predicate for keys that take a class or a function."""
  return callable(value)


callable_or_class.type_name = "class or function"


def int_list(length: int, minimum: int = 1) -> Callable[[Any], bool]:
  """Type predicate: a list of ``length`` ints, each at least ``minimum`` (kernel sizes ...)."""

  def predicate(value: Any) -> bool:
    return (isinstance(value, list) and len(value) == length
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= minimum
                    for v in value))

  predicate.type_name = f"list of {length} int{'s' if length > 1 else ''} >= {minimum}"
  return predicate


def non_negative_int(value: Any) -> bool:
  """Type predicate for counts that may be zero."""
  return isinstance(value, int) and not isinstance(value, bool) and value >= 0


non_negative_int.type_name = "non-negative int"


def join_path(prefix: str, key: str) -> str:
  return f"{prefix}/{key}" if prefix else key


def closest_key(key: str, valid: Iterable[str]) -> str | None:
  matches = difflib.get_close_matches(key, list(valid), n=1, cutoff=0.6)
  return matches[0] if matches else None


def unknown_key_error(key: str, valid: Iterable[str], prefix: str, owner: str) -> ConfigError:
  valid = sorted(valid)
  hint = closest_key(key, valid)
  where = join_path(prefix, key)
  if not valid:
    return ConfigError(f"{where}: {owner} takes no parameters")
  if hint is not None:
    return ConfigError(f"{where}: unknown parameter of {owner}; did you mean '{hint}'?")
  return ConfigError(
      f"{where}: unknown parameter of {owner}; valid keys are: {', '.join(valid)}")


def validate_params(params: Mapping[str, Any] | None, declared: Mapping[str, Param],
                    prefix: str = "", owner: str = "this component",
                    partial: bool = False) -> dict:
  """Checks ``params`` against ``declared`` and returns a new dict with defaults filled in.

  Args:
    partial: check only the keys given (no defaults, nothing required): for keyword
      arguments that are completed later, e.g. ``lr_policy_params``' ``decay_steps``.

  Raises:
    ConfigError: on an unknown key, a wrong type or a missing required key, naming the full
      key path (``prefix/key``).
  """
  if params is None:
    params = {}
  if not isinstance(params, Mapping):
    raise ConfigError(f"{prefix or 'config'}: expected a dict, got {type(params).__name__}")
  result = {}
  for key, value in params.items():
    if key not in declared:
      raise unknown_key_error(key, declared, prefix, owner)
    result[key] = declared[key].check(value, join_path(prefix, key))
  if partial:
    return result
  for key, param in declared.items():
    if key not in result:
      if param.required:
        raise ConfigError(f"{join_path(prefix, key)}: required parameter of {owner} is missing")
      # a fresh copy: a default list must not be shared by every validated config
      default = param.default
      result[key] = copy.deepcopy(default) if isinstance(default, (list, dict)) else default
  return result


class Configurable:
  """Mix-in for classes that declare their config keys in ``PARAMS``."""

  PARAMS: ClassVar[dict[str, Param]] = {}

  @classmethod
  def declared_params(cls) -> dict[str, Param]:
    """All declarations along the class hierarchy, subclasses overriding parents."""
    merged: dict[str, Param] = {}
    for klass in reversed(cls.__mro__):
      merged.update(vars(klass).get("PARAMS", {}))
    return merged

  @classmethod
  def validate_params(cls, params: Mapping[str, Any] | None, prefix: str = "") -> dict:
    return validate_params(params, cls.declared_params(), prefix, owner=cls.__name__)


def param_rows(declared: Mapping[str, Param], prefix: str = "") -> list[tuple[str, Param]]:
  """``(path, Param)`` for each key, sorted, followed by the keys nested under it.

  Keys of a list's entries appear as ``key/<i>/subkey``, of a dict as ``key/subkey``: the
  paths that error messages and command-line overrides use.
  """
  rows = []
  for key in sorted(declared):
    param = declared[key]
    path = join_path(prefix, key)
    rows.append((path, param))
    nested = param.nested()
    if isinstance(nested, DeclaredList):
      rows += param_rows(nested.item.fields, f"{path}/<i>")
    elif isinstance(nested, DeclaredDict):
      rows += param_rows(nested.fields, path)
  return rows


def format_params_table(declared: Mapping[str, Param]) -> str:
  """Markdown table of declarations (nested keys included), for docs and ``--help_params``."""
  if not declared:
    return "Takes no parameters."
  lines = ["| key | type | default | description |", "|---|---|---|---|"]
  for path, p in param_rows(declared):
    default = "**required**" if p.required else f"`{_short_repr(p.default)}`"
    doc = p.doc
    if p.choices:
      doc += f" One of: {', '.join(repr(c) for c in p.choices)}."
    doc = doc.replace("|", "\\|")
    lines.append(f"| `{path}` | {p.type_name()} | {default} | {doc} |")
  return "\n".join(lines)


def _short_repr(value: Any) -> str:
  if isinstance(value, type) or inspect.isfunction(value):
    return value.__name__
  text = repr(value)
  return text if len(text) <= 40 else text[:37] + "..."
