"""scripts/benchmark_scaling.py: the run.py arguments of each model and the summary of rounds."""

import argparse
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "scripts"))
import benchmark_scaling  # noqa: E402  pylint: disable=wrong-import-position


def _args(**overrides):
  values = dict(model="toy", steps=12, warmup=3, batch=None, balanced_workers=False)
  values.update(overrides)
  return argparse.Namespace(**values)


def test_toy_runs_on_the_generated_data_with_its_default_batch():
  args = benchmark_scaling.run_args("/data", _args())
  assert f"--config_file={benchmark_scaling.CONFIGS['toy']}" in args
  assert "--batch_size_per_gpu=32" in args
  assert "--data_layer_params/source_file=/data/train/source.txt" in args
  assert "--bench_steps=12" in args and "--bench_start=3" in args


def test_bible_reads_its_config_data_with_its_batch_unless_told():
  args = benchmark_scaling.run_args(None, _args(model="bible"))
  assert f"--config_file={benchmark_scaling.CONFIGS['bible']}" in args
  assert "--batch_size_per_gpu=4096" in args
  assert not [a for a in args if a.startswith("--data_layer_params")]
  assert "--batch_size_per_gpu=1024" in benchmark_scaling.run_args(None, _args(model="bible",
                                                                               batch=1024))


def test_the_wide_run_is_one_device_with_the_replicas_batch():
  assert "--batch_size_per_gpu=64" in benchmark_scaling.run_args("/d", _args(), scale=2)
  assert "--batch_size_per_gpu=8192" in benchmark_scaling.run_args(None, _args(model="bible"),
                                                                   scale=2)


def test_summary_is_the_median_over_the_rounds_that_ran():
  summary = benchmark_scaling.summarize([(100.0, 900.0), None, (300.0, 1100.0), (200.0, 1000.0)])
  assert summary == {"tokens": 200.0, "peak_mb": 1000.0, "rounds": [100.0, 300.0, 200.0]}
  assert benchmark_scaling.summarize([None, None]) is None


def test_multi_worker_variants_name_their_environment():
  assert benchmark_scaling.parse_variant("pack16:A=16,B=x=y") == ("pack16", {"A": "16",
                                                                            "B": "x=y"}, [])
  assert benchmark_scaling.parse_variant("bf16:--allreduce_dtype=bfloat16,A=1") == (
      "bf16", {"A": "1"}, ["--allreduce_dtype=bfloat16"])
  for bad in ("pack16", ":A=1", "pack16:", "pack16:A", "pack16:=1", "x:--=1"):
    with pytest.raises(ValueError, match="NAME:KEY=VALUE|is not KEY=VALUE"):
      benchmark_scaling.parse_variant(bad)
  env = benchmark_scaling.environment(1, {"OPEN_SEQ2SEQ_ALLREDUCE_PACK_MB": "16"})
  assert env["OPEN_SEQ2SEQ_ALLREDUCE_PACK_MB"] == "16" and env["TF_NUM_INTRAOP_THREADS"] == "1"


def test_balanced_workers_reach_every_run_only_when_asked():
  flag = "--data_layer_params/balanced_workers=True"
  assert flag in benchmark_scaling.run_args(None, _args(model="bible", balanced_workers=True))
  assert flag not in benchmark_scaling.run_args(None, _args(model="bible"))
