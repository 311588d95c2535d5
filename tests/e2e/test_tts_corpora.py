"""Speech-synthesis corpora in LJSpeech's layout: the single-voice espeak-ng corpus
(make_synthetic_speech.py --tts), the Asterisk prompts importer on a fixture in the Debian
packages' layout, and on the real packages when they are installed."""

import filecmp
import gzip
import os
import random
import re
import shutil

import numpy as np
import pytest

from tests.helpers.speech import load_script, tone

REAL_SOUNDS = "/usr/share/asterisk/sounds/en_US_f_Allison"
REAL_TRANSCRIPTS = "/usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz"
NORMALIZED = re.compile(r"^[a-z' .,?!;:\-]+$")


def read_lines(path):
  with open(path, encoding="utf-8") as f:
    return f.read().splitlines()


def check_layout(directory, splits, sample_freq):
  """Every CSV line is ``name|raw|normalized`` with a mono 16-bit WAV; returns the rows."""
  import soundfile
  rows = {}
  for split in splits:
    rows[split] = [line.split("|") for line in read_lines(os.path.join(directory, f"{split}.csv"))]
    for fields in rows[split]:
      assert len(fields) == 3 and all(fields) and not fields[0].endswith(".wav"), fields
      assert NORMALIZED.match(fields[2]), fields
      info = soundfile.info(os.path.join(directory, "wavs", fields[0] + ".wav"))
      assert (info.samplerate, info.channels, info.subtype) == (sample_freq, 1, "PCM_16")
  names = [fields[0] for split in rows.values() for fields in split]
  assert sorted(os.listdir(os.path.join(directory, "wavs"))) == sorted(n + ".wav" for n in names)
  return rows


def edge_silence(signal, sample_freq):
  """Seconds before the first and after the last sample within 40 dB of the peak."""
  loud = np.nonzero(np.abs(signal) > 0.01 * np.abs(signal).max())[0]
  return loud[0] / sample_freq, (len(signal) - 1 - loud[-1]) / sample_freq


def padded_tone(duration, freq, sample_freq, seed, pad=0.2):
  silence = np.zeros(int(pad * sample_freq), np.float32)
  return np.concatenate([silence, tone(duration, freq, sample_freq, seed), silence])


def test_normalize_text_and_trim_silence():
  tts = load_script("tts_corpus")
  assert (tts.normalize_text("Press 1, 2 or 1234 at 3 A.M. then # | 28.8 kb/s", 4)
          == "press one, two or one two three four at three a m then pound twenty eight point "
             "eight kb slash s")
  assert tts.normalize_text("On the 21st, 1,500 people visited www.asterisk.org!") == (
      "on the twenty first, one thousand five hundred people visited www dot asterisk dot org!")
  signal = padded_tone(0.5, 300, 16000, 0, pad=0.3)
  trimmed = tts.trim_silence(signal, 16000, threshold_db=-40, margin_ms=10)
  assert min(edge_silence(signal, 16000)) > 0.29
  assert max(edge_silence(trimmed, 16000)) <= 0.015
  assert 0.5 <= len(trimmed) / 16000 <= 0.53


def test_tts_sentences_are_short_distinct_and_seeded():
  tts = load_script("tts_corpus")
  sentences = tts.make_sentences(random.Random(0), 300)
  normalized = [n for _, n in sentences]
  assert len(set(normalized)) == 300 and len({r for r, _ in sentences}) == 300
  assert all(3 <= tts.word_count(n) <= 10 and NORMALIZED.match(n) for n in normalized)
  assert any(re.search(r"\d", r) for r, _ in sentences)  # raw numbers become words
  assert sentences == tts.make_sentences(random.Random(0), 300)
  assert sentences != tts.make_sentences(random.Random(1), 300)


@pytest.fixture
def maker():
  if not shutil.which("espeak-ng"):
    pytest.skip("espeak-ng not installed (Debian package espeak-ng)")
  return load_script("make_synthetic_speech")


def test_tts_corpus_layout_trimmed_disjoint_deterministic(maker, tmp_path, capsys):
  import soundfile
  splits = ["train", "val", "test"]
  first, second = tmp_path / "a", tmp_path / "b"
  assert maker.main(["--tts", f"--output_dir={first}", "--splits=train=6,val=2,test=2",
                     "--seed=5", "--sample_freq=16000"]) == 0
  assert "train: " in capsys.readouterr().out
  rows = check_layout(str(first), splits, 16000)
  assert [len(rows[s]) for s in splits] == [6, 2, 2]
  train_text = {fields[2] for fields in rows["train"]}
  assert not train_text & {fields[2] for s in ("val", "test") for fields in rows[s]}
  for split in splits:
    for name, _, normalized in rows[split]:
      assert 3 <= len(normalized.split()) <= 10
      signal, rate = soundfile.read(str(first / "wavs" / f"{name}.wav"))
      lead, trail = edge_silence(signal, rate)
      assert lead <= 0.05 and trail <= 0.05 and 0.4 < len(signal) / rate < 6, name
  # the same seed gives the same corpus at any rate (22050 Hz by default)
  maker.make_tts_corpus(str(second), {"train": 6, "val": 2, "test": 2}, seed=5)
  check_layout(str(second), splits, 22050)
  for split in splits:
    assert read_lines(first / f"{split}.csv") == read_lines(second / f"{split}.csv")


