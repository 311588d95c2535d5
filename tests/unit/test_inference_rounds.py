"""Inference in rounds: each process formats its own share only, the chief alone receives
and writes, and two processes give the one-process output. The two processes of a job are
played one after the other: the second's rounds are kept and handed to the chief in the
same rounds (tests/e2e/test_distributed_inference.py runs real processes)."""

import os

import pytest

from open_seq2seq.config import load_config
from open_seq2seq.distributed.backend import Backend
from open_seq2seq.output_sink import OutputSink
from open_seq2seq.training.evaluator import Evaluator
from tests.helpers import toy

EXAMPLES = 23


class _Job:
  """What the second process sent in each round, for the chief to receive."""

  def __init__(self):
    self.sent: list[list] = []


class _Rank(Backend):
  """Process ``index`` of a 2-process job whose other process ran before (index 0) or runs
  after (index 1) this one."""

  num_workers = 2

  def __init__(self, index, job):
    super().__init__()
    self.index, self.job, self.round = index, job, 0

  @property
  def worker_index(self):
    return self.index

  def gather_to_chief(self, objects):
    self.round += 1
    if self.index == 1:
      self.job.sent.append(list(objects))
      return None
    sent = self.job.sent
    return list(objects) + (sent[self.round - 1] if self.round <= len(sent) else [])

  def gather_objects(self, objects):  # the "finished" flags of a round
    if self.index == 1:
      return list(objects)
    return list(objects) + [self.round >= len(self.job.sent)]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
  data = toy.make_toy_data(str(tmp_path_factory.mktemp("toy")), train=8, dev=1,
                           test=EXAMPLES)
  overrides = (toy.data_overrides(data) + toy.split_overrides(data, "test") + toy.TINY_MODEL +
               ["--batch_size_per_gpu=3"])
  base_model, configs = load_config(toy.TOY_CONFIG, "infer", overrides)
  return base_model(configs["infer"], "infer")


def _recording(model, calls, rank):
  """Records, per call of ``model.finalize_inference``, the process and the ids it formats."""
  original = type(model).finalize_inference

  def finalize(results):
    calls.append((rank, sorted(i for i, _ in results)))
    return original(model, results)
  return finalize


def test_each_process_formats_its_own_share_and_only_the_chief_writes(model, tmp_path):
  single = str(tmp_path / "single.txt")
  written, metrics = Evaluator(model, Backend()).infer_to(model.data_layer,
                                                          OutputSink(single))
  assert written == [(single, EXAMPLES)] and "BLEU" in metrics

  job, calls = _Job(), []
  worker_out = tmp_path / "worker"
  worker_out.mkdir()
  model.finalize_inference = _recording(model, calls, 1)
  try:
    # a sink that would write: the worker must not open it
    worker = Evaluator(model, _Rank(1, job), round_batches=1)
    assert worker.infer_to(model.data_layer, OutputSink(str(worker_out / "w.txt"))) == ([], {})
    model.finalize_inference = _recording(model, calls, 0)
    chief_path = str(tmp_path / "chief.txt")
    written, chief_metrics = Evaluator(model, _Rank(0, job), round_batches=1).infer_to(
        model.data_layer, OutputSink(chief_path))
  finally:
    del model.finalize_inference
  assert os.listdir(worker_out) == []
  assert written == [(chief_path, EXAMPLES)]
  with open(single, encoding="utf-8") as a, open(chief_path, encoding="utf-8") as b:
    assert a.read() == b.read()  # complete, in input order, as one process writes it
  assert chief_metrics == pytest.approx(metrics)
  # one call per round of one batch (3 examples), each with its own process's ids only
  by_rank = {rank: [i for r, ids in calls if r == rank for i in ids] for rank in (0, 1)}
  assert sorted(by_rank[0]) == list(range(0, EXAMPLES, 2))
  assert sorted(by_rank[1]) == list(range(1, EXAMPLES, 2))
  assert max(len(ids) for _, ids in calls) == 3 and len(job.sent) >= 4
