#!/usr/bin/env python
"""Builds a LibriSpeech-style speech corpus (CSV + 16-bit WAV) with espeak-ng and flite.

Sentences are random word sequences from ``--words`` (a small vocabulary learns in minutes)
or lines of ``--text_file``. Each utterance gets a random voice, speed, pitch, gain and
white-noise level, and is resampled to ``--sample_freq``. Dev/test sentences never occur in
train. Writes ``<split>.csv`` (``wav_filename,wav_filesize,transcript``; paths relative to
the CSV's folder), ``<split>/*.wav``, ``vocab.txt`` and, with ``--lm``, ``lm.arpa`` (a bigram
model of the training text for CTC decoding with a language model). With ``--word_boundaries``
each word is synthesized alone (same voice, speed and pitch), trimmed of silence (-40 dB) and
the words are joined with 0.03-0.15 s of silence (0.1-0.3 s before and after), so their
boundaries are known: the CSV gets a ``words`` column (``word:start-end`` in seconds, the form
of the infer CSV's word timestamps) for ``scripts/calibrate_timestamps.py``.

    python scripts/make_synthetic_speech.py --output_dir=data/synth --splits=train=400,test=40

With ``--tts`` it builds a speech-synthesis corpus instead, in LJSpeech's layout
(``wavs/<name>.wav`` and header-less ``<split>.csv`` lines ``name|raw text|normalized text``):
one fixed espeak-ng voice (no noise, no gain change), clips trimmed of leading and trailing
silence, at ``--sample_freq`` (22050 Hz by default), short sentences from built-in templates or
``--text_file`` (helpers in tts_corpus.py).

    python scripts/make_synthetic_speech.py --tts --output_dir=data/synth_tts \
        --splits=train=300,val=20,test=20

Needs the Debian packages espeak-ng and flite (installed with apt-get when missing and run
as root); ``--tts`` needs only espeak-ng.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import os
import random
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tts_corpus  # noqa: E402
from open_seq2seq.utils.ngram_lm import write_arpa  # noqa: E402
from open_seq2seq.utils.word_timestamps import format_words  # noqa: E402

DIGITS = "zero one two three four five six seven eight nine".split()
ESPEAK_VOICES = ("en-us", "en-us+f3", "en-gb", "en-gb+f2", "en-us+m3", "en-gb-scotland",
                 "en-029+f4", "en-gb-x-rp+m5")
FLITE_VOICES = ("kal16", "slt", "awb", "rms")
VOCAB = [" "] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["'"]
PACKAGES = {"espeak-ng": "espeak-ng", "flite": "flite"}


def read_audio(path: str, sample_freq: int, resample: bool = True) -> np.ndarray:
  """The speech layer's reader (imported when first used: its package loads TensorFlow,
  which ``--help`` and argument errors do without)."""
  from open_seq2seq.data.speech2text import audio  # pylint: disable=import-outside-toplevel
  return audio.read_audio(path, sample_freq, resample=resample)


def ensure_engines(engines: list[str]) -> None:
  """Installs missing synthesizers from Debian packages (as root), else exits clearly."""
  missing = [e for e in engines if shutil.which(e) is None]
  if not missing:
    return
  if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
    subprocess.run(["apt-get", "install", "-y", "-qq"] + [PACKAGES[e] for e in missing],
                   check=False, stdout=subprocess.DEVNULL, env=dict(
                       os.environ, DEBIAN_FRONTEND="noninteractive"))
  still = [e for e in engines if shutil.which(e) is None]
  if still:
    raise SystemExit(f"error: {', '.join(still)} not found; install the Debian packages "
                     f"{' '.join(PACKAGES[e] for e in still)}")


def voices_for(engines: list[str], voices: list[str] | None) -> list[tuple[str, str]]:
  pool = []
  if "espeak-ng" in engines:
    pool += [("espeak-ng", v) for v in ESPEAK_VOICES]
  if "flite" in engines:
    pool += [("flite", v) for v in FLITE_VOICES]
  if voices:
    pool = [(e, v) for e, v in pool if v in voices]
  if not pool:
    raise SystemExit("error: no voice left; check --engines and --voices")
  return pool


def synthesize(text: str, engine: str, voice: str, speed: int, pitch: int, path: str) -> None:
  if engine == "espeak-ng":
    cmd = ["espeak-ng", "-w", path, "-v", voice, "-s", str(speed), "-p", str(pitch), text]
  else:  # flite has no speed/pitch flags; duration_stretch changes the rate
    cmd = ["flite", "-voice", voice, "--setf", f"duration_stretch={160.0 / speed:.3f}",
           "-t", text, "-o", path]
  subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_sentences(rng: random.Random, count: int, words: list[str], min_words: int,
                   max_words: int, exclude: set[str]) -> list[str]:
  sentences, seen, attempts = [], set(exclude), 0
  while len(sentences) < count:
    attempts += 1
    if attempts > 100 * count + 1000:
      raise SystemExit("error: not enough distinct sentences; widen --words or word counts")
    sentence = " ".join(rng.choice(words) for _ in range(rng.randint(min_words, max_words)))
    if sentence not in seen:
      seen.add(sentence)
      sentences.append(sentence)
  return sentences


def synthesize_words(text: str, engine: str, voice: str, speed: int, pitch: int,
                     sample_freq: int, rng: np.random.Generator
                     ) -> tuple[np.ndarray, list[tuple[str, float, float]]]:
  """Each word alone, trimmed, joined with random silences: (signal, (word, start, end))."""
  pieces, words, position = [], [], 0
  with tempfile.TemporaryDirectory() as tmp:
    raw = os.path.join(tmp, "raw.wav")
    for i, word in enumerate(text.split()):
      synthesize(word, engine, voice, speed, pitch, raw)
      audio = tts_corpus.trim_silence(read_audio(raw, sample_freq, resample=True), sample_freq,
                                      margin_ms=0.0)
      gap = int(sample_freq * (rng.uniform(0.1, 0.3) if i == 0 else rng.uniform(0.0, 0.06)))
      pieces += [np.zeros(gap, np.float32), audio.astype(np.float32)]
      words.append((word, (position + gap) / sample_freq,
                    (position + gap + len(audio)) / sample_freq))
      position += gap + len(audio)
  pieces.append(np.zeros(int(sample_freq * rng.uniform(0.1, 0.3)), np.float32))
  return np.concatenate(pieces), words


def render(job: tuple, sample_freq: int, noise_db: tuple[float, float],
           word_boundaries: bool = False) -> tuple[int, list | None]:
  """Synthesizes one utterance, adds gain and noise, writes 16-bit PCM; returns its size and,
  with ``word_boundaries`` (words synthesized one by one), its words' (word, start, end)."""
  import soundfile
  text, engine, voice, speed, pitch, seed, out_path = job
  rng = np.random.default_rng(seed)
  words = None
  if word_boundaries:
    signal, words = synthesize_words(text, engine, voice, speed, pitch, sample_freq, rng)
  else:
    with tempfile.TemporaryDirectory() as tmp:
      raw = os.path.join(tmp, "raw.wav")
      synthesize(text, engine, voice, speed, pitch, raw)
      signal = read_audio(raw, sample_freq, resample=True)
  signal = signal / (np.max(np.abs(signal)) + 1e-6)
  noise = rng.standard_normal(len(signal)) * 10 ** (rng.uniform(*noise_db) / 20)
  signal = (signal + noise) * rng.uniform(0.3, 0.9)
  signal = np.clip(signal, -1.0, 1.0)
  soundfile.write(out_path, signal, sample_freq, subtype="PCM_16")
  return os.path.getsize(out_path), words