def test_tts_corpus_from_text_file(maker, tmp_path):
  text = tmp_path / "lines.txt"
  text.write_text("The cat sat on 2 mats.\nthe cat sat on two mats\nToo short\n"
                  "A pipe | inside this line.\n" + "word " * 12 + "\nShe sold 12 shells today.\n")
  paths = maker.make_tts_corpus(str(tmp_path / "out"), {"train": 2, "test": 1},
                                text_lines=read_lines(text), sample_freq=8000, seed=0)
  rows = check_layout(str(tmp_path / "out"), list(paths), 8000)
  assert sorted(fields[2] for split in rows.values() for fields in split) == [
      "a pipe inside this line.", "she sold twelve shells today.", "the cat sat on two mats."]
  with pytest.raises(SystemExit, match="distinct usable lines"):
    maker.make_tts_corpus(str(tmp_path / "x"), {"train": 4}, text_lines=read_lines(text))


def test_tts_corpus_with_two_speaking_rates(maker, tmp_path):
  """Each sentence at one of the speeds: seconds per word fall into a slow and a fast group."""
  import soundfile
  paths = maker.make_tts_corpus(str(tmp_path / "out"), {"train": 10}, speeds=(90, 270),
                                sample_freq=8000, seed=3)
  rates = []
  for name, _, normalized in check_layout(str(tmp_path / "out"), list(paths), 8000)["train"]:
    seconds = soundfile.info(str(tmp_path / "out" / "wavs" / f"{name}.wav")).duration
    rates.append(seconds / len(normalized.split()))
  rates = sorted(rates)
  gap = int(np.argmax(np.diff(rates)))  # the split between the two groups
  slow, fast = rates[gap + 1:], rates[:gap + 1]
  assert slow and fast and min(slow) / max(fast) > 1.5, rates
  with pytest.raises(SystemExit):
    maker.main(["--output_dir", str(tmp_path / "asr"), "--speeds", "100,200"])


# The Asterisk prompts: transcripts as in core-sounds-en.txt.gz, None = no WAV installed.
PROMPTS = {
    "beep": "[this is a simple beep tone]",
    "confbridge-join": "<beep ascending>",
    "demo-moreinfo": "For more information, visit www.asterisk.org.",
    "dictate/forhelp": "press 0 for help",
    "digits/1": "one",
    "digits/h-1": "first",
    "invalid": "I am sorry, that's not a valid extension.  Please try again.",
    "letters/at": "at [@]",
    "pbx-invalid": "I am sorry, that's not a valid extension.  Please try again.",
    "pls-try-call-later": None,
    "queue-seconds": "Seconds",
    "silence/1": "(1 second of silence)",
    "vm-goodbye": "Goodbye",
    "vm-leavemsg": " Press 5 to leave a message",
}


