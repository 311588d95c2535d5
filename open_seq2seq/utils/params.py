"""Parameter declarations: every component says, in one place, which keys it takes.

A component (model, data layer, encoder, decoder, loss) sets a class attribute ``PARAMS``
mapping each key to a :class:`Param` (type, default, one-line doc). Declarations are
inherited: a subclass adds to or overrides its parents'. The same declarations drive

* validation of a config before anything is built (:func:`validate_params`), with errors
  that name the full key path and suggest the closest valid key for typos;
* ``run.py --help_params`` and the generated reference page ``docs/config_reference.md``.
"""

from __future__ import annotations

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
      :class:`AnyType` accepts anything.
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
      if t is AnyType:
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


def callable_or_class(value: Any) -> bool:
  """Type predicate for keys that take a class or a function."""
  return callable(value)


callable_or_class.type_name = "class or function"


def join_path(prefix: str, key: str) -> str:
  return f"{prefix}/{key}" if prefix else key


def closest_key(key: str, valid: Iterable[str]) -> str | None:
  matches = difflib.get_close_matches(key, list(valid), n=1, cutoff=0.6)
  return matches[0] if matches else None


def unknown_key_error(key: str, valid: Iterable[str], prefix: str, owner: str) -> ConfigError:
  valid = sorted(valid)
  hint = closest_key(key, valid)
  where = join_path(prefix, key)
  if hint is not None:
    return ConfigError(f"{where}: unknown parameter of {owner}; did you mean '{hint}'?")
  return ConfigError(
      f"{where}: unknown parameter of {owner}; valid keys are: {', '.join(valid)}")


def validate_params(params: Mapping[str, Any] | None, declared: Mapping[str, Param],
                    prefix: str = "", owner: str = "this component") -> dict:
  """Checks ``params`` against ``declared`` and returns a new dict with defaults filled in.

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
  for key, param in declared.items():
    if key not in result:
      if param.required:
        raise ConfigError(f"{join_path(prefix, key)}: required parameter of {owner} is missing")
      result[key] = param.default
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


def signature_params(func: Callable, skip: Iterable[str] = ()) -> dict[str, Param]:
  """Declarations derived from a function or class signature (lr policies, optimizers).

  Parameters without a default are required; a parameter's type is its annotation if it is a
  plain type, else the type of its default, else anything.
  """
  target = func.__init__ if isinstance(func, type) else func
  declared = {}
  skip = set(skip)
  for name, p in inspect.signature(target).parameters.items():
    if name in skip or name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
      continue
    default = REQUIRED if p.default is inspect.Parameter.empty else p.default
    annotation = p.annotation
    if isinstance(annotation, type) and annotation is not inspect.Parameter.empty:
      types = (annotation, None) if default is None else annotation
    elif default is REQUIRED or default is None:
      types = AnyType
    elif isinstance(default, bool):
      types = bool
    elif isinstance(default, (int, float)):
      types = (int, float) if isinstance(default, int) else float
    else:
      types = AnyType
    declared[name] = Param(types, default, "")
  return declared


def format_params_table(declared: Mapping[str, Param]) -> str:
  """Markdown table of declarations, for docs and ``--help_params``."""
  lines = ["| key | type | default | description |", "|---|---|---|---|"]
  for key in sorted(declared):
    p = declared[key]
    default = "**required**" if p.required else f"`{_short_repr(p.default)}`"
    doc = p.doc
    if p.choices:
      doc += f" One of: {', '.join(repr(c) for c in p.choices)}."
    lines.append(f"| `{key}` | {p.type_name()} | {default} | {doc} |")
  return "\n".join(lines)


def _short_repr(value: Any) -> str:
  if isinstance(value, type) or inspect.isfunction(value):
    return value.__name__
  text = repr(value)
  return text if len(text) <= 40 else text[:37] + "..."
