"""scripts/bench_tts.py prints its tables: a training row (run.py --benchmark), an inference
real-time-factor row and a vocoder (HiFi-GAN) row, on a few tones standing in for the
synthetic corpus."""

import os
import re
import subprocess
import sys

import pytest

from tests.helpers.tts import ROOT, write_corpus

pytestmark = pytest.mark.slow


def test_prints_training_frames_and_real_time_factor(tmp_path):
  data = str(tmp_path / "data")
  texts = ["one two three", "four five", "six seven eight", "nine ten"]
  for name in ("train.csv", "val.csv", "test.csv"):
    write_corpus(data, texts, [0.5, 0.4, 0.45, 0.35], name=name)
  cmd = [sys.executable, os.path.join(ROOT, "scripts", "bench_tts.py"),
         "--rows", "train_fp32,rtf_fp32,hifigan_fp32", "--bench_steps", "3", "--bench_start", "1",
         f"--data={data}", f"--workdir={tmp_path / 'work'}"]
  result = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2"))
  assert result.returncode == 0, result.stderr[-3000:]
  train = re.search(r"^\| float32 \| ([\d,]+) \| ([\d.]+) \| ([\d.]+) \| 1\.00 \|", result.stdout,
                    re.M)
  assert train and float(train.group(1).replace(",", "")) > 0, result.stdout
  rtf = re.search(r"^\| float32 \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$",
                  result.stdout, re.M)
  assert rtf, result.stdout
  audio, decoder, griffin_lim, total = map(float, rtf.groups())
  # random weights, stop token off: every sentence runs to max_frames_per_symbol frames
  assert audio > 1.0 and abs(decoder + griffin_lim - total) < 0.002
  vocoder = re.search(r"^\| HiFi-GAN V3/4 generator \(hifigan-synthetic-small\.py, 16 kHz\) \| "
                      r"([\d,]+) \| float32 \| 4 \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$",
                      result.stdout, re.M)
  assert vocoder, result.stdout
  parameters = int(vocoder.group(1).replace(",", ""))
  audio, rtf, speed = map(float, vocoder.groups()[1:])
  assert 50_000 < parameters < 200_000  # V3's layout at a quarter of its channels: ~0.1 M
  # every clip whole: ceil(samples / 256) frames of 256 samples (8192 + 6400 + 7424 + 5632)
  assert abs(audio - 27648 / 16000) < 0.006, result.stdout
  assert rtf > 0 and abs(rtf * speed - 1) < 0.02
