#!/usr/bin/env python
"""Spectrograms of the same prompts from several systems, side by side, as one PNG: the
listening sample picture of docs/speech-synthesis.md (recordings, Tacotron 2 + Griffin-Lim,
FastPitch + HiFi-GAN, ... saying the same held-out sentences).

    python scripts/plot_spectrograms.py --output=docs/images/asterisk_voices.png \\
        --clips=vm-goodbye,vm-password --systems \\
        recordings=data/asterisk/test.csv,tacotron=runs/asterisk-tacotron.csv

Sets are read as scripts/intelligibility.py reads them (a corpus CSV, ``name|raw|normalized``
with audio at ``<folder of the CSV>/wavs/<name>.wav``, or run.py --mode=infer's CSV). Each
row of the picture is a system, each column a clip (default: the first clip of the first
set). Every panel is the clip's STFT magnitude in dB (25 ms Hann windows, 10 ms hop, at the
file's own sample rate) up to ``--max_hz`` (default: the lowest Nyquist frequency of the
files drawn, so that every panel shows the same band), on one colour scale: 0 dB is the
loudest bin of the whole picture, and the scale spans ``--db_range`` below it.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import intelligibility  # noqa: E402  pylint: disable=wrong-import-position
from intelligibility import failure, read_mono  # noqa: E402  pylint: disable=wrong-import-position

WINDOW_S = 0.025
HOP_S = 0.010


def power_spectrogram(audio: np.ndarray, rate: int, max_hz: float
                      ) -> tuple[np.ndarray, np.ndarray]:
  """|STFT|² [bins up to max_hz, frames] (Hann windows of 25 ms, hop 10 ms, every window
  whole: a clip shorter than one is zero-padded to it) and the bins' frequencies in Hz."""
  window = max(int(round(WINDOW_S * rate)), 2)
  hop = max(int(round(HOP_S * rate)), 1)
  n_fft = 1 << (window - 1).bit_length()
  frames = max(len(audio) - window, 0) // hop + 1
  padded = np.zeros(max(len(audio), window), np.float32)
  padded[:len(audio)] = audio
  index = np.arange(window)[None, :] + hop * np.arange(frames)[:, None]
  spectrum = np.fft.rfft(padded[index] * np.hanning(window)[None, :], n=n_fft, axis=1)
  freqs = np.fft.rfftfreq(n_fft, 1.0 / rate)
  keep = freqs <= max_hz + 1e-6
  return (np.abs(spectrum[:, keep]) ** 2).T, freqs[keep]


def draw(panels, rows: list[str], columns: list[str], db_range: float, output: str) -> None:
  """panels[row][column] = (power, freqs, seconds); one PNG with a shared colour bar."""
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure
  from open_seq2seq.utils.io import atomic_open
  peak = max(float(p.max()) for row in panels for p, _, _ in row)
  floor = peak * 10.0 ** (-db_range / 10.0) if peak > 0 else 1e-12
  longest = max(seconds for row in panels for _, _, seconds in row)
  figure = Figure(figsize=(1.5 + 4.2 * len(columns) * min(1.0, 0.35 + longest / 4.0),
                           0.9 + 1.9 * len(rows)), dpi=100, layout="constrained")
  canvas = FigureCanvasAgg(figure)
  grid = figure.subplots(len(rows), len(columns), squeeze=False, sharey=True)
  image = None
  for r, (row_name, row) in enumerate(zip(rows, panels)):
    for c, (power, freqs, seconds) in enumerate(row):
      axes = grid[r][c]
      db = 10.0 * np.log10(np.maximum(power, floor) / (peak if peak > 0 else 1.0))
      image = axes.imshow(db, origin="lower", aspect="auto", cmap="magma",
                          vmin=-db_range, vmax=0.0, interpolation="nearest",
                          extent=(0.0, seconds, 0.0, float(freqs[-1]) / 1000.0))
      axes.set_xlim(0.0, longest)
      if r == 0:
        axes.set_title(columns[c], parse_math=False, fontsize=9)
      if c == 0:
        axes.set_ylabel(f"{row_name}\nkHz", parse_math=False)
      if r == len(rows) - 1:
        axes.set_xlabel("seconds")
  figure.colorbar(image, ax=grid, label="dB below the picture's loudest bin", shrink=0.8)
  with atomic_open(output, binary=True) as f:
    canvas.print_png(f)


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--systems", required=True, help="Comma-separated name=csv pairs, one "
                      "row of the picture each, in this order.")
  parser.add_argument("--clips", help="Comma-separated clip names, one column each "
                      "(default: the first clip of the first set); every set must have them.")
  parser.add_argument("--output", required=True, help="The PNG to write.")
  parser.add_argument("--max_hz", type=float, help="Highest frequency drawn (default: the "
                      "lowest Nyquist frequency of the files drawn).")
  parser.add_argument("--db_range", type=float, default=80.0, help="dB below the loudest "
                      "bin that the colour scale spans.")
  args = parser.parse_args(argv)
  if args.db_range <= 0:
    raise failure(f"--db_range must be positive, got {args.db_range:g}")
  if args.max_hz is not None and args.max_hz <= 0:
    raise failure(f"--max_hz must be positive, got {args.max_hz:g}")
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()  # after argparse: the toolkit's package imports TensorFlow
  from open_seq2seq.utils.io import exit_if_unwritable
  exit_if_unwritable(args.output, "--output")
  systems = intelligibility.parse_systems(args.systems)
  sets = [{clip.name: clip for clip in intelligibility.read_clips(path)}
          for _, path in systems]
  names = ([n.strip() for n in args.clips.split(",") if n.strip()] if args.clips
           else [next(iter(sets[0]))])
  for (system, path), clips in zip(systems, sets):
    missing = [n for n in names if n not in clips]
    if missing:
      raise failure(f"{system} ({path}) has no clip named {', '.join(missing)}; it has "
                    f"{len(clips)}, e.g. {', '.join(list(clips)[:3])}")
  audio = [[read_mono(clips[n].wav) for n in names] for clips in sets]
  max_hz = args.max_hz or min(rate / 2.0 for row in audio for _, rate in row)
  panels = [[power_spectrogram(samples, rate, max_hz) + (len(samples) / rate,)
             for samples, rate in row] for row in audio]
  titles = [f"{n}: {sets[0][n].transcript}" for n in names]
  draw(panels, [s for s, _ in systems], titles, args.db_range, args.output)
  print(f"{args.output}: {len(systems)} systems x {len(names)} clips, 0-{max_hz / 1000:g} kHz")
  return 0


if __name__ == "__main__":
  sys.exit(main())
