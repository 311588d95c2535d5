"""Small composable ``tf.data`` transforms and the two pipelines every data layer composes.

Elements are dicts. A sequence feature ``name`` ([time, ...] tensor) comes with a scalar
``name + "_length"``; an ``"id"`` (int64 scalar) names the example. Every data layer builds
its dataset with one of two pipelines (after OpenNMT-tf's ``training_pipeline`` and
``inference_pipeline``)::

    training:   shard -> filter_by_max_length -> shuffle -> repeat -> process
                  -> bucket_batch (examples or tokens) -> pad_to_multiple -> model_inputs
                  -> prefetch
    inference:  the same without shuffle and repeat: one deterministic pass

:func:`whole_epochs` is the training order for examples named by ids whose batches must not
straddle epochs (speech duration buckets): each epoch is shuffled, processed and batched on
its own.

Each step is a plain function ``dataset -> dataset`` tested on its own; :class:`Batching`
holds the batching choices so that a layer's batch count (``batches_per_epoch``) is computed
from the very bucket sizes its pipeline uses.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf

#: Scalar length features that define an element's length (for filters and buckets).
LENGTH_KEYS = ("source_length", "target_length")


def shard(dataset: tf.data.Dataset, num_shards: int, index: int,
          key: str = "id") -> tf.data.Dataset:
  """Keeps the elements whose ``key`` modulo ``num_shards`` is ``index``.

  Sharding by example id rather than by position keeps the shards disjoint and complete
  whatever was filtered before, and ties each example to one worker for good.
  """
  if not 0 <= index < num_shards:
    raise ValueError(f"shard index {index} is not in [0, {num_shards})")
  if num_shards == 1:
    return dataset
  return dataset.filter(
      lambda element: tf.equal(element[key] % tf.cast(num_shards, element[key].dtype),
                               tf.cast(index, element[key].dtype)))


def filter_by_max_length(dataset: tf.data.Dataset, max_length: int | None,
                         length_keys: Sequence[str] = ("source_length", "target_length")
                         ) -> tf.data.Dataset:
  """Drops the elements where any of ``length_keys`` exceeds ``max_length`` (None: keep all).

  Keys absent from the elements (e.g. targets at inference) are ignored.
  """
  if max_length is None:
    return dataset
  keys = [k for k in length_keys if k in dataset.element_spec]

  def keep(element):
    ok = tf.constant(True)
    for k in keys:
      ok = tf.logical_and(ok, element[k] <= max_length)
    return ok

  return dataset.filter(keep)


def element_length(element: dict, length_keys: Sequence[str]) -> tf.Tensor:
  """The longest of an element's sequences: what padding and token budgets depend on."""
  lengths = [tf.cast(element[k], tf.int32) for k in length_keys if k in element]
  return tf.reduce_max(tf.stack(lengths))


