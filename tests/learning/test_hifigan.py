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

Copy synthesis by scripts/compare_vocoders.py, true mel-cepstral distortion (c1 .. c24,
alpha 0.31) of the 8 held-out tones, random_seed 0: the trained generator 14.85 dB after 800
steps (eval ``mcd`` 14.86), 15.17 dB after 1600 steps (97 s), against 25.75 dB untrained and
13.29 dB for Griffin-Lim (50 iterations) from the same frames, although its mel L1 is half
Griffin-Lim's (0.79-0.81 against 1.44). Why: the output carries a DC offset of -0.18 on every
clip, which the mel loss hardly sees (the Slaney filters give the DC bin no weight) and the
MCD sees as a peak at 0 Hz as loud as the tone (the same waveforms without their mean: 11.59
dB); and the tone comes out 25-40 dB too weak, for some pitches a few bins off. The
multi-resolution STFT loss (``loss_params/stft_weight`` 20) removes the offset and gave 11.97
dB after 800 steps, but 12.25-13.45 dB in the variants tried (docs/speech-synthesis.md), so a
1 dB margin over Griffin-Lim is not asserted: the test requires < 0.75 x the untrained MCD.
"""

import functools
import json
import os
import subprocess
import sys

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
COMPARE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "scripts", "compare_vocoders.py")

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
  return config, evals[-1], os.path.join(root, "logdir")


@functools.lru_cache(maxsize=1)
def baselines(config):
  """(untrained generator's mel L1, input-blind bound, untrained generator's MCD) on the
  held-out clips."""
  cls, loaded = load_config(config, "eval")
  keras.utils.set_random_seed(0)  # the config's random_seed, as run.py sets it
  model = cls(loaded["eval"], "eval")
  untrained = Evaluator(model, Backend()).evaluate(model.data_layer)
  mels = []
  for batch in model.data_layer.build_dataset():
    batch = to_numpy(batch)
    audio, lengths = batch["target_tensors"]
    mel, frames = log_mel_spectrogram(tf.constant(audio), tf.constant(lengths),
                                      **model.mel_options)
    mels += [m[:n] for m, n in zip(mel.numpy(), frames.numpy())]
  frames = np.concatenate(mels)
  blind = float(np.mean(np.abs(frames - np.median(frames, axis=0))))
  return untrained["mel_l1"], blind, untrained["mcd"]


def test_held_out_mel_l1_falls_below_the_untrained_and_the_input_blind_generators(run):
  config, metrics, _ = run
  assert metrics["step"] == STEPS
  untrained, blind, _ = baselines(config)
  assert untrained > blind > 0.5, (untrained, blind)  # the task is not trivial
  assert metrics["eval/mel_l1"] < 0.5 * untrained, (metrics, untrained)
  assert metrics["eval/mel_l1"] < 0.75 * blind, (metrics, blind)


def test_copy_synthesis_mel_cepstral_distortion_falls_well_below_the_untrained(run):
  """scripts/compare_vocoders.py on the held-out tones (true mel-cepstra, frame by frame):
  the trained generator's MCD is well below the untrained generator's (its eval ``mcd``,
  measured here before training) and agrees with the run's own eval ``mcd``. Griffin-Lim's
  MCD from the same frames is printed beside it; that this small generator beat it by a
  margin on every seed (issue 35 item 8) is open (module docstring: why it does not)."""
  config, metrics, logdir = run
  done = subprocess.run([sys.executable, COMPARE, f"--config_file={config}",
                         f"--logdir={logdir}", "--json"], capture_output=True, text=True,
                        timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert done.returncode == 0, done.stderr[-3000:]
  result = json.loads(done.stdout.strip().splitlines()[-1])
  assert result["step"] == STEPS and result["clips"] == 8, result
  hifigan, griffin_lim = result["systems"]["HiFi-GAN"], result["systems"]["Griffin-Lim"]
  untrained_mcd = baselines(config)[2]
  print(f"MCD dB: HiFi-GAN {hifigan['mcd_db']:.2f}, Griffin-Lim {griffin_lim['mcd_db']:.2f}, "
        f"untrained {untrained_mcd:.2f}; eval/mcd {metrics['eval/mcd']:.2f}")
  assert hifigan["mcd_db"] < 0.75 * untrained_mcd, (hifigan, untrained_mcd)
  # the script drops each clip's last frame (Griffin-Lim's length); eval keeps it
  assert hifigan["mcd_db"] == pytest.approx(metrics["eval/mcd"], rel=0.05)
  assert np.isfinite(griffin_lim["mcd_db"]) and griffin_lim["clips"] == 8
