"""Balanced workers: every worker of a step takes its rows from one bucketed global batch.

With the sharded pipeline (:func:`transforms.training_pipeline` on shard ``k``) each worker
buckets its own examples, so in one synchronous step one worker may hold 10-token sentences
and another 60-token ones, and the faster waits for the slower at the all-reduce. Here every
worker builds the *same* sequence of global batches over the whole corpus, then keeps its
share of each::

    ids of the corpus -> whole_epochs (stateless shuffle keyed by the shared seed, repeat)
      -> process (ids -> examples) -> bucket/batch by num_workers x the replica batch
      -> pad_to_multiple -> drop global batches with fewer rows than workers
      -> this worker's rows (sorted by length, dealt forth and back) -> model_inputs
      -> prefetch

A worker's rows: the global batch's rows sorted by length (stable) and dealt out in turn,
forth and back (:func:`worker_rows`). Consecutive rows of that order differ by little and
the back-and-forth deal evens out who gets the longer one, so the workers' real token counts
differ by at most one bucket's spread of lengths, and much less on average (a contiguous
slice of the sorted rows would give the longest to the last worker, a plain deal the
shortest of every group to the first). Every share keeps the global batch's padded time
dimension: all workers of a step compute on the same shapes, and each row is padded exactly
as in the one-process run with the global batch.

The global batch of a bucket is ``num_workers`` times that bucket's replica batch (with
token batching: the replica's token budget over the bucket's padded length, so each worker
gets the rows one replica would). One process with ``num_workers`` times the batch then reads
the same batches, in the same order, as the workers together (exactly with example
batching; with token batching when the budget divides evenly).

The shuffle is :func:`transforms.whole_epochs`'s stateless permutation keyed by
``(seed, epoch)``: no process-local random state (the run gives each worker its own global
seed) and no shuffle buffer, so a checkpointed iterator resumes exactly. Epochs are
repeated before batching, so a bucket's last rows of an epoch join the next epoch's (no
partial batch while repeating); a single pass ends with each bucket's remainder, split as
evenly as it goes, and drops a remainder with fewer rows than workers.

Costs: each worker reads and orders the whole corpus (a text layer holds it in memory
anyway) and pads ``num_workers`` times its batch before keeping its share.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf

from open_seq2seq.data import transforms
from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.params import Param

#: The data-layer key that turns the mode on (a layer adds it to its PARAMS).
PARAM = Param(bool, False, "Training: each worker's batch is its share (rows sorted by "
              "length, dealt in turn) of one global batch bucketed over the whole "
              "corpus alike on every worker, so no worker waits for a longer bucket; needs "
              "random_seed with several workers; shuffles whole epochs (no shuffle buffer).")
KEY = "balanced_workers"


def enabled(params: Mapping, mode: str) -> bool:
  """Whether a layer in ``mode`` with ``params`` builds balanced training batches."""
  return mode == "train" and bool(params.get(KEY))


def check(params: Mapping, mode: str, num_workers: int, seed: int | None) -> None:
  """Raises ConfigError for settings the mode cannot honour."""
  if not enabled(params, mode):
    return
  if params.get("shuffle_buffer_size", -1) >= 1:
    raise ConfigError(f"data_layer_params/{KEY}: shuffles whole epochs of the corpus, so "
                      "shuffle_buffer_size does not apply; remove it (or set it to -1)")
  if num_workers > 1 and params.get("shuffle", True) and seed is None:
    raise ConfigError(f"data_layer_params/{KEY}: the {num_workers} workers must shuffle "
                      "alike; set random_seed")


def global_batch_sizes(batching: transforms.Batching, num_workers: int) -> list[int]:
  """Rows of each bucket's global batch: ``num_workers`` times the replica batch."""
  b = batching
  return [num_workers * size for size in transforms.bucket_batch_sizes(
      b.batch_size, b.by_tokens, b.boundaries, b.pad_multiple, b.max_length, b.batch_multiple)]


