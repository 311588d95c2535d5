"""The translation benchmark scripts print their tables: scripts/benchmark_translation.py
(training figures and, with --infer_sentences, beam-search speed at a forced minimum length;
toy model at tiny sizes) and scripts/bench_conv1d.py."""

import os
import re
import subprocess
import sys

import pytest

from tests.helpers import toy

pytestmark = pytest.mark.slow


def test_prints_training_and_beam_search_figures(tmp_path):
  data = toy.make_toy_data(str(tmp_path / "toy"), train=200, dev=4, test=12)
  tiny = [f"--extra={flag}" for flag in toy.TINY_MODEL if "steps" not in flag]
  cmd = [sys.executable, os.path.join(toy.ROOT, "scripts", "benchmark_translation.py"),
         "--models", "toy", "--toy_data", data, "--steps", "3", "--start", "1",
         "--infer_sentences", "10", "--infer_after", "30", "--infer_min_length", "5",
         *tiny, "--extra=--batch_size_per_gpu=4"]  # 10 sentences: 3 batches, 2 timed
  result = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=toy.ROOT))
  assert result.returncode == 0, result.stderr[-3000:]
  row = re.search(r"^\| toy \| ([\d.]+)M \| ([\d.]+) \| ([\d,]+) \| ([\d,]+) \| ([\d.]+) \| "
                  r"([\d.]+) \|$", result.stdout, re.M)
  assert row, result.stdout
  assert float(row.group(5)) > 0  # beam sentences/s
  # no hypothesis ends before 5 tokens (the toy's tokens are words; 30 steps of training
  # make the model emit symbols rather than the padding and start ids text leaves out)
  assert float(row.group(6)) >= 5


def test_conv1d_benchmark_prints_both_convolutions():
  cmd = [sys.executable, os.path.join(toy.ROOT, "scripts", "bench_conv1d.py"), "--batch", "2",
         "--time", "5", "--channels", "8", "--repeats", "2"]
  result = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=toy.ROOT))
  assert result.returncode == 0, result.stderr[-3000:]
  for name in ("tf.nn.conv1d", "shifted_conv1d"):
    assert re.search(rf"^\| {re.escape(name)} \| [\d.]+ \| [\d.]+ \|$", result.stdout, re.M)
