"""A tiny HiFi-GAN learns to turn the mel frames of tones into their audio.

Through run.py: train_eval on 64 generated tones (8 kHz, random pitch 150-900 Hz, amplitude
and phase per clip; 16 mel channels, hop 64), both update groups (discriminators, then the
generator on adversarial + 2 x feature matching + 45 x mel L1), evaluated on 8 held-out tones
of other pitches, whole clips synthesized from their mel frames alone.

Thresholds and why: the held-out ``mel_l1`` (mean |log mel difference| over every frame and
channel) must be below

* half the untrained generator's, measured here on the same clips with the run's initial
  weights (the config's seed); and
* the input-blind bound: the mel L1 of the best spectrogram that does not depend on the
  input, per channel the median of the held-out log mel over all frames (a model that
  ignores its mel frames cannot beat it on average: its output is the same for every clip,
  and the median minimises the L1 to a channel's values). Tones of random pitch put their
  energy in different channels, so passing it takes following the input's pitch.

Measured on AMD EPYC (2 cores, AVX-512), random_seed 0, 1, 2: held-out mel L1 0.815, 0.833,
0.878 after 800 steps (0.956, 0.896, 0.894 after 400) against 2.40 untrained and an
input-blind bound of 1.56; about 50 s for the run.py process.
"""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import load_config
from open_seq2seq.distributed.backend import Backend
from open_seq2seq.parts.hifigan import log_mel_spectrogram
from open_seq2seq.training.evaluator import Evaluator, to_numpy
from tests.helpers import hifigan as h
from tests.helpers import toy

pytestmark = pytest.mark.slow

RATE, STEPS = 8000, 800

CONFIG = """
from open_seq2seq.data import VocoderDataLayer
from open_seq2seq.decoders import FakeDecoder
from open_seq2seq.encoders import HiFiGANEncoder
from open_seq2seq.losses import HiFiGANLoss
from open_seq2seq.models import HiFiGAN

base_model = HiFiGAN
base_params = {
    "random_seed": 0, "batch_size_per_gpu": 8, "max_steps": %(steps)d,
    "print_loss_steps": 50, "eval_steps": %(steps)d, "save_checkpoint_steps": %(steps)d,
    "optimizer": "Adam", "optimizer_params": {"learning_rate": 2e-3, "beta1": 0.8,
                                              "beta2": 0.99},
    "encoder": HiFiGANEncoder,
    "encoder_params": {"preset": "v3", "upsample_rates": [4, 4, 4],
                       "upsample_kernel_sizes": [8, 8, 8], "upsample_initial_channel": 32,
                       "resblock_kernel_sizes": [3, 5], "resblock_dilation_sizes": [[1, 2],
                                                                                    [1, 3]]},
    "decoder": FakeDecoder,
    "loss": HiFiGANLoss,
    "loss_params": {"periods": [2, 3, 5], "period_channels": [8, 16, 16], "num_scales": 2,
                    "scale_channels": [8, 16, 16], "scale_kernel_sizes": [15, 21, 5],
                    "scale_strides": [1, 4, 1], "scale_groups": [1, 4, 1]},
    "data_layer": VocoderDataLayer,
    "data_layer_params": {"num_audio_features": 16, "sampling_rate": %(rate)d, "n_fft": 256,
                          "hop_length": 64, "mel_type": "slaney", "mag_power": 1,
                          "segment_size": 1024, "dataset_files": [%(train)r]},
}
eval_params = {"eval_batch_size_per_gpu": 8, "data_layer_params": {"dataset_files": [%(val)r]}}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("hifigan_run"))
  train = h.write_corpus(os.path.join(root, "data"), h.tones(64, 1, 0.25, RATE)[0], RATE,
                         "train.csv", prefix="train")
  val = h.write_corpus(os.path.join(root, "data"), h.tones(8, 2, 0.5, RATE)[0], RATE,
                       "val.csv", prefix="val")
  config = os.path.join(root, "config.py")
  with open(config, "w", encoding="utf-8") as f:
    f.write(CONFIG % {"steps": STEPS, "rate": RATE, "train": train, "val": val})
  result = toy.run_cli([f"--config_file={config}", f"--logdir={root}/logdir",
                        "--mode=train_eval"], cwd=root)
  assert result.returncode == 0, result.stderr[-3000:]
  with open(os.path.join(root, "logdir", "metrics.jsonl"), encoding="utf-8") as f:
    evals = [json.loads(line) for line in f if '"eval/' in line]
  return config, evals[-1]


def baselines(config):
  """(untrained generator's mel L1, input-blind bound) on the held-out clips."""
  cls, loaded = load_config(config, "eval")
  keras.utils.set_random_seed(0)  # the config's random_seed, as run.py sets it
  model = cls(loaded["eval"], "eval")
  untrained = Evaluator(model, Backend()).evaluate(model.data_layer)["mel_l1"]
  mels = []
  for batch in model.data_layer.build_dataset():
    batch = to_numpy(batch)
    audio, lengths = batch["target_tensors"]
    mel, frames = log_mel_spectrogram(tf.constant(audio), tf.constant(lengths),
                                      **model.mel_options)
    mels += [m[:n] for m, n in zip(mel.numpy(), frames.numpy())]
  frames = np.concatenate(mels)
  blind = float(np.mean(np.abs(frames - np.median(frames, axis=0))))
  return untrained, blind


def test_held_out_mel_l1_falls_below_the_untrained_and_the_input_blind_generators(run):
  config, metrics = run
  assert metrics["step"] == STEPS
  untrained, blind = baselines(config)
  assert untrained > blind > 0.5, (untrained, blind)  # the task is not trivial
  assert metrics["eval/mel_l1"] < 0.5 * untrained, (metrics, untrained)
  assert metrics["eval/mel_l1"] < 0.75 * blind, (metrics, blind)
  assert np.isfinite(metrics["eval/mcd"]), metrics