def make_corpus(output_dir: str, splits: dict[str, int], words: list[str] | None = None,
                text_lines: list[str] | None = None, min_words: int = 2, max_words: int = 4,
                engines: tuple[str, ...] = ("espeak-ng", "flite"),
                voices: list[str] | None = None, speeds: tuple[int, int] = (140, 190),
                pitches: tuple[int, int] = (30, 70), noise_db: tuple[float, float] = (-45, -30),
                sample_freq: int = 16000, seed: int = 0, workers: int = 2,
                lm: bool = False, word_boundaries: bool = False) -> dict[str, str]:
  """Writes the corpus and returns ``{split: csv_path}`` (``word_boundaries``: module doc)."""
  engines = list(engines)
  ensure_engines(engines)
  pool = voices_for(engines, voices)
  rng = random.Random(seed)
  os.makedirs(output_dir, exist_ok=True)
  with open(os.path.join(output_dir, "vocab.txt"), "w", encoding="utf-8") as f:
    f.write("\n".join(VOCAB) + "\n")
  used: set[str] = set()
  if text_lines is not None:
    lines = [" ".join(l.lower().split()) for l in text_lines]
    lines = [l for l in dict.fromkeys(lines) if l and all(c in VOCAB for c in l)]
    rng.shuffle(lines)
  csv_paths, train_text = {}, []
  for split, count in splits.items():
    if text_lines is not None:
      sentences, lines = lines[:count], lines[count:]
      if len(sentences) < count:
        raise SystemExit(f"error: --text_file has too few usable lines for split {split}")
    else:
      sentences = make_sentences(rng, count, words or DIGITS, min_words, max_words, used)
    used.update(sentences)
    if split == "train":
      train_text = sentences
    os.makedirs(os.path.join(output_dir, split), exist_ok=True)
    jobs = []
    for i, text in enumerate(sentences):
      engine, voice = rng.choice(pool)
      jobs.append((text, engine, voice, rng.randint(*speeds), rng.randint(*pitches),
                   rng.randrange(2 ** 31), os.path.join(output_dir, split, f"{i:06d}.wav")))
    with concurrent.futures.ThreadPoolExecutor(max(1, workers)) as executor:
      rendered = list(executor.map(lambda j: render(j, sample_freq, noise_db, word_boundaries),
                                   jobs))
    csv_path = os.path.join(output_dir, f"{split}.csv")
    tmp = csv_path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
      writer = csv.writer(f)
      writer.writerow(["wav_filename", "wav_filesize", "transcript"] +
                      (["words"] if word_boundaries else []))
      for job, (size, timed) in zip(jobs, rendered):
        writer.writerow([os.path.join(split, os.path.basename(job[6])), size, job[0]] +
                        ([format_words(timed)] if word_boundaries else []))
    os.replace(tmp, csv_path)
    csv_paths[split] = csv_path
  if lm and train_text:
    write_arpa(train_text, os.path.join(output_dir, "lm.arpa"))
  return csv_paths


