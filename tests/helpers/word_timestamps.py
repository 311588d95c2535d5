"""Word timestamps of a trained recognizer on speech whose word boundaries are known, for the
learning tests that already train one (tests/learning/test_speech.py: CTC,
tests/learning/test_conformer_transducer.py: transducer).

Forty utterances of digit words synthesised one by one (``make_synthetic_speech.py
--word_boundaries``: each word trimmed at -40 dB, joined with 0-60 ms of silence) are
transcribed once with raw word times; the calibration (scripts/calibrate_timestamps.py) is
fitted on the first twenty and the boundary error measured on the other twenty, over the
words the recognizer got right. The reference a model without timing gets: every word of the
*reference* transcript given an equal share of the audio.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable

import numpy as np
import soundfile

from tests.helpers.speech import load_script

SPLITS = {"calibrate": 20, "test": 20}


@dataclasses.dataclass(frozen=True)
class Measured:
  matched: int  # held-out words the recognizer got right
  reference_words: int
  start_error: float  # mean absolute error (s) of the calibrated starts, held out
  end_error: float
  even_spread_error: float  # the same for words sharing the audio equally
  mean_word: float  # mean reference word duration (s)
  calibration: object

  @property
  def error(self) -> float:
    """The mean boundary error: starts and ends together."""
    return (self.start_error + self.end_error) / 2

  def line(self) -> str:
    c = self.calibration
    return (f"{self.matched}/{self.reference_words} held-out words matched; mean boundary "
            f"error {self.error:.3f} s (start {self.start_error:.3f}, end {self.end_error:.3f})"
            f", words spread evenly {self.even_spread_error:.3f} s, mean word "
            f"{self.mean_word:.3f} s; offsets {c.start_offset:+.3f} / {c.end_offset:+.3f} s")


def even_spread_error(boundaries: dict[str, list], folder: str) -> float:
  """Mean boundary error of the reference words spread evenly over each utterance's audio."""
  errors = []
  for name, words in boundaries.items():
    duration = soundfile.info(os.path.join(folder, name)).duration
    share = duration / len(words)
    for k, (_, start, end) in enumerate(words):
      errors += [abs(k * share - start), abs((k + 1) * share - end)]
  return float(np.mean(errors))


def measure(workdir: str, infer: Callable, name: str) -> Measured:
  """Word boundaries of the run ``infer(*run.py arguments)`` transcribes with (module doc)."""
  folder = os.path.join(workdir, "data", "word_boundaries")
  csvs = {split: os.path.join(folder, f"{split}.csv") for split in SPLITS}
  if not all(os.path.isfile(path) for path in csvs.values()):
    load_script("make_synthetic_speech").make_corpus(folder, SPLITS, seed=1,
                                                     word_boundaries=True)
  output = os.path.join(workdir, f"{name}_word_times.csv")
  result = infer(f"--infer_output_file={output}", "--word_timestamps=True",
                 f"--data_layer_params/dataset_files={list(csvs.values())}")
  assert result.returncode == 0, result.stderr[-3000:]
  calibrate = load_script("calibrate_timestamps")
  predictions = calibrate.read_words(output, "infer")
  boundaries = {split: calibrate.read_words(path, split) for split, path in csvs.items()}
  fitted = calibrate.fit(calibrate.collect(boundaries["calibrate"], predictions))
  held_out = calibrate.collect(boundaries["test"], predictions)
  start_error, end_error = calibrate.errors(held_out, fitted)
  return Measured(len(held_out.start), held_out.reference_words, start_error, end_error,
                  even_spread_error(boundaries["test"], folder),
                  float(np.mean(held_out.reference_end - held_out.reference_start)), fitted)


def check(measured: Measured) -> None:
  """What a recognizer's word times must reach: most words recognized, and boundaries off by
  less than half the even spread's error and less than a fifth of a word (measured: 0.04 s,
  CTC and transducer, against 0.12 s and words of 0.4 s)."""
  print(measured.line())
  assert measured.matched >= 0.6 * measured.reference_words, measured.line()
  assert measured.error < 0.5 * measured.even_spread_error, measured.line()
  assert measured.error < 0.2 * measured.mean_word, measured.line()
