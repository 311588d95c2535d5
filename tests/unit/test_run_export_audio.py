"""scripts/run_export.py: audio outputs become WAV files (one per input, one line each), and an
input that cannot be served is one line while the other inputs are still served (issue 38).

The SavedModels here are small hand-written tf.Modules with the metadata run.py --mode=export
writes: no training. tests/e2e/test_export.py runs the script on a real Tacotron export.
"""

import json
import os

import numpy as np
import pytest
import soundfile
import tensorflow as tf

from tests.helpers.speech import load_script

run_export = load_script("run_export")

RATE = 8000


class _Speaker(tf.Module):
  """Text in, a tone of 40 samples per character out (zero-padded rows), like the speech
  synthesis signature."""

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def serve(self, text):
    lengths = tf.strings.length(text) * 40
    t = tf.cast(tf.range(tf.reduce_max(lengths)), tf.float32)
    rows = 0.5 * tf.sin(t[None, :] * tf.cast(lengths, tf.float32)[:, None] / 1000.0)
    audio = tf.where(tf.sequence_mask(lengths, tf.shape(t)[0]), rows, 0.0)
    return {"audio": audio, "audio_length": lengths}


class _Listener(tf.Module):
  """Waveforms in, their lengths as text out, like the speech recognition signature."""

  @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32),
                                tf.TensorSpec([None], tf.int32)])
  def serve(self, waveform, length):  # pylint: disable=unused-argument
    return {"text": tf.strings.as_string(length)}


class _Viewer(tf.Module):
  """Encoded images in, their heights out: a batch holding bytes that are no image fails."""

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def serve(self, image):
    heights = tf.map_fn(lambda b: tf.shape(tf.io.decode_png(b))[0], image,
                        fn_output_signature=tf.int32)
    return {"label": tf.strings.as_string(heights)}


def _save(module, directory, signature):
  tf.saved_model.save(module, str(directory), signatures={"serving_default": module.serve})
  os.makedirs(directory / "assets.extra", exist_ok=True)
  (directory / "assets.extra" / "open_seq2seq.json").write_text(json.dumps(
      {"model": "Test", "signatures": {"serving_default": signature}}))
  return directory


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
  root = tmp_path_factory.mktemp("exports")
  speaker = _save(_Speaker(), root / "speaker", {
      "inputs": {"text": {"dtype": "string", "shape": [None], "doc": "sentences"}},
      "outputs": {"audio": "waveforms", "audio_length": "samples of each"},
      "required_imports": [], "sample_rate": RATE,
      "audio_outputs": {"audio": {"length": "audio_length", "sample_rate": RATE}}})
  listener = _save(_Listener(), root / "listener", {
      "inputs": {"waveform": {"dtype": "float32", "shape": [None, None], "doc": "audio"},
                 "length": {"dtype": "int32", "shape": [None], "doc": "samples"}},
      "outputs": {"text": "the transcript"}, "required_imports": [], "sample_rate": RATE})
  viewer = _save(_Viewer(), root / "viewer", {
      "inputs": {"image": {"dtype": "string", "shape": [None], "doc": "image files"}},
      "outputs": {"label": "the class"}, "required_imports": []})
  return {"speaker": speaker, "listener": listener, "viewer": viewer}


def _inputs(tmp_path, lines):
  path = tmp_path / "in.txt"
  path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
  return str(path)


def _errors(capsys) -> list[str]:
  lines = capsys.readouterr().err.splitlines()
  assert all(line.startswith("error: ") for line in lines), lines
  return lines


# ----------------------------------------------------------------------------- audio outputs
def test_audio_outputs_are_written_as_wav_files(exports, tmp_path, capsys):
  sentences = ["hi", "a longer one", "abc"]
  out, wavs = tmp_path / "out.txt", tmp_path / "new" / "wavs"  # missing folders are made
  status = run_export.main([str(exports["speaker"]), _inputs(tmp_path, sentences),
                            "--output", str(out), "--output_dir", str(wavs),
                            "--batch_size", "2"])
  assert status == 0 and capsys.readouterr().err == ""
  lengths = [40 * len(s) for s in sentences]
  assert out.read_text().splitlines() == [
      f"{wavs / f'{i}.wav'} ({n / RATE:.2f} s)" for i, n in enumerate(lengths, 1)]
  assert sorted(os.listdir(wavs)) == ["1.wav", "2.wav", "3.wav"]  # no temporary file left
  for i, n in enumerate(lengths, 1):  # each input's own samples, without the batch's padding
    audio, rate = soundfile.read(str(wavs / f"{i}.wav"), dtype="float32")
    info = soundfile.info(str(wavs / f"{i}.wav"))
    assert rate == RATE and info.subtype == "PCM_16" and info.channels == 1
    np.testing.assert_allclose(audio, 0.5 * np.sin(np.arange(n) * n / 1000.0), atol=2 / 32768)


