"""Word timestamps through run.py: infer with ``--word_timestamps=True`` writes a ``words``
column (``word:start-end``) whose words are the transcript's, and the export served without
open_seq2seq gives the same words and times; make_synthetic_speech.py --word_boundaries
writes speech whose words are where its CSV says."""

import csv
import json
import os
import shutil

import numpy as np
import pytest
import soundfile

from open_seq2seq.utils.word_timestamps import parse_words
from tests.e2e.test_export import run_export_script
from tests.helpers.speech import CONFIG_DIR, VOCAB, load_script, write_corpus
from tests.helpers.toy import run_cli

pytestmark = pytest.mark.slow

TRANSCRIPTS = ["one two", "three", "four five", "six", "two six", "nine one"]


def read_rows(path):
  with open(path, encoding="utf-8", newline="") as f:
    return list(csv.DictReader(f))


def test_infer_writes_word_times_and_the_export_serves_them(tmp_path):
  data = tmp_path / "data"
  csv_path = write_corpus(str(data), TRANSCRIPTS, durations=[1.2, 0.6, 1.1, 0.5, 0.9, 1.0])
  common = [f"--config_file={os.path.join(CONFIG_DIR, 'w2l_toy_synthetic.py')}",
            f"--logdir={tmp_path / 'run'}", f"--data_layer_params/vocab_file={VOCAB}",
            f"--data_layer_params/dataset_files=['{csv_path}']", "--batch_size_per_gpu=3"]
  trained = run_cli(common + ["--mode=train", "--max_steps=2"])
  assert trained.returncode == 0, trained.stderr[-3000:]
  timed = ["--word_timestamps=True", "--word_start_offset=-0.03", "--word_end_offset=0.02"]
  output = tmp_path / "infer.csv"
  inferred = run_cli(common + ["--mode=infer", f"--infer_output_file={output}", *timed])
  assert inferred.returncode == 0, inferred.stderr[-3000:]
  rows = read_rows(output)
  assert list(rows[0]) == ["wav_filename", "predicted_transcript", "words"]
  assert len(rows) == len(TRANSCRIPTS)
  words = {}
  for row in rows:
    words[row["wav_filename"]] = parse_words(row["words"])
    assert [w for w, _, _ in words[row["wav_filename"]]] == row["predicted_transcript"].split()
    duration = soundfile.info(os.path.join(data, row["wav_filename"])).duration
    starts = [start for _, start, _ in words[row["wav_filename"]]]
    assert starts == sorted(starts)
    assert all(0 <= start <= end <= duration + 0.02 for _, start, end in words[row["wav_filename"]])
  assert sum(len(w) for w in words.values()) >= 3, rows  # an untrained model says something

  exported = run_cli(common + ["--mode=export", f"--export_dir={tmp_path / 'exported'}", *timed])
  assert exported.returncode == 0, exported.stderr[-3000:]
  assert "text, ids, ids_length, words, word_start, word_end, num_words" in exported.stdout
  inputs = tmp_path / "wavs.txt"
  inputs.write_text("".join(os.path.join(data, r["wav_filename"]) + "\n" for r in rows))
  run_export_script(str(tmp_path / "exported"), str(inputs), str(tmp_path / "served.jsonl"),
                    "--json")
  served = [json.loads(line) for line in
            (tmp_path / "served.jsonl").read_text(encoding="utf-8").splitlines()]
  for row, out in zip(rows, served):
    assert out["text"] == row["predicted_transcript"]
    n = out["num_words"]
    assert out["words"][:n] == [w for w, _, _ in words[row["wav_filename"]]]
    for key, column in (("word_start", 1), ("word_end", 2)):
      expected = [w[column] for w in words[row["wav_filename"]]]
      assert out[key][:n] == pytest.approx(expected, abs=0.006)  # the CSV's two decimals


def test_synthetic_word_boundaries_are_where_the_words_sound(tmp_path):
  if not (shutil.which("espeak-ng") and shutil.which("flite")):
    pytest.skip("espeak-ng/flite not installed (Debian packages espeak-ng, flite)")
  folder = tmp_path / "words"
  csv_path = load_script("make_synthetic_speech").make_corpus(
      str(folder), {"test": 4}, seed=3, word_boundaries=True)["test"]
  rows = read_rows(csv_path)
  assert len(rows) == 4 and list(rows[0]) == ["wav_filename", "wav_filesize", "transcript",
                                               "words"]
  for row in rows:
    signal, rate = soundfile.read(os.path.join(folder, row["wav_filename"]))
    words = parse_words(row["words"])
    assert [w for w, _, _ in words] == row["transcript"].split()
    bounds = [t for _, start, end in words for t in (start, end)]
    assert bounds == sorted(bounds) and bounds[0] >= 0.09 and bounds[-1] <= len(signal) / rate
    inside = np.zeros(len(signal), bool)
    for _, start, end in words:
      inside[int(start * rate):int(end * rate)] = True
    # the words carry the sound; between and around them only the noise (-45 to -30 dB)
    assert np.sqrt(np.mean(signal[inside] ** 2)) > 4 * np.sqrt(np.mean(signal[~inside] ** 2))
