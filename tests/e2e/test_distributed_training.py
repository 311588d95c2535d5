"""Data parallelism gives the single-process results: towers over 2 logical CPU devices,
TensorFlow multi-worker with 2 processes (local launcher and mpiexec) and Horovod with 2
processes. Also iter_size under distribution, eval/infer split over workers, and a dead
worker stopping the job (then --continue_learning resuming it).

Every run is a real ``run.py`` on 127.0.0.1 with a tiny model (tests/helpers/distributed.py);
each has a timeout, and every process stops by itself.
"""

import contextlib
import os
import signal
import subprocess
import sys
import time
import warnings

import pytest

from open_seq2seq import launch
from tests.helpers import distributed as h

pytestmark = pytest.mark.slow

#: Float sums are done in another order across replicas; a wrong split differs by ~1e-2.
WEIGHT_TOLERANCE = 1e-4


def _horovod_missing() -> str | None:
  if not h.have_mpiexec():
    return "mpiexec not found: run scripts/install_horovod.sh"
  try:
    import horovod.tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  except ImportError as e:
    return f"Horovod is not installed ({e}): run scripts/install_horovod.sh"
  return None


HOROVOD_MISSING = _horovod_missing()
if HOROVOD_MISSING:
  warnings.warn(f"Horovod tests skipped: {HOROVOD_MISSING}")
needs_horovod = pytest.mark.skipif(HOROVOD_MISSING is not None, reason=str(HOROVOD_MISSING))
needs_mpiexec = pytest.mark.skipif(not h.have_mpiexec(), reason="mpiexec not found")

#: name -> (how the processes start, extra run.py arguments, environment, marks)
BACKENDS = {
    "towers": ("single", ["--cpu_towers=2"], {}, []),
    "multi_worker": ("launch", [], {}, []),
    # the toy's gradients (~0.2 MB) all-reduced in many small packs rather than one
    "multi_worker_packs": ("launch", [], {"OPEN_SEQ2SEQ_ALLREDUCE_PACK_MB": "0.02"}, []),
    "multi_worker_mpiexec": ("mpiexec", [], {}, [needs_mpiexec]),
    # gradients summed across the processes / towers in bfloat16 (half the bytes)
    "multi_worker_bf16": ("launch", ["--allreduce_dtype=bfloat16"], {}, []),
    "towers_bf16": ("single", ["--cpu_towers=2", "--allreduce_dtype=bfloat16"], {}, []),
    "horovod": ("mpiexec", ["--use_horovod=True"], {}, [needs_horovod]),
}


def _params(*names):
  return [pytest.param(BACKENDS[name][:3], id=name, marks=BACKENDS[name][3]) for name in names]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  root = tmp_path_factory.mktemp("distributed")
  data = h.make_data(str(root / "data"))
  return root, h.write_config(str(root), data)


def _args(config, logdir, mode="train_eval", *extra):
  return [f"--config_file={config}", f"--mode={mode}", f"--logdir={logdir}", *extra]


def _check(result):
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  return result


@pytest.fixture(scope="module")
def reference(setup):
  """One process, global batch 16, 3 steps (then eval): the run every backend must match."""
  root, config = setup
  logdir = str(root / "single")
  result = _check(h.run("single", _args(config, logdir, "train_eval",
                                        "--batch_size_per_gpu=16")))
  return logdir, result.stdout


def _loss_lines(stdout):
  return [line.split("| lr")[0].split("] ")[-1] for line in stdout.splitlines()
          if "| loss" in line]


def _train_two_replicas(setup, backend, tmp_path, *more):
  """Trains 2 replicas of batch 8 (the reference's global batch of 16): (logdir, result)."""
  launcher, extra, env = backend
  _, config = setup
  logdir = str(tmp_path / "run")
  result = _check(h.run(launcher, _args(config, logdir, "train", "--batch_size_per_gpu=8",
                                        *more, *extra), env=env))
  assert "2 replica(s)" in result.stdout
  return logdir, result


@pytest.mark.parametrize("backend", _params("towers", "multi_worker", "multi_worker_packs",
                                            "multi_worker_mpiexec", "horovod"))
def test_training_matches_one_process_with_the_same_global_batch(setup, reference, backend,
                                                                 tmp_path):
  logdir, result = _train_two_replicas(setup, backend, tmp_path)
  assert _loss_lines(result.stdout) == _loss_lines(reference[1])  # chief alone prints them
  assert h.max_difference(h.weights(logdir), h.weights(reference[0])) < WEIGHT_TOLERANCE
  assert result.stdout.count("Finished training") == 1  # only the chief logs


