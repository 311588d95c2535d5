"""FastPitch with a HiFi-GAN vocoder, as a user runs them: both trained a few steps on the same
tone clips with the shipped synthetic configs, the vocoder exported, then FastPitch pointed at
that export (``--vocoder/export_dir``). Its ``--mode=export`` is one SavedModel, text in,
waveform out, served by scripts/run_export.py without the toolkit: the waveform is the
in-process FastPitch's mel frames through the in-process HiFi-GAN generator (restored from its
own run), ``pace`` still changes the length, and the WAVs are readable at the vocoder's rate;
``interactive_infer`` and ``infer`` write the same vocoder's audio."""

import csv
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import soundfile

from tests.e2e.test_vocoder_export import RUN_EXPORT, serve
from tests.helpers import fastpitch, toy, tts

pytestmark = pytest.mark.slow

RATE, HOP = 16000, 256  # both synthetic configs' audio keys
SENTENCE = "One two three"


def _serve_samples(export_dir, inputs) -> list[dict]:
  """run_export.py --json without --output_dir, in a process that does not import
  open_seq2seq: every output of each line, the waveform as float samples."""
  code = ("import runpy, sys\nsys.argv = sys.argv[1:]\n"
          "try:\n  runpy.run_path(sys.argv[0], run_name='__main__')\n"
          "finally:\n"
          "  assert not [m for m in sys.modules if m.startswith('open_seq2seq')], 'imported'\n")
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  done = _ok(subprocess.run([sys.executable, "-c", code, RUN_EXPORT, export_dir, inputs,
                             "--json"], capture_output=True, text=True, timeout=300,
                            env=dict(env, TF_CPP_MIN_LOG_LEVEL="2"), cwd="/"))
  return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _ok(done):
  assert done.returncode == 0, done.stderr[-3000:]
  return done


@pytest.fixture(scope="module")
def voice(tmp_path_factory):
  root = tmp_path_factory.mktemp("fastpitch_hifigan")
  overrides, _ = fastpitch.example_config_overrides(str(root / "data"))
  steps = ["--mode=train", "--print_samples_steps=None", "--eval_steps=None"]
  vocoder = [f"--config_file={os.path.join(tts.CONFIG_DIR, 'hifigan-synthetic-small.py')}",
             f"--logdir={root / 'hifigan'}",
             *[o for o in overrides if "pitch_stats_files" not in o]]
  _ok(toy.run_cli(vocoder + steps + ["--max_steps=2"]))
  _ok(toy.run_cli(vocoder + ["--mode=export", f"--export_dir={root / 'hifigan-export'}"]))
  acoustic = [f"--config_file={os.path.join(tts.CONFIG_DIR, 'fastpitch-synthetic-small.py')}",
              f"--logdir={root / 'fastpitch'}", *overrides]
  _ok(toy.run_cli(acoustic + steps + ["--max_steps=3"]))
  with_vocoder = acoustic + [f"--vocoder/export_dir={root / 'hifigan-export'}"]
  for pace in ("1.0", "2.0"):
    _ok(toy.run_cli(with_vocoder + ["--mode=export", f"--export_dir={root / f'export-{pace}'}",
                                    f"--pace={pace}"]))
  # the vocoder's own files are no longer needed: the synthesizer's export holds its weights
  shutil.move(str(root / "hifigan-export"), str(root / "hifigan-export-moved"))
  return root, acoustic, vocoder, overrides


def _in_process_audio(root, acoustic, vocoder, overrides) -> tuple[np.ndarray, int]:
  """FastPitch's mel frames of SENTENCE through the HiFi-GAN generator, both restored from
  their runs in this process; and the number of frames."""
  # pylint: disable=import-outside-toplevel
  import tensorflow as tf
  from open_seq2seq.config import load_config
  from open_seq2seq.distributed.backend import Backend
  from open_seq2seq.training.checkpoints import checkpoint_for_eval
  from open_seq2seq.training.evaluator import Evaluator

  def restored(args, logdir, batch_of, count_unused=True):
    config_file = args[0].split("=", 1)[1]
    base, configs = load_config(config_file, "interactive_infer",
                                [f"--logdir={logdir}"] + list(args[2:]))
    model = base(configs["interactive_infer"], "interactive_infer")
    evaluator = Evaluator(model, Backend(), count_unused=count_unused)
    batch = batch_of(model)
    evaluator.ensure_variables(batch)
    evaluator.restore(checkpoint_for_eval(logdir, False, announce=False))
    return evaluator.predict(batch)

  out = restored(acoustic, str(root / "fastpitch"),
                 lambda m: next(iter(m.data_layer.dataset_from_inputs([SENTENCE]))))
  frames = int(out["final_sequence_lengths"][0])
  mel = out["spectrogram"][0][:frames]
  audio = restored(vocoder, str(root / "hifigan"),
                   lambda m: {"source_tensors": (tf.constant(mel[None]), tf.constant([frames]))},
                   count_unused=False)  # the discriminators' weights are not read
  return np.asarray(audio["audio"][0][:int(audio["audio_lengths"][0])]), frames


