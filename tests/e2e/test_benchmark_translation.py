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


def test_memory_benchmark_samples_the_resident_set_at_every_printed_step(tmp_path):
  data = toy.make_toy_data(str(tmp_path / "toy"), train=200, dev=4, test=4)
  overrides = [*toy.data_overrides(data), *toy.split_overrides(data, "train"),
               *[flag for flag in toy.TINY_MODEL if "steps" not in flag]]
  cmd = [sys.executable, os.path.join(toy.ROOT, "scripts", "benchmark_memory.py"),
         "--config", toy.TOY_CONFIG, "--steps", "8", "--every", "2", "--from_step", "4",
         "--save_checkpoint_steps", "4", *[f"--extra={flag}" for flag in overrides]]
  result = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=toy.ROOT))
  assert result.returncode == 0, result.stderr[-3000:]
  rows = re.findall(r"^\| (\d+) \| ([\d,]+) \| ([\d,]+) \| [\d.]+ \|$", result.stdout, re.M)
  assert [int(step) for step, _, _ in rows] == [2, 4, 6, 8], result.stdout
  for _, rss, peak in rows:  # a TensorFlow process holds hundreds of MB; the peak bounds it
    assert 100 < int(rss.replace(",", "")) <= int(peak.replace(",", ""))
  assert re.search(r"RSS at step 4: [\d,]+ MB; at step 8: [\d,]+ MB \([+-][\d,]+ MB, "
                   r"[+-][\d.]+ %\); slope [+-][\d.]+ MB per 100 steps", result.stdout)


def test_memory_slope_is_least_squares_in_mb_per_100_steps():
  sys.path.insert(0, os.path.join(toy.ROOT, "scripts"))
  import benchmark_memory  # pylint: disable=import-outside-toplevel
  assert benchmark_memory.slope_per_100([(100, 1000.0), (200, 1002.0), (300, 1004.0)]) == \
      pytest.approx(2.0)
  assert benchmark_memory.slope_per_100([(100, 5.0)]) == 0.0
  rss, peak = benchmark_memory.memory_mb(os.getpid())
  assert 0 < rss <= peak
