#!/usr/bin/env python
"""Fits the word-timestamp calibration of a speech recognizer on speech whose word boundaries
are known, and prints the boundary errors before and after it.

CTC and transducer outputs are peaky: a token fires on one frame somewhere in its sound, so
raw word times (``frame * window_stride * time reduction``) are biased. This script fits the
model's ``word_start_offset`` and ``word_end_offset`` (seconds added to every start and end)
and, with ``--fit_scale``, ``word_timestamp_scale`` (a factor on the frame times), choosing
the values of least mean absolute boundary error over the words the recognizer got right
(matched by a minimum edit-distance alignment with the reference words):

    # a trained run: runs run.py --mode=infer on the boundaries CSV (raw times) first
    python scripts/calibrate_timestamps.py --config_file=CONFIG --logdir=LOGDIR \\
        --boundaries=data/word_boundaries/calibrate.csv [--fit_scale] [run.py overrides]
    # or the predictions of such a run (run.py --mode=infer --word_timestamps=True, with
    # the default offsets 0 and scale 1)
    python scripts/calibrate_timestamps.py --boundaries=BOUNDARIES.csv --predictions=infer.csv

The "as predicted" column is the error of the times the run gave: raw ones when the script
runs inference; with ``--predictions`` of a calibrated run on held-out speech, its held-out
error (the fit is then a correction on top of its offsets).

The boundaries CSV is a speech CSV (``wav_filename,wav_filesize,transcript``) with a
``words`` column of ``word:start-end`` items in seconds, the infer CSV's form;
``scripts/make_synthetic_speech.py --word_boundaries`` writes one. The output ends with the
run.py flags (and config keys) that apply the fit.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from open_seq2seq.utils.word_timestamps import match_words, parse_words  # noqa: E402

#: The scales ``--fit_scale`` tries.
SCALES = np.round(np.arange(0.8, 1.2 + 1e-9, 0.001), 3)


@dataclasses.dataclass(frozen=True)
class Matches:
  """Reference and predicted times (s) of the words the recognizer got right."""

  reference_start: np.ndarray
  reference_end: np.ndarray
  start: np.ndarray
  end: np.ndarray
  reference_words: int
  utterances: int


@dataclasses.dataclass(frozen=True)
class Calibration:
  start_offset: float = 0.0
  end_offset: float = 0.0
  scale: float = 1.0

  def flags(self) -> str:
    return (f"--word_start_offset={self.start_offset:.3f} "
            f"--word_end_offset={self.end_offset:.3f} --word_timestamp_scale={self.scale:.3f}")


def read_words(path: str, flag: str, column: str = "words") -> dict[str, list]:
  """``{wav_filename: [(word, start, end), ...]}`` of a CSV with a words column."""
  if not os.path.isfile(path):
    raise SystemExit(f"error: {flag} {path} does not exist")
  rows = {}
  with open(path, encoding="utf-8", newline="") as f:
    reader = csv.DictReader(f)
    if "wav_filename" not in (reader.fieldnames or []) or column not in reader.fieldnames:
      raise SystemExit(f"error: {flag} {path}: needs wav_filename and {column} columns (found "
                       f"{','.join(reader.fieldnames or []) or 'nothing'})")
    for row in reader:
      try:
        rows[row["wav_filename"]] = parse_words(row[column] or "")
      except ValueError as e:
        raise SystemExit(f"error: {flag} {path}:{reader.line_num}: {e}") from None
  return rows


def collect(boundaries: dict[str, list], predictions: dict[str, list]) -> Matches:
  """The matched words' times; every utterance of ``boundaries`` must be predicted."""
  missing = [name for name in boundaries if name not in predictions]
  if missing:
    raise SystemExit(f"error: no prediction for {missing[0]} (and {len(missing) - 1} more); "
                     f"infer on the boundaries CSV")
  times = []
  for name, reference in boundaries.items():
    predicted = predictions[name]
    for i, j in match_words([w for w, _, _ in reference], [w for w, _, _ in predicted]):
      times.append((reference[i][1], reference[i][2], predicted[j][1], predicted[j][2]))
  values = np.array(times, np.float64).reshape(-1, 4)
  return Matches(*values.T, reference_words=sum(len(r) for r in boundaries.values()),
                 utterances=len(boundaries))


def errors(matches: Matches, calibration: Calibration = Calibration()) -> tuple[float, float]:
  """Mean absolute start and end errors (s) of the calibrated times (clamped at 0, as the
  model clamps them)."""
  c = calibration
  start = np.maximum(matches.start * c.scale + c.start_offset, 0.0)
  end = np.maximum(matches.end * c.scale + c.end_offset, start)
  return (float(np.mean(np.abs(start - matches.reference_start))),
          float(np.mean(np.abs(end - matches.reference_end))))