def count_steps(lengths: Sequence[int] | np.ndarray, batching: transforms.Batching,
                num_workers: int, repeat: bool = False) -> int:
  """Global batches (steps) of one pass over examples of these ``lengths``: each bucket's
  full batches and its remainder, if that has a row for every worker. With ``repeat`` a
  remainder joins the next epoch's rows instead and every one counts, as in the one-process
  run: steps per epoch do not depend on the number of workers."""
  sizes = global_batch_sizes(batching, num_workers)
  buckets = np.searchsorted(np.asarray(batching.boundaries, np.int64),
                            np.asarray(lengths, np.int64), side="right")
  counts = np.bincount(buckets, minlength=len(sizes))
  least = 1 if repeat else num_workers
  return int(sum(int(n) // size + (int(n) % size >= least) for n, size in zip(counts, sizes)))


def lookup(features: Mapping[str, object]) -> Callable[[tf.data.Dataset], tf.data.Dataset]:
  """A ``process_fn`` turning ``{"id"}`` elements into the rows ``id`` of ``features``
  (arrays or ragged tensors indexed by example id; a ragged row becomes a dense sequence)."""
  columns = {}
  for name, value in features.items():
    if name == "id":  # the element's own
      continue
    if isinstance(value, tf.RaggedTensor):
      columns[name] = (tf.convert_to_tensor(value.flat_values),
                       tf.convert_to_tensor(value.row_splits))
    else:
      columns[name] = (tf.convert_to_tensor(value), None)

  def row(element):
    i = element["id"]
    out = {}
    for name, (values, splits) in columns.items():
      out[name] = values[i] if splits is None else values[splits[i]:splits[i + 1]]
    out["id"] = i
    return out

  return lambda ids: ids.map(row, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def worker_rows(batch: Mapping[str, tf.Tensor], num_workers: int, worker_id: int,
                length_keys: Sequence[str] = transforms.LENGTH_KEYS) -> dict:
  """Worker ``worker_id``'s rows of a global batch: the rows sorted (stable) by the sum of
  the ``length_keys`` present are dealt out in groups of ``num_workers``, in worker order in
  even groups and in reverse order in odd ones (a "snake"), so no worker always gets the
  shorter row of each group."""
  if num_workers == 1:
    return dict(batch)
  keys = [k for k in length_keys if k in batch]
  total = tf.add_n([tf.cast(batch[k], tf.int64) for k in keys])
  order = tf.argsort(total, stable=True)
  place = tf.range(tf.size(order))
  group, position = place // num_workers, place % num_workers
  owner = tf.where(group % 2 == 0, position, num_workers - 1 - position)
  mine = tf.boolean_mask(order, tf.equal(owner, worker_id))
  return {name: tf.gather(value, mine) for name, value in batch.items()}


def balanced_batches(dataset: tf.data.Dataset, batching: transforms.Batching,
                     num_workers: int, worker_id: int) -> tf.data.Dataset:
  """Unbatched examples (the same stream on every worker) -> this worker's share of each
  global batch (see the module docstring); the transform the tests exercise alone."""
  if not 0 <= worker_id < num_workers:
    raise ValueError(f"worker {worker_id} is not in [0, {num_workers})")
  sizes = global_batch_sizes(batching, num_workers)
  if batching.boundaries:
    dataset = dataset.bucket_by_sequence_length(
        lambda element: transforms.element_length(element, batching.length_keys),
        bucket_boundaries=list(batching.boundaries), bucket_batch_sizes=sizes)
  else:
    dataset = dataset.padded_batch(sizes[0])
  dataset = transforms.pad_to_multiple(dataset, batching.pad_multiple, batching.pad_keys)
  if num_workers > 1:  # a last remainder too small to give every worker a row
    dataset = dataset.filter(lambda batch: tf.shape(batch["id"])[0] >= num_workers)
  return dataset.map(lambda batch: worker_rows(batch, num_workers, worker_id,
                                               batching.length_keys))


def training_pipeline(ids: Sequence[int] | np.ndarray, batching: transforms.Batching, *,
                      process_fn: Callable[[tf.data.Dataset], tf.data.Dataset],
                      num_workers: int = 1, worker_id: int = 0, seed: int | None = None,
                      shuffle: bool = True, repeat: bool = True,
                      map_fn: Callable[[dict], dict] | None = transforms.model_inputs,
                      prefetch_buffer_size: int | None = None) -> tf.data.Dataset:
  """This worker's training batches of balanced global batches over the examples ``ids``.

  Args:
    ids: every example of the corpus that training may use (not a shard), int64.
    batching: the replica's batching (batch size per replica, buckets, padding).
    process_fn: ``{"id", "epoch", "seed"}`` elements -> unbatched examples (e.g.
      :func:`lookup`); it sees the same stream on every worker.
    num_workers, worker_id: this worker among the processes of a step.
    seed: the shuffle's key, the same on every worker (None: one drawn here, for one worker).
    shuffle, repeat: permute each epoch; epochs without end.
    map_fn, prefetch_buffer_size: as in :func:`transforms.training_pipeline`.
  """
  epochs = transforms.whole_epochs(ids, lambda rows: rows, seed=seed, shuffle=shuffle,
                                   repeat=repeat)
  dataset = balanced_batches(process_fn(epochs), batching, num_workers, worker_id)
  if map_fn is not None:
    dataset = dataset.map(map_fn)
  if repeat:
    dataset = transforms.endless(dataset)
  return dataset.prefetch(prefetch_buffer_size or tf.data.AUTOTUNE)


def for_layer(layer, ids: Sequence[int] | np.ndarray, batching: transforms.Batching,
              features: Mapping[str, object]) -> tf.data.Dataset:
  """:func:`training_pipeline` of a data layer whose examples are the rows of ``features``
  (indexed by id), with its ``shuffle``/``repeat``/``prefetch_buffer_size`` params, its
  place among the workers and the run's seed (the same on every worker)."""
  p = layer.params
  return training_pipeline(ids, batching, process_fn=lookup(features),
                           num_workers=layer.num_workers, worker_id=layer.worker_id,
                           seed=layer.random_seed, shuffle=p["shuffle"], repeat=p["repeat"],
                           prefetch_buffer_size=p["prefetch_buffer_size"])
