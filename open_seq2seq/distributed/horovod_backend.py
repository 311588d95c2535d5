"""Horovod backend: one replica per process, gradients all-reduced by ``horovod.tensorflow``.

Run under ``mpiexec -np N`` or ``horovodrun -np N`` with ``use_horovod: True`` (or
``--use_horovod=True``). Each process drives one device (its local rank's GPU, or the CPU),
whatever ``num_gpus``/``gpu_ids`` say (the chief prints a notice when they ask for more);
the trainer's cross-replica sums become Horovod all-reduces (one fused group per step), the
chief's initial variables are broadcast to all, and eval/infer results are gathered as Python
objects (on every rank, or on the chief alone through an all-to-all). Keras 3 variables
wrap a ``tf.Variable``: Horovod is given that (``v.value``).
"""

from __future__ import annotations

import os
import pickle
import sys
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from open_seq2seq.distributed import cluster
from open_seq2seq.distributed.backend import Backend
from open_seq2seq.errors import ConfigError, WorkerLostError

INSTALL_HINT = ("install it with scripts/install_horovod.sh, or drop use_horovod to use the "
                "built-in multi-worker backend (mpiexec -np N python run.py ... or "
                "python -m open_seq2seq.launch -np N run.py ...)")

#: Horovod aborts a collective that some ranks never join (e.g. a rank died) after this
#: many seconds instead of waiting forever; MPI launchers also stop the job when a rank dies.
_STALL_SHUTDOWN_SECONDS = "600"
#: Open MPI's setting that makes a rank waiting in a collective yield its core instead of
#: polling. Horovod's background thread runs a small MPI collective every few milliseconds;
#: on a host without GPUs that thread shares its rank's cores with the training, and polling
#: until the other ranks join steals them (Bible Transformer, 2 ranks on 2 cores: scaling
#: efficiency 0.57 polling, 0.98 yielding; docs/benchmarks.md). Read at MPI_Init, which
#: hvd.init() calls; other MPIs ignore it.
CPU_MPI_SETTINGS = {"OMPI_MCA_mpi_yield_when_idle": "1"}


def environment_defaults(environ: dict, has_gpus: bool) -> None:
  """Sets Horovod's settings that this backend chooses, unless the user set them."""
  environ.setdefault("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", _STALL_SHUTDOWN_SECONDS)
  if not has_gpus:
    for key, value in CPU_MPI_SETTINGS.items():
      environ.setdefault(key, value)


def import_horovod() -> Any:
  """``horovod.tensorflow``, or a one-line :class:`ConfigError` saying how to get it."""
  try:
    import horovod.tensorflow as hvd  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ConfigError(f"use_horovod is set but Horovod is not installed ({e}); "
                      f"{INSTALL_HINT}") from None
  return hvd


def ignored_devices_notice(params: dict, size: int) -> str | None:
  """The line saying that ``num_gpus``/``gpu_ids`` are ignored under Horovod, or None.

  As in OpenSeq2Seq, a Horovod process drives one device (its local rank's GPU), so configs
  written for 8 GPUs (``use_horovod: True, num_gpus: 8``) run as they are: the number of
  GPUs is the number of processes the launcher starts.
  """
  gpu_ids = params.get("gpu_ids") or []
  num_gpus = len(gpu_ids) or params.get("num_gpus") or 1
  if gpu_ids:
    asked = f"gpu_ids={list(gpu_ids)}"
  elif num_gpus > 1:
    asked = f"num_gpus={num_gpus}"
  else:
    return None
  notice = f"use_horovod: {asked} ignored; Horovod runs one device per process"
  job = f"this job has {size} process{'es' if size != 1 else ''}"
  if num_gpus == 1 or size == num_gpus:
    return f"{notice} (its local rank's GPU; {job})"
  return f"{notice} (start {num_gpus} processes with mpiexec -np {num_gpus}; {job})"


