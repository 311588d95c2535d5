"""scripts/bench_tts.py's FastPitch + HiFi-GAN row: text to waveform on a few tone clips
standing in for the synthetic corpus, each symbol as long as the clips' speech per symbol."""

import os
import re
import subprocess
import sys

import pytest

from tests.helpers.tts import ROOT, write_corpus

pytestmark = pytest.mark.slow


def test_prints_the_voice_real_time_factor(tmp_path):
  data = str(tmp_path / "data")
  texts = ["one two three", "four five", "six seven eight", "nine ten"]
  durations = [0.5, 0.4, 0.45, 0.35]
  for name in ("train.csv", "val.csv", "test.csv"):
    write_corpus(data, texts, durations, name=name)
  cmd = [sys.executable, os.path.join(ROOT, "scripts", "bench_tts.py"), "--rows", "voice_fp32",
         f"--data={data}", f"--workdir={tmp_path / 'work'}"]
  result = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2"))
  assert result.returncode == 0, result.stderr[-3000:]
  row = re.search(r"^\| FastPitch \+ HiFi-GAN, synthetic small \(16 kHz\) \| ([\d,]+) \+ "
                  r"([\d,]+) \| float32 \| 4 \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| "
                  r"([\d.]+) \|$", result.stdout, re.M)
  assert row, result.stdout
  acoustic, vocoder = (int(g.replace(",", "")) for g in row.groups()[:2])
  audio, fastpitch, hifigan, total, speed = map(float, row.groups()[2:])
  assert 500_000 < acoustic < 2_000_000 and 50_000 < vocoder < 200_000
  # each symbol (text + start/end) lasts the clips' seconds per symbol, rounded to frames
  per_symbol = sum(durations) / sum(len(t) + 2 for t in texts)
  assert f"every symbol {per_symbol * 1000:.0f} ms long" in result.stdout
  frames = round(per_symbol * 16000 / 256)
  assert abs(audio - sum(len(t) + 2 for t in texts) * frames * 256 / 16000) < 0.01, audio
  assert fastpitch > 0 and hifigan > 0 and abs(fastpitch + hifigan - total) < 0.002 * total + 1e-4
  assert abs(total * speed - 1) < 0.02