def render_tts(text: str, path: str, voice: str, speed: int, pitch: int, sample_freq: int,
               trim_db: float | None) -> float:
  """Synthesizes ``text`` unaltered (no noise or gain), trims it, writes it; returns seconds."""
  with tempfile.TemporaryDirectory() as tmp:
    raw = os.path.join(tmp, "raw.wav")
    synthesize(text, "espeak-ng", voice, speed, pitch, raw)
    signal = read_audio(raw, sample_freq, resample=True)
  if trim_db is not None:
    signal = tts_corpus.trim_silence(signal, sample_freq, threshold_db=trim_db)
  tts_corpus.write_wav(path, signal, sample_freq)
  return len(signal) / sample_freq


def make_tts_corpus(output_dir: str, splits: dict[str, int],
                    text_lines: list[str] | None = None, min_words: int = 3,
                    max_words: int = 10, voice: str = "en-us",
                    speeds: tuple[int, ...] = (160,), pitch: int = 50,
                    sample_freq: int = 22050, seed: int = 0, workers: int = 2,
                    trim_db: float | None = -40.0) -> dict[str, str]:
  """Writes a single-voice LJSpeech-layout corpus and returns ``{split: csv_path}``.

  Every sentence is distinct, so val/test sentences never occur in train; the normalized
  text is what espeak-ng speaks, so audio and normalized transcript agree word for word.
  With several ``speeds`` (words per minute) each sentence is spoken at one of them, drawn
  at random: a corpus with speaking styles for global style tokens.
  """
  ensure_engines(["espeak-ng"])
  rng = random.Random(seed)
  total = sum(splits.values())
  if text_lines is not None:
    pool = tts_corpus.text_file_sentences(text_lines, min_words, max_words)
    rng.shuffle(pool)
    if len(pool) < total:
      raise SystemExit(f"error: --text_file has {len(pool)} distinct usable lines of "
                       f"{min_words}-{max_words} words; the splits need {total}")
  else:
    pool = tts_corpus.make_sentences(rng, total, min_words, max_words)
  os.makedirs(os.path.join(output_dir, "wavs"), exist_ok=True)
  csv_paths, start = {}, 0
  for split, count in splits.items():
    sentences, start = pool[start:start + count], start + count
    names = [f"{split}-{i:05d}" for i in range(count)]
    rates = [rng.choice(speeds) for _ in range(count)]
    with concurrent.futures.ThreadPoolExecutor(max(1, workers)) as executor:
      list(executor.map(lambda job: render_tts(
          job[0][1], os.path.join(output_dir, "wavs", job[1] + ".wav"), voice, job[2], pitch,
          sample_freq, trim_db), zip(sentences, names, rates)))
    csv_paths[split] = os.path.join(output_dir, f"{split}.csv")
    tts_corpus.write_metadata(csv_paths[split], [(name, raw, normalized) for name, (raw, normalized)
                                                 in zip(names, sentences)])
  return csv_paths


