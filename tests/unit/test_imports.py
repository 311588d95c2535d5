"""The package imports without cycles, layers import only downward, and each distributed
module loads first in a fresh state."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = "open_seq2seq"
DISTRIBUTED = f"{PACKAGE}.distributed"


def _modules() -> dict[str, str]:
  """Dotted name -> path of every module of the package."""
  modules = {}
  for directory, _, files in os.walk(os.path.join(ROOT, PACKAGE)):
    for name in files:
      if name.endswith(".py"):
        path = os.path.join(directory, name)
        dotted = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
        modules[dotted.removesuffix(".__init__")] = path
  return modules


def _is_type_checking(node: ast.AST) -> bool:
  test = getattr(node, "test", None)
  return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(test)


def _imported(module: str, path: str, modules: dict[str, str], lazy: bool) -> set[str]:
  """Modules of the package that ``module`` imports (``lazy``: also inside functions)."""
  is_package = path.endswith("__init__.py")
  found: set[str] = set()

  def visit(node: ast.AST) -> None:
    if isinstance(node, ast.Import):
      found.update(alias.name for alias in node.names if alias.name in modules)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        parts = module.split(".")[:len(module.split(".")) - node.level + is_package]
        base = ".".join(parts + ([base] if base else []))
      for alias in node.names:
        if f"{base}.{alias.name}" in modules:
          found.add(f"{base}.{alias.name}")
        elif base in modules:
          found.add(base)
    if not lazy and (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                     or _is_type_checking(node)):
      return  # runs later, not while the module is being imported
    for child in ast.iter_child_nodes(node):
      visit(child)

  with open(path, encoding="utf-8") as f:
    visit(ast.parse(f.read(), path))
  found.discard(module)
  return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
  state: dict[str, int] = {}
  cycles: list[list[str]] = []

  def walk(node: str, stack: list[str]) -> None:
    state[node] = 1
    stack.append(node)
    for target in sorted(graph[node]):
      if state.get(target) == 1:
        cycles.append(stack[stack.index(target):] + [target])
      elif target not in state:
        walk(target, stack)
    stack.pop()
    state[node] = 2

  for node in sorted(graph):
    if node not in state:
      walk(node, [])
  return cycles


def _graph(names: list[str], modules: dict[str, str], lazy: bool) -> dict[str, set[str]]:
  return {name: _imported(name, modules[name], modules, lazy) & set(names) for name in names}


def _dependency_order(graph: dict[str, set[str]]) -> list[str]:
  order: list[str] = []
  while len(order) < len(graph):
    ready = sorted(n for n in graph if n not in order and graph[n] <= set(order))
    assert ready, f"import cycle among {sorted(set(graph) - set(order))}"
    order.extend(ready)
  return order


def test_the_cycle_finder_finds_a_cycle():
  assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
  assert _cycles({"a": {"b"}, "b": set()}) == []


def test_distributed_modules_import_each_other_one_way_even_inside_functions():
  modules = _modules()
  names = sorted(n for n in modules if n == DISTRIBUTED or n.startswith(DISTRIBUTED + "."))
  graph = _graph(names, modules, lazy=True)
  assert graph[f"{DISTRIBUTED}.factory"] >= {f"{DISTRIBUTED}.backend",
                                             f"{DISTRIBUTED}.horovod_backend"}
  assert _cycles(graph) == []


def test_no_module_of_the_package_imports_itself_back_at_import_time():
  modules = _modules()
  assert _cycles(_graph(sorted(modules), modules, lazy=False)) == []


def test_each_distributed_module_imports_first_in_a_fresh_state():
  modules = _modules()
  names = sorted(n for n in modules if n.startswith(DISTRIBUTED + "."))
  order = _dependency_order(_graph(names, modules, lazy=True))
  # One interpreter (TensorFlow loads once); the package is dropped before each module.
  code = (
      "import importlib, sys\n"
      f"for name in {order!r}:\n"
      f"  for loaded in [m for m in sys.modules if m.split('.')[0] == {PACKAGE!r}]:\n"
      "    del sys.modules[loaded]\n"
      "  importlib.import_module(name)\n"
      "  print('imported', name)\n"
      "from open_seq2seq.distributed import make_backend\n"
      "from open_seq2seq.distributed import backend, factory\n"
      "assert make_backend is factory.make_backend\n"
      "assert not hasattr(backend, 'make_backend')\n")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2"))
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.split() == [word for name in order for word in ("imported", name)]


def _named_modules(path: str, modules: dict[str, str]) -> set[str]:
  """Modules of the package that a module names in a string (``importlib.import_module``)."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  return {node.value for node in ast.walk(tree)
          if isinstance(node, ast.Constant) and isinstance(node.value, str)
          and node.value in modules and node.value != PACKAGE}


