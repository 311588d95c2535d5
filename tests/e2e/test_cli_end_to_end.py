"""End-to-end CLI runs on tiny generated data: train -> resume -> eval -> infer, and the
errors a user can cause (each one line, non-zero exit, nothing overwritten)."""

import json
import os
import random
import re
import signal
import stat
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers import toy

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return toy.make_toy_data(str(tmp_path_factory.mktemp("toy")))


def base_args(data_dir, logdir, mode="train", split="train"):
  return ([f"--config_file={toy.TOY_CONFIG}", f"--mode={mode}", f"--logdir={logdir}"] +
          toy.TINY_MODEL + toy.data_overrides(data_dir) + toy.split_overrides(data_dir, split))


@pytest.fixture(scope="module")
def trained(data_dir, tmp_path_factory):
  """A tiny run trained for 20 steps (train_eval), shared by the tests below."""
  logdir = str(tmp_path_factory.mktemp("run") / "logdir")
  args = base_args(data_dir, logdir, "train_eval") + ["--max_steps=20",
                                                       "--save_checkpoint_steps=10"]
  # eval_params points at dev through the config's eval dict; overrides apply to both modes,
  # so the split overrides above make eval read the train split, which is fine here.
  result = toy.run_cli(args)
  assert result.returncode == 0, result.stderr[-3000:]
  return logdir, result


def _weights(logdir):
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(logdir))
  return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
          if k.startswith("model/")}


def test_train_eval_writes_run_and_logs(trained):
  logdir, result = trained
  assert tf.train.latest_checkpoint(logdir).endswith("ckpt-20")
  assert os.path.isfile(os.path.join(logdir, "config.txt"))
  assert any(name.startswith("events.out") for name in os.listdir(logdir))
  lines = [l for l in result.stdout.splitlines() if "| loss" in l]
  assert len(lines) == 4  # print_loss_steps=5 over 20 steps
  assert "tokens/s" in lines[-1] and "lr" in lines[-1] and "epoch" in lines[-1]
  assert "eval at step 20" in result.stdout and "BLEU" in result.stdout
  assert os.path.isfile(os.path.join(logdir, "best_models", "best.json"))


def _logged_steps(logdir):
  with open(os.path.join(logdir, "metrics.jsonl"), encoding="utf-8") as f:
    records = [json.loads(line) for line in f]
  return [r["step"] for r in records if "train/loss" in r]


def test_resume_eval_infer(trained, data_dir, tmp_path):
  logdir, _ = trained
  # As if the first run had logged step 23 and then been killed before its next checkpoint:
  # the resumed run trains and logs steps 21.. again, and the log must not hold both.
  with open(os.path.join(logdir, "metrics.jsonl"), "a", encoding="utf-8") as f:
    f.write(json.dumps({"step": 23, "train/loss": 99.0}) + "\n" + '{"step": 24, "lo')
  resumed = toy.run_cli(base_args(data_dir, logdir) + ["--max_steps=25", "--continue_learning"])
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "at step 20" in resumed.stdout
  assert tf.train.latest_checkpoint(logdir).endswith("ckpt-25")
  assert _logged_steps(logdir) == [5, 10, 15, 20, 25]

  evaluated = toy.run_cli(base_args(data_dir, logdir, "eval", "dev"))
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  assert "eval at step 25" in evaluated.stdout and "BLEU" in evaluated.stdout

  out = tmp_path / "pred.txt"
  out.write_text("an older output\n")
  os.chmod(out, 0o640)
  inferred = toy.run_cli(base_args(data_dir, logdir, "infer", "test") +
                         [f"--infer_output_file={out}"])
  assert inferred.returncode == 0, inferred.stderr[-3000:]
  assert f"--infer_output_file {out} exists: inference overwrites it" in inferred.stdout
  assert stat.S_IMODE(os.stat(out).st_mode) == 0o640  # its mode, not a temporary's 0600
  predictions = out.read_text().splitlines()
  sources = open(os.path.join(data_dir, "test", "source.txt")).read().splitlines()
  assert len(predictions) == len(sources)
  assert "BLEU" in inferred.stdout


