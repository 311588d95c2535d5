"""The README's main job and its "Using it" commands, as written, on a tiny model: the main
job script makes the data and the run those commands then use from the same directory.

Every command gets the tiny-model overrides appended (the last override wins), so the run is
seconds instead of minutes; what is tested is that each command works where the README
says to run it, after the main job. The run.py commands start warm (the package imported
once: tests/helpers/warm_cli.py, tested against real processes), ~6 s each less than a cold
start; the scripts run as the processes they are.
"""

import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.helpers import toy, warm_cli

pytestmark = pytest.mark.slow

README = os.path.join(toy.ROOT, "README.md")
# runs of at most 50 steps of a tiny model: Grappler off (training/graph_optimizations.py)
TINY = toy.TINY_MODEL + ["--graph_optimizations=False", "--max_steps=20", "--eval_steps=None"]


def _using_it_commands():
  text = open(README, encoding="utf-8").read()
  section = text[text.index("## Using it"):]
  block = section[section.index("```bash\n") + 8:]
  block = block[:block.index("```")]
  variables, commands = {}, []
  for line in block.splitlines():
    line = line.split("  #")[0].strip()
    assignment = re.fullmatch(r"(\w+)=(\S+)", line)
    if assignment:
      variables[assignment.group(1)] = assignment.group(2)
    elif "python run.py" in line or "python scripts/" in line:
      commands.append(line)
  return variables, commands


def _piped_input(command: str) -> tuple[str | None, str]:
  """(the text an ``echo "..." |`` prefix types into the command, or None; the command after
  the pipe), the echo's argument unquoted as bash does."""
  if "|" not in command:
    return None, command
  echo, rest = command.split("|", 1)
  words = shlex.split(echo)
  assert words[0] == "echo", command  # the only pipe the README's commands use
  return " ".join(words[1:]) + "\n", rest.strip()


def _env():
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=toy.ROOT)


@pytest.fixture(scope="module")
def main_job(tmp_path_factory):
  work = tmp_path_factory.mktemp("readme")
  result = subprocess.run(["bash", os.path.join(toy.ROOT, "scripts", "run_toy_reversal.sh"),
                           str(work), *TINY], capture_output=True, text=True, timeout=900,
                          env=_env())
  assert result.returncode == 0, result.stderr[-3000:]
  return work, result


def test_the_main_job_trains_evaluates_and_writes_inference(main_job):
  work, result = main_job
  assert "BLEU" in result.stdout and "eval at step 20" in result.stdout
  predictions = (work / "runs" / "toy_reversal" / "test_predictions.txt").read_text()
  sources = (work / "toy_text_data" / "test" / "source.txt").read_text()
  assert predictions.count("\n") == sources.count("\n") > 0


def test_the_using_it_commands_work_as_written_after_the_main_job(main_job):
  work, _ = main_job
  variables, commands = _using_it_commands()
  assert len(commands) >= 8
  for command in commands:
    for name, value in variables.items():
      command = command.replace(f"${name}", os.path.join(toy.ROOT, value))
    if command.startswith("python scripts/"):  # averaging, plotting: no config overrides
      command = command.replace("python scripts/", f"{shlex.quote(sys.executable)} "
                                f"{os.path.join(toy.ROOT, 'scripts')}/")
      result = subprocess.run(["bash", "-c", command], cwd=work, capture_output=True, text=True,
                              timeout=600, env=_env())
      assert result.returncode == 0, (command, result.stderr[-3000:])
      continue
    # `[echo TEXT |] python run.py ARGS`: ARGS as bash would split them, TEXT typed in
    typed, run_py = _piped_input(command)
    assert shlex.split(run_py)[:2] == ["python", "run.py"], command
    extra = list(TINY)
    if "--continue_learning" in command:
      extra[-2] = "--max_steps=25"  # on from the main job's step 20
    if "--benchmark" in command:
      extra += ["--bench_steps=4", "--bench_start=1"]
    result = warm_cli.run(shlex.split(run_py)[2:] + extra, _env(), cwd=str(work), timeout=600,
                          stdin_text=typed)
    assert result.returncode == 0, (command, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, command
    assert "not in the source vocabulary" not in result.stderr, command  # the toy's symbols
  assert (work / "runs" / "avg2" / "checkpoint").is_file()  # the averaged checkpoint
  assert (work / "runs" / "toy_reversal" / "curves.png").stat().st_size > 1000
  assert (work / "runs" / "exported" / "saved_model.pb").is_file()  # the export
