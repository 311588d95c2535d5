"""Chooses the distribution backend from the config and the process's environment.

=====================================  ===========================================
what the run asks for                   backend
=====================================  ===========================================
``use_horovod: True``                   :class:`HorovodBackend` (mpiexec / horovodrun)
several processes (MPI env, TF_CONFIG)  :class:`MultiWorkerBackend` (collective all-reduce)
``--cpu_towers=N`` (N > 1)              :class:`TowersBackend` over N logical CPU devices
``num_gpus`` / ``gpu_ids`` > 1          :class:`TowersBackend` over those GPUs
otherwise                               single process, single device
=====================================  ===========================================
"""

from __future__ import annotations

from open_seq2seq.distributed import cluster
from open_seq2seq.distributed.backend import Backend
from open_seq2seq.errors import ConfigError


def make_backend(params: dict, cpu_towers: int = 0) -> Backend:
  """The backend for ``params`` (a validated config) in this process's environment."""
  info = cluster.detect()
  if cpu_towers < 0:
    raise ConfigError(f"--cpu_towers must be >= 0, got {cpu_towers}")
  from open_seq2seq.distributed import strategies
  strategies.configure_gpu_memory(params.get("gpu_memory_growth", True))
  if params.get("use_horovod"):
    if params.get("all_reduce", "auto") != "auto":
      raise ConfigError(f"all_reduce={params['all_reduce']!r} does not apply with use_horovod: "
                        "Horovod sums with what it was built with (HOROVOD_GPU_OPERATIONS=NCCL, "
                        "else MPI or Gloo); leave it 'auto'")
    if cpu_towers > 1:
      raise ConfigError("--cpu_towers cannot be combined with use_horovod (one device per "
                        "process); start more processes instead")
    from open_seq2seq.distributed.horovod_backend import HorovodBackend
    return HorovodBackend(params)
  if info.is_multi_process:
    if cpu_towers > 1:
      raise ConfigError("--cpu_towers cannot be combined with several processes: each "
                        "process drives the CPU as one replica")
    return strategies.MultiWorkerBackend(info, params)
  all_reduce = params.get("all_reduce", "auto")
  if cpu_towers > 1:
    return strategies.TowersBackend(strategies.configure_cpu_devices(cpu_towers), all_reduce)
  towers = len(params.get("gpu_ids") or []) or params.get("num_gpus") or 1
  if towers > 1:
    return strategies.TowersBackend(strategies.gpu_devices(params), all_reduce)
  if all_reduce != "auto":
    raise ConfigError(f"all_reduce={all_reduce!r} needs several replicas (towers or "
                      "processes); this run has one")
  if params.get("gpu_ids"):
    devices = strategies.gpu_devices(params)
    import tensorflow as tf
    return Backend(tf.distribute.OneDeviceStrategy(devices[0]))
  return Backend()
