"""The warm run.py runner the end-to-end tests use (tests/helpers/warm_cli.py) gives what a
real ``python run.py`` process gives: output, exit status, working directory, environment,
and a timeout that stops the run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from tests.helpers import toy, warm_cli

pytestmark = pytest.mark.slow


def _env(**extra: str) -> dict[str, str]:
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=toy.ROOT, **extra)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return toy.make_toy_data(str(tmp_path_factory.mktemp("warm") / "data"), train=64, dev=8,
                           test=8)


def _args(data_dir: str, logdir: str) -> list[str]:
  return [f"--config_file={toy.TOY_CONFIG}", f"--logdir={logdir}", "--mode=train",
          *toy.data_overrides(data_dir), *toy.split_overrides(data_dir, "train"),
          *toy.TINY_MODEL]


def test_an_error_run_equals_a_real_process(data_dir, tmp_path):
  args = _args(data_dir, str(tmp_path / "run")) + ["--encoder_params/encoder_layer=2"]
  cold = subprocess.run([sys.executable, os.path.join(toy.ROOT, "run.py"), *args],
                        capture_output=True, text=True, timeout=300, env=_env())
  warm = warm_cli.run(args, _env())
  assert cold.returncode == warm.returncode == 2
  assert (warm.stdout, warm.stderr) == (cold.stdout, cold.stderr)


def test_cwd_and_environment_are_the_runs_own(data_dir, tmp_path):
  """A relative logdir lands in the run's cwd; an environment variable read at run time
  (a malformed TF_CONFIG, which run.py refuses) reaches the run and not the next one."""
  run = warm_cli.run(_args(data_dir, "relative-run") + ["--max_steps=2"], _env(), cwd=tmp_path)
  assert run.returncode == 0, run.stderr[-2000:]
  assert (tmp_path / "relative-run" / "ckpt-2.index").exists()
  broken = warm_cli.run(_args(data_dir, str(tmp_path / "tf-config")) + ["--max_steps=2"],
                        _env(TF_CONFIG="{not json"))
  assert broken.returncode != 0 and "TF_CONFIG" in broken.stderr, broken.stderr[-2000:]
  again = warm_cli.run(_args(data_dir, str(tmp_path / "after")) + ["--max_steps=2"], _env())
  assert again.returncode == 0, again.stderr[-2000:]


def test_a_timeout_kills_the_run_and_the_server_goes_on(data_dir, tmp_path):
  start = time.monotonic()
  with pytest.raises(subprocess.TimeoutExpired):
    warm_cli.run(_args(data_dir, str(tmp_path / "long")) + ["--max_steps=100000"], _env(),
                 timeout=15)
  assert time.monotonic() - start < 60
  result = warm_cli.run(_args(data_dir, str(tmp_path / "next")) + ["--max_steps=2"], _env())
  assert result.returncode == 0, result.stderr[-2000:]


def test_typed_input_reaches_the_run_as_in_a_real_process(data_dir, tmp_path):
  """``interactive_infer`` reads what is typed (stdin_text) as a piped `python run.py` does."""
  logdir = str(tmp_path / "typed")
  trained = warm_cli.run(_args(data_dir, logdir) + ["--max_steps=2"], _env())
  assert trained.returncode == 0, trained.stderr[-2000:]
  args = [a for a in _args(data_dir, logdir) if a != "--mode=train"] + [
      "--mode=interactive_infer"]
  typed = "α β γ\nδ ε\n"
  cold = subprocess.run([sys.executable, os.path.join(toy.ROOT, "run.py"), *args], input=typed,
                        capture_output=True, text=True, timeout=300, env=_env())
  warm = warm_cli.run(args, _env(), stdin_text=typed)
  assert cold.returncode == warm.returncode == 0, warm.stderr[-2000:]
  untimed = lambda text: re.sub(r"^\[\d\d:\d\d:\d\d\] ", "", text, flags=re.M)
  translations = [line for line in untimed(warm.stdout).splitlines() if not line.startswith(
      ("dtype", "Restored"))]
  assert untimed(warm.stdout) == untimed(cold.stdout) and len(translations) == 2, warm.stdout
  empty = warm_cli.run(args, _env())  # nothing typed: ends at once, translates nothing
  assert empty.returncode == 0
  assert not [line for line in untimed(empty.stdout).splitlines() if line in translations]
