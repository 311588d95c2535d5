#!/usr/bin/env python
"""Intelligibility of speech, by a recognizer that is not part of this project: PocketSphinx
(CMU, BSD licence; PyPI ``pocketsphinx`` 5.x, whose wheel ships its US English acoustic
model, dictionary and 3-gram language model) transcribes every WAV of a set, and the word
error rate (WER) against the set's transcripts is printed per system as a markdown table.

    pip install -e .[tts-eval]
    python scripts/intelligibility.py data/asterisk/test.csv
    python scripts/intelligibility.py --systems \\
        recordings=data/asterisk/test.csv,tacotron=runs/asterisk-test.csv

A set is either CSV the speech-synthesis data layers read (header-less
``name|raw|normalized`` lines, audio at ``<folder of the CSV>/wavs/<name>.wav``) or the
CSV that ``run.py --mode=infer`` writes for speech synthesis (header
``name,transcript,wav_path,seconds``; a relative ``wav_path`` is taken from the working
directory, as infer wrote it, else from the CSV's folder).

Audio is mixed to mono and resampled to the recognizer's 16 kHz; sources at a lower rate
(the Asterisk prompts are 8 kHz) are upsampled, which adds no content above their Nyquist
frequency, and the table says so. Transcript and recognition are normalised alike: the
project's English speech-synthesis cleaner (numbers, money, abbreviations as words,
lowercase ASCII), then every character but letters, digits and in-word apostrophes becomes a
space. The WER is the project's (open_seq2seq.utils.metrics): word edits over reference
words, pooled over the set; each system recognized with the same decoder settings.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import re
import sys
from typing import NamedTuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

RATE = 16000  # PocketSphinx's US English acoustic model
INFER_HEADER = ["name", "transcript", "wav_path", "seconds"]
EXTRA = "pip install -e .[tts-eval] (or .[test])"


def failure(message: str) -> SystemExit:
  """``error: <message>`` on stderr (one line); the exit (status 2, as run.py's) to raise."""
  print(f"error: {message}", file=sys.stderr)
  return SystemExit(2)


class Clip(NamedTuple):
  name: str
  transcript: str
  wav: str


class Result(NamedTuple):
  system: str
  clips: int
  words: int
  seconds: float
  source_rates: tuple[int, ...]
  wer: float
  lines: list  # (name, reference, hypothesis), normalised


def read_clips(path: str) -> list[Clip]:
  """The (name, transcript, WAV path) of each line of a set's CSV; exits on a missing file."""
  if not os.path.isfile(path):
    raise failure(f"{path}: no such CSV file")
  with open(path, encoding="utf-8", newline="") as f:
    text = f.read()
  lines = [line for line in text.splitlines() if line.strip()]
  if not lines:
    raise failure(f"{path}: the CSV is empty")
  folder = os.path.dirname(os.path.abspath(path))
  clips = []
  if next(csv.reader([lines[0]])) == INFER_HEADER:
    for number, row in enumerate(csv.reader(lines[1:]), 2):
      if len(row) != len(INFER_HEADER):
        raise failure(f"{path}:{number}: expected {len(INFER_HEADER)} fields "
                      f"({','.join(INFER_HEADER)}), got {len(row)}")
      wav = row[2]
      if not os.path.isabs(wav) and not os.path.isfile(wav):
        wav = os.path.join(folder, wav)
      clips.append(Clip(row[0], row[1], wav))
  else:
    for number, line in enumerate(lines, 1):
      fields = line.split("|")
      if len(fields) < 2 or not fields[0].strip():
        raise failure(f"{path}:{number}: expected 'name|raw|normalized' (or the "
                      f"header {','.join(INFER_HEADER)} of run.py --mode=infer's CSV)")
      name = fields[0].strip()
      wav = os.path.join(folder, "wavs", name if name.endswith(".wav") else name + ".wav")
      clips.append(Clip(name, fields[-1].strip(), wav))
  for clip in clips:
    if not os.path.isfile(clip.wav):
      raise failure(f"{path}: the audio of {clip.name}, {clip.wav}, not found")
  return clips


def normalize(text: str) -> str:
  """Lowercase words of letters, digits and in-word apostrophes, numbers read out."""
  from open_seq2seq.data.text2speech.text import clean_english
  text = re.sub(r"\(\d+\)", " ", text)  # a dictionary's alternate-pronunciation mark: the(2)
  text = re.sub(r"[^a-z0-9']+", " ", clean_english(text))
  return " ".join(word.strip("'") for word in text.split() if word.strip("'"))


def read_mono(path: str) -> tuple[np.ndarray, int]:
  """Float32 samples mixed to mono and the file's sample rate; exits on an unreadable file."""
  import soundfile
  try:
    audio, rate = soundfile.read(path, dtype="float32", always_2d=True)
  except (RuntimeError, soundfile.LibsndfileError) as e:
    raise failure(f"{path}: not a readable audio file ({e})") from None
  return audio.mean(axis=1), int(rate)


def load_audio(path: str) -> tuple[np.ndarray, int]:
  """16-bit PCM at 16 kHz, mono, and the file's own sample rate."""
  from scipy.signal import resample_poly
  audio, rate = read_mono(path)
  if rate != RATE:
    common = math.gcd(rate, RATE)
    audio = resample_poly(audio, RATE // common, rate // common)
  return (np.clip(audio, -1.0, 1.0) * 32767).astype(np.int16), rate


def recognizer():
  """A PocketSphinx decoder with the wheel's US English models; exits naming the extra."""
  try:
    import pocketsphinx
  except ImportError:
    raise failure(f"the recognizer is PyPI's pocketsphinx, not installed: {EXTRA}") from None
  return pocketsphinx.Decoder(samprate=RATE, loglevel="FATAL")


def transcribe(decoder, pcm) -> str:
  decoder.start_utt()
  decoder.process_raw(pcm.tobytes(), full_utt=True)
  decoder.end_utt()
  hypothesis = decoder.hyp()
  return hypothesis.hypstr if hypothesis is not None else ""


def evaluate(system: str, path: str, decoder) -> Result:
  from open_seq2seq.utils.metrics import word_error_rate
  clips = read_clips(path)
  lines, seconds, rates = [], 0.0, set()
  for clip in clips:
    pcm, rate = load_audio(clip.wav)
    rates.add(rate)
    seconds += len(pcm) / RATE
    lines.append((clip.name, normalize(clip.transcript), normalize(transcribe(decoder, pcm))))
  references = [reference for _, reference, _ in lines]
  wer = word_error_rate(references, [hypothesis for _, _, hypothesis in lines])
  return Result(system, len(clips), sum(len(r.split()) for r in references), seconds,
                tuple(sorted(rates)), wer, lines)


def parse_systems(text: str) -> list[tuple[str, str]]:
  systems = []
  for item in (part.strip() for part in text.split(",")):
    name, sep, path = item.partition("=")
    if not sep or not name.strip() or not path.strip():
      raise failure(f"--systems: '{item}' is not name=csv (e.g. "
                    f"recordings=data/asterisk/test.csv,tacotron=runs/test.csv)")
    systems.append((name.strip(), path.strip()))
  return systems


def table(results: list[Result]) -> str:
  rows = ["| system | clips | words | audio (s) | source rate | WER |",
          "|---|---:|---:|---:|---|---:|"]
  for r in results:
    rate = ", ".join(f"{v / 1000:g} kHz" + (" (upsampled)" if v < RATE else "")
                     for v in r.source_rates)
    rows.append(f"| {r.system} | {r.clips} | {r.words} | {r.seconds:.1f} | {rate} | "
                f"{r.wer:.3f} |")
  return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("csv", nargs="*", help="Sets to transcribe, each a system named by "
                      "its path.")
  parser.add_argument("--systems", help="Comma-separated name=csv pairs, compared side by "
                      "side (after the positional sets).")
  parser.add_argument("--transcripts", help="Also write every clip's normalised reference "
                      "and recognition here (tab-separated: system, name, reference, "
                      "recognized).")
  args = parser.parse_args(argv)
  systems = [(path, path) for path in args.csv] + (parse_systems(args.systems)
                                                   if args.systems else [])
  if not systems:
    parser.error("give a CSV or --systems name=csv,...")
  if args.transcripts:
    from open_seq2seq.utils.io import exit_if_unwritable
    exit_if_unwritable(args.transcripts, "--transcripts")
  for _, path in systems:  # every file is checked before the first is transcribed
    read_clips(path)
  decoder = recognizer()
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()  # the text cleaner's package imports TensorFlow
  results = [evaluate(name, path, decoder) for name, path in systems]
  print(table(results))
  upsampled = sorted({v for r in results for v in r.source_rates if v < RATE})
  if upsampled:
    print(f"\nSources at {', '.join(f'{v} Hz' for v in upsampled)} were upsampled to "
          f"{RATE} Hz for the recognizer: nothing above their Nyquist frequency is heard.")
  print(f"\nRecognizer: PocketSphinx (US English model of its wheel) at {RATE} Hz; WER = "
        "word edits / reference words, texts normalised alike.")
  if args.transcripts:
    from open_seq2seq.utils.io import atomic_write_text
    atomic_write_text(args.transcripts, "".join(
        f"{r.system}\t{name}\t{reference}\t{hypothesis}\n"
        for r in results for name, reference, hypothesis in r.lines))
  return 0


if __name__ == "__main__":
  sys.exit(main())
