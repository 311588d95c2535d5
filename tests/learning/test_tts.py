"""End to end on the synthetic single-voice corpus through run.py: the small Tacotron 2 with
guided attention learns to align text with speech on held-out sentences, teacher forced and
free running, and stops near the true length; infer and interactive infer write audio.

Thresholds (issue 12): teacher-forced band mass > 0.8 and focus rate > 0.4, free-running band
mass > 0.7, and >= 80 % of held-out sentences stopping within 20 % of their length. An
untrained model gets band mass ~0.2 (uniform attention), focus ~1/N and stop accuracy 0.
"""

import csv
import json
import os
import shutil

import pytest
import soundfile

from tests.helpers import toy
from tests.helpers.tts import CONFIG_DIR, make_synthetic_corpus

pytestmark = pytest.mark.slow

CONFIG = os.path.join(CONFIG_DIR, "tacotron-synthetic-small.py")
STEPS = 300


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
  if not shutil.which("espeak-ng"):
    pytest.skip("espeak-ng not installed (Debian package espeak-ng)")
  root = tmp_path_factory.mktemp("tts_run")
  make_synthetic_corpus(str(root / "data" / "synth_tts"),
                        {"train": 300, "val": 20, "test": 4}, seed=0)
  return str(root)


def run(workdir, mode, *extra, stdin=None):
  return toy.run_cli([f"--config_file={CONFIG}", f"--mode={mode}",
                      f"--logdir={workdir}/logdir", *extra], cwd=workdir, stdin=stdin)


@pytest.fixture(scope="module")
def trained(workdir):
  result = run(workdir, "train_eval", f"--max_steps={STEPS}", f"--eval_steps={STEPS}",
               "--print_samples_steps=100")
  assert result.returncode == 0, result.stderr[-3000:]
  return result


def last_eval(workdir):
  with open(os.path.join(workdir, "logdir", "metrics.jsonl"), encoding="utf-8") as f:
    records = [json.loads(line) for line in f if '"eval/' in line]
  return records[-1]


def test_attention_aligns_and_decoding_stops(trained, workdir):
  metrics = last_eval(workdir)
  assert metrics["step"] == STEPS
  assert metrics["eval/band_mass"] > 0.8, metrics
  assert metrics["eval/focus_rate"] > 0.4, metrics
  assert metrics["eval/free_band_mass"] > 0.7, metrics
  assert metrics["eval/stop_accuracy"] >= 0.8, metrics
  assert "Sample text:" in trained.stdout


def test_infer_writes_a_wav_and_alignment_per_line(trained, workdir):
  output = os.path.join(workdir, "infer.csv")
  result = run(workdir, "infer", f"--infer_output_file={output}")
  assert result.returncode == 0, result.stderr[-3000:]
  with open(output, encoding="utf-8", newline="") as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 4
  for row in rows:
    info = soundfile.info(row["wav_path"])
    assert info.samplerate == 16000
    # a 3-10 word sentence at espeak-ng's rate: between half a second and five seconds
    assert 0.5 < info.duration < 5.0, (row, info.duration)
    assert os.path.getsize(row["wav_path"].replace(".wav", "_alignment.png")) > 100


def test_interactive_infer_writes_a_wav(trained, workdir):
  result = run(workdir, "interactive_infer", stdin="the cat sat on the mat.\n")
  assert result.returncode == 0, result.stderr[-3000:]
  path = result.stdout.strip().splitlines()[-1].split(" (")[0]
  assert path.endswith(".wav") and soundfile.info(path).duration > 0.3
