"""What a config file's names stand for when it is read without running it
(:mod:`open_seq2seq.config_static_eval`).

The builtins, standard-library functions and methods a config may call (pure, on the values
they are given), its own functions, the modules it imports, and where an imported name comes
from: the standard library, or the parameter index (:mod:`open_seq2seq.params_index`) for the
package, TensorFlow and Keras. A name outside these raises
:class:`~open_seq2seq.params_index.Unsure`.
"""

from __future__ import annotations

import ast
import builtins
import copy
import inspect
import math
import os
from typing import Any

from open_seq2seq.params_index import Index, Unsure

#: Builtins a config may call.
BUILTINS = {name: getattr(builtins, name)
            for name in ("abs", "all", "any", "bool", "dict", "divmod", "enumerate", "float",
                         "frozenset", "int", "len", "list", "max", "min", "pow", "range",
                         "reversed", "round", "set", "sorted", "str", "sum", "tuple", "zip")}

#: What a config may use of the standard library, by import path.
STDLIB: dict[str, Any] = {
    "os.path.join": os.path.join, "os.path.dirname": os.path.dirname,
    "os.path.basename": os.path.basename, "os.path.abspath": os.path.abspath,
    "os.path.normpath": os.path.normpath, "os.path.expanduser": os.path.expanduser,
    "os.path.splitext": os.path.splitext, "os.path.isabs": os.path.isabs,
    "os.path.exists": os.path.exists, "os.path.isfile": os.path.isfile,
    "os.path.isdir": os.path.isdir, "os.environ": os.environ, "os.getenv": os.getenv,
    "os.getcwd": os.getcwd, "os.sep": os.sep, "os.pardir": os.pardir, "os.curdir": os.curdir,
    "copy.deepcopy": copy.deepcopy, "copy.copy": copy.copy,
    **{f"math.{name}": getattr(math, name) for name in dir(math) if not name.startswith("_")},
}
STDLIB_MODULES = ("os", "os.path", "math", "copy", "runpy")

#: Methods a config may call on its own values.
METHODS = {
    dict: ("get", "items", "keys", "values", "copy", "update", "setdefault", "pop"),
    list: ("append", "extend", "copy", "index", "count", "insert", "pop", "remove", "reverse"),
    str: ("format", "join", "lower", "upper", "replace", "split", "rsplit", "strip", "lstrip",
          "rstrip", "startswith", "endswith", "capitalize", "title", "zfill", "count", "find"),
    type(os.environ): ("get",),
}
CONTAINERS = (dict, list, tuple, str, range, type(os.environ))


class RunPath:
  """``runpy.run_path``: the interpreter reads the file it names the same way."""


class Return(Exception):
  """A ``return`` of a config function, carrying its value."""

  def __init__(self, value: Any):
    super().__init__()
    self.value = value


class Break(Exception):
  """A ``break`` in a config's loop."""


class Continue(Exception):
  """A ``continue`` in a config's loop."""


class Module:
  """A module as the config sees it: ``project``, ``external`` (TensorFlow, Keras) or
  ``stdlib``."""

  def __init__(self, path: str, kind: str):
    self.path, self.kind = path, kind

  def __repr__(self) -> str:
    raise Unsure("a module used as a value")

  def __deepcopy__(self, memo: dict) -> "Module":
    return self


class Function:
  """A ``def`` or ``lambda`` of the config file (called only by the interpreter)."""

  def __init__(self, node: ast.FunctionDef | ast.Lambda, scope: "Scope", defaults: list,
               kw_defaults: list):
    self.node, self.scope = node, scope
    self.__name__ = getattr(node, "name", "<lambda>")
    self.signature = _signature(node.args, defaults, kw_defaults)
    # the names it assigns are its own: reading one before assigning it is an error
    self.local_names = frozenset(n.id for n in ast.walk(node)
                                 if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))

  def __call__(self, *args: Any, **kwargs: Any) -> Any:
    raise Unsure("a config function called outside the config")

  def __repr__(self) -> str:
    raise Unsure("a function printed with its address")

  def __deepcopy__(self, memo: dict) -> "Function":
    return self

  def __copy__(self) -> "Function":
    return self


