"""``run.py --mode=export``: the SavedModel serves in a fresh process that never imports
open_seq2seq (scripts/run_export.py) and gives --mode=infer's outputs on the same inputs."""

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import toy

RUN_EXPORT = os.path.join(toy.ROOT, "scripts", "run_export.py")
#: For the synthesis runs whose audio is compared sample by sample with the SavedModel's:
#: trained with Grappler, not as toy.run_cli's smoke runs are. 60 Griffin-Lim rounds amplify
#: the last bits of the weights, and FastPitch's trained without it put interactive_infer's
#: and the export's samples 16 steps of 16 bits apart once (stop 48; ~3 otherwise).
GRAPPLER_ON = ["--graph_optimizations=True"]


def run_export_script(export_dir: str, inputs: str, output: str, *extra: str) -> None:
  """scripts/run_export.py in a clean process; fails if it imported open_seq2seq."""
  code = ("import runpy, sys\nsys.argv = sys.argv[1:]\n"
          "try:\n  runpy.run_path(sys.argv[0], run_name='__main__')\n"
          "except SystemExit as e:\n  assert not e.code, e.code\n"
          "assert not [m for m in sys.modules if m.startswith('open_seq2seq')], 'imported'\n")
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  done = subprocess.run([sys.executable, "-c", code, RUN_EXPORT, export_dir, inputs,
                         "--output", output, "--batch_size", "7", *extra],
                        capture_output=True, text=True, timeout=300, env=dict(
                            env, TF_CPP_MIN_LOG_LEVEL="2"), cwd="/")
  assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
  """A tiny toy Transformer trained for a few steps, and its --mode=infer predictions."""
  root = tmp_path_factory.mktemp("export")
  data = toy.make_toy_data(str(root / "data"), train=200, dev=10, test=24, seed=3,
                           extra=("--max_length", "12"))
  common = [f"--config_file={toy.TOY_CONFIG}", f"--logdir={root / 'run'}",
            *toy.data_overrides(data), *toy.TINY_MODEL]
  train = toy.run_cli(common + ["--mode=train", "--max_steps=80",
                                *toy.split_overrides(data, "train")])
  assert train.returncode == 0, train.stderr[-3000:]
  infer = toy.run_cli(common + ["--mode=infer", f"--infer_output_file={root / 'infer.txt'}",
                                *toy.split_overrides(data, "test")])
  assert infer.returncode == 0, infer.stderr[-3000:]
  return {"root": root, "data": data, "common": common}


def test_export_serves_what_infer_predicts(toy_run):
  root, common = toy_run["root"], toy_run["common"]
  done = toy.run_cli(common + ["--mode=export", f"--export_dir={root / 'exported'}"])
  assert done.returncode == 0, done.stderr[-3000:]
  assert "serving_default(text) -> text, ids" in done.stdout
  metadata = json.loads((root / "exported" / "assets.extra" / "open_seq2seq.json").read_text())
  assert metadata["model"] == "Text2Text" and metadata["step"] == 80
  assert metadata["signatures"]["serving_default"]["inputs"]["text"]["dtype"] == "string"
  assert not [p for p in os.listdir(root) if ".partial-" in p]

  run_export_script(str(root / "exported"),
                    os.path.join(toy_run["data"], "test", "source.txt"), str(root / "served.txt"))
  infer = (root / "infer.txt").read_text(encoding="utf-8").splitlines()
  served = (root / "served.txt").read_text(encoding="utf-8").splitlines()
  assert len(served) == len(infer) == 24
  assert served == infer


