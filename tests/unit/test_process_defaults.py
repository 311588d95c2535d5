"""process_defaults: run.py puts TensorFlow's per-process settings in place; the user's win."""

import os
import subprocess
import sys

from open_seq2seq.process_defaults import DEFAULTS, apply_process_defaults

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_missing_variables_are_set_and_the_users_values_kept():
  env = {"TF_CPU_ALLOCATOR_USE_BFC": "false", "OTHER": "1"}
  apply_process_defaults(env)
  assert env == {"TF_CPU_ALLOCATOR_USE_BFC": "false", "OTHER": "1"}
  env = {}
  apply_process_defaults(env)
  assert env == DEFAULTS == {"TF_CPU_ALLOCATOR_USE_BFC": "true"}


def _run_py_environment(**env) -> str:
  """The allocator variable as run.py leaves it, and whether TensorFlow was imported first."""
  code = ("import os, runpy, sys; "
          "runpy.run_path('run.py', run_name='imported'); "
          "print(os.environ.get('TF_CPU_ALLOCATOR_USE_BFC'))")
  base = {k: v for k, v in os.environ.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"}
  out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       env={**base, "TF_CPP_MIN_LOG_LEVEL": "2", **env}, check=True, timeout=300)
  return out.stdout.strip().splitlines()[-1]


def test_run_py_applies_them_and_a_users_setting_wins():
  assert _run_py_environment() == "true"
  assert _run_py_environment(TF_CPU_ALLOCATOR_USE_BFC="false") == "false"


def test_run_py_applies_them_before_anything_imports_tensorflow():
  with open(os.path.join(ROOT, "run.py"), encoding="utf-8") as f:
    source = f.read()
  assert source.index("apply_process_defaults()") < source.index("from open_seq2seq.cli")
  with open(os.path.join(ROOT, "open_seq2seq", "process_defaults.py"), encoding="utf-8") as f:
    assert "tensorflow" not in "".join(line for line in f if line.startswith(("import", "from")))


def test_the_console_command_applies_them_before_importing_tensorflow():
  code = ("import os, sys; sys.argv = ['open-seq2seq', '--help']; "
          "from open_seq2seq.process_defaults import main\n"
          "before = 'tensorflow' in sys.modules\n"
          "try:\n  main()\nexcept SystemExit:\n  pass\n"
          "print(before, os.environ.get('TF_CPU_ALLOCATOR_USE_BFC'))")
  base = {k: v for k, v in os.environ.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"}
  out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       env={**base, "TF_CPP_MIN_LOG_LEVEL": "2"}, check=True, timeout=300)
  assert out.stdout.strip().splitlines()[-1] == "False true"
