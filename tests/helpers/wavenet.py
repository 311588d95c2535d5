"""Tiny WaveNet corpora (LJSpeech layout) and configs made at test time."""

from __future__ import annotations

import os

import numpy as np

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
  """``wavs/<prefix><i>.wav`` (16-bit PCM) and a header-less ``name|raw|normalized`` CSV;
  returns the CSV's path."""
  import soundfile
  os.makedirs(os.path.join(directory, "wavs"), exist_ok=True)
  lines = []
  for i, signal in enumerate(signals):
    soundfile.write(os.path.join(directory, "wavs", f"{prefix}{i}.wav"), signal, sample_rate,
                    subtype="PCM_16")
    lines.append(f"{prefix}{i}|Clip {i}.|clip {i}.")
  path = os.path.join(directory, name)
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return path


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