def test_export_serves_the_samples_infer_writes(toy_run):
  """n_best sampled translations: the export returns [batch, n_best] texts and scores, the
  samples --mode=infer drew in another process and in other batches (a sample follows from
  the run's seed and its source sentence)."""
  root, common = toy_run["root"], toy_run["common"]
  sampling = ["--decoder_params/sampling=True", "--decoder_params/n_best=3",
              "--decoder_params/sampling_topk=4"]
  test = os.path.join(toy_run["data"], "test", "source.txt")
  inferred = toy.run_cli(common + sampling + ["--mode=infer", *toy.split_overrides(
      toy_run["data"], "test"), f"--infer_output_file={root / 'sampled.tsv'}"])
  assert inferred.returncode == 0, inferred.stderr[-3000:]
  done = toy.run_cli(common + sampling + ["--mode=export",
                                          f"--export_dir={root / 'exported_nbest'}"])
  assert done.returncode == 0, done.stderr[-3000:]
  assert "serving_default(text) -> text, scores, ids" in done.stdout
  run_export_script(str(root / "exported_nbest"), test, str(root / "served.jsonl"), "--json")
  served = [json.loads(line) for line in
            (root / "served.jsonl").read_text(encoding="utf-8").splitlines()]
  rows = [line.split("\t") for line in
          (root / "sampled.tsv").read_text(encoding="utf-8").splitlines()]
  assert len(served) == 24 and len(rows) == 3 * 24
  for i, out in enumerate(served):
    mine = rows[3 * i:3 * i + 3]
    assert [int(r[0]) for r in mine] == [i] * 3
    assert out["text"] == [r[2] for r in mine]
    assert out["scores"] == pytest.approx([float(r[1]) for r in mine], abs=1e-4)
    assert len(out["ids"]) == 3
  assert any(len(set(out["text"])) > 1 for out in served)  # samples, not one search


def test_export_refuses_an_existing_directory(toy_run):
  existing = toy_run["root"] / "taken"
  existing.mkdir()
  done = toy.run_cli(toy_run["common"] + ["--mode=export", f"--export_dir={existing}"])
  assert done.returncode == 2
  assert "already exists" in done.stderr and len(done.stderr.strip().splitlines()) == 1
  assert os.listdir(existing) == []


def test_export_needs_an_export_dir(toy_run):
  done = toy.run_cli(toy_run["common"] + ["--mode=export"])
  assert done.returncode == 2 and "needs --export_dir" in done.stderr


def test_speech_synthesis_export_speaks_what_interactive_infer_speaks(tmp_path):
  """Tacotron: text in, waveform out; the same samples as interactive_infer's WAV file."""
  import numpy as np
  import soundfile
  from tests.helpers import tts
  overrides, _ = tts.example_config_overrides(str(tmp_path / "data"))
  config = os.path.join(tts.CONFIG_DIR, "tacotron-synthetic-small.py")
  common = [f"--config_file={config}", f"--logdir={tmp_path / 'run'}", *overrides,
            "--decoder_params/max_frames_per_symbol=2.0",
            # Tacotron's prenet dropout is on in every mode: off, both sides are deterministic
            "--decoder_params/prenet_dropout_prob=0.0"]
  train = toy.run_cli(common + ["--mode=train", "--max_steps=3", "--eval_steps=None",
                                "--print_samples_steps=None", *GRAPPLER_ON])
  assert train.returncode == 0, train.stderr[-3000:]
  sentences = ["the cat sat.", "Two  words"]
  # one line: interactive_infer names every line's file interactive_0.wav
  heard = toy.run_cli(common + ["--mode=interactive_infer"], stdin=sentences[1] + "\n")
  assert heard.returncode == 0, heard.stderr[-3000:]
  wavs = [line.split(" (")[0] for line in heard.stdout.splitlines() if ".wav (" in line]
  export = toy.run_cli(common + ["--mode=export", f"--export_dir={tmp_path / 'exported'}"])
  assert export.returncode == 0, export.stderr[-3000:]

  inputs = tmp_path / "inputs.txt"
  inputs.write_text("".join(s + "\n" for s in sentences))
  # one sentence per call, as interactive_infer reads them: an untrained decoder runs to the
  # batch's longest input's frame limit; the audio output is a WAV file per input (issue 38)
  served = tmp_path / "served"
  run_export_script(str(tmp_path / "exported"), str(inputs), str(tmp_path / "out.jsonl"),
                    "--json", "--batch_size", "1", "--output_dir", str(served))
  rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
  assert len(rows) == 2 and len(wavs) == 1
  assert rows[0]["audio_length"] > 0 and rows[0]["spectrogram_length"] > 0
  assert [row["audio"] for row in rows] == [str(served / f"{i}.wav") for i in (1, 2)]
  metadata = json.loads((tmp_path / "exported" / "assets.extra" / "open_seq2seq.json")
                        .read_text())["signatures"]["serving_default"]
  for row in rows:
    audio, rate = soundfile.read(row["audio"], dtype="float32")
    assert rate == metadata["audio_outputs"]["audio"]["sample_rate"]
    assert len(audio) == row["audio_length"]
  for row, wav in zip(rows[1:], wavs):
    expected, _ = soundfile.read(wav, dtype="float32")
    audio, _ = soundfile.read(row["audio"], dtype="float32")
    assert len(audio) == len(expected) > 0
    # both files hold 16-bit samples, and 60 Griffin-Lim rounds amplify float32 rounding
    # (graph vs eager): equal within 16 steps of 16 bits (-66 dB); measured ~3 steps
    assert np.max(np.abs(audio - expected)) < 16 / 32768


