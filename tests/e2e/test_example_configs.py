"""Every config under example_configs/ runs as shipped through run.py's own path.

For each file (found recursively, so a new family's configs are picked up by themselves):
the config loads in every mode, then run.py runs it on tiny generated data with the backend
the config asks for. Only data and steps shrink (a family helper in tests/helpers/ writes the
data and gives the overrides); the model keeps the config's own size.

* Small configs: ``python run.py --mode=train_eval --max_steps=2`` trains two steps,
  evaluates and writes its checkpoint, and ``--mode=infer`` restores it and predicts every
  input. The first config of each combination of components in the session (over every
  xdist worker: ``_infer_key``, ``once``) runs both; the others train with ``--mode=train``.
* Published-size configs (``config_sizes.STEPPED``: over 15 M parameters): ``python run.py
  --mode=train --benchmark --bench_steps=1`` builds the model and trains one step, saving
  nothing; the parameter count is checked against ``PUBLISHED_SIZES``. Their eval, second
  step and checkpoints (8 GB for jasper10x5) cost 1.3-2.5x as much, on 2 AVX-512 cores
  jasper10x5 110-146 s against 73-106 s, en-de-convs2s-8-gpu 55-69 s against 25 s,
  gnmt-v2-4x1024 27-33 s against 16-18 s; infer never ran at that size.

Backends as a user of this machine gets them:

* ``use_horovod: True`` configs run :class:`HorovodBackend` in one process (no mpiexec): their
  ``num_gpus: 8`` is ignored with a one-line notice, as in OpenSeq2Seq (one device per
  process; the number of GPUs is the number of processes started).
* towers configs asking for GPUs the machine does not have (``num_gpus: 8`` on a CPU host)
  stop before anything is built with a one-line error offering ``num_gpus=1`` or
  ``--cpu_towers=N``. One test checks that error on the first such config; every one of
  them runs with ``--num_gpus=1``.
  ``--cpu_towers=2`` works as well but costs 5.5 minutes and 15 GB of memory for
  ds2_large_8gpus_mp on 2 cores (two towers of five bfloat16 GRU layers), against 1 minute
  and 6 GB on one device; towers themselves are tested with small models in
  tests/e2e/test_distributed_training.py. On a host with the GPUs they run as towers.

Under pytest-xdist each config is a scope of its own (tests/conftest.py), so both workers
share them. Per-config times are printed with ``pytest -s``.
"""

from __future__ import annotations

import glob
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import time
from typing import Callable

import pytest

from open_seq2seq.config import load_config, load_config_module
from open_seq2seq.distributed.horovod_backend import ignored_devices_notice
from tests.helpers import (config_sizes, fastpitch, hifigan, image, lm, shared_data, speech,
                           speech_commands, toy, tts, warm_cli, wavenet)

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = sorted(glob.glob(os.path.join(ROOT, "example_configs", "**", "*.py"), recursive=True))

#: Model family (``base_model`` class name) -> ``helper(directory) -> (run.py overrides that
#: point every mode at tiny data written into directory, number of examples)``. A new family
#: adds one function next to these in tests/helpers/ and one line here.
DATA: dict[str, Callable[[str], tuple[list[str], int]]] = {
    "Text2Text": toy.example_config_overrides,
    "Speech2Text": speech.example_config_overrides,
    "Image2Label": image.example_config_overrides,
    "LSTMLM": lm.example_config_overrides,
    "Text2Speech": tts.example_config_overrides,
    "Text2SpeechWavenet": wavenet.example_config_overrides,
    "HiFiGAN": hifigan.example_config_overrides,
    # a data layer whose data differs from its family's: looked up before the model
    "SpeechCommandsDataLayer": speech_commands.example_config_overrides,
    "FastPitchDataLayer": fastpitch.example_config_overrides,
}

