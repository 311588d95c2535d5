"""``run.py --mode=export --export_format=ctranslate2``: a trained toy Transformer written for
CTranslate2 translates the test set as ``--mode=infer`` does (beam 4), in float32 exactly and
quantized to int8 nearly; ``--export_quantization`` is refused with a SavedModel."""

import json
import os

import pytest

from tests.helpers import toy

ctranslate2 = pytest.importorskip("ctranslate2")

pytestmark = pytest.mark.slow

BEAM = ["--decoder_params/beam_size=4", "--decoder_params/alpha=0.0"]


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
  """A tiny toy Transformer trained for 1500 steps, and its beam-4 --mode=infer output."""
  root = tmp_path_factory.mktemp("ct2")
  data = toy.make_toy_data(str(root / "data"), train=200, dev=10, test=30, seed=3,
                           extra=("--max_length", "10"))
  # No label smoothing: on this 14-token vocabulary it leaves ~1 % of every step's
  # probability on <PAD> and <S>, which CTranslate2 renormalises away and we do not
  # (tests/unit/test_ctranslate2_export.py).
  common = [f"--config_file={toy.TOY_CONFIG}", f"--logdir={root / 'run'}",
            *toy.data_overrides(data), *toy.TINY_MODEL, "--loss_params/label_smoothing=0.0"]
  train = toy.run_cli(common + ["--mode=train", "--max_steps=1500",
                                "--save_checkpoint_steps=1500",
                                *toy.split_overrides(data, "train")])
  assert train.returncode == 0, train.stderr[-3000:]
  infer = toy.run_cli(common + BEAM + ["--mode=infer", f"--infer_output_file={root / 'infer.txt'}",
                                       *toy.split_overrides(data, "test")])
  assert infer.returncode == 0, infer.stderr[-3000:]
  with open(os.path.join(data, "test", "source.txt"), encoding="utf-8") as f:
    sources = f.read().splitlines()
  return {"root": root, "common": common, "sources": sources,
          "infer": (root / "infer.txt").read_text(encoding="utf-8").splitlines()}


def export(toy_run, name, *flags):
  target = toy_run["root"] / name
  done = toy.run_cli(toy_run["common"] + BEAM + [
      "--mode=export", "--export_format=ctranslate2", f"--export_dir={target}", *flags])
  assert done.returncode == 0, done.stderr[-3000:]
  return target, done.stdout


def test_float32_export_translates_as_infer(toy_run):
  from open_seq2seq.serving.ctranslate2_export import TextTranslator
  target, stdout = export(toy_run, "float32")
  assert "CTranslate2 model (float32)" in stdout
  metadata = json.loads((target / "open_seq2seq.json").read_text())
  assert metadata["step"] == 1500 and metadata["model"] == "Text2Text"
  assert metadata["decoding"]["beam_size"] == 4
  assert metadata["checkpoint"].startswith(str(toy_run["root"] / "run"))
  translations = TextTranslator(str(target)).translate(toy_run["sources"])
  assert translations == toy_run["infer"]
  assert len(set(translations)) > 10  # the model says different things


def test_int8_export_is_smaller_and_near(toy_run):
  from open_seq2seq.serving.ctranslate2_export import TextTranslator
  target, stdout = export(toy_run, "int8", "--export_quantization=int8")
  assert "CTranslate2 model (int8)" in stdout
  float32 = toy_run["root"] / "float32"
  if float32.exists():
    assert os.path.getsize(target / "model.bin") < os.path.getsize(float32 / "model.bin")
  translations = TextTranslator(str(target)).translate(toy_run["sources"])
  same = sum(a == b for a, b in zip(translations, toy_run["infer"]))
  assert same >= 0.75 * len(translations), (same, len(translations))


def test_quantization_needs_the_ctranslate2_format(toy_run):
  done = toy.run_cli(toy_run["common"] + ["--mode=export", "--export_quantization=int8",
                                          f"--export_dir={toy_run['root'] / 'saved'}"])
  assert done.returncode == 2
  assert done.stderr.strip().splitlines() == [
      "error: --export_quantization: only for --export_format=ctranslate2"]
  assert not (toy_run["root"] / "saved").exists()


def test_benchmark_prints_a_row_per_engine(toy_run):
  import re
  import subprocess
  import sys
  source = toy_run["root"] / "data" / "test" / "source.txt"
  cmd = [sys.executable, os.path.join(toy.ROOT, "scripts", "bench_ctranslate2.py"),
         f"--config_file={toy.TOY_CONFIG}", f"--logdir={toy_run['root'] / 'run'}",
         f"--source={source}", "--sentences=12", "--batch_size=4", "--threads=1",
         *[f"--extra={flag}" for flag in toy_run["common"][2:]]]
  done = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                        env=dict(os.environ, PYTHONPATH=toy.ROOT))
  assert done.returncode == 0, done.stderr[-3000:]
  assert re.search(r"^CPU: .+ \(\d+ logical cores\); 12 sentences of .+, beam 4, batches of 4",
                   done.stdout, re.M), done.stdout
  rows = dict(re.findall(r"^\| ([^|]+?) \| [\d.]+ \| (\d+)/12 \|$", done.stdout, re.M))
  assert list(rows) == ["run.py --mode=infer", "SavedModel (TensorFlow)", "CTranslate2 float32",
                        "CTranslate2 int8"], done.stdout
  # beam 4 everywhere: the SavedModel and CTranslate2 float32 give infer's lines
  assert rows["run.py --mode=infer"] == rows["SavedModel (TensorFlow)"] == "12"
  assert rows["CTranslate2 float32"] == "12"
