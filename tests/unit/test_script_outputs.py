"""Every script that writes files checks its output path before doing any work: one line,
status 2 (issue 33: unusable paths found late lose the work)."""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: script -> (its arguments besides the output one, the output flag, a directory?)
SCRIPTS = {
    "average_checkpoints": (["--checkpoints", "a", "b"], "--output_dir", True),
    "build_lm": (["--text", "corpus.txt"], "--output", False),
    "create_toy_data": ([], "--data_dir", True),
    "import_asterisk_sounds": ([], "--output_dir", True),
    "import_fashion_mnist": ([], "--output_dir", True),
    "import_librispeech": (["--source_dir", "LibriSpeech"], "--output_dir", True),
    "make_speech_commands": ([], "--output_dir", True),
    "make_synthetic_speech": ([], "--output_dir", True),
    "plot_spectrograms": (["--systems", "a=a.csv"], "--output", False),
}


def _main(name):
  spec = importlib.util.spec_from_file_location(f"script_{name}",
                                                os.path.join(ROOT, "scripts", f"{name}.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.main


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_an_output_under_a_regular_file_stops_the_script_in_one_line(name, tmp_path, capsys):
  blocker = tmp_path / "a-file"
  blocker.write_text("in the way\n")
  args, flag, _ = SCRIPTS[name]
  with pytest.raises(SystemExit) as info:
    _main(name)(args + [f"{flag}={blocker}/out"])
  assert info.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert err == [f"error: {flag} {blocker}/out: {blocker} is a regular file, not a "
                 f"directory; choose another {flag}"]
  assert sorted(os.listdir(tmp_path)) == ["a-file"]  # nothing was done


#: Scripts with an output flag that handle it another way.
OTHERWISE = {
    "bench_asr_models": "its --data_dir is an input (the corpus); --workdir is checked first",
    "port_config": "-o writes one file atomically and names a failed write",
    "plot_run": "writes one PNG atomically and names a failed write",
    "run_export": "checks --output before loading the SavedModel",
}


def test_every_script_with_an_output_flag_checks_it_first():
  declares = set()
  for file in sorted(os.listdir(os.path.join(ROOT, "scripts"))):
    if file.endswith(".py"):
      with open(os.path.join(ROOT, "scripts", file), encoding="utf-8") as f:
        text = f.read()
      if any(f'add_argument("{flag}"' in text for flag in ("--output_dir", "--output",
                                                            "--data_dir")):
        declares.add(file[:-3])
  assert declares - set(OTHERWISE) == set(SCRIPTS)
