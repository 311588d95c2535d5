"""scripts/intelligibility.py: PocketSphinx (an independent recognizer) transcribes synthetic
sentences (flite) with a low word error rate, the same sentences' transcripts over tones and
noise with a high one, and run.py --mode=infer's CSV reads as the LJSpeech layout does."""

import csv
import os
import random
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import soundfile

from tests.helpers.speech import load_script, tone
from tests.helpers.tts import ROOT

SCRIPT = os.path.join(ROOT, "scripts", "intelligibility.py")
ENV = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")


def run(*args, env=ENV):
  return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                        timeout=300, env=env)


def wer_of(stdout: str, system: str) -> float:
  match = re.search(rf"^\| {re.escape(system)} \| (\d+) \| (\d+) \| [\d.]+ \| [^|]+ \| "
                    rf"([\d.]+) \|$", stdout, re.M)
  assert match, stdout
  return float(match.group(3))


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
  """Six sentences spoken by flite's slt voice (16 kHz) in the LJSpeech layout; the same
  lines as an infer CSV; and the same transcripts over tones and white noise at 8 kHz.

  (flite, not espeak-ng: PocketSphinx's acoustic model, trained on recorded voices, gets
  most words of espeak-ng's formant synthesis wrong; see docs/speech-synthesis.md.)"""
  root = tmp_path_factory.mktemp("intelligibility")
  speak = load_script("make_synthetic_speech")
  tts_corpus = load_script("tts_corpus")
  speak.ensure_engines(["flite"])
  os.makedirs(root / "speech" / "wavs")
  lines = [(f"s{i}", raw, normalized) for i, (raw, normalized)
           in enumerate(tts_corpus.make_sentences(random.Random(3), 6))]
  for name, _, normalized in lines:
    speak.synthesize(normalized, "flite", "slt", 160, 50,
                     str(root / "speech" / "wavs" / f"{name}.wav"))
  speech = root / "speech" / "test.csv"
  speech.write_text("".join("|".join(line) + "\n" for line in lines))
  # as run.py --mode=infer writes it: a header, paths as given (here relative to the CSV's
  # folder, as a relative --logdir writes them when the CSV goes there too)
  infer = root / "infer.csv"
  with open(infer, "w", encoding="utf-8", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["name", "transcript", "wav_path", "seconds"])
    for name, _, normalized in lines:
      writer.writerow([name, normalized, f"speech/wavs/{name}.wav", "1.00"])
  noise_dir = root / "noise"
  os.makedirs(noise_dir / "wavs")
  shutil.copy(speech, noise_dir / "test.csv")
  rng = np.random.default_rng(0)
  for i, (name, _, _) in enumerate(lines):
    seconds = soundfile.info(str(root / "speech" / "wavs" / f"{name}.wav")).duration
    signal = (tone(seconds, 250.0 + 90 * i, 8000, seed=i) if i % 2 else
              0.3 * rng.standard_normal(int(seconds * 8000)).astype(np.float32))
    soundfile.write(str(noise_dir / "wavs" / f"{name}.wav"), signal, 8000, subtype="PCM_16")
  return {"speech": str(speech), "infer": str(infer), "noise": str(noise_dir / "test.csv"),
          "root": root}


def test_speech_is_recognized_and_noise_is_not(sets):
  transcripts = sets["root"] / "transcripts.tsv"
  result = run("--systems", f"speech={sets['speech']},infer={sets['infer']},"
               f"noise={sets['noise']}", f"--transcripts={transcripts}")
  assert result.returncode == 0, result.stderr[-3000:]
  speech, infer, noise = (wer_of(result.stdout, s) for s in ("speech", "infer", "noise"))
  # measured 0.159 on these six sentences (7 of 44 words), 0.218 on 40 such sentences;
  # noise and tones: 1.0 (every word missed)
  assert speech < 0.35, result.stdout
  assert infer == speech  # same clips read through the infer CSV's columns
  assert noise >= 0.8, result.stdout
  assert re.search(r"\| noise \| 6 \| \d+ \| [\d.]+ \| 8 kHz \(upsampled\) \|", result.stdout)
  assert "Sources at 8000 Hz were upsampled to 16000 Hz" in result.stdout
  rows = [line.split("\t") for line in transcripts.read_text().splitlines()]
  assert len(rows) == 18 and {r[0] for r in rows} == {"speech", "infer", "noise"}