@pytest.fixture
def asterisk_fixture(tmp_path):
  """Sounds root and gzipped transcripts in the Debian packages' layout."""
  import soundfile
  sounds = tmp_path / "usr/share/asterisk/sounds/en_US_f_Allison"
  doc = tmp_path / "usr/share/doc/asterisk-core-sounds-en"
  doc.mkdir(parents=True)
  lines = ["; Core Asterisk Sounds in English", ""]
  for i, (prompt, text) in enumerate(sorted(PROMPTS.items())):
    lines.append(f"{prompt}: {text or 'Please try your call again later.'}")
    if text is None:
      continue
    wav = sounds / f"{prompt}.wav"
    wav.parent.mkdir(parents=True, exist_ok=True)
    signal = np.zeros(8000, np.float32) if prompt.startswith("silence") else padded_tone(
        0.3 + 0.05 * i, 200 + 40 * i, 8000, i)
    soundfile.write(str(wav), signal, 8000, subtype="PCM_16")
  soundfile.write(str(sounds / "unlisted.wav"), tone(0.2, 300, 8000), 8000, subtype="PCM_16")
  transcripts = doc / "core-sounds-en.txt.gz"
  with gzip.open(transcripts, "wt", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  (doc / "copyright").write_text("License: CC-BY-SA-3.0\n")
  return str(sounds), str(transcripts)


def test_import_asterisk_fixture(asterisk_fixture, tmp_path, capsys):
  importer = load_script("import_asterisk_sounds")
  sounds, transcripts = asterisk_fixture
  out = tmp_path / "out"
  assert importer.main([f"--output_dir={out}", f"--sounds_dir={sounds}",
                        f"--transcripts={transcripts}", "--val_size=2", "--test_size=2",
                        "--seed=1"]) == 0
  printed = capsys.readouterr().out
  assert "10 utterances (train 6, val 2, test 2)" in printed
  assert re.search(r"dropped 4 transcript lines\n +3 +tone, beep or silence.*\n +1 +no WAV file",
                   printed), printed
  rows = check_layout(str(out), ["train", "val", "test"], 8000)
  by_name = {fields[0]: (split, fields[1], fields[2])
             for split, split_rows in rows.items() for fields in split_rows}
  assert set(by_name) == {p.replace("/", "-") for p, t in PROMPTS.items()
                          if t and t[0] not in "[<("}
  assert by_name["letters-at"][1:] == ("at", "at")
  assert by_name["vm-leavemsg"][1:] == ("Press 5 to leave a message",
                                        "press five to leave a message")
  assert by_name["dictate-forhelp"][2] == "press zero for help"
  assert by_name["demo-moreinfo"][2] == "for more information, visit www dot asterisk dot org."
  assert by_name["invalid"][0] == by_name["pbx-invalid"][0]  # same text, same split
  assert filecmp.cmp(f"{sounds}/digits/h-1.wav", out / "wavs/digits-h-1.wav", shallow=False)
  readme = (out / "README.txt").read_text()
  assert "CC-BY-SA-3.0" in readme and "Asterisk" in readme and "Allison Smith" in readme
  assert (out / "LICENSE-DATA.txt").read_text() == "License: CC-BY-SA-3.0\n"
  assert not [f for f in os.listdir(out) if f.endswith(".tmp")]
  # deterministic with the seed
  again = importer.import_asterisk_sounds(str(tmp_path / "again"), sounds, transcripts, 2, 2, 1)
  for split, path in again["csv"].items():
    assert read_lines(path) == read_lines(out / f"{split}.csv")


def test_import_asterisk_resampled_and_trimmed(asterisk_fixture, tmp_path):
  import soundfile
  importer = load_script("import_asterisk_sounds")
  sounds, transcripts = asterisk_fixture
  out = tmp_path / "out"
  summary = importer.import_asterisk_sounds(str(out), sounds, transcripts, val_size=1,
                                            test_size=1, sample_freq=16000, trim_db=-40)
  rows = check_layout(str(out), ["train", "val", "test"], 16000)
  assert sum(len(r) for r in rows.values()) == summary["utterances"] == 10
  for split_rows in rows.values():
    for name, _, _ in split_rows:
      signal, rate = soundfile.read(str(out / "wavs" / f"{name}.wav"))
      assert max(edge_silence(signal, rate)) <= 0.05, name
  assert "resampled to 16000 Hz" in (out / "README.txt").read_text()


def test_import_asterisk_errors(asterisk_fixture, tmp_path, monkeypatch):
  importer = load_script("import_asterisk_sounds")
  sounds, transcripts = asterisk_fixture
  with pytest.raises(SystemExit, match="--sounds_dir .*: not found"):
    importer.import_asterisk_sounds(str(tmp_path / "o"), str(tmp_path / "nowhere"), transcripts)
  with pytest.raises(SystemExit, match="10 usable prompts, too few"):
    importer.import_asterisk_sounds(str(tmp_path / "o"), sounds, transcripts, 6, 5)
  monkeypatch.setattr(os, "geteuid", lambda: 1000)  # not root: no apt-get, one clear line
  with pytest.raises(SystemExit, match="asterisk-core-sounds-en-wav asterisk-core-sounds-en"):
    importer.ensure_packages(str(tmp_path / "sounds"), str(tmp_path / "t.txt.gz"))


@pytest.mark.skipif(not (os.path.isdir(REAL_SOUNDS) and os.path.isfile(REAL_TRANSCRIPTS)),
                    reason="Debian packages asterisk-core-sounds-en-wav and "
                           "asterisk-core-sounds-en not installed")
def test_import_real_asterisk_sounds(tmp_path):
  importer = load_script("import_asterisk_sounds")
  summary = importer.import_asterisk_sounds(str(tmp_path))
  assert summary["utterances"] >= 500 and summary["minutes"] >= 20
  assert summary["sizes"]["val"] == summary["sizes"]["test"] == 20
  assert summary["dropped"]["tone, beep or silence (bracketed note only)"] >= 10
  rows = check_layout(str(tmp_path), ["train", "val", "test"], 8000)
  by_name = {fields[0]: fields for split_rows in rows.values() for fields in split_rows}
  assert by_name["digits-1"][2] == "one" and by_name["vm-leavemsg"][2].startswith("press five")
  assert "beep" not in by_name and "silence-1" not in by_name
  assert not any(c in fields[1] for fields in by_name.values() for c in "[]<>()")
