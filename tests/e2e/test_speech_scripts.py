"""LibriSpeech importer on a tiny archive, the synthetic corpus builder, and real speech from
Debian's pocketsphinx-testdata read, featurized and transcribed end to end."""

import csv
import os
import re
import shutil
import tarfile

import numpy as np
import pytest

from tests.helpers.speech import (POCKETSPHINX_DIR, build_model, load_script, speech_config,
                                  to_numpy, tone)


def read_csv(path):
  with open(path, encoding="utf-8", newline="") as f:
    return list(csv.DictReader(f))


UTTERANCES = {"84-121123-0000": "GO DO YOU HEAR", "84-121123-0001": "BUT IN LESS THAN FIVE MINUTES",
              "174-50561-0000": "FORGOTTEN TOO"}


@pytest.fixture
def librispeech_archive(tmp_path):
  import soundfile
  src = tmp_path / "src"
  for utt, text in UTTERANCES.items():
    speaker, chapter, _ = utt.split("-")
    folder = src / "LibriSpeech" / "dev-clean" / speaker / chapter
    folder.mkdir(parents=True, exist_ok=True)
    soundfile.write(str(folder / f"{utt}.flac"), tone(0.4, 300), 16000, subtype="PCM_16")
    with open(folder / f"{speaker}-{chapter}.trans.txt", "a") as f:
      f.write(f"{utt} {text}\n")
  archive = tmp_path / "dev-clean.tar.gz"
  with tarfile.open(archive, "w:gz") as tar:
    tar.add(src / "LibriSpeech", arcname="LibriSpeech")
  return str(archive)


@pytest.mark.parametrize("audio_format", ["wav", "flac"])
def test_import_librispeech(librispeech_archive, tmp_path, audio_format):
  importer = load_script("import_librispeech")
  out = tmp_path / "out"
  paths = importer.import_librispeech(str(out), [librispeech_archive], audio_format=audio_format)
  assert list(paths) == ["dev-clean"]
  rows = read_csv(paths["dev-clean"])
  assert sorted(r["transcript"] for r in rows) == sorted(t.lower() for t in UTTERANCES.values())
  for row in rows:
    audio = os.path.join(str(out), row["wav_filename"])
    assert audio.endswith("." + audio_format) and os.path.getsize(audio) == int(row["wav_filesize"])
  model = build_model(speech_config([paths["dev-clean"]]), "eval")
  batch = to_numpy(next(iter(model.data_layer.build_dataset())))
  assert batch["source_tensors"][1].tolist() == [41, 41, 41]


def test_import_librispeech_rejects_missing_audio(librispeech_archive, tmp_path):
  importer = load_script("import_librispeech")
  src = tmp_path / "tree"
  with tarfile.open(librispeech_archive) as tar:
    tar.extractall(src, filter="data")
  os.remove(next(src.rglob("*.flac")))
  with pytest.raises(SystemExit, match="is missing"):
    importer.import_librispeech(str(tmp_path / "o"), source_dir=str(src))


def test_make_synthetic_speech(tmp_path):
  if not (shutil.which("espeak-ng") and shutil.which("flite")):
    pytest.skip("espeak-ng/flite not installed (Debian packages espeak-ng, flite)")
  maker = load_script("make_synthetic_speech")
  paths = maker.make_corpus(str(tmp_path), {"train": 8, "test": 4}, seed=3, lm=True)
  train, test = read_csv(paths["train"]), read_csv(paths["test"])
  assert len(train) == 8 and len(test) == 4
  assert not {r["transcript"] for r in train} & {r["transcript"] for r in test}
  import soundfile
  for row in train + test:
    assert set(row["transcript"].split()) <= set(maker.DIGITS)
    info = soundfile.info(os.path.join(str(tmp_path), row["wav_filename"]))
    assert info.samplerate == 16000 and info.subtype == "PCM_16" and 0.3 < info.duration < 5
  assert os.path.isfile(tmp_path / "lm.arpa") and os.path.isfile(tmp_path / "vocab.txt")


def pocketsphinx_csv(directory):
  """A CSV over pocketsphinx-testdata's LibriVox recordings and their transcripts."""
  rows = []
  with open(os.path.join(POCKETSPHINX_DIR, "librivox", "transcription")) as f:
    for line in f:
      match = re.match(r"<s>(.*)</s>\s*\((\S+)\)", line.strip())
      wav = os.path.join(POCKETSPHINX_DIR, "librivox", match.group(2) + ".wav")
      rows.append((wav, " ".join(match.group(1).split())))
  path = os.path.join(directory, "librivox.csv")
  with open(path, "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["wav_filename", "wav_filesize", "transcript"])
    for wav, text in rows:
      writer.writerow([wav, os.path.getsize(wav), text])
  return path, rows


@pytest.mark.skipif(not os.path.isdir(POCKETSPHINX_DIR),
                    reason="Debian package pocketsphinx-testdata not installed")
def test_real_speech_read_featurize_transcribe(tmp_path):
  librosa = pytest.importorskip("librosa")
  csv_path, rows = pocketsphinx_csv(str(tmp_path))
  model = build_model(speech_config([csv_path], batch_size_per_gpu=2), "eval")
  layer = model.data_layer
  # features of real speech agree with librosa's
  signal, _ = librosa.load(rows[1][0], sr=None)
  ours = layer.extractor.raw_features(signal)
  from open_seq2seq.data.speech2text.features import preemphasize
  power = np.abs(librosa.stft(preemphasize(signal), n_fft=512, hop_length=160, win_length=320,
                              window="hann")) ** 2
  ref = np.log(librosa.filters.mel(sr=16000, n_fft=512, n_mels=32) @ power + 1e-20).T
  np.testing.assert_allclose(ours, ref, atol=2e-3)
  # an (untrained) model transcribes every recording; WER is computed over real transcripts
  results, inferred = [], []
  for batch in layer.build_dataset():
    outputs = to_numpy(model.predict(batch))
    batch = to_numpy(batch)
    assert np.isfinite(outputs["logits"]).all()
    results += model.evaluate(batch, outputs)
    inferred += model.infer(batch, outputs)
  metrics = model.finalize_evaluation(sorted(results))
  assert metrics["WER"] >= 0 and len(results) == len(rows) == 5
  assert [i for i, _ in sorted(inferred)] == list(range(5))
  # frame counts follow the recordings' durations (7.1 s -> 711 frames)
  assert layer.featurize(rows[0][0])[0].shape == (711, 32)
