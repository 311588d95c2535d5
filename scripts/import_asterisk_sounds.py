#!/usr/bin/env python
"""Imports the Asterisk core sound prompts as a speech-synthesis corpus (LJSpeech layout).

The Debian packages asterisk-core-sounds-en-wav (8 kHz WAVs under
/usr/share/asterisk/sounds/en_US_f_Allison, some in subfolders such as ``digits/``) and
asterisk-core-sounds-en (transcripts in /usr/share/doc/asterisk-core-sounds-en/
core-sounds-en.txt.gz) hold ~560 studio prompts by one speaker, Allison Smith, licensed
CC-BY-SA-3.0. The transcript file has ``;`` comments and ``<prompt>: <text>`` lines, e.g.
``digits/1: one``; tones, beeps and silences are described in brackets
(``beep: [this is a simple beep tone]``, ``silence/1: (1 second of silence)``).

Writes ``wavs/<prompt with / as ->.wav`` (``digits/1`` -> ``digits-1``), header-less
``train.csv``/``val.csv``/``test.csv`` lines ``name|raw text|normalized text`` (numbers and
symbols as words), and README.txt naming the origin and licence. Prompts with the same text
land in the same split.

    python scripts/import_asterisk_sounds.py --output_dir=data/asterisk

Installs the packages with apt-get when they are missing and it runs as root.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import os
import random
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tts_corpus  # noqa: E402
from open_seq2seq.utils.io import atomic_open, atomic_write_text  # noqa: E402

PACKAGES = ("asterisk-core-sounds-en-wav", "asterisk-core-sounds-en")
SOUNDS_DIR = "/usr/share/asterisk/sounds/en_US_f_Allison"
TRANSCRIPTS = "/usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz"
# Notes about the recording, not words read: [tones], <beep ...>, (10 seconds of silence).
NOTE = re.compile(r"\[[^\]]*\]|<[^>]*>|\([^)]*\)")
# Prompts read numbers of 4+ digits (extensions, passwords) digit by digit.
SPELL_DIGITS_FROM = 4

README = """\
Asterisk core sound prompts (English, voice of Allison Smith) as a speech-synthesis corpus
in the LJSpeech layout: wavs/<name>.wav and header-less <split>.csv files with lines
name|raw transcript|normalized transcript.