def _signature(arguments: ast.arguments, defaults: list, kw_defaults: list
               ) -> inspect.Signature:
  """The signature of a ``def`` or ``lambda`` (``kw_defaults``: None where there is none)."""
  empty, kinds = inspect.Parameter.empty, inspect.Parameter
  positional = arguments.posonlyargs + arguments.args
  first_default = len(positional) - len(defaults)
  parameters = []
  for i, arg in enumerate(positional):
    kind = kinds.POSITIONAL_ONLY if i < len(arguments.posonlyargs) else \
        kinds.POSITIONAL_OR_KEYWORD
    default = defaults[i - first_default] if i >= first_default else empty
    parameters.append(inspect.Parameter(arg.arg, kind, default=default))
  if arguments.vararg:
    parameters.append(inspect.Parameter(arguments.vararg.arg, kinds.VAR_POSITIONAL))
  for arg, default, given in zip(arguments.kwonlyargs, kw_defaults, arguments.kw_defaults):
    parameters.append(inspect.Parameter(arg.arg, kinds.KEYWORD_ONLY,
                                        default=empty if given is None else default))
  if arguments.kwarg:
    parameters.append(inspect.Parameter(arguments.kwarg.arg, kinds.VAR_KEYWORD))
  return inspect.Signature(parameters)


class Scope:
  """Variables of the module or of a function call."""

  def __init__(self, variables: dict, parent: "Scope | None" = None,
               local_names: frozenset = frozenset()):
    self.variables, self.parent, self.local_names = variables, parent, local_names

  def lookup(self, name: str) -> Any:
    scope: Scope | None = self
    while scope is not None:
      if name in scope.variables:
        return scope.variables[name]
      if name in scope.local_names:
        raise Unsure(f"{name} read before it is assigned")
      scope = scope.parent
    if name in BUILTINS:
      return BUILTINS[name]
    raise Unsure(f"name {name} is not defined")


class Imports:
  """Resolves the modules and names a config imports."""

  def __init__(self, index: Index):
    self.index = index
    self.imported: set[str] = set()  # the package's modules the file imported

  def module(self, dotted: str) -> Module:
    """The module an import statement names (it must exist)."""
    if dotted in STDLIB_MODULES:
      return Module(dotted, "stdlib")
    parts = dotted.split(".")
    if parts[0] == "open_seq2seq" and self.index.is_module(dotted):
      self.imported.update(".".join(parts[:i + 1]) for i in range(len(parts)))
      return Module(dotted, "project")
    if self.index.importable(dotted):
      return Module(dotted, "external")
    raise Unsure(f"module {dotted}")

  def attribute(self, module: Module, name: str, importing: bool = False) -> Any:
    """``module.name`` (``importing``: in ``from module import name``, where a submodule of
    the package loads)."""
    path = f"{module.path}.{name}"
    if module.kind == "stdlib":
      if path in STDLIB_MODULES:
        return Module(path, "stdlib")
      if path in STDLIB:
        return STDLIB[path]
      if path == "runpy.run_path":
        return RunPath
      raise Unsure(f"{path} of the standard library")
    if self.index.is_module(path) and (module.kind == "external" or importing or
                                       path in self.imported):
      if module.kind == "project":
        self.imported.add(path)
      return Module(path, module.kind)
    return self.index.name(path)

  def method(self, value: Any, name: str) -> Any:
    """``value.name``: a method of :data:`METHODS` or an attribute the index records (enum
    members and their ``value``)."""
    if isinstance(value, Module):
      return self.attribute(value, name)
    if Index.info(value) is not None:
      return self.index.attribute(value, name)
    if name in METHODS.get(type(value), ()):
      return getattr(value, name)
    raise Unsure(f"attribute {name} of a {type(value).__name__}")


__all__ = ["BUILTINS", "STDLIB", "METHODS", "CONTAINERS", "Module", "Function", "Scope",
           "Imports", "RunPath", "Return", "Break", "Continue"]
