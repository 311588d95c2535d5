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