def test_json_names_the_wav_file_and_keeps_the_other_outputs(exports, tmp_path):
  out, wavs = tmp_path / "out.jsonl", tmp_path / "wavs"
  assert run_export.main([str(exports["speaker"]), _inputs(tmp_path, ["ab"]), "--json",
                          "--output", str(out), "--output_dir", str(wavs)]) == 0
  assert [json.loads(line) for line in out.read_text().splitlines()] == [
      {"audio": str(wavs / "1.wav"), "audio_length": 80}]


def test_an_audio_export_needs_an_output_dir_or_json(exports, tmp_path, capsys):
  assert run_export.main([str(exports["speaker"]), _inputs(tmp_path, ["ab"])]) == 2
  assert _errors(capsys) == ["error: this export's output 'audio' is audio: give "
                             "--output_dir=DIR for its WAV files (one per input), or --json "
                             "for the raw samples"]
  out = tmp_path / "raw.jsonl"  # --json alone: the samples themselves, as before
  assert run_export.main([str(exports["speaker"]), _inputs(tmp_path, ["ab"]), "--json",
                          "--output", str(out)]) == 0
  row = json.loads(out.read_text())
  assert row["audio_length"] == 80 and len(row["audio"]) == 80


def test_an_output_dir_for_an_export_without_audio_is_refused(exports, tmp_path, capsys):
  assert run_export.main([str(exports["viewer"]), _inputs(tmp_path, ["x.png"]),
                          "--output_dir", str(tmp_path / "wavs")]) == 2
  assert "--output_dir: this export's outputs are not audio (label)" in _errors(capsys)[0]
  assert not (tmp_path / "wavs").exists()


@pytest.mark.parametrize("flag", ["--output_dir", "--output"])
def test_an_output_under_a_regular_file_is_one_line_before_any_work(exports, tmp_path,
                                                                     capsys, flag):
  blocker = tmp_path / "a-file"
  blocker.write_text("in the way\n")
  # the inputs file does not even exist: the output is checked first
  assert run_export.main([str(exports["speaker"]), str(tmp_path / "none.txt"),
                          f"{flag}={blocker}/out"]) == 2
  assert _errors(capsys) == [f"error: {flag} {blocker}/out: {blocker} is a regular file, "
                             f"not a directory; choose another {flag}"]
  assert sorted(os.listdir(tmp_path)) == ["a-file"]


# ----------------------------------------------------------------------------- failed inputs
def test_a_missing_input_file_is_one_line_and_the_others_are_served(exports, tmp_path,
                                                                     capsys):
  for name, samples in (("a.wav", 800), ("b.wav", 1200)):
    soundfile.write(str(tmp_path / name), np.zeros(samples, np.float32), RATE,
                    subtype="PCM_16")
  missing = str(tmp_path / "missing.wav")
  inputs = _inputs(tmp_path, [str(tmp_path / "a.wav"), missing, str(tmp_path / "b.wav")])
  out = tmp_path / "out.txt"
  status = run_export.main([str(exports["listener"]), inputs, "--output", str(out)])
  errors = _errors(capsys)
  assert status == 1
  assert len(errors) == 1 and errors[0].startswith(f"error: {inputs}:2: WAV file {missing!r} "
                                                   f"cannot be read")
  assert out.read_text().splitlines() == ["800", "", "1200"]  # lines stay in input order
  assert run_export.main([str(exports["listener"]), inputs, "--output", str(out),
                          "--json"]) == 1
  rows = [json.loads(line) for line in out.read_text().splitlines()]
  assert rows[0] == {"text": "800"} and rows[2] == {"text": "1200"}
  assert rows[1]["error"].startswith(f"{inputs}:2: WAV file {missing!r} cannot be read")


def test_an_input_the_model_cannot_read_costs_only_itself(exports, tmp_path, capsys):
  for name, height in (("a.png", 3), ("b.png", 5)):
    (tmp_path / name).write_bytes(tf.io.encode_png(np.zeros((height, 2, 1), np.uint8)).numpy())
  (tmp_path / "c.txt").write_text("not an image")
  inputs = _inputs(tmp_path, [str(tmp_path / n) for n in ("a.png", "c.txt", "b.png")])
  out = tmp_path / "out.txt"
  # one batch of three: the graph fails on c.txt, so each input is served on its own
  assert run_export.main([str(exports["viewer"]), inputs, "--output", str(out)]) == 1
  errors = _errors(capsys)
  assert len(errors) == 1 and errors[0].startswith(
      f"error: {inputs}:2: the model cannot read this input")
  assert out.read_text().splitlines() == ["3", "", "5"]
