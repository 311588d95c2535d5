"""Reads a config file without running it: a small interpreter over its syntax tree.

It follows what a config file does -- imports, assignments, dicts and lists, ``if``, ``for``,
its own functions (``def _data(split): ...``), comprehensions, f-strings, ``os.path.join``,
``os.environ.get``, ``copy.deepcopy``, ``runpy.run_path`` of another config -- on real
Python values, with stand-ins from the parameter index for what it imports from the package,
TensorFlow and Keras (:mod:`open_seq2seq.config_static_env`). Nothing is imported and no code
of the file runs. Anything else (a call into TensorFlow, ``print``, ``try``, a class, a name
the index does not hold, an exception the real run would raise) raises
:class:`~open_seq2seq.params_index.Unsure`: the caller then loads the file the normal way.
"""

from __future__ import annotations

import ast
import inspect
import operator
from typing import Any, Callable

from open_seq2seq.config_static_env import (BUILTINS, CONTAINERS, Break, Continue, Function,
                                            Imports, Module, Return, RunPath, Scope)
from open_seq2seq.params_index import Index, Unsure, Shown

#: Statements and expressions evaluated before a config is deemed too busy to follow.
_MAX_STEPS = 500_000
_MAX_DEPTH = 50

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: operator.pow, ast.BitOr: operator.or_, ast.BitAnd: operator.and_,
           ast.BitXor: operator.xor, ast.LShift: operator.lshift, ast.RShift: operator.rshift}
_IN_PLACE = {operator.add: operator.iadd, operator.or_: operator.ior}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Is: operator.is_, ast.IsNot: operator.is_not,
            ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_CONVERSIONS = {115: str, 114: repr, 97: ascii}