def test_fastpitch_export_speaks_what_interactive_infer_speaks(tmp_path):
  """FastPitch: text in, waveform out through the same serving adapter as Tacotron; the
  served audio has interactive_infer's length and samples, and pace 2.0 at export time
  halves it (the model keys reach the exported graph)."""
  import numpy as np
  import soundfile
  from tests.helpers import fastpitch, tts
  overrides, _ = fastpitch.example_config_overrides(str(tmp_path / "data"))
  config = os.path.join(tts.CONFIG_DIR, "fastpitch-synthetic-small.py")
  common = [f"--config_file={config}", f"--logdir={tmp_path / 'run'}", *overrides]
  train = toy.run_cli(common + ["--mode=train", "--max_steps=3", "--eval_steps=None",
                                "--print_samples_steps=None", *GRAPPLER_ON])
  assert train.returncode == 0, train.stderr[-3000:]
  sentence = "Two  words"
  heard = toy.run_cli(common + ["--mode=interactive_infer"], stdin=sentence + "\n")
  assert heard.returncode == 0, heard.stderr[-3000:]
  wav = [line.split(" (")[0] for line in heard.stdout.splitlines() if ".wav (" in line][0]
  inputs = tmp_path / "inputs.txt"
  inputs.write_text(sentence + "\n")
  lengths = {}
  for pace in ("1.0", "2.0"):
    exported = tmp_path / f"exported-{pace}"
    export = toy.run_cli(common + ["--mode=export", f"--export_dir={exported}",
                                   f"--pace={pace}"])
    assert export.returncode == 0, export.stderr[-3000:]
    served = tmp_path / f"served-{pace}"
    run_export_script(str(exported), str(inputs), str(tmp_path / f"out-{pace}.jsonl"), "--json",
                      "--output_dir", str(served))
    row = json.loads((tmp_path / f"out-{pace}.jsonl").read_text().splitlines()[0])
    audio, _ = soundfile.read(row["audio"], dtype="float32")
    lengths[pace] = row["spectrogram_length"]
    assert len(audio) == row["audio_length"] > 0
    if pace == "1.0":
      expected, _ = soundfile.read(wav, dtype="float32")
      assert len(audio) == len(expected)
      assert np.max(np.abs(audio - expected)) < 16 / 32768  # as Tacotron's, above
  # rounding per symbol: half of the frames, give or take one per symbol
  assert abs(lengths["2.0"] - lengths["1.0"] / 2) <= len(sentence) + 2, lengths
  assert lengths["2.0"] < lengths["1.0"]