def test_infer_writes_the_n_best_hypotheses_with_scores(trained, data_dir, tmp_path):
  logdir, _ = trained
  out = tmp_path / "nbest.tsv"
  inferred = toy.run_cli(base_args(data_dir, logdir, "infer", "test") + [
      f"--infer_output_file={out}", "--decoder_params/beam_size=4",
      "--decoder_params/n_best=3"])
  assert inferred.returncode == 0, inferred.stderr[-3000:]
  assert "BLEU" in inferred.stdout  # of the best hypotheses
  rows = [line.split("\t") for line in out.read_text().splitlines()]
  sources = open(os.path.join(data_dir, "test", "source.txt")).read().splitlines()
  assert len(rows) == 3 * len(sources) and all(len(row) == 3 for row in rows)
  assert [int(row[0]) for row in rows] == [i for i in range(len(sources)) for _ in range(3)]
  for i in range(len(sources)):
    scores = [float(row[1]) for row in rows[3 * i:3 * i + 3]]
    texts = [row[2] for row in rows[3 * i:3 * i + 3]]
    assert scores == sorted(scores, reverse=True) and len(set(texts)) == 3


def test_interactive_infer_reads_stdin(trained, data_dir):
  logdir, _ = trained
  # It reads what is typed, so the config's data files need not exist.
  args = base_args(data_dir, logdir, "interactive_infer", "test") + [
      "--data_layer_params/source_file=/nonexistent/source.txt",
      "--data_layer_params/target_file=/nonexistent/target.txt"]
  proc = toy.run_cli(args, stdin="1 2 3 4 5\n\n6 7 8\n", timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  answers = [l for l in proc.stdout.splitlines() if not l.startswith("[")]
  assert len(answers) == 2  # one per non-empty input line


def test_logdir_conflict_refuses_and_overwrites_nothing(trained, data_dir):
  logdir, _ = trained
  before = {n: os.path.getmtime(os.path.join(logdir, n)) for n in os.listdir(logdir)}
  result = toy.run_cli(base_args(data_dir, logdir) + ["--max_steps=2"])
  assert result.returncode == 2
  assert "already holds a run" in result.stderr and "--continue_learning" in result.stderr
  assert "Traceback" not in result.stderr
  after = {n: os.path.getmtime(os.path.join(logdir, n)) for n in os.listdir(logdir)}
  assert before == after


def test_a_failed_resume_leaves_the_runs_config_as_it_was(trained, data_dir):
  logdir, _ = trained
  config = os.path.join(logdir, "config.txt")
  before = open(config, encoding="utf-8").read()
  result = toy.run_cli(base_args(data_dir, logdir) + [
      "--continue_learning", "--max_steps=30", "--decoder_params/filter_size=48"])
  assert result.returncode == 2, result.stderr[-2000:]
  last = result.stderr.strip().splitlines()[-1]
  assert "its weights do not fit the model built with decoder_params/filter_size" in last, last
  assert open(config, encoding="utf-8").read() == before


def test_load_model_reports_loaded_and_skipped(trained, data_dir, tmp_path):
  logdir, _ = trained
  # --continue_learning on a logdir without a checkpoint starts afresh, and says so.
  result = toy.run_cli(base_args(data_dir, str(tmp_path / "new")) + [
      "--max_steps=1", f"--load_model={logdir}", "--decoder_params/filter_size=48",
      "--continue_learning"])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "--continue_learning: no checkpoint in" in result.stdout
  assert "training from scratch" in result.stdout
  line = next(l for l in result.stdout.splitlines() if "load_model: initialised" in l)
  loaded = int(line.split("initialised ")[1].split()[0])
  skipped = int(line.split("skipped ")[1].split(":")[0])
  assert loaded > 0 and skipped > 0  # the decoder's FFN kernels changed shape


@pytest.mark.parametrize("extra, message", [
    (["--encoder_params/encoder_layer=2"], "did you mean 'encoder_layers'"),
    (["--decoder_params/beam_size=two"], "decoder_params/beam_size: expected int"),
    (["--data_layer_params/source_file=/nonexistent/source.txt"], "/nonexistent/source.txt"),
])
def test_user_errors_are_one_line(data_dir, tmp_path, extra, message):
  result = toy.run_cli(base_args(data_dir, str(tmp_path / "run")) + ["--max_steps=2"] + extra)
  assert result.returncode == 2, result.stderr[-2000:]
  errors = [l for l in result.stderr.splitlines() if l.startswith("error:")]
  assert len(errors) == 1 and message in errors[0], result.stderr[-2000:]
  assert "Traceback" not in result.stderr
  assert not os.path.exists(tmp_path / "run" / "checkpoint")


def test_empty_line_in_data_is_named(data_dir, tmp_path):
  source = tmp_path / "source.txt"
  lines = open(os.path.join(data_dir, "train", "source.txt")).read().splitlines()
  lines[3] = ""
  source.write_text("\n".join(lines) + "\n")
  result = toy.run_cli(base_args(data_dir, str(tmp_path / "run")) +
                       ["--max_steps=2", f"--data_layer_params/source_file={source}"])
  assert result.returncode == 2
  assert "Traceback" not in result.stderr
  assert f"{source}:4" in result.stderr, result.stderr[-2000:]


def test_an_error_is_the_only_line_on_stderr(data_dir, tmp_path):
  """No TensorFlow start-up chatter before (or after) the project's line, even when the
  user's environment does not quiet TensorFlow."""
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  env["PYTHONPATH"] = toy.ROOT
  result = subprocess.run(
      [sys.executable, os.path.join(toy.ROOT, "run.py"),
       *base_args(data_dir, str(tmp_path / "run")), "--max_steps=2",
       "--data_layer_params/source_file=/nonexistent/source.txt"],
      capture_output=True, text=True, timeout=300, env=env)
  assert result.returncode == 2
  assert result.stderr.splitlines() == [
      "error: source_file /nonexistent/source.txt does not exist; check "
      "data_layer_params/source_file"], result.stderr


def test_missing_config_and_no_checkpoint(data_dir, tmp_path):
  result = toy.run_cli(["--config_file=/nonexistent/config.py", "--mode=train"])
  assert result.returncode == 2 and "does not exist" in result.stderr
  result = toy.run_cli(base_args(data_dir, str(tmp_path / "empty"), "eval", "dev"))
  assert result.returncode == 2 and "no checkpoint found" in result.stderr
  assert "Traceback" not in result.stderr


@pytest.mark.parametrize("sig,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_a_signal_saves_a_checkpoint(data_dir, tmp_path, sig, status):
  logdir = str(tmp_path / "run")
  args = base_args(data_dir, logdir) + ["--max_steps=100000", "--print_loss_steps=1"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=toy.ROOT, PYTHONUNBUFFERED="1")
  # stderr goes to a file: a pipe nobody reads until the end could fill up and stall the run
  err_path = tmp_path / "stderr.txt"
  with open(err_path, "w", encoding="utf-8") as err_file:
    proc = subprocess.Popen([sys.executable, os.path.join(toy.ROOT, "run.py"), *args],
                            stdout=subprocess.PIPE, stderr=err_file, text=True, env=env)
    try:
      deadline = time.time() + 300
      for line in proc.stdout:
        if "| loss" in line and "step      3" in line or time.time() > deadline:
          break
      proc.send_signal(sig)
      out, _ = proc.communicate(timeout=120)
    finally:
      if proc.poll() is None:
        proc.kill()
  err = err_path.read_text(encoding="utf-8")
  assert proc.returncode == status, err[-2000:]
  assert "Traceback" not in err
  assert err.strip().splitlines()[-1] == f"stopped by {sig.name}", err[-2000:]
  checkpoint = tf.train.latest_checkpoint(logdir)
  assert checkpoint is not None and int(checkpoint.rsplit("-", 1)[1]) >= 3
  step = int(checkpoint.rsplit("-", 1)[1])
  assert f"Stopped by {sig.name}: saved a checkpoint at step {step}; resume with " \
         "--continue_learning" in out


def test_resume_equals_uninterrupted(data_dir, tmp_path):
  """N steps straight == N/2 steps, then --continue_learning to N (same seed, dropout on)."""
  straight, split = str(tmp_path / "straight"), str(tmp_path / "split")
  common = ["--save_checkpoint_steps=1000", "--print_loss_steps=None",
            "--save_summaries_steps=None"]
  r = toy.run_cli(base_args(data_dir, straight) + common + ["--max_steps=12"])
  assert r.returncode == 0, r.stderr[-3000:]
  r = toy.run_cli(base_args(data_dir, split) + common + ["--max_steps=6"])
  assert r.returncode == 0, r.stderr[-3000:]
  r = toy.run_cli(base_args(data_dir, split) + common + ["--max_steps=12", "--continue_learning"])
  assert r.returncode == 0, r.stderr[-3000:]
  a, b = _weights(straight), _weights(split)
  assert a.keys() == b.keys() and len(a) > 10
  for key in a:
    np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-6, err_msg=key)


def _newest_saved_step(logdir):
  """The step of the newest checkpoint file in ``logdir`` (0: none yet). Not "does ckpt-5
  exist": a fast run saves and rotates it out between two looks."""
  try:
    names = os.listdir(logdir)
  except FileNotFoundError:
    return 0
  steps = [int(m.group(1)) for m in map(re.compile(r"ckpt-(\d+)\.index$").match, names) if m]
  return max(steps, default=0)


def test_kill_9_during_saves_leaves_a_newest_checkpoint_that_loads(data_dir, tmp_path):
  """SIGKILL at a random moment of a run that saves at every step: the newest listed
  checkpoint reads, and resuming from it reaches the uninterrupted run's weights."""
  straight, killed = str(tmp_path / "straight"), str(tmp_path / "killed")
  common = ["--max_steps=30", "--save_checkpoint_steps=1", "--print_loss_steps=None",
            "--save_summaries_steps=None"]
  r = toy.run_cli(base_args(data_dir, straight) + common)
  assert r.returncode == 0, r.stderr[-3000:]
  delay = random.Random().uniform(0.0, 0.5)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=toy.ROOT)
  proc = subprocess.Popen([sys.executable, os.path.join(toy.ROOT, "run.py"),
                           *base_args(data_dir, killed), *common], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    deadline = time.time() + 300
    while _newest_saved_step(killed) < 5 and time.time() < deadline:
      time.sleep(0.05)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
  finally:
    if proc.poll() is None:
      proc.kill()
  newest = tf.train.latest_checkpoint(killed)
  assert newest is not None, f"no checkpoint listed (killed {delay:.3f} s after step 5)"
  reader = tf.train.load_checkpoint(newest)
  for key, dtype in reader.get_variable_to_dtype_map().items():
    if dtype != tf.variant:  # the data position: read back by the resume below
      reader.get_tensor(key)
  r = toy.run_cli(base_args(data_dir, killed) + common + ["--continue_learning"])
  assert r.returncode == 0, r.stderr[-3000:]
  a, b = _weights(straight), _weights(killed)
  for key in a:
    np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-6,
                               err_msg=f"{key} (killed {delay:.3f} s after step 5 was saved)")


