"""The inference sink: input order, chief only, atomic files; and sample summaries."""

import csv
import os
import pickle

import numpy as np
import pytest
import soundfile

from open_seq2seq.errors import DataError
from open_seq2seq.outputs import (AudioSample, CsvRows, ImageSample, NpzArrays, PickledObject,
                                  TextLines, TextSample, WavFile, read_npz_arrays)
from open_seq2seq.output_sink import OutputSink


def test_text_lines_are_written_in_input_order_with_header(tmp_path):
  path = str(tmp_path / "out" / "pred.txt")  # the folder is created
  written = OutputSink(path).write([TextLines([(2, "c"), (0, "a"), (1, "b")], header="h")])
  assert written == [(path, 3)]
  with open(path, encoding="utf-8") as f:
    assert f.read() == "h\na\nb\nc\n"


def test_csv_rows_quote_fields_and_go_to_their_own_path(tmp_path):
  default = str(tmp_path / "default.txt")
  own = str(tmp_path / "rows.csv")
  OutputSink(default).write([CsvRows([(1, ("b.wav", "x, y")), (0, ("a.wav", 'say "hi"'))],
                                     columns=("wav_filename", "text"), path=own)])
  assert not os.path.exists(default)
  with open(own, encoding="utf-8", newline="") as f:
    assert list(csv.reader(f)) == [["wav_filename", "text"], ["a.wav", 'say "hi"'],
                                   ["b.wav", "x, y"]]


def test_only_the_chief_writes(tmp_path):
  path = str(tmp_path / "pred.txt")
  assert OutputSink(path, write=False).write([TextLines([(0, "a")])]) == []
  assert os.listdir(tmp_path) == []


def test_a_failed_write_keeps_the_previous_file_and_leaves_no_temporary(tmp_path):
  path = str(tmp_path / "pred.txt")
  OutputSink(path).write([TextLines([(0, "old")])])

  class Unprintable:
    def __str__(self):
      raise RuntimeError("formatting failed half-way")

  with pytest.raises(TypeError):
    OutputSink(path).write([TextLines([(0, "new"), (1, Unprintable())])])
  with open(path, encoding="utf-8") as f:
    assert f.read() == "old\n"
  assert os.listdir(tmp_path) == ["pred.txt"]


def test_pickle_and_wav_outputs(tmp_path):
  logits = {"a.wav": np.arange(6, dtype=np.float32).reshape(2, 3)}
  wav = np.sin(np.linspace(0, 100, 800)).astype(np.float32) * 0.5
  sink = OutputSink(str(tmp_path / "unused.txt"))
  written = sink.write([PickledObject(logits, str(tmp_path / "logits.pickle")),
                        WavFile(wav, 8000, str(tmp_path / "audio" / "0.wav"))])
  assert [n for _, n in written] == [1, 1]
  with open(tmp_path / "logits.pickle", "rb") as f:
    np.testing.assert_array_equal(pickle.load(f)["a.wav"], logits["a.wav"])
  samples, rate = soundfile.read(str(tmp_path / "audio" / "0.wav"), dtype="float32")
  assert rate == 8000 and samples.shape == (800,)
  np.testing.assert_allclose(samples, wav, atol=1 / 2 ** 14)


def test_npz_arrays_round_trip_without_pickle_and_merge_across_chunks(tmp_path):
  path = str(tmp_path / "logits.npz")
  first = {"a.wav": np.arange(6, dtype=np.float32).reshape(2, 3)}
  second = {"dir/b.wav": np.ones((4, 3), np.float32), "c.wav": np.zeros((0, 3), np.float32)}
  with OutputSink(str(tmp_path / "unused.txt")).stream() as stream:
    stream.add([NpzArrays(first, path)])
    stream.add([NpzArrays(second, path)])
  assert stream.written == [(path, 3)]
  with np.load(path, allow_pickle=False) as data:  # plain arrays: no object to unpickle
    assert sorted(data.files) == ["lengths", "names", "values"]
  read = read_npz_arrays(path)
  assert list(read) == ["a.wav", "dir/b.wav", "c.wav"]
  for name, value in {**first, **second}.items():
    np.testing.assert_array_equal(read[name], value)


@pytest.mark.parametrize("content,message", [
    (b"not a zip", "not a readable .npz"),
    (None, "without lengths, values"),
    ("objects", "not a readable .npz"),
])
def test_read_npz_arrays_refuses_other_files_in_one_line(tmp_path, content, message):
  path = tmp_path / "x.npz"
  if content is None:
    np.savez(path, names=np.array(["a"]))
  elif content == "objects":
    np.savez(path, names=np.array([{"a": 1}], dtype=object), lengths=np.array([1]),
             values=np.zeros([1]))
  else:
    path.write_bytes(content)
  with pytest.raises(DataError) as error:
    read_npz_arrays(str(path))
  assert message in str(error.value) and "\n" not in str(error.value)


def test_sample_summaries_reach_tensorboard(tmp_path):
  import tensorflow as tf
  from open_seq2seq.training.reporting import Summaries
  summaries = Summaries(str(tmp_path))
  summaries.samples(7, [ImageSample("attention", np.random.rand(5, 4)),
                        AudioSample("speech", np.zeros(160, np.float32), 16000),
                        TextSample("transcript", "hello")], prefix="train_samples/")
  Summaries(None).samples(7, [TextSample("ignored", "x")])  # no logdir: nothing, no error
  tags = {}
  for name in os.listdir(tmp_path):
    if name.startswith("events.out"):
      for event in tf.compat.v1.train.summary_iterator(str(tmp_path / name)):
        for value in event.summary.value:
          tags[value.tag] = (event.step, value.metadata.plugin_data.plugin_name)
  assert tags == {"train_samples/attention": (7, "images"),
                  "train_samples/speech": (7, "audio"),
                  "train_samples/transcript": (7, "text")}
