"""Backends on ``tf.distribute`` strategies: towers in one process, and several processes.

* :class:`TowersBackend` — ``MirroredStrategy`` over local GPUs, or over N logical devices
  carved out of the CPU (``--cpu_towers``), so the tower path runs without GPUs.
* :class:`MultiWorkerBackend` — ``MultiWorkerMirroredStrategy`` with TensorFlow's collective
  all-reduce (ring on CPU, NCCL on GPU), configured from ``TF_CONFIG`` or from an MPI
  launcher's environment (see :mod:`open_seq2seq.distributed.cluster`). A dead or unreachable
  worker is detected by TensorFlow's coordination-service heartbeats (seconds), and any
  collective is also bounded by ``OPEN_SEQ2SEQ_COLLECTIVE_TIMEOUT`` seconds (default 1800), so
  the job stops with :class:`open_seq2seq.errors.WorkerLostError` instead of hanging.
  ``OPEN_SEQ2SEQ_ALLREDUCE_PACK_MB`` splits the gradients' all-reduce into packs of that many
  MB (default: 4 MB packs for the ring, one pack for NCCL). Inference outputs reach the chief
  alone through the coordination service's key-value store (:mod:`.coordination`).

Variables are created under the strategy's scope; the multi-worker strategy broadcasts their
initial values from the chief when they are created, so every worker starts identical.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from open_seq2seq.distributed import cluster, coordination
from open_seq2seq.distributed.backend import Backend
# WorkerLostError lives in open_seq2seq.errors; importing it here keeps
# ``from open_seq2seq.distributed.strategies import WorkerLostError`` working.
from open_seq2seq.errors import ConfigError, WorkerLostError

TIMEOUT_VAR = "OPEN_SEQ2SEQ_COLLECTIVE_TIMEOUT"
#: Bounds a collective whose peers are alive but stuck (dead peers are noticed in seconds by
#: heartbeats). Generous: a worker may wait in an all-gather while another finishes a long
#: eval pass.
DEFAULT_COLLECTIVE_TIMEOUT = 1800.0

PACK_VAR = "OPEN_SEQ2SEQ_ALLREDUCE_PACK_MB"
#: Gradients are all-reduced in packs of about this many MB (by collective implementation),
#: in the reverse order of the variables (the order the backward pass produces them). The
#: ring (CPU, over gRPC) moves large messages slowly: on 2 workers of one host, the Bible
#: Transformer's 90 MB took 3x as long in one pack as in 4 MB packs (docs/benchmarks.md,
#: scripts/benchmark_allreduce.py). NCCL keeps TensorFlow's default, one pack for everything
#: (never measured here). 0 means one pack.
DEFAULT_PACK_MB = {"ring": 4.0, "nccl": 0.0}

#: Where cross-replica sums land (as ``strategy.reduce`` does outside any device scope).
_HOST = "/device:CPU:0"

#: TensorFlow errors raised in a process whose peer died or cannot be reached.
_LOST_PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
                     tf.errors.CancelledError, tf.errors.AbortedError)


def pack_bytes(implementation: str = "ring") -> int:
  """The all-reduce pack size of a multi-worker job, in bytes: ``OPEN_SEQ2SEQ_ALLREDUCE_PACK_MB``,
  else the default of the collective ``implementation`` ("ring" or "nccl")."""
  text = os.environ.get(PACK_VAR)
  if text is None:
    return int(DEFAULT_PACK_MB[implementation] * 2**20)
  try:
    megabytes = float(text)
  except ValueError:
    megabytes = -1.0
  if not megabytes >= 0:
    raise ConfigError(f"{PACK_VAR}={text!r}: give the all-reduce pack size in MB, a number "
                      ">= 0 (0: one pack)")
  return int(megabytes * 2**20)


# ---------------------------------------------------------------------- devices
def configure_cpu_devices(count: int) -> list[str]:
  """Splits the CPU into ``count`` logical devices; returns their names.

  Must run before TensorFlow initialises its devices (before the first op).
  """
  cpus = tf.config.list_physical_devices("CPU")
  try:
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(count)])
  except RuntimeError:
    if len(tf.config.list_logical_devices("CPU")) != count:
      raise ConfigError("--cpu_towers must be applied before TensorFlow starts; create the "
                        "backend before building any tensor") from None
  return [d.name for d in tf.config.list_logical_devices("CPU")]


def gpu_devices(params: dict) -> list[str]:
  """The local GPUs a config asks for (``gpu_ids``, else the first ``num_gpus``)."""
  available = tf.config.list_physical_devices("GPU")
  ids = params.get("gpu_ids") or list(range(params.get("num_gpus") or 1))
  missing = [i for i in ids if i >= len(available)]
  if missing:
    raise ConfigError(
        f"num_gpus/gpu_ids ask for GPU(s) {ids} but this machine has {len(available)}; "
        "set num_gpus=1, or pass --cpu_towers=N to run N towers on the CPU")
  return [f"/gpu:{i}" for i in ids]


def configure_gpu_memory(grow: bool) -> int:
  """``gpu_memory_growth``: each local GPU takes memory as it needs it (TensorFlow's default
  takes nearly all of every visible GPU at start, which stops a second process on the same
  GPU). Must run before TensorFlow initialises the GPUs; returns how many it configured."""
  gpus = tf.config.list_physical_devices("GPU")
  if grow:
    for gpu in gpus:
      try:
        tf.config.experimental.set_memory_growth(gpu, True)
      except RuntimeError:
        raise ConfigError("gpu_memory_growth must be applied before TensorFlow initialises "
                          "the GPUs; create the backend before building any tensor") from None
  return len(gpus) if grow else 0


def all_reduce_for_towers(choice: str, devices: list[str]):
  """The ``cross_device_ops`` of ``MirroredStrategy`` for ``all_reduce`` (None: TensorFlow's
  pick, NCCL when every device is a GPU)."""
  on_gpus = all("gpu" in d.lower() for d in devices)
  if choice == "ring":
    raise ConfigError("all_reduce='ring' is for several processes (multi-worker); towers in "
                      "one process use nccl, hierarchical_copy or one_device")
  if choice == "nccl" and not on_gpus:
    raise ConfigError(f"all_reduce='nccl' needs GPU towers, these are {devices}; use 'auto' "
                      "or 'one_device'")
  if choice == "nccl":
    return tf.distribute.NcclAllReduce()
  if choice == "hierarchical_copy":  # DGX-1-like GPU topologies without NCCL
    return tf.distribute.HierarchicalCopyAllReduce()
  if choice == "one_device" or not on_gpus:  # logical CPU devices sum through one device
    return tf.distribute.ReductionToOneDevice()
  return None


def all_reduce_for_workers(choice: str, has_gpus: bool):
  """The collective implementation of ``MultiWorkerMirroredStrategy`` for ``all_reduce``."""
  implementations = tf.distribute.experimental.CommunicationImplementation
  if choice in ("hierarchical_copy", "one_device"):
    raise ConfigError(f"all_reduce={choice!r} is for towers in one process; several "
                      "processes use nccl or ring")
  if choice == "nccl" and not has_gpus:
    raise ConfigError("all_reduce='nccl' needs GPUs and this machine has none; use 'auto' "
                      "or 'ring'")
  if choice == "nccl" or (choice == "auto" and has_gpus):
    return implementations.NCCL
  return implementations.RING


def _bind_local_gpus(info: cluster.ClusterInfo, per_worker: int) -> None:
  """Each process on a machine sees its own ``per_worker`` GPUs (by local rank)."""
  gpus = tf.config.list_physical_devices("GPU")
  if not gpus:
    return
  start = info.local_rank * per_worker
  mine = gpus[start:start + per_worker]
  if len(mine) < per_worker:
    raise ConfigError(f"local rank {info.local_rank} needs GPUs {start}..{start + per_worker - 1}"
                      f" but this machine has {len(gpus)}; start fewer processes per machine "
                      "or lower num_gpus")
  tf.config.set_visible_devices(mine, "GPU")


# ---------------------------------------------------------------------- backends
class StrategyBackend(Backend):
  """A backend whose data goes through ``strategy.distribute_datasets_from_function``."""

  @property
  def supports_iterator_checkpoint(self) -> bool:
    # tf.distribute's DistributedIterator is not trackable (TF 2.21): on resume, training
    # data restarts from the beginning of each shard.
    return False

  def distribute_dataset(self, dataset_fn: Callable[[int, int], tf.data.Dataset]):
    # One input pipeline per process, batched per replica; its local replicas take
    # consecutive batches. TensorFlow numbers pipelines in worker order (chief first).
    return self.strategy.distribute_datasets_from_function(
        lambda context: dataset_fn(context.num_input_pipelines, context.input_pipeline_id))

  def reduce_sum(self, value: Any) -> Any:
    # One batched all-reduce per dtype for the whole step (gradients, loss sum, weight,
    # tokens): strategy.reduce would issue one collective per tensor (or fail on nested
    # values under MultiWorkerMirroredStrategy), and a batch is packed into one buffer.
    flat = tf.nest.flatten(value)
    by_dtype: dict = {}
    for i, tensor in enumerate(flat):
      by_dtype.setdefault(self.strategy.experimental_local_results(tensor)[0].dtype,
                          []).append(i)
    out: list = [None] * len(flat)
    for indices in by_dtype.values():
      reduced = self.strategy.extended.batch_reduce_to(
          tf.distribute.ReduceOp.SUM, [(flat[i], _HOST) for i in indices])
      for i, total in zip(indices, reduced):
        out[i] = self.strategy.experimental_local_results(total)[0]
    return tf.nest.pack_sequence_as(value, out)


class TowersBackend(StrategyBackend):
  """Synchronous towers over local devices (``MirroredStrategy``) in one process."""

  name = "towers"

  def __init__(self, devices: list[str], all_reduce: str = "auto"):
    ops = all_reduce_for_towers(all_reduce, devices)
    super().__init__(tf.distribute.MirroredStrategy(devices=devices, cross_device_ops=ops))
    self.devices = devices
    self.cross_device_ops = ops


class MultiWorkerBackend(StrategyBackend):
  """Several processes (one or more devices each), collective all-reduce between them."""

  name = "multi-worker"

  def __init__(self, info: cluster.ClusterInfo, params: dict,
               timeout: float | None = None):
    self.info = info
    if info.source != "tf_config":
      # TensorFlow reads its cluster from TF_CONFIG: write ours from the MPI environment.
      os.environ["TF_CONFIG"] = json.dumps(cluster.tf_config_for(info))
    per_worker = len(params.get("gpu_ids") or []) or params.get("num_gpus") or 1
    _bind_local_gpus(info, per_worker)
    timeout = timeout or float(os.environ.get(TIMEOUT_VAR, DEFAULT_COLLECTIVE_TIMEOUT))
    self._timeout = timeout
    implementations = tf.distribute.experimental.CommunicationImplementation
    implementation = all_reduce_for_workers(params.get("all_reduce", "auto"),
                                            bool(tf.config.list_physical_devices("GPU")))
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=implementation, timeout_seconds=timeout,
        bytes_per_pack=pack_bytes("nccl" if implementation == implementations.NCCL
                                  else "ring"))
    try:
      strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    except (tf.errors.OpError, RuntimeError) as e:
      raise WorkerLostError(
          f"worker {info.rank} of {info.size} could not join the job "
          f"({_first_line(e)}); check that every process started and that the ports in "
          f"TF_CONFIG={os.environ.get('TF_CONFIG')} are free (or set {cluster.PORT_VAR})"
          ) from None
    super().__init__(strategy)
    self._lost = False
    # Collectives run inside tf.functions: eager ones are slow and warn on MWMS.
    self._gather = tf.function(self._gather_fn, autograph=False)
    self._barrier = tf.function(self._barrier_fn, autograph=False)
    self._store = coordination.key_value_store()
    self._sends = 0  # gather_to_chief calls so far: every process counts the same

  def _gather_fn(self, value):
    return self.strategy.gather(value, axis=0)

  def _barrier_fn(self):
    one = self.strategy.run(lambda: tf.constant(1.0))
    return self.strategy.reduce(tf.distribute.ReduceOp.SUM, one, axis=None)

  @property
  def num_workers(self) -> int:
    return self.info.size

  @property
  def worker_index(self) -> int:
    return self.info.rank

  # ------------------------------------------------------------------ collectives
  def _first_local_value(self, value: tf.Tensor, empty: tf.Tensor):
    """A per-replica value: ``value`` on this process's first replica, ``empty`` elsewhere."""
    local = self.num_local_replicas
    return self.strategy.experimental_distribute_values_from_function(
        lambda context: value if context.replica_id_in_sync_group % local == 0 else empty)

  def gather_objects(self, objects: list) -> list:
    payload = pickle.dumps(list(objects), protocol=pickle.HIGHEST_PROTOCOL)
    # Collectives move int32 tensors of equal shapes: gather the lengths, pad every payload
    # to the longest (rounded up to a power of two, so few shapes get traced), gather rows.
    lengths = self._gather(
        self._first_local_value(tf.constant([len(payload)], tf.int64),
                                tf.zeros([0], tf.int64))).numpy()
    width = 1 << max(0, (int(lengths.max()) + 3) // 4 - 1).bit_length()
    padded = np.zeros(width * 4, np.uint8)
    padded[:len(payload)] = np.frombuffer(payload, np.uint8)
    rows = self._gather(
        self._first_local_value(tf.constant(padded.view(np.int32)[None, :]),
                                tf.zeros([0, width], tf.int32))).numpy()
    gathered: list = []
    for row, length in zip(rows, lengths):
      gathered.extend(pickle.loads(row.view(np.uint8)[:length].tobytes()))
    return gathered

  def gather_to_chief(self, objects: list) -> list | None:
    # A worker's objects go to the chief alone, through the coordination service's
    # key-value store (an all-gather would hand every payload to every worker). The worker
    # does not wait for the chief to read them; the chief reads them in worker order.
    if self._store is None:
      gathered = self.gather_objects(objects)
      return gathered if self.is_chief else None
    self._sends += 1
    prefix = f"open_seq2seq/gather_to_chief/{self._sends}"
    if not self.is_chief:
      coordination.send(self._store, f"{prefix}/{self.worker_index}", list(objects))
      return None
    gathered = list(objects)
    for worker in range(self.num_workers):
      if worker != self.worker_index:
        gathered.extend(coordination.receive(self._store, f"{prefix}/{worker}",
                                             self._timeout))
    return gathered

  def barrier(self) -> None:
    self._barrier().numpy()

  # ------------------------------------------------------------------ failures
  def translate_error(self, error: BaseException) -> Exception | None:
    if not isinstance(error, _LOST_PEER_ERRORS):
      return None
    self._lost = True
    return WorkerLostError(
        f"worker {self.info.rank}: another worker of the {self.info.size}-process job died or "
        f"became unreachable ({_first_line(error)}); stopping. Restart every process with "
        f"--continue_learning to resume from the last checkpoint")

  def shutdown(self) -> None:
    # On success wait for everyone, so no worker tears down its server while another still
    # needs it; after an error the peers may be gone, so leave at once.
    if self._lost or sys.exc_info()[0] is not None:
      return
    try:
      self.barrier()
    except _LOST_PEER_ERRORS:
      pass


def _first_line(error: BaseException) -> str:
  text = getattr(error, "message", None) or str(error)
  lines = [line.strip() for line in text.splitlines() if line.strip()]
  for line in lines:
    if "unhealthy" in line or "aborted" in line.lower() or "failed to connect" in line:
      return line[:200]
  return (lines[-1] if lines else type(error).__name__)[:200]