#: Balanced workers on shuffled, bucketed data: the sharded pipeline would give each worker
#: its own order and buckets, so only the shared global batches match one process.
BALANCED = ["--data_layer_params/balanced_workers=True", "--data_layer_params/shuffle=True",
            "--data_layer_params/bucket_width=3"]


@pytest.fixture(scope="module")
def balanced_reference(setup):
  root, config = setup
  logdir = str(root / "single-balanced")
  result = _check(h.run("single", _args(config, logdir, "train", "--batch_size_per_gpu=16",
                                        *BALANCED)))
  return logdir, result.stdout


@pytest.mark.parametrize("backend", _params("multi_worker", "horovod"))
def test_balanced_workers_train_shuffled_buckets_as_one_process_does(setup, balanced_reference,
                                                                     backend, tmp_path):
  logdir, result = _train_two_replicas(setup, backend, tmp_path, *BALANCED)
  assert _loss_lines(result.stdout) == _loss_lines(balanced_reference[1])
  assert h.max_difference(h.weights(logdir), h.weights(balanced_reference[0])) < WEIGHT_TOLERANCE


def test_a_balanced_run_resumed_mid_epoch_trains_as_a_straight_one(setup, balanced_reference,
                                                                   tmp_path):
  """One process restores the balanced pipeline's iterator from the checkpoint of step 1."""
  _, config = setup
  logdir = str(tmp_path / "resumed")
  common = ["--batch_size_per_gpu=16", *BALANCED]
  _check(h.run("single", _args(config, logdir, "train", "--max_steps=1", *common)))
  resumed = _check(h.run("single", _args(config, logdir, "train", "--continue_learning",
                                         "--max_steps=3", *common)))
  assert "at step 1" in resumed.stdout
  assert h.max_difference(h.weights(logdir), h.weights(balanced_reference[0])) < WEIGHT_TOLERANCE


@pytest.fixture(scope="module")
def sgd_reference(setup):
  """The reference run with SGD: its update is linear in the gradients, so a rounding of the
  summed gradients shows in the weights in proportion, unlike Adam's normalised update."""
  root, config = setup
  logdir = str(root / "single-sgd")
  _check(h.run("single", _args(config, logdir, "train", "--batch_size_per_gpu=16",
                               "--optimizer=SGD")))
  return logdir


#: SGD weights after the bfloat16 all-reduce: further from the float32 run's than float
#: reordering goes (~1e-7) and closer than 8 bits of the updates allow
BF16_TOLERANCE = (1e-6, 1e-3)


@pytest.mark.parametrize("backend", _params("multi_worker_bf16", "towers_bf16"))
def test_bfloat16_all_reduce_trains_close_to_one_process(setup, sgd_reference, backend,
                                                         tmp_path):
  logdir, _ = _train_two_replicas(setup, backend, tmp_path, "--optimizer=SGD")
  difference = h.max_difference(h.weights(logdir), h.weights(sgd_reference))
  assert BF16_TOLERANCE[0] < difference < BF16_TOLERANCE[1]


@pytest.mark.parametrize("backend", _params("multi_worker", "horovod"))
def test_iter_size_under_distribution(setup, reference, backend, tmp_path):
  """2 workers x batch 4 x iter_size 2 = one process with batch 16."""
  launcher, extra, _ = backend
  _, config = setup
  logdir = str(tmp_path / "run")
  _check(h.run(launcher, _args(config, logdir, "train", "--batch_size_per_gpu=4",
                               "--iter_size=2", *extra)))
  assert h.max_difference(h.weights(logdir), h.weights(reference[0])) < WEIGHT_TOLERANCE


@pytest.fixture(scope="module")
def two_optimizers(setup):
  """The tiny model trained by two update groups (an SGD critic on the encoder, then Adam on
  the decoder), one process, global batch 16: (config, logdir) of the reference run."""
  root, _ = setup
  config = h.write_config(str(root), str(root / "data"), two_optimizers=True)
  logdir = str(root / "single-two-optimizers")
  result = _check(h.run("single", _args(config, logdir, "train", "--batch_size_per_gpu=16")))
  assert "Training" in result.stdout
  return config, logdir


