"""The composed tf.data pipelines, batch counting and the DataLayer base class."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.data import transforms
from open_seq2seq.data.data_layer import DataLayer
from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.params import Param
from tests.helpers.text import length_dataset


LENGTHS = [int(n) for n in np.random.default_rng(3).integers(1, 30, size=41)]


def test_training_pipeline_composes_every_step():
  batching = transforms.Batching(4, pad_multiple=8)
  dataset = transforms.training_pipeline(
      length_dataset(LENGTHS), batching, num_shards=2, shard_index=1, max_length=20,
      shuffle_buffer_size=100, seed=3, repeat=True)
  kept = [i for i, n in enumerate(LENGTHS) if i % 2 == 1 and n + 1 <= 20]
  batches = list(dataset.take(3 * len(kept)))
  ids = [int(i) for b in batches for i in b["id"].numpy()]
  epoch = ids[:len(kept)]
  assert sorted(epoch) == kept and epoch != kept          # shard, filter, shuffle
  assert len(ids) > len(kept) and set(ids) == set(kept)   # repeat
  for b in batches:
    assert set(b) == {"source_tensors", "target_tensors", "id"}  # map to model inputs
    x, x_len = b["source_tensors"]
    y, _ = b["target_tensors"]
    assert x.shape[0] <= 4 and x.shape[1] % 8 == 0 and y.shape[1] % 8 == 0
    np.testing.assert_array_equal(x[0, :x_len[0]], np.arange(4, 4 + int(x_len[0])))
  again = transforms.training_pipeline(
      length_dataset(LENGTHS), batching, num_shards=2, shard_index=1, max_length=20,
      shuffle_buffer_size=100, seed=3)
  assert [int(i) for b in again.take(len(batches)) for i in b["id"].numpy()] == ids


def test_process_runs_after_shuffle_and_repeat():
  seen_positions = []

  def process(dataset):
    # the position in the processed stream: it keeps counting across epochs
    return dataset.enumerate().map(lambda i, e: dict(e, position=i))

  dataset = transforms.training_pipeline(
      length_dataset(LENGTHS[:10]), transforms.Batching(10), shuffle_buffer_size=10, seed=1,
      process_fn=process, map_fn=None)
  for batch in dataset.take(2):
    seen_positions.append(batch["position"].numpy().tolist())
    assert batch["id"].numpy().tolist() != list(range(10))  # shuffled before processing
  assert seen_positions == [list(range(10)), list(range(10, 20))]


def test_inference_pipeline_is_one_deterministic_pass():
  batching = transforms.Batching(5, boundaries=tuple(transforms.bucket_boundaries(30, 8)))
  dataset = transforms.inference_pipeline(length_dataset(LENGTHS), batching, num_shards=3,
                                          shard_index=0, max_length=25)
  ids = [int(i) for b in dataset for i in b["id"].numpy()]
  assert sorted(ids) == [i for i, n in enumerate(LENGTHS) if i % 3 == 0 and n + 1 <= 25]
  assert [int(i) for b in dataset for i in b["id"].numpy()] == ids
  plain = transforms.inference_pipeline(length_dataset(LENGTHS, with_target=False),
                                        transforms.Batching(7))
  batches = list(plain)
  assert [int(i) for b in batches for i in b["id"].numpy()] == list(range(len(LENGTHS)))
  assert "target_tensors" not in batches[0]


@pytest.mark.parametrize("by_tokens,width,pad_multiple,batch_size", [
    (False, None, 1, 6), (False, 5, 1, 6), (False, 4, 8, 3),
    (True, 1, 1, 64), (True, 8, 8, 64), (True, 5, 1, 100), (True, None, 8, 64)])
def test_count_batches_matches_the_batched_dataset(by_tokens, width, pad_multiple, batch_size):
  lengths = [int(n) for n in np.random.default_rng(5).integers(1, 40, size=150)]
  longest = max(lengths) + 1  # targets are one longer
  batching = transforms.Batching(
      batch_size, by_tokens, tuple(transforms.bucket_boundaries(longest, width)) if width
      else (), longest, pad_multiple, batch_multiple=pad_multiple)
  counted = sum(1 for _ in batching.batch(length_dataset(lengths)))
  assert batching.count_batches([n + 1 for n in lengths]) == counted
  assert batching.count_batches([]) == 0


def test_batching_sizes_are_those_of_bucket_batch():
  assert transforms.bucket_batch_sizes(64, True, [9, 17], 8, 20, 8) == [8, 4, 2]
  assert transforms.bucket_batch_sizes(5, False, [9, 17]) == [5, 5, 5]
  with pytest.raises(ValueError, match="increasing"):
    transforms.bucket_batch_sizes(5, False, [9, 9])


def test_slices_makes_ragged_rows_dense():
  ragged = tf.RaggedTensor.from_row_lengths(np.arange(6, dtype=np.int32), np.array([2, 4]))
  rows = list(transforms.slices({"source": ragged, "id": np.arange(2)}))
  assert isinstance(rows[1]["source"], tf.Tensor)
  assert rows[1]["source"].numpy().tolist() == [2, 3, 4, 5]


# ------------------------------------------------------------------- DataLayer base
class CountingLayer(DataLayer):
  """A layer over ``size`` numbered examples, to test the base class's defaults."""

  PARAMS = {"size": Param(int, 10, "Examples.")}

  def get_size_in_samples(self) -> int:
    return len(range(self.worker_id, self.params["size"], self.num_workers))

  def build_dataset(self) -> tf.data.Dataset:
    rows = tf.data.Dataset.from_tensor_slices({"id": np.arange(self.params["size"])})
    return transforms.inference_pipeline(rows, transforms.Batching(self.batch_size),
                                         num_shards=self.num_workers,
                                         shard_index=self.worker_id, map_fn=None)