def test_the_export_speaks_through_the_hifigan_generator(voice):
  root, acoustic, vocoder, overrides = voice
  metadata = json.loads((root / "export-1.0" / "assets.extra" / "open_seq2seq.json")
                        .read_text())
  described = metadata["signatures"]["serving_default"]
  assert described["vocoder"]["model"] == "HiFiGAN"
  assert described["audio_outputs"]["audio"]["sample_rate"] == RATE
  inputs = root / "inputs.txt"
  inputs.write_text(SENTENCE + "\n", encoding="utf-8")

  # served by TensorFlow alone (the vocoder's export is gone from its place): the samples...
  exported = _serve_samples(str(root / "export-1.0"), str(inputs))
  assert len(exported) == 1
  frames = exported[0]["spectrogram_length"]
  samples = np.asarray(exported[0]["audio"], np.float32)[:exported[0]["audio_length"]]
  assert len(samples) == exported[0]["audio_length"] == frames * HOP
  expected, expected_frames = _in_process_audio(root, acoustic, vocoder, overrides)
  assert expected_frames == frames and len(expected) == frames * HOP
  assert np.ptp(expected) > 0 and np.abs(expected).max() > 1e-4  # a few steps: quiet
  np.testing.assert_allclose(samples, expected, rtol=1e-4, atol=1e-7)

  # ... and as a WAV at the vocoder's rate
  done = _ok(serve(str(root / "export-1.0"), str(inputs), str(root / "served")))
  assert done.stdout.strip() == f"{root / 'served' / '1.wav'} ({frames * HOP / RATE:.2f} s)"
  served, rate = soundfile.read(str(root / "served" / "1.wav"), dtype="float32")
  assert rate == RATE
  np.testing.assert_allclose(served, expected, atol=1 / 32768)

  # pace 2: half the frames (give or take one per symbol), hop samples each
  _ok(serve(str(root / "export-2.0"), str(inputs), str(root / "fast")))
  fast, rate = soundfile.read(str(root / "fast" / "1.wav"), dtype="float32")
  assert rate == RATE and len(fast) % HOP == 0
  assert abs(len(fast) / HOP - frames / 2) <= len(SENTENCE) + 2 and len(fast) < len(served)


def test_interactive_infer_and_infer_write_the_vocoders_audio(voice):
  root, acoustic, _, overrides = voice
  shutil.copytree(str(root / "hifigan-export-moved"), str(root / "hifigan-export-2"))
  with_vocoder = acoustic + [f"--vocoder/export_dir={root / 'hifigan-export-2'}"]
  heard = _ok(toy.run_cli(with_vocoder + ["--mode=interactive_infer"],
                          stdin=SENTENCE + "\n"))
  wav = [line.split(" (")[0] for line in heard.stdout.splitlines() if ".wav (" in line][0]
  audio, rate = soundfile.read(wav, dtype="float32")
  served, _ = soundfile.read(str(root / "served" / "1.wav"), dtype="float32")
  assert rate == RATE
  np.testing.assert_allclose(audio, served, atol=2 / 32768)

  table = root / "infer.csv"
  _ok(toy.run_cli(with_vocoder + ["--mode=infer", f"--infer_output_file={table}"]))
  with open(table, encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 4
  for row in rows:
    audio, rate = soundfile.read(os.path.join(root / "fastpitch", row["wav_path"]),
                                 dtype="float32")  # an absolute path stays as it is
    assert rate == RATE and len(audio) > 0 and len(audio) % HOP == 0


def test_a_vocoder_of_other_mel_settings_is_refused(voice):
  root, acoustic, _, _ = voice
  done = toy.run_cli(acoustic + [f"--vocoder/export_dir={root / 'hifigan-export-moved'}",
                                 "--data_layer_params/hop_length=128", "--mode=export",
                                 f"--export_dir={root / 'refused'}"])
  assert done.returncode == 2
  assert done.stderr.strip().splitlines()[-1] == (
      f"error: vocoder: export_dir {root / 'hifigan-export-moved'} was trained with "
      f"hop_length 256 but the acoustic model's data layer has 128; train the vocoder with "
      f"the acoustic model's audio keys")
  assert not os.path.exists(root / "refused")