def _upward_imports(layer: str, allowed, modules: dict[str, str]) -> list[str]:
  """``module -> imported`` for every import of a module of ``layer`` (lazy ones and module
  names given to importlib too) that ``allowed(imported)`` refuses."""
  found = []
  for name in sorted(modules):
    if name == layer or name.startswith(layer + "."):
      targets = (_imported(name, modules[name], modules, lazy=True)
                 | _named_modules(modules[name], modules))
      found += [f"{name} -> {target}" for target in sorted(targets) if not allowed(target)]
  return found


def _within(target: str, *packages: str) -> bool:
  return any(target == p or target.startswith(p + ".") for p in packages)


def test_upward_imports_are_found_even_inside_functions(tmp_path):
  assert _within("open_seq2seq.utils.low", f"{PACKAGE}.utils")
  assert not _within("open_seq2seq.utilsx", f"{PACKAGE}.utils")
  low = tmp_path / "low.py"
  low.write_text("import importlib\n"
                 "def later():\n"
                 "  from open_seq2seq.training import high\n"
                 "  return importlib.import_module('open_seq2seq.models')\n", encoding="utf-8")
  modules = {"open_seq2seq.utils.low": str(low), "open_seq2seq.training.high": "",
             "open_seq2seq.models": ""}
  assert _upward_imports(f"{PACKAGE}.utils", lambda t: _within(t, f"{PACKAGE}.utils"),
                         modules) == ["open_seq2seq.utils.low -> open_seq2seq.models",
                                      "open_seq2seq.utils.low -> open_seq2seq.training.high"]


def test_utils_import_nothing_above_them_even_inside_functions():
  # utils/ is the ground floor: every other subpackage may use it, so it uses none of them.
  modules = _modules()
  allowed = lambda target: _within(target, f"{PACKAGE}.utils", f"{PACKAGE}.errors")  # noqa: E731
  assert _upward_imports(f"{PACKAGE}.utils", allowed, modules) == []


def test_models_do_not_import_training_distribution_or_the_cli():
  # models/ sits below the trainer, the backends and the command line that drive it.
  modules = _modules()
  above = (f"{PACKAGE}.training", f"{PACKAGE}.distributed", f"{PACKAGE}.cli")
  allowed = lambda target: not _within(target, *above)  # noqa: E731
  assert _upward_imports(f"{PACKAGE}.models", allowed, modules) == []


def test_the_launcher_side_does_not_start_tensorflow():
  code = ("import sys\n"
          "import open_seq2seq.launch\n"
          "from open_seq2seq.distributed import cluster\n"
          "print('tensorflow' in sys.modules)\n")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip() == "False"


#: A module over this many lines is about more than one concept (DESIGN.md): split it.
MAX_MODULE_LINES = 400


def test_no_module_of_the_package_is_over_the_size_limit():
  sizes = {}
  for name, path in _modules().items():
    with open(path, encoding="utf-8") as f:
      sizes[name] = sum(1 for _ in f)
  over = {name: lines for name, lines in sizes.items() if lines > MAX_MODULE_LINES}
  assert not over, f"modules over {MAX_MODULE_LINES} lines: {over}"
