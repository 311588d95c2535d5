"""Distribution backends: the thin layer between the training loop and the devices.

The trainer is written once against :class:`Backend`. A backend decides

* where variables live (``strategy.scope()``) and how a per-replica function runs
  (``strategy.run``);
* how per-replica values are summed across replicas *and* processes (:meth:`reduce_sum`),
  which the trainer uses for gradients, loss sums and token counts;
* which shard of the data each process reads, who writes files (:attr:`is_chief`), how
  initial variables are made identical (:meth:`broadcast_variables`) and how eval/infer
  results are gathered on the chief (:meth:`gather_objects`).

The default backend is one process on the default device.
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf


class Backend:
  """Single process, single device: every hook is the identity."""

  name = "single"

  def __init__(self, strategy: tf.distribute.Strategy | None = None):
    self.strategy = strategy or tf.distribute.get_strategy()

  # ------------------------------------------------------------------ topology
  @property
  def num_replicas(self) -> int:
    """Replicas taking part in one synchronous step, over all processes."""
    return self.strategy.num_replicas_in_sync

  @property
  def num_workers(self) -> int:
    """Processes taking part (each reads its own shard of the data)."""
    return 1

  @property
  def worker_index(self) -> int:
    return 0

  @property
  def is_chief(self) -> bool:
    """Whether this process writes checkpoints, summaries, logs and outputs."""
    return self.worker_index == 0

  @property
  def supports_iterator_checkpoint(self) -> bool:
    """Whether the input iterator's position can be saved in checkpoints."""
    return True

  # ------------------------------------------------------------------ data
  def distribute_dataset(self, dataset_fn: Callable[[int, int], tf.data.Dataset]):
    """Dataset for this process; ``dataset_fn(num_shards, shard_index)`` builds one shard.

    Each process reads its own shard (its local replicas take its batches in turn), so that
    every example is seen once per epoch across all workers.
    """
    return dataset_fn(self.num_workers, self.worker_index)

  # ------------------------------------------------------------------ computation
  def run(self, fn: Callable, args: tuple = ()) -> Any:
    return self.strategy.run(fn, args=args)

  def reduce_sum(self, value: Any) -> Any:
    """Sums a per-replica (nested) value over all replicas of all processes."""
    return self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)

  def local_results(self, value: Any) -> list:
    """The per-replica components of ``value`` held by this process."""
    return list(self.strategy.experimental_local_results(value))

  def broadcast_variables(self, variables: list) -> None:
    """Makes ``variables`` equal to the chief's (no-op where the strategy does it)."""

  def gather_objects(self, objects: list) -> list:
    """Concatenation of every process's ``objects`` (on every process)."""
    return list(objects)

  def barrier(self) -> None:
    """Waits for every process."""

  def shutdown(self) -> None:
    """Releases resources (collective groups, MPI) at the end of a run."""


def make_backend(params: dict, cpu_towers: int = 0) -> Backend:
  """The backend a config asks for (single process unless towers/workers/Horovod).

  ``num_gpus``/``gpu_ids`` > 1 select towers over local devices; ``use_horovod`` selects
  Horovod; a multi-process launch (MPI environment or ``TF_CONFIG``) selects TensorFlow's
  multi-worker all-reduce. ``cpu_towers`` splits the CPU into that many logical devices.
  """
  try:
    from open_seq2seq.distributed import factory  # multi-device backends, if present
  except ImportError:
    return Backend()
  return factory.make_backend(params, cpu_towers=cpu_towers)
