#!/usr/bin/env python
"""Builds a synthetic keyword-spotting corpus in Google Speech Commands' folder layout.

Each command word is spoken ``--per_word`` times by espeak-ng with a random voice, speed,
pitch, gain, position in the clip and white-noise level, as one-second 16-bit clips::

    <output_dir>/<word>/<speaker>_nohash_<n>.wav
    <output_dir>/validation_list.txt, testing_list.txt     # <word>/<clip>.wav lines
    <output_dir>/training_list.txt                         # the rest (the real set has none)
    <output_dir>/_background_noise_/*.wav                  # white, pink, brown noise, hum

Clips are put in the validation / testing lists with probability ``--validation`` /
``--testing`` each. Everything follows from ``--seed``. Read it with
SpeechCommandsDataLayer (``dataset_files: ["training_list.txt"]`` ...).

    python scripts/make_speech_commands.py --output_dir=data/speech_commands_synthetic \
        --words=yes,no,up,down,left,right,on,off,stop,go --per_word=60

Needs the Debian package espeak-ng (installed with apt-get when missing and run as root).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import random
import sys
import tempfile
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# make_synthetic_speech and open_seq2seq.data import TensorFlow: imported where used, so
# that --help answers without it
from open_seq2seq.utils.io import atomic_open  # noqa: E402

COMMANDS = "yes no up down left right on off stop go".split()
NOISE_SECONDS = 10.0


def fit_clip(signal: np.ndarray, length: int, rng: np.random.Generator) -> np.ndarray:
  """The speech of ``signal`` (leading/trailing silence trimmed) at a random place of a
  ``length``-sample clip (cropped around its centre when longer)."""
  loud = np.flatnonzero(np.abs(signal) > 0.02 * (np.max(np.abs(signal), initial=0.0) + 1e-9))
  if len(loud):
    signal = signal[loud[0]:loud[-1] + 1]
  if len(signal) >= length:
    start = (len(signal) - length) // 2
    return signal[start:start + length]
  start = int(rng.integers(0, length - len(signal) + 1))
  return np.pad(signal, (start, length - len(signal) - start))


def render_word(job: tuple, sample_freq: int) -> None:
  """Speaks one word, places it in a one-second clip, adds gain and noise, writes PCM 16."""
  import soundfile
  from make_synthetic_speech import synthesize
  from open_seq2seq.data.speech2text.audio import read_audio
  word, voice, speed, pitch, seed, out_path = job
  rng = np.random.default_rng(seed)
  with tempfile.TemporaryDirectory() as tmp:
    raw = os.path.join(tmp, "raw.wav")
    synthesize(word, "espeak-ng", voice, speed, pitch, raw)
    signal = read_audio(raw, sample_freq, resample=True)
  signal = signal / (np.max(np.abs(signal), initial=0.0) + 1e-6)
  signal = fit_clip(signal, sample_freq, rng) * rng.uniform(0.3, 0.9)
  signal = signal + rng.standard_normal(len(signal)) * 10 ** (rng.uniform(-60, -35) / 20)
  soundfile.write(out_path, np.clip(signal, -1.0, 1.0), sample_freq, subtype="PCM_16")


def colored_noise(kind: str, num_samples: int, rng: np.random.Generator) -> np.ndarray:
  """Peak-normalised noise: white (flat), pink (1/f power), brown (1/f^2), or a 50 Hz hum
  with harmonics over faint white noise."""
  if kind == "hum":
    t = np.arange(num_samples) / 16000.0
    hum = sum(np.sin(2 * np.pi * 50 * k * t + rng.uniform(0, 2 * np.pi)) / k for k in (1, 2, 3))
    signal = hum + 0.05 * rng.standard_normal(num_samples)
  else:
    spectrum = np.fft.rfft(rng.standard_normal(num_samples))
    freqs = np.maximum(np.fft.rfftfreq(num_samples), 1.0 / num_samples)
    exponent = {"white": 0.0, "pink": 0.5, "brown": 1.0}[kind]
    signal = np.fft.irfft(spectrum / freqs ** exponent, num_samples)
  return (0.9 * signal / (np.max(np.abs(signal)) + 1e-9)).astype(np.float32)


def write_background_noise(output_dir: str, sample_freq: int, seed: int,
                           seconds: float = NOISE_SECONDS) -> list[str]:
  import soundfile
  folder = os.path.join(output_dir, "_background_noise_")
  os.makedirs(folder, exist_ok=True)
  paths = []
  for i, kind in enumerate(("white", "pink", "brown", "hum")):
    rng = np.random.default_rng([seed, i])
    path = os.path.join(folder, f"{kind}_noise.wav")
    tmp = path + ".tmp.wav"
    soundfile.write(tmp, colored_noise(kind, int(seconds * sample_freq), rng), sample_freq,
                    subtype="PCM_16")
    os.replace(tmp, path)
    paths.append(path)
  return paths


def _write_list(path: str, names: list[str]) -> None:
  with atomic_open(path) as f:
    f.write("".join(f"{name}\n" for name in names))


def make_commands(output_dir: str, words: list[str] | None = None, per_word: int = 60,
                  validation: float = 0.1, testing: float = 0.1,
                  voices: list[str] | None = None, speeds: tuple[int, int] = (120, 200),
                  pitches: tuple[int, int] = (20, 80), sample_freq: int = 16000, seed: int = 0,
                  workers: int = 2) -> dict[str, list[str]]:
  """Writes the corpus; returns ``{"training": [...], "validation": [...], "testing": [...]}``
  (``<word>/<clip>.wav`` names)."""
  words = list(words or COMMANDS)
  if len(set(words)) != len(words) or any(not w or w.startswith("_") or "/" in w
                                          for w in words):
    raise SystemExit(f"error: --words must be distinct plain words, got {words}")
  if not 0 <= validation + testing < 1:
    raise SystemExit("error: --validation + --testing must be below 1")
  from make_synthetic_speech import ESPEAK_VOICES, ensure_engines
  ensure_engines(["espeak-ng"])
  pool = list(voices or ESPEAK_VOICES)
  rng = random.Random(seed)
  jobs, splits = [], {"training": [], "validation": [], "testing": []}
  for word in words:
    os.makedirs(os.path.join(output_dir, word), exist_ok=True)
    for n in range(per_word):
      voice, speed, pitch = rng.choice(pool), rng.randint(*speeds), rng.randint(*pitches)
      speaker = f"{zlib.crc32(f'{voice}/{speed}/{pitch}'.encode()):08x}"
      name = f"{word}/{speaker}_nohash_{n}.wav"
      draw = rng.random()
      split = ("validation" if draw < validation else
               "testing" if draw < validation + testing else "training")
      splits[split].append(name)
      jobs.append((word, voice, speed, pitch, rng.randrange(2 ** 31),
                   os.path.join(output_dir, name)))
  with concurrent.futures.ThreadPoolExecutor(max(1, workers)) as executor:
    list(executor.map(lambda job: render_word(job, sample_freq), jobs))
  write_background_noise(output_dir, sample_freq, seed)
  for split, names in splits.items():
    _write_list(os.path.join(output_dir, f"{split}_list.txt"), names)
  return splits


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
  parser.add_argument("--output_dir", default="data/speech_commands_synthetic")
  parser.add_argument("--words", default=",".join(COMMANDS),
                      help="comma-separated command words (one class each)")
  parser.add_argument("--per_word", type=int, default=60, help="clips per word")
  parser.add_argument("--validation", type=float, default=0.1,
                      help="share of clips in validation_list.txt")
  parser.add_argument("--testing", type=float, default=0.1,
                      help="share of clips in testing_list.txt")
  parser.add_argument("--voices", default=None,
                      help="comma-separated espeak-ng voices (default: the English voices of "
                           "make_synthetic_speech.py)")
  parser.add_argument("--sample_freq", type=int, default=16000)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--workers", type=int, default=2, help="espeak-ng processes at once")
  args = parser.parse_args(argv)
  if args.per_word < 1:
    parser.error("--per_word must be at least 1")
  from open_seq2seq.utils.io import exit_if_unwritable  # pylint: disable=import-outside-toplevel
  exit_if_unwritable(args.output_dir, "--output_dir", directory=True)
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()
  splits = make_commands(args.output_dir, [w.strip() for w in args.words.split(",") if w.strip()],
                         args.per_word, args.validation, args.testing,
                         args.voices.split(",") if args.voices else None,
                         sample_freq=args.sample_freq, seed=args.seed, workers=args.workers)
  print(f"wrote {sum(map(len, splits.values()))} clips to {args.output_dir}: " +
        ", ".join(f"{len(v)} {k}" for k, v in splits.items()))
  return 0


if __name__ == "__main__":
  sys.exit(main())
