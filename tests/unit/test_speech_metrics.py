"""Speech2Text's WER/CER equal jiwer's; inference rows, samples and the logits dump."""

import csv
import os
import pickle

import numpy as np
import pytest

from open_seq2seq.output_sink import OutputSink
from open_seq2seq.outputs import read_npz_arrays
from tests.helpers.speech import build_model, speech_config, write_corpus

PAIRS = [  # (reference, hypothesis)
    ("the cat sat on the mat", "the cat sat on mat"),
    ("hello world", "hello there world"),
    ("one two three", "one too three"),
    ("a b c d e", ""),
    ("speech recognition", "speech recognition"),
    ("it's a test", "its a test of it"),
    ("abc", "abd"),
]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
  directory = tmp_path_factory.mktemp("metrics")
  corpus = write_corpus(str(directory), [r for r, _ in PAIRS])
  return build_model(speech_config([corpus], logdir=str(directory / "logdir"),
                                   decoder_params={"infer_logits_to_pickle": True}), "infer")


def pad(rows, value):
  width = max([len(r) for r in rows] + [1])
  return np.array([list(r) + [value] * (width - len(r)) for r in rows], np.int32)


def fake_batch(model, pairs, first_id=0):
  targets = model.data_layer.targets
  refs = [targets.encode(r) for r, _ in pairs]
  hyps = [targets.encode(h) for _, h in pairs]
  batch = {"id": np.arange(first_id, first_id + len(pairs)),
           "target_tensors": (pad(refs, 0), np.array([len(r) for r in refs], np.int32))}
  outputs = {"outputs": pad(hyps, -1), "final_sequence_lengths": np.array([len(h) for h in hyps]),
             "logits": np.zeros((len(pairs), 5, 29), np.float32),
             "src_lengths": np.full(len(pairs), 5, np.int32)}
  return batch, outputs


def test_wer_and_cer_equal_jiwer(model):
  jiwer = pytest.importorskip("jiwer")
  results = []
  for start in range(0, len(PAIRS), 3):  # batches of 3, like an eval pass
    results += model.evaluate(*fake_batch(model, PAIRS[start:start + 3], start))
  metrics = model.finalize_evaluation(results)
  refs, hyps = [r for r, _ in PAIRS], [h for _, h in PAIRS]
  assert metrics["WER"] == pytest.approx(jiwer.wer(refs, hyps), abs=1e-9)
  assert metrics["CER"] == pytest.approx(jiwer.cer(refs, hyps), abs=1e-9)


def test_samples_show_target_and_prediction(model):
  lines = model.format_samples(*fake_batch(model, PAIRS[:1]))
  assert lines[0] == "Sample WER: 0.1667"
  assert lines[1].endswith("the cat sat on the mat") and lines[2].endswith("the cat sat on mat")


def test_infer_rows_in_input_order_and_logits_dump(model, tmp_path):
  results = []
  order = [4, 0, 6, 2, 5, 1, 3]  # batches may arrive in any order
  for i in order:
    batch, outputs = fake_batch(model, [PAIRS[i]], i)
    outputs["logits"][:] = i
    results += model.infer(batch, outputs)
  out_path = str(tmp_path / "infer-out.csv")
  logdir = str(tmp_path / "logdir")  # the run's directory: where the logits go by default
  written = OutputSink(out_path, directory=logdir).write(
      model.finalize_inference(results))  # arrival order
  assert [n for _, n in written] == [7, 7]
  with open(out_path, encoding="utf-8", newline="") as f:
    header, *rows = list(csv.reader(f))
  assert header == ["wav_filename", "predicted_transcript"]
  assert [r[0] for r in rows] == [os.path.join("audio", f"{i:04d}.wav") for i in range(7)]
  assert [r[1] for r in rows] == [h for _, h in PAIRS]
  metrics = model.score_inference(sorted(results))
  assert metrics["WER"] == pytest.approx(model.finalize_evaluation(
      model.evaluate(*fake_batch(model, PAIRS)))["WER"])
  assert written[1][0] == os.path.join(logdir, "infer_logits.npz")
  dump = read_npz_arrays(written[1][0])  # no pickle: loading it cannot run code
  assert set(dump) == {r[0] for r in rows}
  assert dump[os.path.join("audio", "0006.wav")].shape == (5, 29)
  assert np.all(dump[os.path.join("audio", "0006.wav")] == 6)
  # OpenSeq2Seq's pickle, when infer_logits_file asks for one
  model.decoder.params["infer_logits_file"] = str(tmp_path / "logits.pickle")
  try:
    written = OutputSink(out_path, directory=logdir).write(model.finalize_inference(results))
  finally:
    model.decoder.params["infer_logits_file"] = None
  with open(tmp_path / "logits.pickle", "rb") as f:
    pickled = pickle.load(f)
  assert set(pickled) == set(dump)
  np.testing.assert_array_equal(pickled[os.path.join("audio", "0006.wav")],
                                dump[os.path.join("audio", "0006.wav")])