def test_normalizes_both_texts_alike():
  normalize = load_script("intelligibility").normalize
  assert normalize("Dr. Smith paid $12, didn't he?") == "doctor smith paid twelve dollars didn't he"
  assert normalize("...has left the conference.") == "has left the conference"
  assert normalize("the(2) inter-asterisk 'quoted'") == "the inter asterisk quoted"


def test_missing_files_and_recognizer_are_one_line_errors(sets, tmp_path):
  result = run("--systems", f"ok={sets['speech']},bad={tmp_path / 'none.csv'}")
  assert result.returncode == 2
  assert result.stderr.strip() == f"error: {tmp_path / 'none.csv'}: no such CSV file"
  broken = tmp_path / "broken"
  shutil.copytree(os.path.dirname(sets["speech"]), broken)
  os.remove(next(p for p in (broken / "wavs").iterdir()))
  result = run(str(broken / "test.csv"))
  assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
  assert re.fullmatch(r"error: \S+test\.csv: the audio of s\d, \S+\.wav, not found\n",
                      result.stderr), result.stderr
  blocker = tmp_path / "blocker" / "pocketsphinx"  # an environment without the recognizer
  os.makedirs(blocker)
  (blocker / "__init__.py").write_text("raise ImportError('not installed')\n")
  result = run(sets["speech"], env=dict(ENV, PYTHONPATH=f"{blocker.parent}{os.pathsep}{ROOT}"))
  assert result.returncode == 2
  assert result.stderr.strip() == ("error: the recognizer is PyPI's pocketsphinx, not "
                                   "installed: pip install -e .[tts-eval] (or .[test])")


PLOT = os.path.join(ROOT, "scripts", "plot_spectrograms.py")


def test_spectrogram_picture_of_two_systems(sets, tmp_path):
  """scripts/plot_spectrograms.py draws the same clips of two sets (16 kHz speech, 8 kHz
  tones and noise) as one PNG, a row per system and a column per clip, in the band both
  have; a clip one set lacks is a one-line error."""
  from matplotlib.image import imread
  output = tmp_path / "voices.png"
  result = subprocess.run([sys.executable, PLOT, f"--output={output}", "--clips=s0,s1",
                           "--systems", f"speech={sets['speech']},noise={sets['noise']}"],
                          capture_output=True, text=True, timeout=300, env=ENV)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip() == f"{output}: 2 systems x 2 clips, 0-4 kHz"
  picture = imread(str(output))
  assert picture.ndim == 3 and picture.shape[0] > 300 and picture.shape[1] > 600
  assert picture[..., :3].std() > 0.1  # drawn, not blank
  result = subprocess.run([sys.executable, PLOT, f"--output={tmp_path / 'x.png'}",
                           "--clips=s0,nope", "--systems", f"speech={sets['speech']}"],
                          capture_output=True, text=True, timeout=300, env=ENV)
  assert result.returncode == 2 and not (tmp_path / "x.png").exists()
  assert result.stderr.startswith(f"error: speech ({sets['speech']}) has no clip named "
                                  "nope; it has 6, e.g. s0, s1, s2"), result.stderr
  assert len(result.stderr.strip().splitlines()) == 1


def test_spectrogram_bins_and_frames():
  plot = load_script("plot_spectrograms")
  rate = 8000
  t = np.arange(rate) / rate  # one second of 1 kHz plus a weaker 3 kHz
  audio = (np.sin(2 * np.pi * 1000 * t) + 0.1 * np.sin(2 * np.pi * 3000 * t)).astype(np.float32)
  power, freqs = plot.power_spectrogram(audio, rate, max_hz=2000.0)
  assert freqs[-1] <= 2000.0 and power.shape[0] == len(freqs)
  assert power.shape[1] == 1 + (rate - 200) // 80  # whole 25 ms windows every 10 ms
  assert abs(freqs[power[:, 10].argmax()] - 1000.0) <= rate / 256
  full, full_freqs = plot.power_spectrogram(audio, rate, max_hz=4000.0)
  strong = full[np.abs(full_freqs - 1000.0).argmin(), 10]
  weak = full[np.abs(full_freqs - 3000.0).argmin(), 10]
  assert 15.0 < 10 * np.log10(strong / weak) < 25.0  # 20 dB apart, within the window's leakage
