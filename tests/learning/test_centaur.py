"""End to end on the synthetic single-voice corpus through run.py: the small Centaur with
guided attention learns to align text with speech on held-out sentences, teacher forced and
free running, and stops near the true length.

Thresholds: test_tts.py's (teacher-forced band mass > 0.8 and focus rate > 0.4, free-running
band mass > 0.7, >= 80 % of held-out sentences stopping within 20 % of their length). An
untrained model gets band mass ~0.2 (uniform attention), focus ~1/N and stop accuracy 0.
"""

import json
import os
import shutil

import pytest

from tests.helpers import toy
from tests.helpers.tts import CONFIG_DIR, assert_aligned, make_synthetic_corpus

pytestmark = pytest.mark.slow

CONFIG = os.path.join(CONFIG_DIR, "centaur-synthetic-small.py")
STEPS = 350


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  if not shutil.which("espeak-ng"):
    pytest.skip("espeak-ng not installed (Debian package espeak-ng)")
  root = str(tmp_path_factory.mktemp("centaur_run"))
  make_synthetic_corpus(os.path.join(root, "data", "synth_tts"),
                        {"train": 300, "val": 20, "test": 4}, seed=0)
  result = toy.run_cli([f"--config_file={CONFIG}", "--mode=train_eval", f"--logdir={root}/logdir",
                        f"--max_steps={STEPS}", f"--eval_steps={STEPS}",
                        "--print_samples_steps=100"], cwd=root)
  assert result.returncode == 0, result.stderr[-3000:]
  return root, result


def test_attention_aligns_and_decoding_stops(trained):
  root, result = trained
  with open(os.path.join(root, "logdir", "metrics.jsonl"), encoding="utf-8") as f:
    metrics = [json.loads(line) for line in f if '"eval/' in line][-1]
  assert metrics["step"] == STEPS
  assert_aligned(metrics)
  assert "Sample text:" in result.stdout
