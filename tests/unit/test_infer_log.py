"""run.py --mode=infer's closing log (issue 38): the files written one per input (audio,
alignment figures) are one line per folder, not one "wrote 1 records" line per file."""

import argparse
import os
import types

import numpy as np

from open_seq2seq import cli
from open_seq2seq.outputs import CsvRows, PngFile, WavFile

SENTENCES = 6


class _Evaluator:
  """Writes what a speech synthesizer's infer writes for SENTENCES inputs, in two rounds."""

  metrics: dict = {}

  def infer_to(self, layer, sink):  # pylint: disable=unused-argument
    with sink.stream() as stream:
      for start in (0, SENTENCES // 2):
        ids = range(start, start + SENTENCES // 2)
        stream.add([o for i in ids for o in (
            WavFile(np.zeros(80, np.float32), 8000, f"infer_audio/s{i}.wav"),
            PngFile(np.zeros((4, 5, 3)), f"infer_audio/s{i}_alignment.png"))]
                   + [CsvRows([(i, (f"s{i}",)) for i in ids], columns=("name",))],
                   finished=ids)
    return stream.written, self.metrics


def test_infer_logs_a_line_per_folder_not_per_file(tmp_path, capsys):
  output, logdir = str(tmp_path / "out.csv"), str(tmp_path / "run")
  infer = cli._infer  # pylint: disable=protected-access
  infer(argparse.Namespace(infer_output_file=output), _Evaluator(),
        types.SimpleNamespace(data_layer=None), types.SimpleNamespace(is_chief=True), logdir)
  lines = [line for line in capsys.readouterr().out.splitlines() if " wrote " in line]
  assert len(lines) < SENTENCES
  folder = os.path.join(logdir, "infer_audio")
  assert [line.split("] ", 1)[1] for line in lines] == [
      f"wrote {SENTENCES} predictions to {output}",
      f"wrote {2 * SENTENCES} files to {folder} ({SENTENCES} .wav, {SENTENCES} .png)"]
  assert len(os.listdir(folder)) == 2 * SENTENCES


def test_infer_prints_metrics_as_eval_does(tmp_path, capsys):
  evaluator = _Evaluator()
  evaluator.metrics = {"WER": 0.123456}
  cli._infer(argparse.Namespace(infer_output_file=str(tmp_path / "o.csv")),  # pylint: disable=protected-access
             evaluator, types.SimpleNamespace(data_layer=None),
             types.SimpleNamespace(is_chief=True), str(tmp_path / "run"))
  assert "] WER 0.1235" in capsys.readouterr().out  # 4 decimals, as the eval line


def test_one_record_and_count_metrics_read_right(tmp_path, capsys):
  """Issue 38: "wrote 1 predictions", and a count metric printed with 4 decimals."""
  evaluator = _Evaluator()
  evaluator.metrics = {"perplexity": 12.5, "eval_tokens": 4480}
  evaluator.infer_to = lambda layer, sink: ([(str(tmp_path / "o.csv"), 1)], evaluator.metrics)
  cli._infer(argparse.Namespace(infer_output_file=str(tmp_path / "o.csv")),  # pylint: disable=protected-access
             evaluator, types.SimpleNamespace(data_layer=None),
             types.SimpleNamespace(is_chief=True), str(tmp_path / "run"))
  lines = [line.split("] ", 1)[1] for line in capsys.readouterr().out.splitlines()]
  assert lines == [f"wrote 1 prediction to {tmp_path / 'o.csv'}", "perplexity 12.5000",
                   "eval_tokens 4480"]
