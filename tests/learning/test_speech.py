"""End to end on synthetic speech through run.py: the toy Wave2Letter config learns to
transcribe held-out utterances (WER < 0.25), and eval, infer and interactive infer work on
the trained run."""

import csv
import os
import shutil

import pytest

from open_seq2seq.utils.metrics import word_error_rate
from tests.helpers import shared_data, toy, word_timestamps
from tests.helpers.speech import CONFIG_DIR, VOCAB, held_out_wer
from tests.helpers.speech import load_script

pytestmark = pytest.mark.slow

CONFIG = os.path.join(CONFIG_DIR, "w2l_toy_synthetic.py")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
  """A working directory of this module holding data/synthetic_speech (the toy config's
  relative paths): one corpus for the session, linked (tests/helpers/shared_data.py; the
  speech learning modules import this fixture)."""
  if not (shutil.which("espeak-ng") and shutil.which("flite")):
    pytest.skip("espeak-ng/flite not installed (Debian packages espeak-ng, flite)")
  corpus = shared_data.shared_directory(
      tmp_path_factory, "synthetic_speech-400-40-40",
      lambda directory: load_script("make_synthetic_speech").make_corpus(
          directory, {"train": 400, "dev": 40, "test": 40}, seed=0))
  return shared_data.linked_into(str(tmp_path_factory.mktemp("speech_run")),
                                 "data/synthetic_speech", corpus)


def run(workdir, mode, *extra, stdin=None):
  args = [f"--config_file={CONFIG}", f"--mode={mode}", f"--logdir={workdir}/logdir",
          f"--data_layer_params/vocab_file={VOCAB}", *extra]
  return toy.run_cli(args, cwd=workdir, stdin=stdin)


@pytest.fixture(scope="module")
def trained(workdir):
  result = run(workdir, "train_eval")
  assert result.returncode == 0, result.stderr[-3000:]
  return result


def read_rows(path):
  with open(path, encoding="utf-8", newline="") as f:
    return list(csv.DictReader(f))


def test_train_eval_reports_wer_and_samples(trained, workdir):
  out = trained.stdout
  assert "Sample target:" in out and "Sample prediction:" in out
  assert "eval at step 600" in out and "WER" in out and "CER" in out
  assert os.path.isfile(os.path.join(workdir, "logdir", "best_models", "best.json"))


def test_learns_to_transcribe_held_out_speech(trained, workdir):
  output = os.path.join(workdir, "test_predictions.csv")
  result = run(workdir, "infer", f"--infer_output_file={output}")
  assert result.returncode == 0, result.stderr[-3000:]
  wer = held_out_wer(output, os.path.join(workdir, "data", "synthetic_speech", "test.csv"))
  assert wer < 0.25, f"held-out WER {wer:.3f}"
  assert "WER" in result.stdout  # the infer CSV has transcripts, so it is scored too


def test_word_timestamps_of_words_spoken_one_by_one(trained, workdir):
  """The greedy CTC path's token runs, calibrated, give word boundaries on held-out words
  synthesised one by one (tests/helpers/word_timestamps.py; measured in
  docs/speech-recognition.md#word-timestamps)."""
  word_timestamps.check(word_timestamps.measure(
      workdir, lambda *extra: run(workdir, "infer", *extra), "ctc"))


def test_eval_and_interactive_infer(trained, workdir):
  evaluated = run(workdir, "eval")
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  assert "eval at step 600" in evaluated.stdout and "WER" in evaluated.stdout
  wav = os.path.join(workdir, "data", "synthetic_speech", "test", "000000.wav")
  expected = read_rows(os.path.join(workdir, "data", "synthetic_speech", "test.csv"))[0]
  interactive = run(workdir, "interactive_infer", stdin=f"{wav}\nno/such/file.wav\n")
  assert interactive.returncode == 0, interactive.stderr[-3000:]
  lines = [l for l in interactive.stdout.splitlines() if l and not l.startswith("[")]
  assert lines and word_error_rate([expected["transcript"]], [lines[0]]) <= 0.5, lines
  assert "no/such/file.wav: audio file not found" in interactive.stderr


def test_export_transcribes_as_infer_does(trained, workdir, tmp_path):
  """The SavedModel (waveform in, greedy CTC transcript out, features in the graph) served
  without open_seq2seq gives --mode=infer's transcripts of the test WAV files."""
  from tests.e2e.test_export import run_export_script
  output = str(tmp_path / "infer.csv")
  inferred = run(workdir, "infer", f"--infer_output_file={output}")
  assert inferred.returncode == 0, inferred.stderr[-3000:]
  exported = run(workdir, "export", f"--export_dir={tmp_path / 'exported'}")
  assert exported.returncode == 0, exported.stderr[-3000:]
  assert "serving_default(waveform, length) -> text, ids, ids_length" in exported.stdout
  rows = read_rows(output)
  data = os.path.join(workdir, "data", "synthetic_speech")
  inputs = tmp_path / "wavs.txt"
  inputs.write_text("".join(os.path.join(data, r["wav_filename"]) + "\n" for r in rows))
  run_export_script(str(tmp_path / "exported"), str(inputs), str(tmp_path / "served.txt"))
  served = (tmp_path / "served.txt").read_text(encoding="utf-8").splitlines()
  assert served == [r["predicted_transcript"] for r in rows]


def test_duration_batches_infer_in_file_order_and_train_resumably(trained, workdir, tmp_path):
  """``batching: "duration"`` through run.py: infer gives the rows of one-bucket batching in
  file order (the same transcripts up to padding's round-off), and a bucketed training run
  resumes from its checkpoint."""
  duration = ["--data_layer_params/batching=duration", "--data_layer_params/batch_duration=24"]
  outputs = {}
  for name, extra in (("examples", []), ("duration", duration)):
    outputs[name] = str(tmp_path / f"{name}.csv")
    result = run(workdir, "infer", f"--infer_output_file={outputs[name]}", *extra)
    assert result.returncode == 0, result.stderr[-3000:]
  plain, bucketed = read_rows(outputs["examples"]), read_rows(outputs["duration"])
  assert [r["wav_filename"] for r in bucketed] == [r["wav_filename"] for r in plain]
  same = sum(a["predicted_transcript"] == b["predicted_transcript"]
             for a, b in zip(plain, bucketed))
  assert same >= len(plain) - 2, f"{same} of {len(plain)} transcripts equal"

  logdir = str(tmp_path / "duration_run")
  args = [f"--config_file={CONFIG}", "--mode=train", f"--logdir={logdir}",
          f"--data_layer_params/vocab_file={VOCAB}", "--save_checkpoint_steps=2", *duration]
  first = toy.run_cli(args + ["--max_steps=2"], cwd=workdir)
  assert first.returncode == 0, first.stderr[-3000:]
  resumed = toy.run_cli(args + ["--max_steps=4", "--continue_learning"], cwd=workdir)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "at step 2" in resumed.stdout, resumed.stdout[-2000:]
  assert os.path.isfile(os.path.join(logdir, "ckpt-4.index"))