def fit(matches: Matches, fit_scale: bool = False) -> Calibration:
  """The offsets (and scale) of least mean absolute boundary error: for a scale, the best
  offsets are the medians of the differences; scales are tried on a 0.001 grid."""
  best = None
  for scale in (SCALES if fit_scale else [1.0]):
    calibration = Calibration(
        float(np.median(matches.reference_start - scale * matches.start)),
        float(np.median(matches.reference_end - scale * matches.end)), float(scale))
    total = sum(errors(matches, calibration))
    if best is None or total < best[0]:
      best = (total, calibration)
  return best[1]


def table(matches: Matches, calibration: Calibration) -> str:
  """The report: words matched, errors before and after, the fitted values."""
  before, after = errors(matches), errors(matches, calibration)
  duration = float(np.mean(matches.reference_end - matches.reference_start))
  lines = [f"{len(matches.start)} words matched of {matches.reference_words} reference words "
           f"({matches.utterances} utterances); mean reference word: {duration:.3f} s",
           "",
           "| boundary | fitted offset (s) | mean abs error as predicted (s) | after the fit (s) |",
           "|---|---:|---:|---:|",
           f"| start | {calibration.start_offset:+.3f} | {before[0]:.3f} | {after[0]:.3f} |",
           f"| end | {calibration.end_offset:+.3f} | {before[1]:.3f} | {after[1]:.3f} |",
           f"| both | | {np.mean(before):.3f} | {np.mean(after):.3f} |",
           "",
           f"scale: {calibration.scale:.3f}",
           f"run.py flags: --word_timestamps=True {calibration.flags()}",
           f'config keys: "word_timestamps": True, "word_start_offset": '
           f'{calibration.start_offset:.3f}, "word_end_offset": {calibration.end_offset:.3f}, '
           f'"word_timestamp_scale": {calibration.scale:.3f}']
  return "\n".join(lines)


def run_inference(args: argparse.Namespace, overrides: list[str], output: str) -> None:
  """run.py --mode=infer on the boundaries CSV with raw word times (offsets 0, scale 1)."""
  command = [sys.executable, os.path.join(ROOT, "run.py"), f"--config_file={args.config_file}",
             "--mode=infer", f"--logdir={args.logdir}", f"--infer_output_file={output}",
             f"--data_layer_params/dataset_files=['{os.path.abspath(args.boundaries)}']",
             "--word_timestamps=True", "--word_start_offset=0.0", "--word_end_offset=0.0",
             "--word_timestamp_scale=1.0", *overrides]
  done = subprocess.run(command, check=False)
  if done.returncode != 0:
    raise SystemExit(f"error: run.py --mode=infer failed (exit status {done.returncode})")


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--boundaries", required=True,
                      help="CSV with the reference words column (word:start-end)")
  parser.add_argument("--predictions", help="an infer CSV with raw word times (instead of "
                      "running the model)")
  parser.add_argument("--config_file", help="the run's config (with --logdir: run infer)")
  parser.add_argument("--logdir", help="the run's directory (its latest checkpoint)")
  parser.add_argument("--infer_output_file", help="where the infer run writes its CSV "
                      "(default: a temporary file)")
  parser.add_argument("--fit_scale", action="store_true",
                      help="also fit word_timestamp_scale (0.8-1.2)")
  args, overrides = parser.parse_known_args(argv)
  if bool(args.predictions) == bool(args.config_file and args.logdir):
    parser.error("give --predictions, or --config_file and --logdir (not both)")
  if args.predictions and (overrides or args.infer_output_file):
    parser.error(f"{' '.join(overrides) or '--infer_output_file'}: only with --config_file "
                 f"and --logdir (the script runs inference then)")
  if args.infer_output_file:
    from open_seq2seq.utils.io import exit_if_unwritable  # pylint: disable=import-outside-toplevel
    exit_if_unwritable(args.infer_output_file, "--infer_output_file")
  boundaries = read_words(args.boundaries, "--boundaries")
  if args.predictions:
    predictions = read_words(args.predictions, "--predictions")
  else:
    with tempfile.TemporaryDirectory() as tmp:
      output = args.infer_output_file or os.path.join(tmp, "infer.csv")
      run_inference(args, overrides, output)
      predictions = read_words(output, "--infer_output_file")
  matches = collect(boundaries, predictions)
  if len(matches.start) == 0:
    raise SystemExit("error: the recognizer got no reference word right; nothing to fit")
  print(table(matches, fit(matches, args.fit_scale)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
