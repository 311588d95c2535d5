"""Scripts start quietly (issue 38): ``--help`` answers without importing TensorFlow, and no
TensorFlow start-up line (oneDNN, CPU features, absl's preamble, CUDA) opens a script's
output. Every ``scripts/*.py`` with a ``__main__`` is found on its own, so a new script is
checked as soon as it exists.
"""

import ast
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS_DIR = os.path.join(ROOT, "scripts")

#: What TensorFlow's native libraries print while they load (and at the first oneDNN op).
NOISE = re.compile(r"oneDNN|TF_ENABLE_ONEDNN_OPTS|absl::InitializeLog|rebuild TensorFlow|"
                   r"cuda[_ ]|CUDA|^[IWEF]\d{4} \d+:\d+:\d+\.\d+ ", re.MULTILINE)
#: Calls that start TensorFlow quietly: the toolkit's, and run_export.py's own (it runs an
#: export without the toolkit).
QUIET_STARTS = {"start_script_quietly", "import_tensorflow_quietly"}
#: Scripts other work owns that do not start quietly yet -> the checks they fail, and why
#: (strict: once one passes, remove it here).
PENDING: dict = {}
MARKER = "tensorflow imported: "
#: Runs a script as ``python SCRIPT ARGS`` does, then says whether TensorFlow was imported.
WRAPPER = textwrap.dedent(f"""\
    import os, runpy, sys
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(script)  # where python SCRIPT looks first, not the cwd
    code = 0
    try:
      runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
      code = e.code
    sys.stdout.flush()
    print("\\n{MARKER}" + str("tensorflow" in sys.modules), flush=True)
    sys.exit(code)
    """)


def _scripts() -> list[str]:
  names = []
  for name in sorted(os.listdir(SCRIPTS_DIR)):
    if name.endswith(".py"):
      with open(os.path.join(SCRIPTS_DIR, name), encoding="utf-8") as f:
        if re.search(r"^if __name__ == .__main__.:", f.read(), re.MULTILINE):
          names.append(name)
  return names


SCRIPTS = _scripts()


def _params(check: str) -> list:
  return [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=PENDING[name][1]))
          if check in PENDING.get(name, ((), ""))[0] else name for name in SCRIPTS]


def _env() -> dict:
  env = dict(os.environ)
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # the scripts' own default, not the test suite's
  return env


def _run(args: list[str], cwd: str = ROOT) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable] + args, capture_output=True, text=True, cwd=cwd,
                        env=_env(), timeout=300, check=False)


def _tree(name: str) -> ast.Module:
  with open(os.path.join(SCRIPTS_DIR, name), encoding="utf-8") as f:
    return ast.parse(f.read())


def _imported(name: str, seen: set[str] | None = None) -> set[str]:
  """Every module ``scripts/name`` imports anywhere (functions included), through the other
  scripts it imports."""
  seen = set() if seen is None else seen
  seen.add(name)
  modules = set()
  for node in ast.walk(_tree(name)):
    if isinstance(node, ast.Import):
      modules.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      modules.add(node.module)
  for module in sorted(modules):
    sibling = module.split(".")[0] + ".py"
    if os.path.isfile(os.path.join(SCRIPTS_DIR, sibling)) and sibling not in seen:
      modules |= _imported(sibling, seen)
  return modules


#: Imports each module named on the command line with TensorFlow blocked; prints the JSON
#: list of those whose import tries to load it (directly or through another module).
_PROBE = textwrap.dedent("""\
    import importlib, importlib.abc, json, sys
    tried = []
    class Block(importlib.abc.MetaPathFinder):
      def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "keras", "tf_keras"):
          tried.append(name)
          raise ImportError(f"blocked: {name}")
    sys.meta_path.insert(0, Block())
    needs = []
    for module in sys.argv[1:]:
      del tried[:]
      try:
        importlib.import_module(module)
      except Exception:
        pass
      if tried:
        needs.append(module)
    print(json.dumps(needs))
    """)
_TF_ROOTS = ("tensorflow", "keras", "tf_keras", "tensorflow_text")
_needs_tensorflow: set[str] | None = None


def _tensorflow_modules(modules: set[str]) -> set[str]:
  """The modules of the project (and its tests' helpers) whose import loads TensorFlow."""
  global _needs_tensorflow  # pylint: disable=global-statement
  if _needs_tensorflow is None:
    ours = sorted({m for name in SCRIPTS for m in _imported(name)
                   if m.split(".")[0] in ("open_seq2seq", "tests")})
    done = _run(["-c", _PROBE] + ours)
    assert done.returncode == 0, done.stderr
    _needs_tensorflow = set(json.loads(done.stdout.strip().splitlines()[-1]))
  return {m for m in modules if m.split(".")[0] in _TF_ROOTS or m in _needs_tensorflow}


