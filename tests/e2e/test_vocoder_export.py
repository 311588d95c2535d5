"""An exported HiFi-GAN vocoder served by scripts/run_export.py (which never imports
open_seq2seq): ``.npy`` mel frames in, one WAV per input line out, at the model's rate and
``frames * hop`` samples long, the same audio whatever the batching and the same as
``interactive_infer`` writes from the same frames; a bad input costs only its own line."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile

from tests.helpers import hifigan as h
from tests.helpers import toy

RUN_EXPORT = os.path.join(toy.ROOT, "scripts", "run_export.py")
HOP, RATE, MELS = 64, 8000, 16

pytestmark = pytest.mark.slow


def serve(export_dir, inputs, output_dir, *extra):
  """run_export.py in a clean process that must not import open_seq2seq."""
  code = ("import runpy, sys\nsys.argv = sys.argv[1:]\n"
          "try:\n  runpy.run_path(sys.argv[0], run_name='__main__')\n"
          "except SystemExit as e:\n  code = e.code\nelse:\n  code = 0\n"
          "assert not [m for m in sys.modules if m.startswith('open_seq2seq')], 'imported'\n"
          "sys.exit(code)\n")
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  return subprocess.run([sys.executable, "-c", code, RUN_EXPORT, export_dir, inputs,
                         "--output_dir", output_dir, *extra], capture_output=True, text=True,
                        timeout=300, env=dict(env, TF_CPP_MIN_LOG_LEVEL="2"), cwd="/")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  root = tmp_path_factory.mktemp("vocoder_export")
  config = h.write_tiny_config(str(root))
  common = [f"--config_file={config}", f"--logdir={root / 'run'}"]
  done = toy.run_cli(common + ["--mode=train", "--max_steps=1"])
  assert done.returncode == 0, done.stderr[-3000:]
  done = toy.run_cli(common + ["--mode=export", f"--export_dir={root / 'export'}"])
  assert done.returncode == 0, done.stderr[-3000:]
  # the mel frames of two held-out tones of different lengths, as the data layer makes them
  from open_seq2seq.data import VocoderDataLayer  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  layer = VocoderDataLayer({"num_audio_features": MELS, "sampling_rate": RATE, "n_fft": 256,
                            "hop_length": HOP, "mel_type": "slaney", "mag_power": 1},
                           mode="interactive_infer")
  paths = []
  for i, seconds in enumerate((0.1, 0.23)):
    mel = layer.frames_and_audio(tf.constant(h.tones(1, 20 + i, seconds, RATE)[0][0]))[0]
    paths.append(str(root / f"mel{i}.npy"))
    np.save(paths[-1], mel.numpy())
  return root, common, paths


def test_the_exported_vocoder_writes_a_wav_per_mel_file(exported):
  root, common, paths = exported
  metadata = json.loads((root / "export" / "assets.extra" / "open_seq2seq.json").read_text())
  assert metadata["model"] == "HiFiGAN"
  inputs = root / "inputs.txt"
  inputs.write_text("\n".join(paths) + "\n", encoding="utf-8")
  done = serve(str(root / "export"), str(inputs), str(root / "batched"), "--batch_size=2")
  assert done.returncode == 0, done.stderr[-3000:]
  frames = [len(np.load(p)) for p in paths]
  assert frames[0] != frames[1]
  lines = done.stdout.splitlines()
  assert lines == [f"{root / 'batched' / f'{i}.wav'} ({n * HOP / RATE:.2f} s)"
                   for i, n in zip((1, 2), frames)]
  batched = []
  for i, n in zip((1, 2), frames):
    audio, rate = soundfile.read(str(root / "batched" / f"{i}.wav"), dtype="float32")
    assert rate == RATE and len(audio) == n * HOP and np.abs(audio).max() > 0
    batched.append(audio)

  # one at a time, with a bad line between: the same audio, the bad line reported alone
  bad = root / "bad.npy"
  np.save(bad, np.zeros([5, MELS + 1], np.float32))
  inputs.write_text(f"{paths[0]}\n{bad}\n{paths[1]}\n", encoding="utf-8")
  done = serve(str(root / "export"), str(inputs), str(root / "single"), "--batch_size=1")
  assert done.returncode == 1, done.stderr[-3000:]
  assert f"inputs.txt:2: {bad} holds a float32 array of shape (5, {MELS + 1})" in done.stderr
  assert sorted(os.listdir(root / "single")) == ["1.wav", "3.wav"]
  for name, expected in zip(("1.wav", "3.wav"), batched):
    audio, _ = soundfile.read(str(root / "single" / name), dtype="float32")
    np.testing.assert_allclose(audio, expected, atol=2 / 32768)

  # interactive_infer vocodes the same frames into the same samples
  heard = toy.run_cli(common + ["--mode=interactive_infer"], stdin=paths[1] + "\n")
  assert heard.returncode == 0, heard.stderr[-3000:]
  audio, _ = soundfile.read(str(root / "run" / "interactive_audio" / "mel1.wav"),
                            dtype="float32")
  np.testing.assert_allclose(audio, batched[1], atol=2 / 32768)