@pytest.mark.parametrize("backend", _params("towers", "multi_worker", "horovod"))
def test_two_optimizers_train_as_one_process_does(two_optimizers, backend, tmp_path):
  """Each group's gradients are summed over the replicas before its update, the second
  group's forward pass on every replica reads the first group's new weights, and the moving
  averages are updated once per step from the synchronised weights."""
  config, reference = two_optimizers
  launcher, extra, env = backend
  logdir = str(tmp_path / "run")
  result = _check(h.run(launcher, _args(config, logdir, "train", "--batch_size_per_gpu=8",
                                        *extra), env=env))
  assert "2 replica(s)" in result.stdout
  weights = h.weights(logdir)
  assert any("optimizer_critic" in name for name in weights)
  assert any("moving_average/shadows" in name for name in weights)  # compared as well
  assert h.max_difference(weights, h.weights(reference)) < WEIGHT_TOLERANCE


def _eval_and_infer(launcher, config, logdir, output, extra):
  evaluated = _check(h.run(launcher, _args(config, logdir, "eval", *extra)))
  _check(h.run(launcher, _args(config, logdir, "infer", f"--infer_output_file={output}",
                               *extra)))
  with open(output, encoding="utf-8") as f:
    return h.eval_line(evaluated.stdout), f.read()


@pytest.fixture(scope="module")
def reference_outputs(setup, reference):
  root, config = setup
  return _eval_and_infer("single", config, reference[0], str(root / "single-infer.txt"), [])


@pytest.mark.parametrize("backend", _params("towers", "multi_worker", "horovod"))
def test_eval_and_infer_split_over_workers_give_single_process_outputs(
    setup, reference, reference_outputs, backend, tmp_path):
  # 43 examples in batches of 7: two workers read 22 and 21 (4 and 3 batches), towers
  # run 7 batches on 2 devices; the padding replicas' outputs must be dropped.
  launcher, extra, _ = backend
  _, config = setup
  eval_line, predictions = _eval_and_infer(launcher, config, reference[0],
                                           str(tmp_path / "infer.txt"), extra)
  assert predictions.count("\n") == 43
  assert predictions == reference_outputs[1]
  assert eval_line == reference_outputs[0]