def test_pure_float16_trains_the_toy_config(data_dir, tmp_path):
  """Its Adam epsilon (1e-9) is 0 in float16: the update is made in float32 (issue 18)."""
  result = toy.run_cli(base_args(data_dir, str(tmp_path / "run")) + [
      "--dtype=float16", "--loss_scaling=Backoff", "--max_steps=40", "--print_loss_steps=5"])
  assert result.returncode == 0, result.stderr[-3000:]
  losses = [float(l.split("| loss ")[1].split()[0]) for l in result.stdout.splitlines()
            if "| loss" in l]
  assert len(losses) == 8 and losses[-1] < 0.8 * losses[0], losses
  weights = _weights(str(tmp_path / "run"))
  assert all(np.isfinite(w).all() for w in weights.values())
  assert any(w.dtype == np.float16 for w in weights.values())


def test_benchmark_prints_table_and_saves_nothing(data_dir, tmp_path):
  logdir = tmp_path / "bench"
  result = toy.run_cli(base_args(data_dir, str(logdir)) + ["--benchmark", "--bench_steps=6",
                                                           "--bench_start=2"])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "median tokens/s" in result.stdout and "peak memory" in result.stdout
  assert not (logdir / "checkpoint").exists()


def test_help_params_lists_components(data_dir):
  result = toy.run_cli([f"--config_file={toy.TOY_CONFIG}", "--help_params"] +
                       toy.data_overrides(data_dir) + toy.split_overrides(data_dir, "train"))
  assert result.returncode == 0, result.stderr[-2000:]
  for name in ("TransformerEncoder", "TransformerDecoder", "ParallelTextDataLayer",
               "`encoder_layers`", "`batch_size_per_gpu`"):
    assert name in result.stdout