def test_base_fills_defaults_and_never_touches_the_callers_params():
  given = {}
  layer = CountingLayer(given, mode="eval", batch_size=3, random_seed=4)
  assert layer.params == {"size": 10} and given == {}
  assert (layer.mode, layer.batch_size, layer.random_seed, layer.inference) == ("eval", 3, 4,
                                                                             False)
  assert CountingLayer({}, mode="interactive_infer").inference
  with pytest.raises(ConfigError, match="data_layer_params/sise: unknown parameter"):
    CountingLayer({"sise": 3})
  with pytest.raises(ConfigError, match="mode must be one of"):
    CountingLayer({}, mode="predict")
  with pytest.raises(ConfigError, match="batch size"):
    CountingLayer({}, batch_size=0)
  with pytest.raises(ConfigError, match="shard index must be in"):
    CountingLayer({}, num_workers=2, worker_id=2)


def test_base_shard_and_batching_facts():
  layer = CountingLayer({"size": 7}, mode="eval", batch_size=2)
  assert layer.shard(1, 0) is layer
  third = layer.shard(3, 2)
  assert (third.num_workers, third.worker_id) == (3, 2) and layer.worker_id == 0
  assert third.params is layer.params and third.shard(3, 2) is third
  assert [int(i) for b in third.build_dataset() for i in b["id"]] == [2, 5]
  assert third.shard(1, 0).get_size_in_samples() == 7  # shards are of the whole data
  with pytest.raises(ConfigError, match="shard index"):
    layer.shard(2, 5)
  for shard in (layer, third, layer.shard(8, 7)):
    assert shard.batches_per_epoch() == sum(1 for _ in shard.build_dataset())
  assert layer.throughput_unit == "examples" and layer.unit_scale == 1.0
  batch = next(iter(layer.build_dataset()))
  count = tf.function(layer.count_units)(batch)
  assert count.dtype == tf.int64 and int(count) == 2


def _filter_process(dataset):  # a process step whose output count tf.data cannot know
  return dataset.filter(lambda element: element["source_length"] > 1)


def _iterator_checks_for_missing_data(dataset_fn) -> bool:
  """Whether a distributed iterator over ``dataset_fn`` checks at every batch whether some
  replica ran out of data (TensorFlow's get_next_as_optional, an all-reduce per batch in a
  multi-worker run). Read from the distributed dataset's private flag: no public API says."""
  strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
  distributed = strategy.distribute_datasets_from_function(lambda _: dataset_fn())
  return distributed._enable_get_next_as_optional  # pylint: disable=protected-access


def test_a_repeating_pipeline_is_declared_infinite_and_spares_the_per_batch_check():
  def pipeline(repeat):
    return transforms.training_pipeline(length_dataset(LENGTHS), transforms.Batching(4),
                                        process_fn=_filter_process, repeat=repeat, seed=1)
  assert pipeline(True).cardinality() == tf.data.INFINITE_CARDINALITY
  assert pipeline(False).cardinality() == tf.data.UNKNOWN_CARDINALITY
  assert not _iterator_checks_for_missing_data(lambda: pipeline(True))
  assert _iterator_checks_for_missing_data(lambda: pipeline(False))  # the check it spares
  epochs = transforms.whole_epochs(np.arange(7), _filter_process_ids, seed=0)
  assert epochs.cardinality() == tf.data.INFINITE_CARDINALITY
  assert len(list(epochs.take(20))) == 20


def _filter_process_ids(dataset):
  return dataset.filter(lambda element: element["id"] % 2 == 0)


def test_an_endless_stream_that_ends_after_all_says_so():
  ended = transforms.endless(tf.data.Dataset.range(3).filter(lambda x: x < 2))
  with pytest.raises(tf.errors.FailedPreconditionError, match="infinite"):
    list(ended)
  known = tf.data.Dataset.range(3)  # known cardinalities are left as they are
  assert transforms.endless(known) is known