Origin: the Asterisk project's core sound prompts (asterisk-core-sounds, English), recorded
by Allison Smith (http://www.theivrvoice.com), financial contributions by Digium, Inc.
Copyright 2003-2010 Allison Smith. Taken from the Debian packages asterisk-core-sounds-en-wav
(audio) and asterisk-core-sounds-en (transcripts, core-sounds-en.txt.gz).

Licence: Creative Commons Attribution-ShareAlike 3.0 Unported (CC-BY-SA-3.0),
https://creativecommons.org/licenses/by-sa/3.0/{licence_copy}
This corpus is an adaptation distributed under the same licence.

Changes made to the original work: prompts renamed (subfolders flattened with '-', e.g.
digits/1.wav -> wavs/digits-1.wav); prompts that are tones, beeps or silences dropped;
bracketed notes removed from the transcripts; normalized transcripts added (lowercase,
numbers and symbols as words){changes}.
"""


def ensure_packages(sounds_dir: str, transcripts: str) -> None:
  """Installs the Debian packages when the default files are missing (as root), else exits."""
  def missing() -> list[str]:
    return [p for p, path in zip(PACKAGES, (sounds_dir, transcripts)) if not os.path.exists(path)]
  if not missing():
    return
  if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for update in (False, True):  # a fresh image may need its package lists first
      if update:
        subprocess.run(["apt-get", "update", "-qq"], check=False, stdout=subprocess.DEVNULL,
                       env=env)
      subprocess.run(["apt-get", "install", "-y", "-qq"] + list(PACKAGES), check=False,
                     stdout=subprocess.DEVNULL, env=env)
      if not missing():
        return
  absent = " and ".join(p for p in (sounds_dir, transcripts) if not os.path.exists(p))
  raise SystemExit(f"error: {absent} not found; install the Debian packages {' '.join(PACKAGES)}"
                   f" (if they are installed, dpkg may exclude /usr/share/doc: pass --transcripts)")


def read_transcripts(path: str) -> tuple[list[tuple[str, str]], collections.Counter]:
  """``(prompt, text)`` pairs of the transcript file (gzipped or plain) and malformed lines."""
  opener = gzip.open if path.endswith(".gz") else open
  pairs, bad = [], collections.Counter()
  try:
    with opener(path, "rt", encoding="utf-8") as f:
      for line in f:
        line = line.strip()
        if not line or line.startswith(";"):
          continue
        prompt, sep, text = line.partition(":")
        if not sep or not prompt.strip() or " " in prompt.strip():
          bad["malformed line (no '<prompt>: ')"] += 1
          continue
        pairs.append((prompt.strip(), text.strip()))
  except (OSError, UnicodeDecodeError) as e:
    raise SystemExit(f"error: {path}: cannot read the transcripts ({e})") from None
  return pairs, bad


def speakable(text: str) -> tuple[str, str | None]:
  """The transcript without bracketed notes, or ``("", reason)`` when nothing is spoken."""
  raw = " ".join(NOTE.sub(" ", text).replace("|", " ").split())
  if re.search(r"[A-Za-z0-9]", raw):
    return raw, None
  return "", "tone, beep or silence (bracketed note only)" if text else "empty transcript"


def split_groups(rows: list[tuple[str, str, str]], val_size: int, test_size: int, seed: int
                 ) -> dict[str, list[tuple[str, str, str]]]:
  """Deterministic train/val/test split that keeps prompts with the same words together."""
  groups: dict[str, list] = collections.defaultdict(list)
  for row in sorted(rows):
    groups[tts_corpus.word_key(row[2])].append(row)
  texts = sorted(groups)
  random.Random(seed).shuffle(texts)
  splits: dict[str, list] = {"train": [], "val": [], "test": []}
  for text in texts:
    group = groups[text]
    if len(splits["test"]) + len(group) <= test_size:
      splits["test"] += group
    elif len(splits["val"]) + len(group) <= val_size:
      splits["val"] += group
    else:
      splits["train"] += group
  return {name: sorted(split) for name, split in splits.items()}


def copy_audio(src: str, dst: str, sample_freq: int | None, trim_db: float | None) -> float:
  """Copies (or resamples / trims) one prompt to a 16-bit mono WAV; returns its seconds."""
  import soundfile
  info = soundfile.info(src)
  if (sample_freq in (None, info.samplerate) and trim_db is None and info.channels == 1
      and info.format == "WAV" and info.subtype == "PCM_16"):
    with open(src, "rb") as fin, atomic_open(dst, binary=True) as fout:
      shutil.copyfileobj(fin, fout)
    return info.duration
  from open_seq2seq.data.speech2text.audio import read_audio
  rate = sample_freq or info.samplerate
  signal = read_audio(src, rate, resample=True)
  if trim_db is not None:
    signal = tts_corpus.trim_silence(signal, rate, threshold_db=trim_db)
  tts_corpus.write_wav(dst, signal, rate)
  return len(signal) / rate


def import_asterisk_sounds(output_dir: str, sounds_dir: str | None = None,
                           transcripts: str | None = None, val_size: int = 20,
                           test_size: int = 20, seed: int = 0, sample_freq: int | None = None,
                           trim_db: float | None = None, max_seconds: float | None = None,
                           limit: int | None = None) -> dict:
  """Writes the corpus; returns ``{"csv": {split: path}, "utterances", "minutes", "dropped"}``.

  Args:
    sounds_dir / transcripts: the prompts' root folder and transcript file (default: where
      the Debian packages put them, installed when missing and running as root).
    sample_freq: resample to this rate (default: keep the prompts' 8 kHz, copying the files).
    trim_db: trim leading/trailing audio this far below the loudest frame (default: keep).
    max_seconds: drop prompts longer than this.
    limit: keep only the first ``limit`` usable prompts (by name), for quick runs.
  """
  import soundfile
  if sounds_dir is None or transcripts is None:
    ensure_packages(sounds_dir or SOUNDS_DIR, transcripts or TRANSCRIPTS)
  sounds_dir, transcripts = sounds_dir or SOUNDS_DIR, transcripts or TRANSCRIPTS
  for path, option in ((sounds_dir, "--sounds_dir"), (transcripts, "--transcripts")):
    if not os.path.exists(path):
      raise SystemExit(f"error: {option} {path}: not found")
  pairs, dropped = read_transcripts(transcripts)
  kept, names = [], {}
  for prompt, text in sorted(pairs):
    raw, reason = speakable(text)
    name = prompt.replace("/", "-")
    src = os.path.join(sounds_dir, prompt + ".wav")
    if reason is None and name in names:
      reason = "duplicate prompt name"
    elif reason is None and not os.path.isfile(src):
      reason = "no WAV file"
    elif reason is None and max_seconds and soundfile.info(src).duration > max_seconds:
      reason = f"longer than {max_seconds:g} s"
    if reason:
      dropped[reason] += 1
      continue
    names[name] = src
    kept.append((name, raw, tts_corpus.normalize_text(raw, SPELL_DIGITS_FROM)))
  kept = kept[:limit] if limit else kept
  if len(kept) <= val_size + test_size:
    raise SystemExit(f"error: {transcripts}: {len(kept)} usable prompts, too few for "
                     f"--val_size={val_size} and --test_size={test_size}")
  splits = split_groups(kept, val_size, test_size, seed)
  os.makedirs(os.path.join(output_dir, "wavs"), exist_ok=True)
  seconds, csv_paths = 0.0, {}
  for split, rows in splits.items():
    for name, _, _ in rows:
      seconds += copy_audio(names[name], os.path.join(output_dir, "wavs", name + ".wav"),
                            sample_freq, trim_db)
    csv_paths[split] = os.path.join(output_dir, f"{split}.csv")
    tts_corpus.write_metadata(csv_paths[split], rows)
  write_readme(output_dir, transcripts, sample_freq, trim_db)
  return {"csv": csv_paths, "utterances": len(kept), "minutes": seconds / 60,
          "dropped": dropped, "sizes": {k: len(v) for k, v in splits.items()}}


def write_readme(output_dir: str, transcripts: str, sample_freq: int | None,
                 trim_db: float | None) -> None:
  """README.txt (origin, licence, changes) plus the packages' copyright file when found."""
  licence_copy = ""
  copyright_file = os.path.join(os.path.dirname(os.path.abspath(transcripts)), "copyright")
  if os.path.isfile(copyright_file):
    with open(copyright_file, encoding="utf-8", errors="replace") as f:
      atomic_write_text(os.path.join(output_dir, "LICENSE-DATA.txt"), f.read())
    licence_copy = "\nThe full licence text (Debian's copyright file) is in LICENSE-DATA.txt."
  changes = ""
  if sample_freq:
    changes += f"; resampled to {sample_freq} Hz"
  if trim_db is not None:
    changes += f"; leading and trailing silence trimmed ({trim_db:g} dB)"
  atomic_write_text(os.path.join(output_dir, "README.txt"),
                    README.format(licence_copy=licence_copy, changes=changes))


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--output_dir", required=True)
  parser.add_argument("--sounds_dir", help=f"the prompts' root folder (default {SOUNDS_DIR})")
  parser.add_argument("--transcripts", help=f"core-sounds-en.txt[.gz] (default {TRANSCRIPTS})")
  parser.add_argument("--val_size", type=int, default=20)
  parser.add_argument("--test_size", type=int, default=20)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--sample_freq", type=int, help="resample (default: keep 8000 Hz)")
  parser.add_argument("--trim_db", type=float,
                      help="trim leading/trailing audio this far below the loudest frame, "
                           "e.g. -40 (default: no trimming)")
  parser.add_argument("--max_seconds", type=float, help="drop prompts longer than this")
  parser.add_argument("--limit", type=int, help="keep only this many prompts (quick runs)")
  args = parser.parse_args(argv)
  from open_seq2seq.utils.io import exit_if_unwritable  # pylint: disable=import-outside-toplevel
  exit_if_unwritable(args.output_dir, "--output_dir", directory=True)
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()  # reading the audio and the number words import TensorFlow
  summary = import_asterisk_sounds(args.output_dir, args.sounds_dir, args.transcripts,
                                   args.val_size, args.test_size, args.seed, args.sample_freq,
                                   args.trim_db, args.max_seconds, args.limit)
  sizes = ", ".join(f"{k} {v}" for k, v in summary["sizes"].items())
  print(f"{summary['utterances']} utterances ({sizes}), {summary['minutes']:.1f} minutes "
        f"in {args.output_dir}")
  dropped = summary["dropped"]
  print(f"dropped {sum(dropped.values())} transcript lines" +
        "".join(f"\n  {count:4d}  {reason}" for reason, count in dropped.most_common()))
  return 0


if __name__ == "__main__":
  sys.exit(main())