STEPS = 2
#: Trainable parameters of models whose size was published (OpenSeq2Seq / papers), within
#: 10 %: read off the trainer's "Training N parameters" line of the run itself.
PUBLISHED_SIZES = {"jasper10x5_LibriSpeech_nvgrad.py": 333e6,
                   # Gulati et al. 2020, Table 1: Conformer (M)
                   "conformer_transducer_medium_8gpus_mp.py": 30.7e6,
                   "quartznet15x5_LibriSpeech.py": 18.9e6,
                   # NeMo's FastPitch with its aligner (fastpitch_align_v1.05): ~45 M
                   "fastpitch_ljspeech.py": 45e6,
                   "resnet-50-v1.py": 25.6e6, "resnet-50-v1-mp.py": 25.6e6,
                   "resnet-50-v2.py": 25.6e6, "resnet-50-v2-mp.py": 25.6e6}
#: Infer (a fresh process that restores the checkpoint and traces the model again) runs for
#: models up to this size. Above it, it costs 15-40 s more per config on 2 cores and runs the
#: forward pass the train_eval's eval just ran; restore and output are covered by the others.
#: Every config above it is in config_sizes.STEPPED today (built and stepped only).
INFER_MAX_PARAMS = 15_000_000
#: A config above this size that is not in config_sizes.STEPPED fails: it would spend a
#: minute or more on an eval and a checkpoint of its size. (Between the two, one that is not
#: listed trains and evaluates without infer; if it evaluates first for its combination of
#: components, that combination's infer is not run.)
FULL_CYCLE_MAX_PARAMS = 50_000_000
TIMEOUT = 1800
_STARTED = re.compile(r"Training ([\d,]+) parameters for (\d+) steps? .* (\d+) replica\(s\), "
                      r"backend ([\w-]+)(, graph optimizations off)?\)")


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
  """``python run.py ARGS --graph_optimizations=False`` from the repository root as one
  process (started warm: the package is imported once, tests/helpers/warm_cli.py); (result,
  seconds). These runs are smoke runs of one or two steps, so Grappler is off
  (training/graph_optimizations.py): a quarter of a run's time after import on 2 Intel
  cores; the learning tests run with it."""
  env = toy.single_process_env()
  env.update(PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
  start = time.monotonic()
  result = warm_cli.run(args + ["--graph_optimizations=False"], env, cwd=ROOT, timeout=TIMEOUT)
  return result, time.monotonic() - start


def _explain(result: subprocess.CompletedProcess) -> str:
  return f"exit {result.returncode}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n" \
         f"{result.stderr[-3000:]}"


def _expected_backend(params: dict) -> tuple[str, int, list[str]]:
  """(backend name, replicas, extra run.py flags) a user of this machine gets."""
  if params["use_horovod"]:
    return "horovod", 1, []
  gpu_ids = params["gpu_ids"] or []
  towers = len(gpu_ids) or params["num_gpus"] or 1
  needed = max(gpu_ids) + 1 if gpu_ids else (towers if towers > 1 else 0)
  if _gpus() >= needed:
    return ("towers", towers, []) if towers > 1 else ("single", 1, [])
  return "single", 1, ["--num_gpus=1"] + (["--gpu_ids=None"] if gpu_ids else [])


def _family(path: str) -> str | None:
  """The DATA key of the config's ``base_model``: its class or the nearest base class with a
  helper (``Text2SpeechCentaur`` uses ``Text2Speech``'s), or its data layer's when that has
  one of its own; None when there is none."""
  module = load_config_module(path)
  layer = getattr(module.base_params.get("data_layer"), "__name__", None)
  if layer in DATA:
    return layer
  for klass in module.base_model.__mro__:
    if klass.__name__ in DATA:
      return klass.__name__
  return None


@pytest.fixture(scope="session")
def once(tmp_path_factory) -> Callable[[str, tuple], bool]:
  """``once(what, key)``: True the first time it is asked in this test session, over every
  xdist worker (the first to create the key's file in the session's directory wins), so
  that spreading the configs over workers does not repeat an eval or infer."""
  directory = pathlib.Path(shared_data.session_root(tmp_path_factory), "example-config-runs")
  directory.mkdir(exist_ok=True)

  def first(what: str, key: tuple) -> bool:
    name = hashlib.sha256(repr((what, key)).encode()).hexdigest()[:20]
    try:
      os.close(os.open(directory / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
      return False
    return True

  return first


def test_every_family_of_the_examples_has_a_data_helper():
  assert len(CONFIGS) >= 8
  missing = {load_config_module(path).base_model.__name__ for path in CONFIGS
             if _family(path) is None}
  assert not missing, f"add a data helper to tests/helpers/ for {missing}"


def test_every_stepped_config_exists():
  """A renamed config left in config_sizes.STEPPED would get the full cycle unnoticed."""
  names = {os.path.basename(path) for path in CONFIGS}
  assert len(names) == len(CONFIGS), "two example configs share a file name"
  assert set(config_sizes.STEPPED) <= names, set(config_sizes.STEPPED) - names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: os.path.relpath(p, ROOT))
def test_config_trains_evaluates_and_infers_through_run_py(path, tmp_path, once):
  data, examples = DATA[_family(path)](str(tmp_path / "data"))
  # SentencePiece targets a recipe trains (the LibriSpeech Conformers): a model of their size
  data += speech.sentencepiece_stand_in(load_config(path, "train", data)[1]["train"],
                                        str(tmp_path / "data"))
  for mode in ("train", "eval", "infer"):
    load_config(path, mode, data)  # every mode validates, with the data overrides
  params = load_config(path, "train", data)[1]["train"]
  backend, replicas, flags = _expected_backend(params)
  if backend == "horovod" and _horovod_missing():
    pytest.skip(_horovod_missing())
  logdir = str(tmp_path / "run")
  try:
    if os.path.basename(path) in config_sizes.STEPPED:
      times = _build_and_step(path, logdir, data, params)
    else:
      times = _train_eval_and_infer(path, logdir, data, examples, params, once)
  finally:
    shutil.rmtree(logdir, ignore_errors=True)
  print(f"\n{os.path.relpath(path, ROOT)} [{backend}, {replicas} replica(s)]: " +
        ", ".join(f"{name} {seconds:.0f} s" for name, seconds in times.items()))


def test_a_towers_config_as_shipped_says_what_to_do_without_its_gpus(tmp_path):
  """The first towers config asking for GPUs this machine lacks, run as shipped, stops with
  one line offering num_gpus=1 or --cpu_towers=N (the check reads only num_gpus/gpu_ids, so
  one config stands for all of them; the others run with the flags above)."""
  for path in CONFIGS:
    data, _ = DATA[_family(path)](str(tmp_path / "data"))
    params = load_config(path, "train", data)[1]["train"]
    if _expected_backend(params)[2]:
      break
    shutil.rmtree(tmp_path / "data")
  else:
    pytest.skip("this machine has the GPUs every towers config asks for")
  logdir = str(tmp_path / "run")
  epochs = ["--num_epochs=None"] if params["num_epochs"] is not None else []
  result, _ = _run([f"--config_file={path}", f"--logdir={logdir}", *data,
                    "--mode=train_eval", f"--max_steps={STEPS}", *epochs])
  assert result.returncode == 2, _explain(result)
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error: num_gpus/gpu_ids ask for GPU(s)"), _explain(result)
  assert "set num_gpus=1" in last and "--cpu_towers=N" in last
  assert not os.path.exists(os.path.join(logdir, "checkpoint"))


def _infer_key(params: dict) -> tuple:
  """What an infer run exercises: the components, the switches they turn on (True booleans
  such as ``style_embedding_enable``) and the dtype. Infer runs for the first config of each
  combination (sizes and training keys differ between the others: train_eval covers them),
  which saves a process start, a rebuild and a restore per repeated combination
  (resnet-50-v1/v2, the LM and transfer configs, the Jasper family ...)."""
  names = [getattr(params.get(slot), "__name__", str(params.get(slot)))
           for slot in ("data_layer", "encoder", "decoder", "loss")]
  switches = sorted(f"{slot}/{key}" for slot in ("encoder", "decoder")
                    for key, value in (params.get(f"{slot}_params") or {}).items()
                    if value is True)
  return (*names, *switches, str(params["dtype"]))


def _check_started(result: subprocess.CompletedProcess, path: str, params: dict,
                   steps: int) -> int:
  """Checks the run's start line (backend, replicas, steps, published size) and its notices;
  returns the number of trained parameters."""
  backend, replicas, _ = _expected_backend(params)
  assert result.returncode == 0, _explain(result)
  started = _STARTED.search(result.stdout)
  assert started, _explain(result)
  assert (started.group(4), int(started.group(3))) == (backend, replicas)
  assert int(started.group(2)) == steps, _explain(result)
  assert started.group(5), "--graph_optimizations=False did not reach the run"
  trained = int(started.group(1).replace(",", ""))
  published = PUBLISHED_SIZES.get(os.path.basename(path))
  if published is not None:
    assert abs(trained / published - 1) < 0.1, f"{trained:,} parameters, published {published:,.0f}"
  # Keys kept for OpenSeq2Seq that change nothing each say so (slots.ignored_settings), and
  # so do the data helpers' un-prefixed overrides, which point train and eval at the same
  # tiny data on purpose; any other notice is about the devices.
  notices = [line for line in result.stderr.splitlines() if line.startswith("notice:")
             and ": ignored: " not in line
             and " reaches both the train and the eval config of train_eval " not in line]
  notice = ignored_devices_notice(params, 1) if backend == "horovod" else None
  assert notices == ([f"notice: {notice}"] if notice else []), _explain(result)
  return trained


def _build_and_step(path: str, logdir: str, data: list[str], params: dict) -> dict[str, float]:
  """A published-size config: run.py builds it and trains one step (``--benchmark``, which
  saves nothing); returns the seconds of the run."""
  flags = _expected_backend(params)[2]
  result, seconds = _run([f"--config_file={path}", f"--logdir={logdir}", *data, *flags,
                          "--mode=train", "--benchmark", "--bench_steps=1"])
  trained = _check_started(result, path, params, steps=1)
  assert re.search(r"^\| steps timed +\| 1 \|$", result.stdout, re.M), _explain(result)
  assert trained > INFER_MAX_PARAMS, \
      f"{trained:,} parameters: take {os.path.basename(path)} off config_sizes.STEPPED (" \
      f"configs up to {INFER_MAX_PARAMS:,} get the train_eval and infer cycle)"
  assert not glob.glob(os.path.join(logdir, "ckpt-*")), "--benchmark wrote a checkpoint"
  print(f"\n{os.path.basename(path)}: {trained:,} parameters", end="")
  return {"build and step": seconds}


def _train_eval_and_infer(path: str, logdir: str, data: list[str], examples: int,
                          params: dict, once: Callable[[str, tuple], bool]) -> dict[str, float]:
  """Runs and checks train_eval then infer in ``logdir``; returns the seconds of each run."""
  flags = _expected_backend(params)[2]
  common = [f"--config_file={path}", f"--logdir={logdir}", *data]
  times = {}

  # An eval (and an infer) traces and runs the same code as another size of the same
  # components: the other configs of a combination train with --mode=train (~10 minutes of
  # the suite).
  evaluate = once("eval", _infer_key(params))
  # early stopping needs the evals of train_eval (--mode=train refuses it)
  train_mode = "train_eval" if evaluate or params.get("early_stopping") else "train"
  train = [f"--mode={train_mode}", f"--max_steps={STEPS}"]
  if params["num_epochs"] is not None:
    train.append("--num_epochs=None")
  result, times[train_mode] = _run(common + flags + train)
  trained = _check_started(result, path, params, steps=STEPS)
  assert trained <= FULL_CYCLE_MAX_PARAMS, \
      f"{trained:,} parameters: add {os.path.basename(path)} to config_sizes.STEPPED (built " \
      f"and stepped only)"
  if evaluate:
    assert re.search(rf"eval at step {STEPS}:", result.stdout), _explain(result)
  assert f"Finished training at step {STEPS}" in result.stdout
  assert os.path.exists(os.path.join(logdir, f"ckpt-{STEPS}.index"))

  # Infer restores the best checkpoint that train_eval's eval saved (restore_best_checkpoint).
  if not evaluate or trained > INFER_MAX_PARAMS:
    return times
  output = os.path.join(logdir, "infer-out.txt")
  result, times["infer"] = _run(common + flags + ["--mode=infer",
                                                  f"--infer_output_file={output}"])
  assert result.returncode == 0, _explain(result)
  assert f"wrote {examples} predictions to {output}" in result.stdout, _explain(result)
  with open(output, encoding="utf-8") as f:
    assert len(f.read().splitlines()) >= examples
  return times
