"""Base class of every data layer."""

from __future__ import annotations

import copy
from typing import Any, Iterable

import tensorflow as tf

from open_seq2seq.data.description import DataDescription
from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.params import Configurable

#: Modes a data layer is built in. ``interactive_infer`` batches what the user types
#: (:meth:`DataLayer.dataset_from_inputs`) and is otherwise like ``infer``.
MODES = ("train", "eval", "infer", "interactive_infer")


def _check_shard(num_shards: int, index: int) -> None:
  if num_shards < 1 or not 0 <= index < num_shards:
    raise ConfigError(f"data shard {index} of {num_shards}: the shard index must be in "
                      f"[0, {max(num_shards, 1)})")


class DataLayer(Configurable):
  """A data layer reads files and yields batches as a ``tf.data.Dataset``.

  Each element is a dict::

      {"source_tensors": (inputs, input_lengths),
       "target_tensors": (targets, target_lengths),   # absent in infer mode
       "id": example_index}                           # int64 [batch], position in the file

  ``id`` lets eval/infer put outputs back in file order after bucketing and sharding.

  A layer never writes into ``params``: what it derives from its files (vocabulary sizes,
  alphabets) is published by :attr:`description`, and its batching facts by
  :meth:`batches_per_epoch`, :attr:`throughput_unit`, :meth:`count_units` and
  :attr:`unit_scale`.

  Args:
    params: this layer's ``data_layer_params`` (validated again here, which only fills
      defaults for a layer built directly rather than from a config).
    mode: one of :data:`MODES`.
    batch_size: examples (or, for token-based layers, tokens) per replica batch.
    num_workers, worker_id: shard of the data this instance reads. Shards are disjoint
      and together cover every example once per epoch.
    random_seed: the run's seed (None: unseeded), for layers with their own randomness.
  """

  PARAMS = {}

  def __init__(self, params: dict[str, Any], mode: str = "train", batch_size: int = 32,
               num_workers: int = 1, worker_id: int = 0, random_seed: int | None = None):
    if mode not in MODES:
      raise ConfigError(f"{type(self).__name__}: mode must be one of {', '.join(MODES)}, "
                        f"got {mode!r}")
    if batch_size < 1:
      raise ConfigError(f"batch size must be at least 1, got {batch_size}")
    _check_shard(num_workers, worker_id)
    self.params = self.validate_params(params, prefix="data_layer_params")
    self.mode = mode
    self.batch_size = batch_size
    self.num_workers = num_workers
    self.worker_id = worker_id
    self.random_seed = random_seed

  @property
  def inference(self) -> bool:
    """True in infer and interactive_infer: one pass, no targets fed to the model."""
    return self.mode in ("infer", "interactive_infer")

  @property
  def description(self) -> DataDescription:
    """What this layer provides to the model (vocabulary sizes, alphabets, features)."""
    return DataDescription()

  def shard(self, num_shards: int, index: int) -> DataLayer:
    """This layer reading shard ``index`` of ``num_shards`` of the whole data.

    Returns ``self`` when it already reads that shard, else a shallow copy that shares
    everything read at construction (vocabularies, corpora): nothing is read again. A shard
    may be empty (fewer examples than shards); its dataset then yields no batch.
    """
    _check_shard(num_shards, index)
    if (num_shards, index) == (self.num_workers, self.worker_id):
      return self
    layer = copy.copy(self)
    layer.num_workers, layer.worker_id = num_shards, index
    return layer

  def shard_dataset(self, num_shards: int, index: int) -> tf.data.Dataset:
    """The batched dataset of shard ``index`` of ``num_shards``: what a backend asks for
    (``Backend.distribute_dataset`` / ``eval_batches`` call it with their topology)."""
    return self.shard(num_shards, index).build_dataset()

  def build_dataset(self) -> tf.data.Dataset:
    """The batched dataset of this worker's shard."""
    raise NotImplementedError

  def get_size_in_samples(self) -> int:
    """Number of examples in this worker's shard (after filtering)."""
    raise NotImplementedError

  def batches_per_epoch(self) -> int:
    """Batches one pass over this worker's shard yields (here: by examples)."""
    return -(-self.get_size_in_samples() // self.batch_size)

  @property
  def throughput_unit(self) -> str:
    """What :meth:`count_units` times :attr:`unit_scale` measures, for "<n> <unit>/s"."""
    return "examples"

  @property
  def unit_scale(self) -> float:
    """Throughput units per counted unit (e.g. seconds of audio per feature frame)."""
    return 1.0

  def count_units(self, batch: dict) -> tf.Tensor:
    """int64 scalar, in-graph: counted units in a batch of :meth:`build_dataset` (here:
    examples)."""
    return tf.cast(tf.shape(batch["id"])[0], tf.int64)

  def dataset_from_inputs(self, inputs: Iterable[str]) -> tf.data.Dataset:
    """Batches made from raw user inputs (``interactive_infer``)."""
    raise NotImplementedError
