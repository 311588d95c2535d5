#!/usr/bin/env python
"""Turns LibriSpeech archives (FLAC + ``*.trans.txt``) into Speech2Text CSV files.

    python scripts/import_librispeech.py --output_dir=data/librispeech \
        --archives dev-clean.tar.gz train-clean-100.tar.gz

Each archive is extracted under ``--output_dir`` (``LibriSpeech/<subset>/...``; an already
extracted tree can be given with ``--source_dir`` instead), every utterance is converted to
16-bit WAV (or kept as FLAC with ``--format=flac``: the data layer reads both), and
``librivox-<subset>.csv`` is written with the header ``wav_filename,wav_filesize,transcript``,
paths relative to the CSV's folder and lowercase transcripts.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import os
import sys
import tarfile

# the package beside scripts/ (the output checks), also without pip install -e
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def extract(archive: str, output_dir: str) -> None:
  if not os.path.isfile(archive):
    raise SystemExit(f"error: {archive} does not exist")
  with tarfile.open(archive) as tar:
    for member in tar.getmembers():
      target = os.path.realpath(os.path.join(output_dir, member.name))
      if not target.startswith(os.path.realpath(output_dir) + os.sep):
        raise SystemExit(f"error: {archive}: member {member.name} escapes the output folder")
    tar.extractall(output_dir, filter="data")


def find_subsets(root: str) -> dict[str, str]:
  """``{subset name: folder}`` for each ``LibriSpeech/<subset>`` holding transcripts."""
  subsets = {}
  base = os.path.join(root, "LibriSpeech")
  if not os.path.isdir(base):
    return subsets
  for name in sorted(os.listdir(base)):
    folder = os.path.join(base, name)
    if os.path.isdir(folder):
      subsets[name] = folder
  return subsets


def read_transcripts(folder: str) -> list[tuple[str, str]]:
  """``[(flac path, transcript)]`` of every ``*.trans.txt`` line below ``folder``."""
  rows = []
  for directory, _, files in sorted(os.walk(folder)):
    for name in sorted(files):
      if not name.endswith(".trans.txt"):
        continue
      path = os.path.join(directory, name)
      with open(path, encoding="utf-8") as f:
        for line_num, line in enumerate(f, 1):
          line = line.strip()
          if not line:
            continue
          utt_id, _, text = line.partition(" ")
          flac = os.path.join(directory, utt_id + ".flac")
          if not os.path.isfile(flac):
            raise SystemExit(f"error: {path}:{line_num}: {flac} is missing")
          rows.append((flac, " ".join(text.lower().split())))
  return rows


def convert(flac: str, audio_format: str) -> str:
  """Writes the 16-bit WAV beside ``flac`` (if asked) and returns the audio path to use."""
  if audio_format == "flac":
    return flac
  import soundfile
  wav = flac[:-len(".flac")] + ".wav"
  if not os.path.isfile(wav):
    data, rate = soundfile.read(flac, dtype="int16")
    tmp = wav + ".tmp"
    soundfile.write(tmp, data, rate, subtype="PCM_16", format="WAV")
    os.replace(tmp, wav)
  return wav


def write_csv(rows: list[tuple[str, str]], csv_path: str) -> None:
  base = os.path.dirname(os.path.abspath(csv_path))
  tmp = csv_path + ".tmp"
  with open(tmp, "w", encoding="utf-8", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["wav_filename", "wav_filesize", "transcript"])
    for audio, text in rows:
      writer.writerow([os.path.relpath(os.path.abspath(audio), base), os.path.getsize(audio),
                       text])
  os.replace(tmp, csv_path)


def import_librispeech(output_dir: str, archives: list[str] | None = None,
                       source_dir: str | None = None, audio_format: str = "wav",
                       workers: int = 2) -> dict[str, str]:
  """Extracts/converts and returns ``{subset: csv path}``."""
  os.makedirs(output_dir, exist_ok=True)
  for archive in archives or []:
    extract(archive, output_dir)
  root = source_dir or output_dir
  subsets = find_subsets(root)
  if not subsets:
    raise SystemExit(f"error: no LibriSpeech/<subset> folder under {root}")
  csv_paths = {}
  for subset, folder in subsets.items():
    rows = read_transcripts(folder)
    with concurrent.futures.ThreadPoolExecutor(max(1, workers)) as executor:
      audio = list(executor.map(lambda r: convert(r[0], audio_format), rows))
    csv_path = os.path.join(output_dir, f"librivox-{subset}.csv")
    write_csv([(a, text) for a, (_, text) in zip(audio, rows)], csv_path)
    csv_paths[subset] = csv_path
  return csv_paths


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--output_dir", required=True)
  parser.add_argument("--archives", nargs="*", default=[], help="LibriSpeech .tar.gz files")
  parser.add_argument("--source_dir", help="folder holding an extracted LibriSpeech/")
  parser.add_argument("--format", choices=("wav", "flac"), default="wav")
  parser.add_argument("--workers", type=int, default=2)
  args = parser.parse_args(argv)
  if not args.archives and not args.source_dir:
    parser.error("give --archives or --source_dir")
  from open_seq2seq.utils.io import exit_if_unwritable  # pylint: disable=import-outside-toplevel
  exit_if_unwritable(args.output_dir, "--output_dir", directory=True)
  for subset, path in import_librispeech(args.output_dir, args.archives, args.source_dir,
                                         args.format, args.workers).items():
    print(f"{subset}: {path}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