def parse_splits(text: str) -> dict[str, int]:
  splits = {}
  for part in text.split(","):
    name, _, count = part.partition("=")
    if not count.isdigit():
      raise SystemExit(f"error: --splits: {part!r} should look like train=400")
    splits[name.strip()] = int(count)
  return splits


ASR_DEFAULTS = {"splits": "train=400,dev=40,test=40", "min_words": 2, "max_words": 4,
                "sample_freq": 16000}
TTS_DEFAULTS = {"splits": "train=300,val=20,test=20", "min_words": 3, "max_words": 10,
                "sample_freq": 22050}


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--output_dir", required=True)
  parser.add_argument("--tts", action="store_true",
                      help="write a single-voice speech-synthesis corpus (LJSpeech layout)")
  parser.add_argument("--splits", help=f"default {ASR_DEFAULTS['splits']} "
                      f"(--tts: {TTS_DEFAULTS['splits']})")
  parser.add_argument("--words", help="comma-separated vocabulary of the random sentences "
                      "(default: the digits; not with --tts)")
  parser.add_argument("--text_file", help="one sentence per line (instead of --words or, with "
                      "--tts, the built-in templates; --tts keeps lines of "
                      "--min_words..--max_words words)")
  parser.add_argument("--min_words", type=int, help="default 2 (--tts: 3)")
  parser.add_argument("--max_words", type=int, help="default 4 (--tts: 10)")
  parser.add_argument("--engines", help="default espeak-ng,flite (not with --tts)")
  parser.add_argument("--voices", help="comma-separated subset of the voices (not with --tts)")
  parser.add_argument("--sample_freq", type=int, help="default 16000 (--tts: 22050)")
  parser.add_argument("--trim_db", type=float, default=-40.0,
                      help="--tts: trim leading/trailing audio this far below the loudest frame")
  parser.add_argument("--speeds",
                      help="--tts only (default 160): comma-separated speaking rates (words per minute); each "
                      "sentence gets one at random (several: styles for GST)")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--workers", type=int, default=2)
  parser.add_argument("--lm", action="store_true", help="also write a bigram lm.arpa")
  parser.add_argument("--word_boundaries", action="store_true",
                      help="synthesize words one by one, joined with silences, and write "
                      "their times (a words column) for calibrate_timestamps.py")
  args = parser.parse_args(argv)
  # pylint: disable=import-outside-toplevel
  from open_seq2seq.utils.io import exit_if_unwritable
  from open_seq2seq.utils.quiet_start import start_script_quietly
  exit_if_unwritable(args.output_dir, "--output_dir", directory=True)
  start_script_quietly()  # the audio reader's package loads TensorFlow
  defaults = TTS_DEFAULTS if args.tts else ASR_DEFAULTS
  for key, value in defaults.items():
    if getattr(args, key) is None:
      setattr(args, key, value)
  text_lines = None
  if args.text_file:
    with open(args.text_file, encoding="utf-8") as f:
      text_lines = f.read().splitlines()
  if args.tts:
    for option in ("words", "engines", "voices", "lm", "word_boundaries"):
      if getattr(args, option):
        parser.error(f"--{option} applies to speech-recognition corpora, not --tts")
    paths = make_tts_corpus(args.output_dir, parse_splits(args.splits), text_lines=text_lines,
                            min_words=args.min_words, max_words=args.max_words,
                            speeds=tuple(int(v) for v in (args.speeds or "160").split(",")),
                            sample_freq=args.sample_freq, seed=args.seed,
                            workers=args.workers, trim_db=args.trim_db)
  else:
    if args.speeds:
      parser.error("--speeds applies to --tts corpora (speech recognition corpora draw "
                   "140-190 words per minute)")
    words = args.words or ",".join(DIGITS)
    paths = make_corpus(args.output_dir, parse_splits(args.splits),
                        words=[w.strip() for w in words.split(",") if w.strip()],
                        text_lines=text_lines, min_words=args.min_words,
                        max_words=args.max_words,
                        engines=tuple((args.engines or "espeak-ng,flite").split(",")),
                        voices=args.voices.split(",") if args.voices else None,
                        sample_freq=args.sample_freq, seed=args.seed, workers=args.workers,
                        lm=args.lm, word_boundaries=args.word_boundaries)
  for split, path in paths.items():
    print(f"{split}: {path}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