@pytest.mark.parametrize("name", _params("static"))
def test_a_script_that_imports_tensorflow_starts_it_quietly(name):
  """Checked in the source: a script that imports TensorFlow (itself, through the toolkit or
  another script) calls a quiet start; the --help test below checks that it comes after
  argparse."""
  tensorflow = _tensorflow_modules(_imported(name))
  calls = {node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
           for node in ast.walk(_tree(name)) if isinstance(node, ast.Call)}
  assert not tensorflow or calls & QUIET_STARTS, (
      f"scripts/{name} imports TensorFlow (through {sorted(tensorflow)[:3]}) but never calls "
      f"open_seq2seq.utils.quiet_start.start_script_quietly() after parsing its arguments")
  assert "ArgumentParser(" in ast.unparse(_tree(name)), (
      f"scripts/{name}: parse the command line with argparse, so that --help answers")


def _help(name: str, has_argparse: bool) -> subprocess.CompletedProcess | str:
  if not has_argparse:
    return "has no argparse: --help would run it"  # (the test above fails for it)
  return _run(["-c", WRAPPER, os.path.join(SCRIPTS_DIR, name), "--help"])


@pytest.fixture(scope="module")
def helps():
  """Every script's ``--help``, two at a time. The sources are parsed here, in one thread:
  CPython 3.11's parser fails now and then when two threads parse at once ("AST constructor
  recursion depth mismatch"), so the threads only wait on the subprocesses."""
  has_argparse = ["ArgumentParser(" in ast.unparse(_tree(name)) for name in SCRIPTS]
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    return dict(zip(SCRIPTS, pool.map(_help, SCRIPTS, has_argparse)))


@pytest.mark.parametrize("name", _params("help"))
def test_help_answers_without_tensorflow_and_without_noise(name, helps):
  done = helps[name]
  assert not isinstance(done, str), f"scripts/{name} {done}"
  assert done.returncode == 0 and "usage:" in done.stdout, done.stderr[-2000:]
  assert done.stdout.rstrip().endswith(MARKER + "False"), \
      f"scripts/{name} --help imported TensorFlow: parse the arguments before importing it"
  noise = NOISE.findall(done.stdout + done.stderr)
  assert not noise, f"scripts/{name} --help printed TensorFlow's start-up lines: {noise}"


def _export_without_saved_model(tmp_path) -> list[str]:
  export = tmp_path / "export"
  (export / "assets.extra").mkdir(parents=True)
  (export / "assets.extra" / "open_seq2seq.json").write_text(json.dumps({
      "signatures": {"serving_default": {"inputs": {"text": {"dtype": "string"}},
                                         "outputs": {"text": "a sentence"}}}}))
  (tmp_path / "inputs.txt").write_text("a b\n")
  return [str(export), str(tmp_path / "inputs.txt")]


def test_scripts_that_import_tensorflow_print_none_of_its_start_up_lines(tmp_path):
  """Real runs of three kinds: TensorFlow directly with a first op (check_records.py),
  through the toolkit (build_lm.py), and run_export.py's own filter."""
  (tmp_path / "data-00000-of-00001").write_bytes(b"")  # an empty TFRecord file: 0 records
  (tmp_path / "text.txt").write_text("the cat sat\nthe dog sat on the mat\n")
  runs = {
      "check_records.py": ([str(tmp_path)], 0),
      "build_lm.py": (["--text", str(tmp_path / "text.txt"), "--output",
                       str(tmp_path / "lm.arpa")], 0),
      "run_export.py": (_export_without_saved_model(tmp_path), 2),
  }
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    done = dict(zip(runs, pool.map(
        lambda name: _run([os.path.join(SCRIPTS_DIR, name)] + runs[name][0], str(tmp_path)),
        runs)))
  for name, (_, status) in runs.items():
    assert done[name].returncode == status, (name, done[name].stderr[-2000:])
    noise = NOISE.findall(done[name].stdout + done[name].stderr)
    assert not noise, f"scripts/{name} printed TensorFlow's start-up lines: {noise}"
  assert done["check_records.py"].stderr == done["build_lm.py"].stderr == ""
  assert done["check_records.py"].stdout == "checked 0 records in 1 file: 0 damaged\n"
  error = done["run_export.py"].stderr.splitlines()
  assert len(error) == 1 and "the SavedModel cannot be loaded" in error[0], error
