"""Tiny WaveNet corpora (LJSpeech layout) and configs made at test time."""

from __future__ import annotations

import os

import numpy as np

from tests.helpers.tts import write_clips

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG_DIR = os.path.join(ROOT, "example_configs", "text2speech")


def chirp(seconds: float, start_hz: float, end_hz: float, sample_rate: int,
          amplitude: float = 0.5) -> np.ndarray:
  """A linear chirp from ``start_hz`` to ``end_hz``, float32."""
  t = np.arange(int(round(seconds * sample_rate))) / sample_rate
  rate = (end_hz - start_hz) / max(seconds, 1e-9)
  return (amplitude * np.sin(2 * np.pi * (start_hz * t + 0.5 * rate * t * t))).astype(np.float32)


def write_corpus(directory: str, signals: list[np.ndarray], sample_rate: int,
                 name: str = "train.csv", prefix: str = "clip") -> str:
  """``wavs/<prefix><i>.wav`` and a ``name|raw|normalized`` CSV ("Clip i."); returns its path."""
  return write_clips(directory, signals, [f"Clip {i}." for i in range(len(signals))],
                     sample_rate, name, prefix)


def example_config_overrides(directory: str) -> tuple[list[str], int]:
  """Text2SpeechWavenet family: four clips of 30-60 ms at LJSpeech's 22050 Hz (3-6 frames of
  256 samples: inference samples each one step at a time) serve every mode, two per step; the
  model keeps the config's size. Returns the run.py overrides and the number of clips."""
  signals = [chirp(seconds, 200.0 + 150.0 * i, 900.0, 22050)
             for i, seconds in enumerate([0.05, 0.03, 0.06, 0.04])]
  csv_path = write_corpus(directory, signals, 22050)
  return ([f"--data_layer_params/dataset_files=['{csv_path}']",
           f"--data_layer_params/dataset_location={directory}", "--batch_size_per_gpu=2"],
          len(signals))
