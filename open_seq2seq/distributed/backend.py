"""Distribution backends: the thin layer between the training loop and the devices.

The trainer is written once against :class:`Backend`. A backend decides

* where variables live (``strategy.scope()``) and how a per-replica function runs
  (``strategy.run``);
* how per-replica values are summed across replicas *and* processes (:meth:`reduce_sum`),
  which the trainer uses for gradients, loss sums and token counts, and from inside a
  replica function (:meth:`replica_sum`, for data-dependent initialization);
* which shard of the data each process reads, who writes files (:attr:`is_chief`), how
  initial variables are made identical (:meth:`broadcast_variables`) and how eval/infer
  results are gathered: on every process (:meth:`gather_objects`, when every process needs
  the outcome, e.g. eval metrics for early stopping) or on the chief alone
  (:meth:`gather_to_chief`, for what only the chief writes: inference outputs).

The default backend is one process on the default device; :func:`open_seq2seq.distributed.
factory.make_backend` chooses the backend of a run.
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
  def num_local_replicas(self) -> int:
    """Replicas (devices) driven by this process."""
    try:
      return len(self.strategy.extended.worker_devices)
    except RuntimeError:  # the default strategy: one device
      return 1

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

  def eval_batches(self, dataset_fn: Callable[[int, int], tf.data.Dataset]):
    """One eval/infer pass: yields ``(per-replica batch, number of real replica batches)``.

    This process reads its shard and hands its local replicas one batch each per step; the
    last step is padded with copies of its last batch, whose outputs the caller drops
    (replicas at index >= the count). Steps need no cross-process communication, so workers
    with more batches than others never wait: results meet in :meth:`gather_objects`. A
    process whose shard is empty yields one padding batch (count 0) so it can still build
    the model.
    """
    count = self.num_local_replicas
    group: list = []
    seen = False
    for batch in dataset_fn(self.num_workers, self.worker_index):
      group.append(batch)
      if len(group) == count:
        yield self._per_replica(group), count
        group, seen = [], True
    if group:
      yield self._per_replica(group + group[-1:] * (count - len(group))), len(group)
      seen = True
    if not seen:
      padding = next(iter(dataset_fn(1, 0)), None)
      if padding is not None:
        yield self._per_replica([padding] * count), 0

  def _per_replica(self, batches: list) -> Any:
    count = len(batches)
    if count == 1:
      return batches[0]
    return self.strategy.experimental_distribute_values_from_function(
        lambda context: batches[context.replica_id_in_sync_group % count])

  # ------------------------------------------------------------------ computation
  def run(self, fn: Callable, args: tuple = ()) -> Any:
    return self.strategy.run(fn, args=args)

  def reduce_sum(self, value: Any) -> Any:
    """Sums a per-replica (nested) value over all replicas of all processes."""
    return self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)

  def replica_sum(self, values: list) -> list:
    """Sums each tensor of ``values`` over all replicas of all processes, from *inside* a
    replica function (:meth:`run`); every replica gets the sums."""
    return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM,
                                                           list(values))

  def local_results(self, value: Any) -> list:
    """The per-replica components of ``value`` held by this process."""
    return list(self.strategy.experimental_local_results(value))

  def broadcast_variables(self, variables: list) -> None:
    """Makes ``variables`` equal to the chief's (no-op where the strategy does it)."""

  def gather_objects(self, objects: list) -> list:
    """Concatenation of every process's ``objects`` (on every process)."""
    return list(objects)

  def gather_to_chief(self, objects: list) -> list | None:
    """Concatenation of every process's ``objects`` (in worker order) on the chief; None on
    the other processes, which get nothing back. Every process must call it, in the same
    order as the other collectives."""
    return list(objects) if self.is_chief else None

  def translate_error(self, error: BaseException) -> Exception | None:
    """A one-line user-facing error for ``error`` (a lost worker ...), or None to re-raise."""
    return None

  def barrier(self) -> None:
    """Waits for every process."""

  def shutdown(self) -> None:
    """Releases resources (collective groups, MPI) at the end of a run."""

