"""scripts/compare_vocoders.py builds the generator as its run was trained: a run made with an
override that changes the model (here the generator's width) is compared without repeating
it, as run.py --mode=eval does (the run's overrides.yaml)."""

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import toy, tts

pytestmark = pytest.mark.slow

COMPARE = os.path.join(toy.ROOT, "scripts", "compare_vocoders.py")
CONFIG = os.path.join(tts.CONFIG_DIR, "hifigan-synthetic-small.py")


def test_the_runs_overrides_apply_again(tmp_path):
  overrides, _ = tts.example_config_overrides(str(tmp_path / "data"))
  logdir = tmp_path / "run"
  done = toy.run_cli([f"--config_file={CONFIG}", f"--logdir={logdir}", "--mode=train",
                      "--max_steps=2", "--print_samples_steps=None", "--eval_steps=None",
                      "--encoder_params/upsample_initial_channel=16", *overrides])
  assert done.returncode == 0, done.stderr[-3000:]
  csv_path = [o for o in overrides if o.startswith("--data_layer_params/dataset_files=")][0]
  clips = csv_path.split("=", 1)[1].strip("[]'\"")
  done = subprocess.run([sys.executable, COMPARE, f"--config_file={CONFIG}",
                         f"--logdir={logdir}", f"--csv={clips}", "--max_clips=2", "--json",
                         "--griffin_lim_iters=2"], capture_output=True, text=True,
                        timeout=600, cwd=toy.ROOT, env=toy.single_process_env())
  assert done.returncode == 0, done.stderr[-3000:]
  assert "upsample_initial_channel" in done.stderr  # the notice names what it applied
  result = json.loads(done.stdout.strip().splitlines()[-1])
  assert result["step"] == 2 and result["clips"] == 2, result