class HorovodBackend(Backend):
  """Data parallelism with Horovod across processes (one device per process)."""

  name = "horovod"

  def __init__(self, params: dict):
    if os.environ.get(cluster.LAUNCHER_VAR):
      raise ConfigError("use_horovod needs mpiexec or horovodrun; open_seq2seq.launch starts "
                        "the built-in multi-worker backend only (drop use_horovod)")
    if params.get("allreduce_dtype", "float32") != "float32":
      raise ConfigError(f"allreduce_dtype={params['allreduce_dtype']!r}: Horovod's all-reduce "
                        "has no bfloat16; drop use_horovod (multi-worker and towers have it) "
                        "or keep float32")
    hvd = import_horovod()
    environment_defaults(os.environ, bool(tf.config.list_physical_devices("GPU")))
    # ranks all on this machine talk through shared memory: no socket on any interface
    for name, value in cluster.mpi_transport_defaults(cluster.detect()).items():
      os.environ.setdefault(name, value)
    hvd.init()
    if not hvd.mpi_enabled() and not hvd.gloo_enabled():
      raise ConfigError("Horovod has neither MPI nor Gloo enabled; " + INSTALL_HINT)
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
      tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")
    self.hvd = hvd
    super().__init__(tf.distribute.get_strategy())
    notice = ignored_devices_notice(params, hvd.size())
    if notice and self.is_chief:
      print(f"notice: {notice}", file=sys.stderr, flush=True)

  @property
  def num_replicas(self) -> int:
    return self.hvd.size()

  @property
  def num_workers(self) -> int:
    return self.hvd.size()

  @property
  def worker_index(self) -> int:
    return self.hvd.rank()

  @property
  def supports_iterator_checkpoint(self) -> bool:
    return False  # each rank's iterator has its own position; only the chief writes

  def distribute_dataset(self, dataset_fn: Callable[[int, int], tf.data.Dataset]):
    return dataset_fn(self.num_workers, self.worker_index)

  def reduce_sum(self, value: Any) -> Any:
    flat = tf.nest.flatten(value)
    # One fused all-reduce per dtype keeps the step to a few MPI calls.
    reduced: list = [None] * len(flat)
    by_dtype: dict = {}
    for i, tensor in enumerate(flat):
      by_dtype.setdefault(tf.as_dtype(tensor.dtype), []).append(i)
    for indices in by_dtype.values():
      sums = self.hvd.grouped_allreduce([flat[i] for i in indices], op=self.hvd.Sum)
      for i, total in zip(indices, sums):
        reduced[i] = total
    return tf.nest.pack_sequence_as(value, reduced)

  def replica_sum(self, values: list) -> list:
    return list(self.hvd.grouped_allreduce(list(values), op=self.hvd.Sum))

  def broadcast_variables(self, variables: list) -> None:
    underlying = [getattr(v, "value", v) if not isinstance(v, tf.Variable) else v
                  for v in variables]
    self.hvd.broadcast_variables(underlying, root_rank=0)

  def gather_objects(self, objects: list) -> list:
    return [item for part in self.hvd.allgather_object(list(objects)) for item in part]

  def gather_to_chief(self, objects: list) -> list | None:
    # An all-to-all in which every rank sends its whole payload to the chief and nothing to
    # the others: the chief receives the payloads in rank order, the others nothing.
    payload = np.frombuffer(pickle.dumps(list(objects), protocol=pickle.HIGHEST_PROTOCOL),
                            np.uint8)
    splits = [0] * self.hvd.size()
    splits[0] = len(payload)
    received, sizes = self.hvd.alltoall(tf.constant(payload),
                                        splits=tf.constant(splits, tf.int32))
    if not self.is_chief:
      return None
    data, gathered, start = received.numpy().tobytes(), [], 0
    for size in sizes.numpy().tolist():
      gathered.extend(pickle.loads(data[start:start + size]))
      start += size
    return gathered

  def translate_error(self, error: BaseException) -> Exception | None:
    text = str(error).strip()
    if type(error).__name__ != "HorovodInternalError" and "Horovod has been shut down" not in text:
      return None
    reason = text.splitlines()[-1][:200] if text else type(error).__name__
    return WorkerLostError(
        f"rank {self.worker_index}: Horovod stopped, another rank probably died ({reason}); "
        "restart the job with --continue_learning to resume from the last checkpoint")

  def barrier(self) -> None:
    self.hvd.allreduce(tf.constant(0.0), op=self.hvd.Sum).numpy()

  def shutdown(self) -> None:
    self.hvd.shutdown()
