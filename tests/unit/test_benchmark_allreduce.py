"""scripts/benchmark_allreduce.py: the tensors it sums, the runs it starts, what it reads back."""

import argparse
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "scripts"))
import benchmark_allreduce  # noqa: E402  pylint: disable=wrong-import-position


def _args(**overrides):
  values = dict(mb=9.0, tensor_mb=4.0, packs="0,4,auto", backends="multi-worker,horovod",
                steps=5, timeout=60.0)
  values.update(overrides)
  return argparse.Namespace(**values)


def test_tensors_make_the_total_with_a_shorter_last_one():
  sizes = benchmark_allreduce.tensor_sizes(9.0, 4.0)
  assert sizes == [2**20, 2**20, 2**18]  # float32 elements: 4 + 4 + 1 MB
  assert benchmark_allreduce.tensor_sizes(8.0, 4.0) == [2**20, 2**20]
  with pytest.raises(ValueError, match="> 0"):
    benchmark_allreduce.tensor_sizes(0, 4.0)


def test_each_pack_is_a_multi_worker_run_with_its_environment_and_horovod_runs_under_mpiexec():
  runs = benchmark_allreduce.commands(_args())
  names = [name for name, *_ in runs]
  assert names == ["multi-worker, pack=0", "multi-worker, pack=4", "multi-worker, pack=auto",
                   "horovod"]
  envs = {name: env for name, _, env in runs}
  assert envs["multi-worker, pack=0"] == {"OPEN_SEQ2SEQ_ALLREDUCE_PACK_MB": "0"}
  assert envs["multi-worker, pack=auto"] == {}  # the backend's own default
  launch = runs[0][1]
  assert launch[1:7] == ["-m", "open_seq2seq.launch", "-np", "2", "--bind_cores", "--timeout"]
  assert "--worker" in launch and "--mb=9.0" in launch and "--horovod" not in launch
  horovod = runs[-1][1]
  assert horovod[:6] == ["mpiexec", "--oversubscribe", "-np", "2", "--bind-to", "core"]
  assert horovod[-1] == "--horovod"
  assert [n for n, *_ in benchmark_allreduce.commands(_args(backends="horovod"))] == ["horovod"]
  with pytest.raises(ValueError, match="unknown"):
    benchmark_allreduce.commands(_args(backends="nccl"))


def test_the_chiefs_line_is_read_through_the_launchers_rank_prefix():
  out = "[1] noise\n[0] " + benchmark_allreduce.RESULT + '{"ms": 12.5, "workers": 2}\n'
  assert benchmark_allreduce.parse_result(out) == 12.5
  assert benchmark_allreduce.parse_result("[0] nothing\n") is None


def test_table_gives_medians_and_the_bandwidth_of_the_total():
  text = benchmark_allreduce.table(100.0, {"a": [10.0, 30.0, 20.0], "b": []})
  row_a = next(line for line in text.splitlines() if line.startswith("| a "))
  assert "| 20.0 | 10.0, 30.0, 20.0 | 5.24 |" in row_a  # 100 MiB in 20 ms
  assert "| b | failed |" in text
