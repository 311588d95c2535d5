"""scripts/bench_asr_models.py: the equal-time reading of the WER curves and its checks (the
runs themselves are the benchmark, docs/benchmarks.md)."""

import math

import pytest

from tests.helpers.speech import load_script


@pytest.fixture(scope="module")
def bench():
  return load_script("bench_asr_models")


def test_the_wer_at_a_time_is_the_last_eval_done_by_then(bench):
  curve = [(10.0, 100, 0.9), (20.0, 200, 0.5), (30.0, 300, 0.2)]
  assert bench.wer_at(curve, 25.0) == (0.5, 200)
  assert bench.wer_at(curve, 30.0) == (0.2, 300)
  wer, step = bench.wer_at(curve, 5.0)
  assert math.isnan(wer) and step == 0


def test_missing_data_and_unknown_configs_are_one_line_errors(bench, tmp_path):
  with pytest.raises(SystemExit, match="train.csv not found: make the corpus"):
    bench.main(["--data_dir", str(tmp_path)])
  for split in ("train", "dev", "test"):
    (tmp_path / f"{split}.csv").write_text("wav_filename,wav_filesize,transcript\n")
  with pytest.raises(SystemExit, match="nope.py is not in example_configs/speech2text/"):
    bench.main(["--data_dir", str(tmp_path), "--configs", "nope.py"])


def test_the_cpu_is_named(bench):
  assert "cores" in bench.cpu_name()
