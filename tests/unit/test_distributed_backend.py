"""Backend hooks that need no second process: eval batching, error translation and the
all-reduce pack size."""

import pytest
import tensorflow as tf

from open_seq2seq import errors
from open_seq2seq.distributed import strategies
from open_seq2seq.distributed.backend import Backend
from open_seq2seq.distributed.strategies import MultiWorkerBackend


class _SecondOfTwoWorkers(Backend):
  num_workers = 2
  worker_index = 1


def _numbers(num_shards, shard, count=5):
  return tf.data.Dataset.range(count).shard(num_shards, shard).batch(1)


def test_eval_batches_yield_every_local_batch_once_in_order():
  steps = list(Backend().eval_batches(_numbers))
  assert [int(batch[0]) for batch, _ in steps] == [0, 1, 2, 3, 4]
  assert all(count == 1 for _, count in steps)
  steps = list(_SecondOfTwoWorkers().eval_batches(_numbers))
  assert [int(batch[0]) for batch, _ in steps] == [1, 3]  # this worker's shard only


def test_a_worker_with_an_empty_shard_still_gets_a_batch_to_build_on():
  steps = list(_SecondOfTwoWorkers().eval_batches(lambda n, i: _numbers(n, i, count=1)))
  assert len(steps) == 1
  batch, count = steps[0]
  assert count == 0 and int(batch[0]) == 0  # a padding copy; its outputs are dropped


def test_lost_peer_errors_become_one_line_with_the_resume_hint():
  backend = MultiWorkerBackend.__new__(MultiWorkerBackend)  # no cluster needed to translate
  backend.info = type("Info", (), {"rank": 0, "size": 2})()
  backend._lost = False
  error = tf.errors.UnavailableError(
      None, None, "Collective ops is aborted by: Error reported from /job:worker/task:1: "
      "The following tasks are unhealthy (stopped sending heartbeats):\n/job:worker/task:1")
  translated = backend.translate_error(error)
  assert isinstance(translated, errors.WorkerLostError)
  assert "another worker" in str(translated) and "--continue_learning" in str(translated)
  assert "\n" not in str(translated)
  assert backend.translate_error(ValueError("a bug")) is None  # bugs keep their traceback


def test_worker_lost_error_is_a_user_error_still_importable_from_strategies():
  assert issubclass(errors.WorkerLostError, errors.OpenSeq2SeqError)
  assert strategies.WorkerLostError is errors.WorkerLostError  # the old import path


def test_horovod_errors_become_worker_lost_errors():
  from open_seq2seq.distributed.horovod_backend import HorovodBackend
  backend = HorovodBackend.__new__(HorovodBackend)  # no Horovod needed to translate
  backend.hvd = type("Hvd", (), {"rank": staticmethod(lambda: 1)})()
  horovod_internal_error = type("HorovodInternalError", (RuntimeError,), {})
  translated = backend.translate_error(horovod_internal_error("ring broken\nrank 0 exited"))
  assert isinstance(translated, errors.WorkerLostError)
  assert str(translated).startswith("rank 1: Horovod stopped, another rank probably died "
                                    "(rank 0 exited)")
  assert backend.translate_error(ValueError("a bug")) is None


def test_all_reduce_pack_size_comes_from_the_environment(monkeypatch):
  monkeypatch.delenv(strategies.PACK_VAR, raising=False)
  assert strategies.pack_bytes() == strategies.pack_bytes("ring") == 4 * 2**20
  assert strategies.pack_bytes("nccl") == 0  # TensorFlow's default: one pack
  monkeypatch.setenv(strategies.PACK_VAR, "16")
  assert strategies.pack_bytes("nccl") == 16 * 2**20
  monkeypatch.setenv(strategies.PACK_VAR, "16")
  assert strategies.pack_bytes() == 16 * 2**20
  monkeypatch.setenv(strategies.PACK_VAR, "0")
  assert strategies.pack_bytes() == 0
  for bad in ("-1", "lots", "nan"):
    monkeypatch.setenv(strategies.PACK_VAR, bad)
    with pytest.raises(errors.ConfigError, match="OPEN_SEQ2SEQ_ALLREDUCE_PACK_MB=.*MB"):
      strategies.pack_bytes()