def _start_rank(rank, port, args):
  env = h.environment(**launch.rank_environment(rank, 2, port))
  return subprocess.Popen([sys.executable, *h.run_py(), *args], env=env, cwd=h.ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@contextlib.contextmanager
def _two_ranks_training(config, logdir):
  """A 2-process TF multi-worker job training until killed, yielded as (chief, worker) once
  it has saved a checkpoint; both are killed at the end of the block if still running."""
  args = _args(config, logdir, "train", "--max_steps=1000000", "--save_checkpoint_steps=20",
               "--print_loss_steps=100", "--batch_size_per_gpu=8")
  port = launch.free_base_port(2)
  chief, worker = _start_rank(0, port, args), _start_rank(1, port, args)
  try:
    h.wait_for(lambda: h.has_checkpoint(logdir) or
               chief.poll() is not None, 240, "the first checkpoint")
    assert chief.poll() is None, chief.communicate()[1][-3000:]
    yield chief, worker
  finally:
    for proc in (chief, worker):
      if proc.poll() is None:
        proc.kill()
        proc.communicate()


def test_dead_worker_stops_the_job_with_a_clear_error_then_resumes(setup, tmp_path):
  _, config = setup
  logdir = str(tmp_path / "run")
  with _two_ranks_training(config, logdir) as (chief, worker):
    worker.send_signal(signal.SIGKILL)
    killed = time.time()
    _, stderr = chief.communicate(timeout=120)
    waited = time.time() - killed
  assert chief.returncode not in (0, None)
  lines = [line for line in stderr.splitlines() if line.startswith("error:")]
  assert lines and "another worker" in lines[-1] and "--continue_learning" in lines[-1], \
      stderr[-3000:]
  assert waited < 120

  latest = int(h.tf.train.latest_checkpoint(logdir).rsplit("-", 1)[1])
  resumed = _check(h.run("launch", _args(config, logdir, "train", "--continue_learning",
                                         f"--max_steps={latest + 3}",
                                         "--batch_size_per_gpu=8")))
  assert f"at step {latest}" in resumed.stdout
  assert h.tf.train.latest_checkpoint(logdir).endswith(f"ckpt-{latest + 3}")


def _horovod_job_with_one_rank_signalled(config, logdir, sig):
  """Starts a 2-rank Horovod job under mpiexec, sends ``sig`` to one rank once the job has
  saved a checkpoint; returns ``(job, stdout, stderr, seconds from the signal to the end)``."""
  args = _args(config, logdir, "train", "--max_steps=1000000", "--save_checkpoint_steps=20",
               "--print_loss_steps=100", "--batch_size_per_gpu=8", "--use_horovod=True")
  job = subprocess.Popen(h.command("mpiexec", args), env=h.environment(), cwd=h.ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
  try:
    h.wait_for(lambda: h.has_checkpoint(logdir) or
               job.poll() is not None, 240, "the first checkpoint")
    assert job.poll() is None, job.communicate()[1][-3000:]
    ranks = subprocess.run(["pgrep", "-P", str(job.pid)], capture_output=True, text=True)
    pids = [int(p) for p in ranks.stdout.split()]
    assert len(pids) == 2, ranks
    os.kill(pids[1], sig)
    signalled = time.time()
    out, err = job.communicate(timeout=120)
    return job, out, err, time.time() - signalled
  finally:
    if job.poll() is None:
      h.kill_group(job)


@needs_horovod
def test_dead_horovod_rank_stops_the_mpi_job(setup, tmp_path):
  _, config = setup
  job, _, stderr, waited = _horovod_job_with_one_rank_signalled(config, str(tmp_path / "run"),
                                                                 signal.SIGKILL)
  assert job.returncode != 0
  assert "signal 9" in stderr or "Killed" in stderr, stderr[-3000:]
  assert waited < 120


def _check_stopped_by_peer(chief_out, logdir):
  """The chief, not signalled itself, stopped with its peer after one same step and saved."""
  line = next((l for l in chief_out.splitlines() if "Stopped by SIGTERM" in l), None)
  assert line and "(sent to another worker): saved a checkpoint at step" in line, \
      chief_out[-3000:]
  step = int(line.split("at step ")[1].split(";")[0])
  assert h.tf.train.latest_checkpoint(logdir).endswith(f"ckpt-{step}")
  assert step >= 20


def test_sigterm_to_one_worker_stops_both_after_the_same_step_with_a_checkpoint(setup,
                                                                                tmp_path):
  _, config = setup
  logdir = str(tmp_path / "run")
  with _two_ranks_training(config, logdir) as (chief, worker):
    worker.send_signal(signal.SIGTERM)
    chief_out, chief_err = chief.communicate(timeout=120)
    _, worker_err = worker.communicate(timeout=120)
  assert (chief.returncode, worker.returncode) == (143, 143), chief_err[-3000:]
  assert "Traceback" not in chief_err + worker_err
  assert worker_err.strip().splitlines()[-1] == "stopped by SIGTERM"
  _check_stopped_by_peer(chief_out, logdir)


@needs_horovod
def test_sigterm_to_one_horovod_rank_stops_the_job_with_a_checkpoint(setup, tmp_path):
  _, config = setup
  logdir = str(tmp_path / "run")
  job, out, err, _ = _horovod_job_with_one_rank_signalled(config, logdir, signal.SIGTERM)
  assert job.returncode != 0
  assert "Traceback" not in err, err[-3000:]
  _check_stopped_by_peer(out, logdir)


# ---------------------------------------------------------------------- the toy Transformer
def _transformer_args(data_dir, logdir, batch, *extra):
  from tests.helpers import toy  # pylint: disable=import-outside-toplevel
  no_dropout = [f"--{side}_params/{key}=0.0" for side in ("encoder", "decoder")
                for key in ("attention_dropout", "relu_dropout", "layer_postprocess_dropout")]
  return ([f"--config_file={toy.TOY_CONFIG}", "--mode=train", f"--logdir={logdir}"] +
          toy.TINY_MODEL + toy.data_overrides(data_dir) + toy.split_overrides(data_dir, "train") +
          no_dropout + ["--data_layer_params/shuffle=False", "--data_layer_params/max_length=None",
                        "--max_steps=3", f"--batch_size_per_gpu={batch}", *extra])


def test_toy_transformer_towers_and_workers_match_one_process(setup, tmp_path):
  root, _ = setup
  data = str(root / "data")
  single = str(tmp_path / "single")
  _check(h.run("single", _transformer_args(data, single, 16)))
  for name, launcher, extra in (("towers", "single", ["--cpu_towers=2"]),
                                ("workers", "launch", [])):
    logdir = str(tmp_path / name)
    _check(h.run(launcher, _transformer_args(data, logdir, 8, *extra)))
    difference = h.max_difference(h.weights(logdir), h.weights(single))
    assert difference < WEIGHT_TOLERANCE, (name, difference)
