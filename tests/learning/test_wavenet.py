"""A tiny WaveNet learns to predict tones from their past samples and mel frames.

Through run.py: train_eval on 256 generated tones (8 kHz, random pitch 150-900 Hz, amplitude
and phase per clip, 64 mu-law bins), evaluated teacher forced on 8 held-out tones of other
pitches; then infer synthesizes the held-out clips from their mel frames alone.

Thresholds and why:

* eval ``cross_entropy`` below half the ``unigram_entropy`` of the eval targets (measured
  with random_seed 0, 1, 2: 1.27, 1.29, 1.34 nats against 3.58). The unigram entropy is the
  cross-entropy of the best model that ignores the past and the conditioning (it predicts the
  bin histogram itself): a model that learns nothing cannot go below it, and an untrained
  WaveNet sits near log(64) = 4.16 nats. A sine's next sample is almost determined by the
  previous two, so a model that uses the context gets far below.
* eval ``accuracy`` of the most likely bin above 0.3 (measured 0.49-0.51), against ~0.05 for
  the best context-free guess (the most frequent bin).
* the synthesized audio's strongest frequency lies within 10 % of the tone's pitch for at
  least 3 of the 8 held-out clips (measured: 5, 6, 6): free-running sampling follows the mel
  conditioning. Noise or a pitch-blind model lands in a 10 % band around a given pitch for a
  few per cent of clips (3 of 8 by chance: ~0.2 %).
"""

import csv
import json
import os

import numpy as np
import pytest
import soundfile

from tests.helpers import toy
from tests.helpers.wavenet import write_corpus

pytestmark = pytest.mark.slow

RATE, STEPS = 8000, 250

CONFIG = """
from open_seq2seq.data import WavenetDataLayer
from open_seq2seq.decoders import FakeDecoder
from open_seq2seq.encoders import WavenetEncoder
from open_seq2seq.losses import WavenetLoss
from open_seq2seq.models import Text2SpeechWavenet
from open_seq2seq.optimizers.lr_policies import poly_decay

base_model = Text2SpeechWavenet
base_params = {
    "random_seed": 0, "batch_size_per_gpu": 8, "max_steps": %(steps)d,
    "print_loss_steps": 50, "eval_steps": %(steps)d, "save_checkpoint_steps": %(steps)d,
    "optimizer": "Adam", "lr_policy": poly_decay,
    "lr_policy_params": {"learning_rate": 6e-3, "decay_steps": %(steps)d, "min_lr": 3e-4},
    "encoder": WavenetEncoder,
    "encoder_params": {"kernel_size": 2, "blocks": 2, "layers_per_block": 6, "filters": 32,
                       "bn_momentum": 0.9},
    "decoder": FakeDecoder,
    "loss": WavenetLoss,
    "data_layer": WavenetDataLayer,
    "data_layer_params": {"num_audio_features": 16, "sampling_rate": %(rate)d, "n_fft": 256,
                          "hop_length": 64, "quantization_channels": 64, "window_size": 512},
}
train_params = {"data_layer_params": {"dataset_files": [%(train)r]}}
eval_params = {"data_layer_params": {"dataset_files": [%(val)r], "window_size": 2048}}
infer_params = {"data_layer_params": {"dataset_files": [%(val)r], "max_infer_frames": 16}}
"""


def tones(count: int, seed: int, seconds: float) -> tuple[list[np.ndarray], np.ndarray]:
  """Sines of random pitch (150-900 Hz), amplitude and phase."""
  rng = np.random.default_rng(seed)
  t = np.arange(int(seconds * RATE)) / RATE
  freqs = rng.uniform(150, 900, count)
  signals = [(rng.uniform(0.2, 0.6) * np.sin(2 * np.pi * f * t + rng.uniform(0, 2 * np.pi))
              ).astype(np.float32) for f in freqs]
  return signals, freqs


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("wavenet_run"))
  train = write_corpus(os.path.join(root, "data"), tones(256, 1, 0.25)[0], RATE, "train.csv",
                       prefix="train")
  val_signals, val_freqs = tones(8, 2, 0.5)
  val = write_corpus(os.path.join(root, "data"), val_signals, RATE, "val.csv", prefix="val")
  config = os.path.join(root, "config.py")
  with open(config, "w", encoding="utf-8") as f:
    f.write(CONFIG % {"steps": STEPS, "rate": RATE, "train": train, "val": val})
  common = [f"--config_file={config}", f"--logdir={root}/logdir"]
  result = toy.run_cli(common + ["--mode=train_eval"], cwd=root)
  assert result.returncode == 0, result.stderr[-3000:]
  return root, common, val_freqs


def test_predicts_tones_far_below_the_unigram_entropy(run):
  root, _, _ = run
  with open(os.path.join(root, "logdir", "metrics.jsonl"), encoding="utf-8") as f:
    evals = [json.loads(line) for line in f if '"eval/' in line]
  metrics = evals[-1]
  assert metrics["step"] == STEPS
  assert metrics["eval/unigram_entropy"] > 3.0, metrics  # the task is not trivial
  assert metrics["eval/cross_entropy"] < 0.5 * metrics["eval/unigram_entropy"], metrics
  assert metrics["eval/accuracy"] > 0.3, metrics


def test_synthesized_clips_follow_the_pitch_of_their_mel_frames(run):
  root, common, freqs = run
  output = os.path.join(root, "infer.csv")
  result = toy.run_cli(common + ["--mode=infer", f"--infer_output_file={output}"], cwd=root)
  assert result.returncode == 0, result.stderr[-3000:]
  with open(output, encoding="utf-8", newline="") as f:
    rows = list(csv.DictReader(f))
  assert [row["name"] for row in rows] == [f"val{i}" for i in range(len(freqs))]
  peaks = []
  for row in rows:
    audio, rate = soundfile.read(row["wav_path"])
    assert rate == RATE and len(audio) == 16 * 64  # max_infer_frames x hop
    spectrum = np.abs(np.fft.rfft(audio * np.hanning(len(audio))))
    peaks.append((np.argmax(spectrum[1:]) + 1) * rate / len(audio))
  close = np.abs(np.array(peaks) / freqs - 1) < 0.1
  assert close.sum() >= 3, list(zip(peaks, freqs))