def parse(path: str) -> ast.Module:
  """The syntax tree of ``path``; SyntaxError as compiling it for import raises it."""
  with open(path, "rb") as f:
    source = f.read()
  tree = compile(source, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
  compile(tree, path, "exec", dont_inherit=True)  # errors of the compiler proper, too
  return tree


def read_config(path: str, index: Index, file: str, name: str, depth: int = 0) -> dict:
  """The variables the config file at ``path`` defines when run as module ``name`` with
  ``__file__`` ``file``.

  Raises:
    SyntaxError: the file does not compile.
    Unsure: the file does something this reading does not follow.
  """
  tree = parse(path)
  variables = {"__name__": name, "__file__": file, "__doc__": ast.get_docstring(tree, False)}
  try:
    _Interpreter(index, depth).block(tree.body, Scope(variables))
  except Unsure:
    raise
  except Exception as e:  # the real run would fail here too (or this reading errs): defer
    raise Unsure(f"{type(e).__name__}: {e}") from e
  return variables


class _Interpreter:
  """Runs the supported statements and expressions over real values and stand-ins."""

  def __init__(self, index: Index, depth: int):
    self.index, self.imports = index, Imports(index)
    self.depth, self.steps = depth, 0

  def tick(self) -> None:
    self.steps += 1
    if self.steps > _MAX_STEPS:
      raise Unsure("the config computes too much to follow")

  # ---------------------------------------------------------------- statements
  def block(self, statements: list[ast.stmt], scope: Scope) -> None:
    for statement in statements:
      self.tick()
      handler = getattr(self, f"_s_{type(statement).__name__}", None)
      if handler is None:
        raise Unsure(f"statement {type(statement).__name__} at line {statement.lineno}")
      handler(statement, scope)

  def _s_Expr(self, node: ast.Expr, scope: Scope) -> None:
    self.expr(node.value, scope)

  def _s_Pass(self, node: ast.Pass, scope: Scope) -> None:
    pass

  def _s_Break(self, node: ast.Break, scope: Scope) -> None:
    raise Break() if isinstance(node, ast.Break) else Continue()

  _s_Continue = _s_Break

  def _s_Return(self, node: ast.Return, scope: Scope) -> None:
    raise Return(None if node.value is None else self.expr(node.value, scope))

  def _s_Assign(self, node: ast.Assign, scope: Scope) -> None:
    value = self.expr(node.value, scope)
    for target in node.targets:
      self.assign(target, value, scope)

  def _s_AnnAssign(self, node: ast.AnnAssign, scope: Scope) -> None:
    if node.value is None or not node.simple:
      raise Unsure("an annotation without a value")
    self.assign(node.target, self.expr(node.value, scope), scope)

  def _s_AugAssign(self, node: ast.AugAssign, scope: Scope) -> None:
    if isinstance(node.target, ast.Name):
      current = scope.lookup(node.target.id)
    elif isinstance(node.target, ast.Subscript):
      current = self.subscript(self.expr(node.target.value, scope),
                               self.expr(node.target.slice, scope))
    else:
      raise Unsure("augmented assignment to an attribute")
    operation = _BINARY[type(node.op)]
    value = _IN_PLACE.get(operation, operation)(self.plain(current),
                                                self.plain(self.expr(node.value, scope)))
    self.assign(node.target, value, scope)

  def assign(self, target: ast.expr, value: Any, scope: Scope) -> None:
    if isinstance(target, ast.Name):
      scope.variables[target.id] = value
    elif isinstance(target, ast.Subscript):
      container = self.expr(target.value, scope)
      if not isinstance(container, (dict, list)):
        raise Unsure("item assignment to an imported object")
      container[self.expr(target.slice, scope)] = value
    elif isinstance(target, (ast.Tuple, ast.List)) and \
        not any(isinstance(e, ast.Starred) for e in target.elts):
      values = list(value)
      if len(values) != len(target.elts):
        raise Unsure("unpacking of another length")
      for element, item in zip(target.elts, values):
        self.assign(element, item, scope)
    else:
      raise Unsure(f"assignment to {type(target).__name__}")

  def _s_If(self, node: ast.If, scope: Scope) -> None:
    self.block(node.body if bool(self.expr(node.test, scope)) else node.orelse, scope)

  def _s_For(self, node: ast.For, scope: Scope) -> None:
    for item in list(self.expr(node.iter, scope)):
      self.tick()
      self.assign(node.target, item, scope)
      try:
        self.block(node.body, scope)
      except Break:
        return
      except Continue:
        continue
    self.block(node.orelse, scope)

  def _s_Assert(self, node: ast.Assert, scope: Scope) -> None:
    if not bool(self.expr(node.test, scope)):
      raise Unsure("a failing assert")

  def _s_FunctionDef(self, node: ast.FunctionDef, scope: Scope) -> None:
    if node.decorator_list:
      raise Unsure("a decorated function")
    scope.variables[node.name] = self.function(node, scope)

  def _s_Import(self, node: ast.Import, scope: Scope) -> None:
    for alias in node.names:
      module = self.imports.module(alias.name)
      top = alias.name.split(".")[0]
      if alias.asname:
        scope.variables[alias.asname] = module
      else:  # "import a.b" binds a
        scope.variables[top] = module if top == alias.name else self.imports.module(top)

  def _s_ImportFrom(self, node: ast.ImportFrom, scope: Scope) -> None:
    if node.level:
      raise Unsure("a relative import")
    if node.module == "__future__":
      return
    module = self.imports.module(node.module)
    for alias in node.names:
      if alias.name == "*":
        raise Unsure("import *")
      scope.variables[alias.asname or alias.name] = self.imports.attribute(
          module, alias.name, importing=True)

  # ---------------------------------------------------------------- expressions
  def expr(self, node: ast.expr, scope: Scope) -> Any:
    self.tick()
    handler = getattr(self, f"_e_{type(node).__name__}", None)
    if handler is None:
      raise Unsure(f"expression {type(node).__name__} at line {node.lineno}")
    return handler(node, scope)

  def _e_Constant(self, node: ast.Constant, scope: Scope) -> Any:
    return node.value

  def _e_Name(self, node: ast.Name, scope: Scope) -> Any:
    return scope.lookup(node.id)

  def _e_Attribute(self, node: ast.Attribute, scope: Scope) -> Any:
    return self.imports.method(self.expr(node.value, scope), node.attr)

  def _e_Subscript(self, node: ast.Subscript, scope: Scope) -> Any:
    return self.subscript(self.expr(node.value, scope), self.expr(node.slice, scope))

  @staticmethod
  def subscript(container: Any, key: Any) -> Any:
    if not isinstance(container, CONTAINERS):
      raise Unsure("subscript of an imported object")
    return container[key]

  def _e_Slice(self, node: ast.Slice, scope: Scope) -> slice:
    return slice(*(None if part is None else self.expr(part, scope)
                   for part in (node.lower, node.upper, node.step)))

  def _e_BinOp(self, node: ast.BinOp, scope: Scope) -> Any:
    return _BINARY[type(node.op)](self.plain(self.expr(node.left, scope)),
                                  self.plain(self.expr(node.right, scope)))

  def _e_UnaryOp(self, node: ast.UnaryOp, scope: Scope) -> Any:
    operand = self.expr(node.operand, scope)
    if isinstance(node.op, ast.Not):
      return not bool(operand)  # a stand-in whose truth is unknown raises Unsure
    return _UNARY[type(node.op)](self.plain(operand))

  def _e_BoolOp(self, node: ast.BoolOp, scope: Scope) -> Any:
    value = None
    for operand in node.values:
      value = self.expr(operand, scope)
      if bool(value) == isinstance(node.op, ast.Or):
        return value
    return value

  def _e_Compare(self, node: ast.Compare, scope: Scope) -> bool:
    left = self.expr(node.left, scope)
    for op, right_node in zip(node.ops, node.comparators):
      right = self.expr(right_node, scope)
      if not bool(_COMPARE[type(op)](left, right)):
        return False
      left = right
    return True

  def _e_IfExp(self, node: ast.IfExp, scope: Scope) -> Any:
    return self.expr(node.body if bool(self.expr(node.test, scope)) else node.orelse, scope)

  def _e_Dict(self, node: ast.Dict, scope: Scope) -> dict:
    result: dict = {}
    for key, value in zip(node.keys, node.values):
      if key is None:  # {**other}
        result.update(self.expr(value, scope))
      else:
        key_value = self.expr(key, scope)
        result[key_value] = self.expr(value, scope)
    return result

  def elements(self, nodes: list[ast.expr], scope: Scope) -> list:
    result: list = []
    for element in nodes:
      if isinstance(element, ast.Starred):
        result.extend(self.expr(element.value, scope))
      else:
        result.append(self.expr(element, scope))
    return result

  def _e_List(self, node: ast.List, scope: Scope) -> list:
    return self.elements(node.elts, scope)

  def _e_Tuple(self, node: ast.Tuple, scope: Scope) -> tuple:
    return tuple(self.elements(node.elts, scope))

  def _e_Set(self, node: ast.Set, scope: Scope) -> set:
    return set(self.elements(node.elts, scope))

  def _e_JoinedStr(self, node: ast.JoinedStr, scope: Scope) -> str:
    return "".join(self.expr(part, scope) for part in node.values)

  def _e_FormattedValue(self, node: ast.FormattedValue, scope: Scope) -> str:
    value = self.plain(self.expr(node.value, scope))
    if node.conversion != -1:
      value = _CONVERSIONS[node.conversion](value)
    return format(value, "" if node.format_spec is None else self.expr(node.format_spec, scope))

  def comprehension(self, generators: list[ast.comprehension], scope: Scope,
                    produce: Callable[[Scope], None]) -> None:
    inner = Scope({}, scope)

    def loop(depth: int) -> None:
      if depth == len(generators):
        produce(inner)
        return
      generator = generators[depth]
      if generator.is_async:
        raise Unsure("async comprehension")
      # the first iterable is evaluated in the enclosing scope
      for item in list(self.expr(generator.iter, inner if depth else scope)):
        self.tick()
        self.assign(generator.target, item, inner)
        if all(bool(self.expr(test, inner)) for test in generator.ifs):
          loop(depth + 1)

    loop(0)

  def _e_ListComp(self, node: ast.ListComp, scope: Scope) -> list:
    result: list = []
    self.comprehension(node.generators, scope,
                       lambda inner: result.append(self.expr(node.elt, inner)))
    return result

  _e_GeneratorExp = _e_ListComp  # consumed at once by the call it is given to

  def _e_SetComp(self, node: ast.SetComp, scope: Scope) -> set:
    return set(self._e_ListComp(node, scope))

  def _e_DictComp(self, node: ast.DictComp, scope: Scope) -> dict:
    result: dict = {}

    def produce(inner: Scope) -> None:
      key = self.expr(node.key, inner)
      result[key] = self.expr(node.value, inner)

    self.comprehension(node.generators, scope, produce)
    return result

  def _e_Lambda(self, node: ast.Lambda, scope: Scope) -> Function:
    return self.function(node, scope)

  def _e_Call(self, node: ast.Call, scope: Scope) -> Any:
    function = self.expr(node.func, scope)
    args = self.elements(node.args, scope)
    kwargs: dict = {}
    for keyword in node.keywords:
      if keyword.arg is None:
        kwargs.update(self.expr(keyword.value, scope))
      else:
        kwargs[keyword.arg] = self.expr(keyword.value, scope)
    if isinstance(function, Function):
      return self.call(function, args, kwargs)
    if function is RunPath:
      if len(args) != 1 or kwargs or not isinstance(args[0], str) or self.depth >= 3:
        raise Unsure("runpy.run_path with more than a path")
      return dict(read_config(args[0], self.index, args[0], "<run_path>", self.depth + 1))
    if isinstance(function, (Module, Shown)) or inspect.isclass(function) and \
        function not in BUILTINS.values():
      raise Unsure(f"a call of {getattr(function, '__name__', type(function).__name__)}")
    # only what the lookups hand out gets here: a builtin, a function of the standard
    # library's allowed list or an allowed method of a config's own value
    return function(*args, **kwargs)

  # ---------------------------------------------------------------- functions
  def function(self, node: ast.FunctionDef | ast.Lambda, scope: Scope) -> Function:
    arguments = node.args  # defaults are evaluated where the function is defined
    defaults = [self.expr(d, scope) for d in arguments.defaults]
    kw_defaults = [None if d is None else self.expr(d, scope) for d in arguments.kw_defaults]
    return Function(node, scope, defaults, kw_defaults)

  def call(self, function: Function, args: list, kwargs: dict) -> Any:
    if self.depth >= _MAX_DEPTH:
      raise Unsure("calls nested too deep")
    node = function.node
    if any(isinstance(n, (ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom, ast.Await))
           for n in ast.walk(node)):
      raise Unsure("global, nonlocal or yield in a config function")
    bound = function.signature.bind(*args, **kwargs)  # TypeError: as the real call
    bound.apply_defaults()
    scope = Scope(dict(bound.arguments), function.scope, function.local_names)
    self.depth += 1
    try:
      if isinstance(node, ast.Lambda):
        return self.expr(node.body, scope)
      try:
        self.block(node.body, scope)
      except Return as returned:
        return returned.value
      return None
    finally:
      self.depth -= 1

  @staticmethod
  def plain(value: Any) -> Any:
    """``value`` for an operator or a format: a stand-in's behaviour there is unknown."""
    if isinstance(value, (Module, Function)) or Index.info(value) is not None:
      raise Unsure("an operator applied to an imported object")
    return value


__all__ = ["read_config", "parse"]
