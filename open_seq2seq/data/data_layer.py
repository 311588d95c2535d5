"""Base class of every data layer."""

from __future__ import annotations

from typing import Any, Iterable

import tensorflow as tf

from open_seq2seq.data.description import DataDescription
from open_seq2seq.utils.params import Configurable


class DataLayer(Configurable):
  """A data layer reads files and yields batches as a ``tf.data.Dataset``.

  Each element is a dict::

      {"source_tensors": (inputs, input_lengths),
       "target_tensors": (targets, target_lengths),   # absent in infer mode
       "id": example_index}                           # int64 [batch], position in the file

  ``id`` lets eval/infer put outputs back in file order after bucketing and sharding.

  Args:
    params: this layer's validated ``data_layer_params``.
    model: the owning model (gives access to top-level params such as ``dtype``).
    mode: "train", "eval" or "infer".
    batch_size: examples (or, for token-based layers, a size hint) per replica batch.
    num_workers, worker_id: shard of the data this instance reads. Training shards are
      disjoint and together cover every example once per epoch.
  """

  PARAMS = {}

  def __init__(self, params: dict[str, Any], model: Any = None, mode: str = "train",
               batch_size: int = 32, num_workers: int = 1, worker_id: int = 0):
    self.params = dict(params)
    self.model = model
    self.mode = mode
    self.batch_size = batch_size
    self.num_workers = num_workers
    self.worker_id = worker_id

  @property
  def description(self) -> DataDescription:
    """What this layer provides to the model (vocabulary sizes, alphabets, features)."""
    return DataDescription()

  def build_dataset(self) -> tf.data.Dataset:
    """The batched dataset of this worker's shard."""
    raise NotImplementedError

  def get_size_in_samples(self) -> int:
    """Number of examples in this worker's shard (after filtering)."""
    raise NotImplementedError

  def dataset_from_inputs(self, inputs: Iterable[str]) -> tf.data.Dataset:
    """Batches made from raw user inputs (``interactive_infer``)."""
    raise NotImplementedError