def round_up(value: int, multiple: int) -> int:
  return -(-value // multiple) * multiple


def bucket_boundaries(max_length: int, width: int) -> list[int]:
  """Boundaries of buckets ``[1, width], [width+1, 2*width], ...`` covering ``max_length``.

  In ``tf.data`` terms bucket i holds lengths in ``[b[i-1], b[i])``, so the boundaries are
  ``width+1, 2*width+1, ...``; the last bucket's longest member is ``max_length``.
  """
  if width < 1:
    raise ValueError(f"bucket width must be positive, got {width}")
  num_buckets = max(1, round_up(max_length, width) // width)
  return [i * width + 1 for i in range(1, num_buckets)]


def bucket_batch(dataset: tf.data.Dataset, batch_size: int, by_tokens: bool = False,
                 boundaries: Sequence[int] | None = None, pad_multiple: int = 1,
                 max_length: int | None = None,
                 length_keys: Sequence[str] = ("source_length", "target_length"),
                 batch_multiple: int = 1, drop_remainder: bool = False) -> tf.data.Dataset:
  """Pads and batches elements, grouping those of similar length when ``boundaries`` are given.

  Args:
    dataset: unbatched dict elements; every tensor is padded with 0 (= PAD_ID).
    batch_size: examples per batch, or with ``by_tokens`` the budget of tokens per batch,
      padding included: ``batch examples * longest padded sequence <= batch_size``.
    by_tokens: batch by token budget instead of by a number of examples.
    boundaries: increasing length boundaries of the buckets (see :func:`bucket_boundaries`);
      None puts every element in one bucket (plain padded batching).
    pad_multiple: the padded time dimension will be rounded up to this multiple (by
      :func:`pad_to_multiple`, applied after this); token budgets account for it.
    max_length: longest element length; required with ``by_tokens`` (bounds the last bucket).
    length_keys: scalar length features that define an element's length.
    batch_multiple: with ``by_tokens``, round each bucket's batch size down to a multiple of
      this when it is at least that big (keeps batch dims friendly to half precision).
    drop_remainder: drop each bucket's last incomplete batch.

  A single element longer than the token budget still forms a batch of one.
  """
  boundaries = list(boundaries or [])
  sizes = bucket_batch_sizes(batch_size, by_tokens, boundaries, pad_multiple, max_length,
                             batch_multiple)
  if not boundaries:
    return dataset.padded_batch(sizes[0], drop_remainder=drop_remainder)
  return dataset.bucket_by_sequence_length(
      element_length_func=lambda element: element_length(element, length_keys),
      bucket_boundaries=boundaries, bucket_batch_sizes=sizes,
      drop_remainder=drop_remainder)


def bucket_batch_sizes(batch_size: int, by_tokens: bool = False,
                       boundaries: Sequence[int] | None = None, pad_multiple: int = 1,
                       max_length: int | None = None, batch_multiple: int = 1) -> list[int]:
  """Examples per batch of each bucket, as :func:`bucket_batch` uses them (same arguments)."""
  boundaries = list(boundaries or [])
  if any(b2 <= b1 for b1, b2 in zip(boundaries, boundaries[1:])) or any(
      b < 1 for b in boundaries):
    raise ValueError(f"bucket boundaries must be positive and increasing, got {boundaries}")
  if not by_tokens:
    return [batch_size] * (len(boundaries) + 1)
  if max_length is None:
    raise ValueError("bucket_batch(by_tokens=True) needs max_length to size the last bucket")
  # bucket i holds lengths below boundaries[i]; the last one up to max_length
  uppers = [b - 1 for b in boundaries] + [max(max_length, 1)]
  return [_token_batch_size(batch_size, round_up(upper, pad_multiple), batch_multiple)
          for upper in uppers]


def count_batches(lengths: Sequence[int] | np.ndarray, batch_size: int, by_tokens: bool = False,
                  boundaries: Sequence[int] | None = None, pad_multiple: int = 1,
                  max_length: int | None = None, batch_multiple: int = 1) -> int:
  """Batches :func:`bucket_batch` makes of one pass over elements of these ``lengths``.

  Each bucket emits full batches and then its remainder, so a pass yields, per bucket,
  ``ceil(count / bucket batch size)`` batches (exact for a finite pass; a repeated dataset
  carries remainders over into the next epoch).
  """
  sizes = bucket_batch_sizes(batch_size, by_tokens, boundaries, pad_multiple, max_length,
                             batch_multiple)
  # bucket i holds lengths in [boundaries[i-1], boundaries[i])
  buckets = np.searchsorted(np.asarray(boundaries or [], np.int64),
                            np.asarray(lengths, np.int64), side="right")
  counts = np.bincount(buckets, minlength=len(sizes))
  return int(sum(-(-int(n) // size) for n, size in zip(counts, sizes)))


def _token_batch_size(budget: int, padded_length: int, multiple: int) -> int:
  size = max(1, budget // padded_length)
  if multiple > 1 and size >= multiple:
    size -= size % multiple
  return size


def pad_to_multiple(dataset: tf.data.Dataset, multiple: int,
                    keys: Sequence[str] = ("source", "target")) -> tf.data.Dataset:
  """Pads the time dimension (axis 1) of batched ``keys`` with 0 to a multiple of ``multiple``.

  Half-precision matmuls run fastest when dimensions are multiples of 8; lengths stay true.
  """
  if multiple <= 1:
    return dataset
  present = [k for k in keys if k in dataset.element_spec]

  def pad(element):
    element = dict(element)
    for k in present:
      x = element[k]
      time = tf.shape(x)[1]
      extra = (multiple - time % multiple) % multiple
      paddings = [[0, 0], [0, extra]] + [[0, 0]] * (len(x.shape) - 2)
      element[k] = tf.pad(x, paddings)
    return element

  return dataset.map(pad, num_parallel_calls=tf.data.AUTOTUNE)


def slices(features: Mapping[str, object],
           num_parallel_calls: int | None = None) -> tf.data.Dataset:
  """One dict element per row of ``features`` (ragged rows become dense sequences)."""
  dataset = tf.data.Dataset.from_tensor_slices(dict(features))
  # from_tensor_slices keeps a ragged spec for the rows: an identity map makes them dense.
  return dataset.map(dict, num_parallel_calls=num_parallel_calls or tf.data.AUTOTUNE,
                     deterministic=True)


def model_inputs(batch: Mapping[str, tf.Tensor]) -> dict:
  """A batch of flat features -> the model's ``source_tensors``/``target_tensors``/``id``."""
  inputs = {"source_tensors": (batch["source"], batch["source_length"]), "id": batch["id"]}
  if "target" in batch:
    inputs["target_tensors"] = (batch["target"], batch["target_length"])
  return inputs


@dataclasses.dataclass(frozen=True)
class Batching:
  """How a pipeline groups examples into batches; the batch count uses the same choices.

  Attributes:
    batch_size: examples per batch, or with ``by_tokens`` tokens per batch (padding included).
    by_tokens: batch by a token budget (see :func:`bucket_batch`).
    boundaries: bucket boundaries (:func:`bucket_boundaries`); empty: one bucket.
    max_length: longest element length (sizes the last bucket of token batches).
    pad_multiple: round the time dimension of ``pad_keys`` up to this multiple.
    batch_multiple: round token batch sizes down to a multiple of this.
    length_keys: scalar length features that define an element's length.
    pad_keys: the batched sequence features ``pad_multiple`` applies to.
  """

  batch_size: int
  by_tokens: bool = False
  boundaries: tuple[int, ...] = ()
  max_length: int | None = None
  pad_multiple: int = 1
  batch_multiple: int = 1
  length_keys: tuple[str, ...] = LENGTH_KEYS
  pad_keys: tuple[str, ...] = ("source", "target")

  def batch(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
    """Bucketed padded batches, time dimensions padded to ``pad_multiple``."""
    dataset = bucket_batch(dataset, self.batch_size, self.by_tokens, self.boundaries,
                           self.pad_multiple, self.max_length, self.length_keys,
                           self.batch_multiple)
    return pad_to_multiple(dataset, self.pad_multiple, self.pad_keys)

  def count_batches(self, lengths: Sequence[int] | np.ndarray) -> int:
    """Batches :meth:`batch` makes of one pass over elements of these lengths."""
    return count_batches(lengths, self.batch_size, self.by_tokens, self.boundaries,
                         self.pad_multiple, self.max_length, self.batch_multiple)


def endless(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """A dataset that repeats without end, declared infinite where tf.data cannot tell.

  Through ``flat_map`` and ``filter`` a repeating pipeline's cardinality is unknown, and
  then a multi-worker distributed iterator checks at every batch, by an all-reduce, whether
  some worker has run out of data (``get_next_as_optional``); a known infinite dataset
  skips that check. Declared only when the cardinality is unknown: if the stream ends after
  all (every example filtered out), reading it fails and says so.
  """
  if dataset.cardinality() != tf.data.UNKNOWN_CARDINALITY:
    return dataset
  return dataset.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))


def training_pipeline(dataset: tf.data.Dataset, batching: Batching, *, num_shards: int = 1,
                      shard_index: int = 0, max_length: int | None = None,
                      shuffle_buffer_size: int | None = None, seed: int | None = None,
                      repeat: bool = True,
                      process_fn: Callable[[tf.data.Dataset], tf.data.Dataset] | None = None,
                      map_fn: Callable[[dict], dict] | None = model_inputs,
                      prefetch_buffer_size: int | None = None) -> tf.data.Dataset:
  """shard -> filter -> shuffle -> repeat -> process -> batch/bucket -> pad -> map -> prefetch.

  Args:
    dataset: unbatched dict elements with an ``"id"``.
    batching: how elements are batched and padded.
    num_shards, shard_index: keep the elements of this shard (1: the dataset is one shard).
    max_length: drop elements longer than this (:func:`filter_by_max_length`; None: keep).
    shuffle_buffer_size: shuffle with this buffer (None or 0: keep the order).
    seed: the shuffle's seed (None: TensorFlow's global seed).
    repeat: repeat forever.
    process_fn: per-example work that is too heavy to shuffle (decoding audio, say): it
      runs after shuffling on the dataset itself, so it may zip in random seeds, map, filter.
    map_fn: batch -> model inputs (None: batches stay flat dicts).
    prefetch_buffer_size: batches prefetched (None: autotune).
  """
  dataset = shard(dataset, num_shards, shard_index)
  dataset = filter_by_max_length(dataset, max_length, batching.length_keys)
  if shuffle_buffer_size:
    dataset = dataset.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
  if repeat:
    dataset = dataset.repeat()
  if process_fn is not None:
    dataset = process_fn(dataset)
  dataset = batching.batch(dataset)
  if map_fn is not None:
    dataset = dataset.map(map_fn)
  if repeat:
    dataset = endless(dataset)
  return dataset.prefetch(prefetch_buffer_size or tf.data.AUTOTUNE)


def inference_pipeline(dataset: tf.data.Dataset, batching: Batching, *, num_shards: int = 1,
                       shard_index: int = 0, max_length: int | None = None,
                       process_fn: Callable[[tf.data.Dataset], tf.data.Dataset] | None = None,
                       map_fn: Callable[[dict], dict] | None = model_inputs,
                       prefetch_buffer_size: int | None = None) -> tf.data.Dataset:
  """One deterministic pass: shard -> filter -> process -> batch/bucket -> pad -> map -> prefetch.

  Arguments as in :func:`training_pipeline`. Buckets reorder examples; their ids put
  outputs back in order.
  """
  return training_pipeline(dataset, batching, num_shards=num_shards, shard_index=shard_index,
                           max_length=max_length, shuffle_buffer_size=None, repeat=False,
                           process_fn=process_fn, map_fn=map_fn,
                           prefetch_buffer_size=prefetch_buffer_size)


def whole_epochs(ids: Sequence[int] | np.ndarray,
                 epoch_fn: Callable[[tf.data.Dataset], tf.data.Dataset], *,
                 seed: int | None = None, shuffle: bool = True,
                 repeat: bool = True) -> tf.data.Dataset:
  """Epochs over the examples ``ids``, each turned into batches on its own by ``epoch_fn``.

  Epoch ``e`` is ``{"id", "epoch", "seed"}`` elements: ``ids`` in an order drawn by a
  stateless shuffle keyed by ``(seed, e)`` (file order without ``shuffle``), ``seed`` an int64
  of ``(seed, e, id)`` for per-example randomness (augmentation). ``epoch_fn`` (process,
  bucket, batch) sees one epoch at a time, so a bucket's last partial batch closes its epoch:
  every epoch holds each example once in :meth:`Batching.count_batches` batches. Epochs are
  chained by ``flat_map`` (one, or without end with ``repeat``); the iterator's state is
  positions, with no shuffle buffer or seed generator to restore, so a checkpointed iterator
  resumes exactly. (Batching after a reshuffling ``shuffle`` and before ``repeat`` is no
  substitute: with a ``zip`` or ``filter`` between them, a restored iterator shuffles the next
  epoch in another order, in TF 2.21.)

  Args:
    ids: the examples (int64 ids), e.g. this worker's shard.
    epoch_fn: one epoch's elements -> its batches.
    seed: the shuffle's and the per-example seeds' key (None: one drawn now; a resumed
      run then finishes its current epoch exactly and shuffles later ones anew).
    shuffle: permute each epoch.
    repeat: epochs without end (else one).
  """
  ids = np.asarray(ids, np.int64)
  count = len(ids)
  key = int(np.random.default_rng().integers(2 ** 62)) if seed is None else int(seed)
  table = tf.constant(ids)

  def epoch(number, key):
    positions = tf.data.Dataset.range(count)

    def element(position):
      if shuffle:
        position = tf.random.experimental.index_shuffle(
            position, tf.stack([key, number]), count - 1)
      example = tf.gather(table, position)
      seed = tf.random.stateless_uniform([], tf.stack([key + number, example]),
                                         minval=None, maxval=None, dtype=tf.int64)
      return {"id": example, "epoch": number, "seed": seed}

    return epoch_fn(positions.map(element))

  if count == 0:  # nothing to repeat: one empty epoch
    return epoch_fn(tf.data.Dataset.range(0).map(
        lambda _: {"id": tf.constant(0, tf.int64), "epoch": tf.constant(0, tf.int64),
                   "seed": tf.constant(0, tf.int64)}))
  # the key travels in the epochs' elements: a restored flat_map rebuilds its current epoch
  # from the saved element, so even an unseeded run resumes that epoch in its own order
  epochs = tf.data.Dataset.range(2 ** 62 if repeat else 1).map(
      lambda number: (number, tf.constant(key, tf.int64)))
  chained = epochs.flat_map(epoch)
  return endless(chained) if repeat else chained