NO_DROPOUT = [f"--{part}_params/{key}=0.0" for part in ("encoder", "decoder")
              for key in ("attention_dropout", "relu_dropout", "layer_postprocess_dropout")]


def test_iter_size_equals_one_large_batch(data_dir, tmp_path):
  """iter_size=2 with batch 8 makes the same updates as iter_size=1 with batch 16."""
  common = NO_DROPOUT + ["--data_layer_params/shuffle=False", "--max_steps=3",
                         "--print_loss_steps=None", "--save_summaries_steps=None"]
  large, accumulated = str(tmp_path / "large"), str(tmp_path / "accumulated")
  r = toy.run_cli(base_args(data_dir, large) + common + ["--batch_size_per_gpu=16"])
  assert r.returncode == 0, r.stderr[-3000:]
  r = toy.run_cli(base_args(data_dir, accumulated) + common +
                  ["--batch_size_per_gpu=8", "--iter_size=2"])
  assert r.returncode == 0, r.stderr[-3000:]
  a, b = _weights(large), _weights(accumulated)
  initial_differs = False
  for key in a:
    np.testing.assert_allclose(a[key], b[key], rtol=2e-4, atol=2e-6, err_msg=key)
  # and the runs did train: a third run with half the batch and no accumulation differs
  half = str(tmp_path / "half")
  r = toy.run_cli(base_args(data_dir, half) + common + ["--batch_size_per_gpu=8"])
  assert r.returncode == 0, r.stderr[-3000:]
  c = _weights(half)
  initial_differs = any(not np.allclose(a[k], c[k], rtol=2e-4, atol=2e-6) for k in a)
  assert initial_differs


def test_freeze_variables_and_enable_logs(trained, data_dir, tmp_path):
  """Frozen variables keep their loaded values; --enable_logs copies the console to logdir."""
  logdir, _ = trained
  run = tmp_path / "frozen"
  result = toy.run_cli(base_args(data_dir, str(run)) + [
      "--max_steps=3", f"--load_model={logdir}", "--freeze_variables_regex=.*encoder",
      "--enable_logs"])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Freezing" in result.stdout
  before, after = _weights(logdir), _weights(str(run))
  encoder = [k for k in after if "/encoder." in k and "seed_state" not in k]
  decoder = [k for k in after if "/decoder." in k and "seed_state" not in k]
  assert encoder and decoder
  for key in encoder:
    np.testing.assert_array_equal(before[key], after[key], err_msg=key)
  assert any(not np.array_equal(before[k], after[k]) for k in decoder)
  (record,) = (run / "logs").iterdir()  # one folder per run (tests/e2e/test_run_options.py)
  assert "--enable_logs" in (record / "command.txt").read_text()
  assert "Freezing" in (record / "stdout.log").read_text()
