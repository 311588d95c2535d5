"""Tiny speech-synthesis corpora (LJSpeech layout) made at test time."""

from __future__ import annotations

import glob
import os

import numpy as np

from tests.helpers.speech import load_script, tone

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCAB = os.path.join(ROOT, "open_seq2seq", "test_utils", "vocab_tts.txt")
CONFIG_DIR = os.path.join(ROOT, "example_configs", "text2speech")


def write_clips(directory: str, signals: list, transcripts: list[str], sample_rate: int,
                name: str = "train.csv", prefix: str = "utt") -> str:
  """``wavs/<prefix><i>.wav`` (16-bit PCM) and a header-less ``name|raw|normalized`` CSV of
  the transcripts; returns the CSV's path."""
  import soundfile
  os.makedirs(os.path.join(directory, "wavs"), exist_ok=True)
  lines = []
  for i, (signal, text) in enumerate(zip(signals, transcripts)):
    soundfile.write(os.path.join(directory, "wavs", f"{prefix}{i}.wav"), signal, sample_rate,
                    subtype="PCM_16")
    lines.append(f"{prefix}{i}|{text}|{text.lower()}")
  path = os.path.join(directory, name)
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return path


def write_corpus(directory: str, transcripts: list[str], durations: list[float],
                 sample_rate: int = 16000, name: str = "train.csv") -> str:
  """Tones of the given durations as ``wavs/utt<i>.wav`` and a ``name|raw|normalized`` CSV;
  returns the CSV's path."""
  signals = [tone(seconds, 300.0 + 60.0 * i, sample_rate, seed=i)
             for i, seconds in enumerate(durations)]
  return write_clips(directory, signals, transcripts, sample_rate, name)


def example_config_overrides(directory: str) -> tuple[list[str], int]:
  """Text2Speech family: four short clips serve every mode, two per step (the model keeps the
  config's size). Returns the run.py overrides and the number of utterances."""
  transcripts = ["One two.", "Three!", "Four, five?", "Six"]
  csv_path = write_corpus(directory, transcripts, durations=[0.5, 0.3, 0.45, 0.25])
  return ([f"--data_layer_params/dataset_files=['{csv_path}']",
           f"--data_layer_params/dataset_location={directory}", "--batch_size_per_gpu=2"],
          len(transcripts))


def make_synthetic_corpus(directory: str, splits: dict[str, int], seed: int = 0,
                          speeds: tuple[int, ...] = (160,)) -> dict:
  """The espeak-ng single-voice corpus of scripts/make_synthetic_speech.py --tts."""
  return load_script("make_synthetic_speech").make_tts_corpus(directory, splits, seed=seed,
                                                              speeds=speeds)


def add_heldout_split(directory: str, name: str, count: int, seed: int,
                      speeds: tuple[int, ...] = (160,)) -> str:
  """Adds ``<name>.csv`` (up to ``count`` sentences, drawn with another ``seed``) to the
  synthetic corpus in ``directory`` without touching its other splits, and without any
  sentence they hold (another seed may draw one again). Returns the CSV's path."""
  path = make_synthetic_corpus(directory, {name: count}, seed=seed, speeds=speeds)[name]
  seen = set()
  for other in glob.glob(os.path.join(directory, "*.csv")):
    if os.path.abspath(other) != os.path.abspath(path):
      with open(other, encoding="utf-8") as f:
        seen.update(line.rstrip("\n").split("|")[-1] for line in f if line.strip())
  with open(path, encoding="utf-8") as f:
    lines = [line for line in f if line.strip() and line.rstrip("\n").split("|")[-1] not in seen]
  with open(path, "w", encoding="utf-8") as f:
    f.writelines(lines)
  return path


def assert_aligned(metrics: dict, stop_accuracy: float | None = 0.8) -> None:
  """Issue 12's learning thresholds on an eval record of metrics.jsonl: teacher-forced band
  mass > 0.8 and focus rate > 0.4, free-running band mass > 0.7, and (unless
  ``stop_accuracy`` is None) at least that share of sentences stopping within 20 % of their
  length (untrained: ~0.2, ~1/N, ~0.2, 0.04)."""
  assert metrics["eval/band_mass"] > 0.8, metrics
  assert metrics["eval/focus_rate"] > 0.4, metrics
  assert metrics["eval/free_band_mass"] > 0.7, metrics
  if stop_accuracy is not None:
    assert metrics["eval/stop_accuracy"] >= stop_accuracy, metrics
