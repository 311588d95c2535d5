"""The chief's order-restoring writer: records arriving out of order from several processes
are written in input order as soon as the examples before them are finished, with bounded
memory, per-example files at once, pickles merged at the end, and no half-written file."""

import os
import pickle

import numpy as np
import pytest

from open_seq2seq.outputs import CsvRows, PickledObject, PngFile, TextLines
from open_seq2seq.output_sink import OrderRestorer, OutputSink, Watermark


def test_order_restorer_emits_each_item_once_the_ids_before_it_are_finished():
  emitted = []
  order = OrderRestorer(emitted.append)
  watermark = Watermark()
  order.add(2, "c")
  order.add(0, "a")
  order.release(watermark.finish([0, 2]))  # 1 is not finished: "c" waits
  assert emitted == ["a"] and order.pending == 1
  order.add(1, "b")
  order.release(watermark.finish([1]))
  assert emitted == ["a", "b", "c"] and order.pending == 0 and order.max_pending == 2


def test_watermark_stops_at_a_gap_and_flush_writes_the_rest_in_order():
  watermark = Watermark()
  assert watermark.finish([3, 1, 0]) == 2  # 2 never comes (e.g. an example the data dropped)
  emitted = []
  order = OrderRestorer(emitted.append)
  for index in (5, 3, 4):
    order.add(index, index)
  order.release(watermark.finish([4, 5]))
  assert emitted == []
  order.flush()  # the end of the pass
  assert emitted == [3, 4, 5]


def _rounds(num_examples, num_ranks, per_round):
  """What the chief receives: per round, per rank, the rank's next ``per_round`` ids (ids
  are sharded by id modulo the ranks), reversed within the chunk as buckets may reorder."""
  shards = [list(range(rank, num_examples, num_ranks)) for rank in range(num_ranks)]
  rounds = []
  while any(shards):
    rounds.append([shard[:per_round][::-1] for shard in shards])
    shards = [shard[per_round:] for shard in shards]
  return rounds


def test_streamed_lines_are_in_input_order_and_memory_stays_within_a_round(tmp_path):
  path = str(tmp_path / "pred.txt")
  rounds = _rounds(num_examples=100, num_ranks=3, per_round=5)
  with OutputSink(path).stream() as stream:
    for chunks in rounds:
      for ids in chunks:
        stream.add([TextLines([(i, f"line {i}") for i in ids], header="h")], finished=ids)
        assert stream.pending < 3 * 5  # never more than one round of all ranks waits
      assert stream.pending == 0  # a whole round arrived: everything before it is written
      assert not os.path.exists(path)  # written under a temporary name until the end
  assert stream.max_pending >= 5  # it did wait for the other ranks
  assert stream.written == [(path, 100)]
  with open(path, encoding="utf-8") as f:
    assert f.read().splitlines() == ["h"] + [f"line {i}" for i in range(100)]
  assert os.listdir(tmp_path) == ["pred.txt"]


def test_per_example_files_are_written_on_arrival_and_pickles_merged_at_the_end(tmp_path):
  sink = OutputSink(str(tmp_path / "pred.csv"), directory=str(tmp_path / "run"))
  image = np.zeros((2, 2))
  with sink.stream() as stream:
    stream.add([PngFile(image, "pictures/1.png"), PickledObject({"b": 1}, "all.pickle"),
                CsvRows([(1, ("b", "pictures/1.png"))], columns=("name", "file"),
                        path_columns=("file",))], finished=[1])
    assert os.path.exists(tmp_path / "run" / "pictures" / "1.png")  # at once
    assert not os.path.exists(tmp_path / "run" / "all.pickle")  # cannot stream
    stream.add([PngFile(image, "pictures/0.png"), PickledObject({"a": 0}, "all.pickle"),
                CsvRows([(0, ("a", "pictures/0.png"))], columns=("name", "file"),
                        path_columns=("file",))], finished=[0])
  run = str(tmp_path / "run")
  assert stream.written == [
      (os.path.join(run, "pictures", "1.png"), 1), (os.path.join(run, "pictures", "0.png"), 1),
      (str(tmp_path / "pred.csv"), 2), (os.path.join(run, "all.pickle"), 2)]
  with open(tmp_path / "pred.csv", encoding="utf-8") as f:  # paths as written
    assert f.read().splitlines() == ["name,file", f"a,{run}/pictures/0.png",
                                     f"b,{run}/pictures/1.png"]
  with open(tmp_path / "run" / "all.pickle", "rb") as f:
    assert pickle.load(f) == {"a": 0, "b": 1}


def test_a_failed_pass_keeps_the_previous_file_and_leaves_no_temporary(tmp_path):
  path = str(tmp_path / "pred.txt")
  OutputSink(path).write([TextLines([(0, "old")])])
  with pytest.raises(RuntimeError, match="a worker died"):
    with OutputSink(path).stream() as stream:
      stream.add([TextLines([(0, "new")])], finished=[0])  # written to the temporary file
      raise RuntimeError("a worker died")
  with open(path, encoding="utf-8") as f:
    assert f.read() == "old\n"
  assert os.listdir(tmp_path) == ["pred.txt"]


def test_a_disabled_sink_streams_nothing(tmp_path):
  with OutputSink(str(tmp_path / "pred.txt"), write=False).stream() as stream:
    stream.add([TextLines([(0, "a")]), PngFile(np.zeros((1, 1)), "a.png")], finished=[0])
  assert stream.written == [] and os.listdir(tmp_path) == []


def test_relative_paths_are_relative_to_the_output_directory(tmp_path):
  sink = OutputSink("out.txt", directory=str(tmp_path))
  assert sink.resolve(None) == "out.txt"  # --infer_output_file: as the user gave it
  assert sink.resolve("infer_audio/a.wav") == os.path.join(str(tmp_path), "infer_audio", "a.wav")
  assert sink.resolve("/abs/x.pickle") == "/abs/x.pickle"
  # without a directory: next to the default output
  assert OutputSink(str(tmp_path / "o.txt")).resolve("a.png") == str(tmp_path / "a.png")
