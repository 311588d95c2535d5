"""Every config under example_configs/ runs as shipped through run.py's own path.

For each file (found recursively, so a new family's configs are picked up by themselves):
the config loads in every mode, then ``python run.py --mode=train_eval --max_steps=2`` trains
two steps on tiny generated data with the backend the config asks for, evaluates, writes its
checkpoint, and ``--mode=infer`` restores it and predicts every input. Only data and steps
shrink (a family helper in tests/helpers/ writes the data and gives the overrides); the
model keeps the config's own size.

Backends as a user on this machine gets them:

* ``use_horovod: True`` configs run :class:`HorovodBackend` in one process (no mpiexec): their
  ``num_gpus: 8`` is ignored with a notice, as in OpenSeq2Seq (one device per process).
* towers configs asking for more GPUs than the machine has (``num_gpus: 8`` on a CPU host)
  stop with a one-line error that suggests ``--cpu_towers=N``; the test checks that error,
  then runs them as it says, with ``--cpu_towers=2`` (two towers on the CPU; the config is
  not changed). On a host with enough GPUs they run on their GPUs.

Per-config times are printed (``pytest -s``); see the report in docs/distributed.md.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import time
from typing import Callable

import pytest

from open_seq2seq.config import load_config, load_config_module
from tests.helpers import speech, toy

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = sorted(glob.glob(os.path.join(ROOT, "example_configs", "**", "*.py"), recursive=True))

#: Model family (``base_model`` class name) -> ``helper(directory) -> (run.py overrides that
#: point every mode at tiny data written into directory, number of examples)``. A new family
#: adds one function next to these in tests/helpers/ and one line here.
DATA: dict[str, Callable[[str], tuple[list[str], int]]] = {
    "Text2Text": toy.example_config_overrides,
    "Speech2Text": speech.example_config_overrides,
}

#: Logical CPU devices used for towers configs on a machine without their GPUs.
CPU_TOWERS = 2
STEPS = 2
TIMEOUT = 1800
#: Launcher variables that would turn a run into a multi-process job.
_JOB_VARIABLES = ("OMPI_", "PMI_", "PMIX_", "HOROVOD_", "MPI_LOCAL", "TF_CONFIG",
                  "OPEN_SEQ2SEQ_LAUNCHER")


def _horovod_missing() -> str | None:
  try:
    import horovod.tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  except ImportError as e:
    return f"Horovod is not installed ({e}): run scripts/install_horovod.sh"
  return None


def _gpus() -> int:
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return len(tf.config.list_physical_devices("GPU"))


def _run(args: list[str]) -> tuple[subprocess.CompletedProcess, float]:
  """``python run.py ARGS`` from the repository root as one process; (result, seconds)."""
  env = {k: v for k, v in os.environ.items() if not k.startswith(_JOB_VARIABLES)}
  env.update(PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
  start = time.monotonic()
  result = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=TIMEOUT, env=env)
  return result, time.monotonic() - start


def _explain(result: subprocess.CompletedProcess) -> str:
  return f"exit {result.returncode}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n" \
         f"{result.stderr[-3000:]}"


def _expected_backend(params: dict) -> tuple[str, int, list[str]]:
  """(backend name, replicas, extra run.py flags) a user of this machine gets."""
  if params["use_horovod"]:
    return "horovod", 1, []
  towers = len(params["gpu_ids"] or []) or params["num_gpus"] or 1
  if towers == 1:
    return "single", 1, []
  if _gpus() >= towers:
    return "towers", towers, []
  return "towers", CPU_TOWERS, [f"--cpu_towers={CPU_TOWERS}"]


def test_every_family_of_the_examples_has_a_data_helper():
  assert len(CONFIGS) >= 8
  families = {load_config_module(path).base_model.__name__ for path in CONFIGS}
  assert families <= set(DATA), f"add a data helper to tests/helpers/ for {families - set(DATA)}"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: os.path.relpath(p, ROOT))
def test_config_trains_evaluates_and_infers_through_run_py(path, tmp_path):
  family = load_config_module(path).base_model.__name__
  data, examples = DATA[family](str(tmp_path / "data"))
  for mode in ("train", "eval", "infer"):
    load_config(path, mode, data)  # every mode validates, with the data overrides
  params = load_config(path, "train", data)[1]["train"]
  backend, replicas, flags = _expected_backend(params)
  if backend == "horovod" and _horovod_missing():
    pytest.skip(_horovod_missing())
  logdir = str(tmp_path / "run")
  common = [f"--config_file={path}", f"--logdir={logdir}", *data]
  times = {}

  if flags:  # as shipped, on a machine without its GPUs: one line saying what to do
    result, times["no GPUs"] = _run(common + ["--mode=train", f"--max_steps={STEPS}"])
    assert result.returncode == 2, _explain(result)
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: num_gpus/gpu_ids ask for GPU(s)"), _explain(result)
    assert "--cpu_towers=N" in last
    assert not os.path.exists(os.path.join(logdir, "checkpoint"))

  train = [f"--max_steps={STEPS}", "--num_epochs=None"] if params["num_epochs"] else [
      f"--max_steps={STEPS}"]
  result, times["train_eval"] = _run(common + flags + ["--mode=train_eval", *train])
  assert result.returncode == 0, _explain(result)
  started = re.search(r"(\d+) replica\(s\), backend ([\w-]+)", result.stdout)
  assert started, _explain(result)
  assert (started.group(2), int(started.group(1))) == (backend, replicas)
  assert re.search(rf"eval at step {STEPS}:", result.stdout), _explain(result)
  assert f"Finished training at step {STEPS}" in result.stdout
  assert os.path.exists(os.path.join(logdir, f"ckpt-{STEPS}.index"))
  notices = [line for line in result.stderr.splitlines() if line.startswith("notice:")]
  if backend == "horovod" and (params["num_gpus"] or 1) > 1:
    assert notices == [f"notice: use_horovod: num_gpus={params['num_gpus']} ignored; Horovod "
                       f"runs one device per process (start {params['num_gpus']} processes "
                       f"with mpiexec -np {params['num_gpus']}; this job has 1 process)"]

  output = str(tmp_path / "infer-out.txt")
  result, times["infer"] = _run(common + flags + ["--mode=infer",
                                                  f"--infer_output_file={output}"])
  assert result.returncode == 0, _explain(result)
  assert f"wrote {examples} predictions to {output}" in result.stdout, _explain(result)
  with open(output, encoding="utf-8") as f:
    assert len(f.read().splitlines()) >= examples

  print(f"\n{os.path.relpath(path, ROOT)} [{backend}, {replicas} replica(s)]: " +
        ", ".join(f"{name} {seconds:.0f} s" for name, seconds in times.items()))
