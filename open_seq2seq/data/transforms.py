"""Small composable ``tf.data`` transforms shared by data layers.

Elements are dicts. A sequence feature ``name`` ([time] int tensor) comes with a scalar
``name + "_length"``; an ``"id"`` (int64 scalar) names the example. A pipeline reads

    from_tensor_slices -> shard -> filter_by_max_length -> shuffle/repeat
      -> bucket_batch (examples or tokens per batch) -> pad_to_multiple -> prefetch

and each step is a plain function ``dataset -> dataset`` tested on its own.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf


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
  if any(b2 <= b1 for b1, b2 in zip(boundaries, boundaries[1:])) or any(
      b < 1 for b in boundaries):
    raise ValueError(f"bucket boundaries must be positive and increasing, got {boundaries}")
  if by_tokens:
    if max_length is None:
      raise ValueError("bucket_batch(by_tokens=True) needs max_length to size the last bucket")
    # bucket i holds lengths below boundaries[i]; the last one up to max_length
    uppers = [b - 1 for b in boundaries] + [max(max_length, 1)]
    sizes = [_token_batch_size(batch_size, round_up(upper, pad_multiple), batch_multiple)
             for upper in uppers]
  else:
    sizes = [batch_size] * (len(boundaries) + 1)
  if not boundaries:
    return dataset.padded_batch(sizes[0], drop_remainder=drop_remainder)
  return dataset.bucket_by_sequence_length(
      element_length_func=lambda element: element_length(element, length_keys),
      bucket_boundaries=boundaries, bucket_batch_sizes=sizes,
      drop_remainder=drop_remainder)


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
