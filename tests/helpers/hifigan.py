"""Tiny HiFi-GAN corpora (LJSpeech layout) made at test time."""

from __future__ import annotations

import numpy as np

from tests.helpers.tts import write_clips


def tones(count: int, seed: int, seconds: float, sample_rate: int,
          low: float = 150.0, high: float = 900.0) -> tuple[list[np.ndarray], np.ndarray]:
  """Sines of random pitch (``low``-``high`` Hz), amplitude (0.2-0.6) and phase."""
  rng = np.random.default_rng(seed)
  t = np.arange(int(seconds * sample_rate)) / sample_rate
  freqs = rng.uniform(low, high, count)
  signals = [(rng.uniform(0.2, 0.6) * np.sin(2 * np.pi * f * t + rng.uniform(0, 2 * np.pi))
              ).astype(np.float32) for f in freqs]
  return signals, freqs


def write_corpus(directory: str, signals: list[np.ndarray], sample_rate: int,
                 name: str = "train.csv", prefix: str = "clip") -> str:
  """``wavs/<prefix><i>.wav`` and a ``name|raw|normalized`` CSV ("Clip i."); returns its path."""
  return write_clips(directory, signals, [f"Clip {i}." for i in range(len(signals))],
                     sample_rate, name, prefix)


def example_config_overrides(directory: str) -> tuple[list[str], int]:
  """HiFiGAN family: four tones of 0.12-0.3 s at LJSpeech's 22050 Hz serve every mode, two
  per step: shorter than V1's 8192-sample segments (taken whole) and longer than the small
  config's 4096 at 16 kHz (cropped); the model keeps the config's size. Returns the run.py
  overrides and the number of clips."""
  signals = [tones(1, i, seconds, 22050)[0][0] for i, seconds in enumerate([0.3, 0.12, 0.25,
                                                                             0.15])]
  csv_path = write_corpus(directory, signals, 22050)
  return ([f"--data_layer_params/dataset_files=['{csv_path}']",
           f"--data_layer_params/dataset_location={directory}", "--batch_size_per_gpu=2"],
          len(signals))


TINY_CONFIG = """
from open_seq2seq.data import VocoderDataLayer
from open_seq2seq.decoders import FakeDecoder
from open_seq2seq.encoders import HiFiGANEncoder
from open_seq2seq.losses import HiFiGANLoss
from open_seq2seq.models import HiFiGAN

base_model = HiFiGAN
base_params = {
    "random_seed": 0, "batch_size_per_gpu": 4, "max_steps": 1, "dtype": %(dtype)r,
    "save_checkpoint_steps": 1,
    "optimizer": "Adam", "optimizer_params": {"learning_rate": 1e-3, "beta1": 0.8,
                                              "beta2": 0.99},
    "encoder": HiFiGANEncoder,
    "encoder_params": {"preset": "v3", "upsample_rates": [4, 4, 4],
                       "upsample_kernel_sizes": [8, 8, 8], "upsample_initial_channel": 16,
                       "resblock_kernel_sizes": [3], "resblock_dilation_sizes": [[1, 2]]},
    "decoder": FakeDecoder,
    "loss": HiFiGANLoss,
    "loss_params": {"periods": [2, 3], "period_channels": [4, 8, 8], "num_scales": 2,
                    "scale_channels": [4, 8, 8], "scale_kernel_sizes": [5, 9, 3],
                    "scale_strides": [1, 2, 1], "scale_groups": [1, 2, 1]},
    "data_layer": VocoderDataLayer,
    "data_layer_params": {"num_audio_features": 16, "sampling_rate": 8000, "n_fft": 256,
                          "hop_length": 64, "mel_type": "slaney", "mag_power": 1,
                          "segment_size": 640, "dataset_files": [%(train)r]},
}
eval_params = {"data_layer_params": {"dataset_files": [%(val)r]}}
infer_params = {"data_layer_params": {"dataset_files": [%(val)r]}}
"""


def write_tiny_config(directory: str, dtype: str = "float32") -> str:
  """A 2-update-group HiFi-GAN of a few thousand parameters (8 kHz, 16 mels, hop 64) and its
  corpus: 8 training tones of 0.25 s (longer than the 640-sample segments, so every segment
  has the same length) and 3 held-out ones; returns the config's path."""
  train = write_corpus(directory, tones(8, 11, 0.25, 8000)[0], 8000, "train.csv", "train")
  val = write_corpus(directory, tones(3, 12, 0.2, 8000)[0], 8000, "val.csv", "val")
  path = f"{directory}/config_{dtype}.py"
  with open(path, "w", encoding="utf-8") as f:
    f.write(TINY_CONFIG % {"dtype": dtype, "train": train, "val": val})
  return path
