"""Who am I in a multi-process job: rank, size and hosts from the launcher's environment.

Sources, first match wins:

* ``TF_CONFIG`` (Kubernetes / Kubeflow TFJob, or written by hand): the cluster spec as JSON;
  tasks of the ``chief`` job come first, then ``worker`` tasks.
* Open MPI's ``mpiexec``/``mpirun`` (``OMPI_COMM_WORLD_RANK`` ...); ``python -m
  open_seq2seq.launch`` sets the same variables.
* MPICH / Intel MPI's Hydra ``mpiexec`` (``PMI_RANK``, ``PMI_SIZE``, ``MPI_LOCALRANKID`` ...).
* ``horovodrun`` with Gloo (``HOROVOD_RANK`` ...).
* A SLURM step started by ``srun`` (``SLURM_PROCID``, ``SLURM_STEP_NUM_TASKS``,
  ``SLURM_STEP_NODELIST`` ...; :mod:`open_seq2seq.distributed.slurm`).

An MPI launcher wins over SLURM: ``mpiexec`` inside an ``sbatch`` allocation starts its
daemons with ``srun``, so its ranks also carry the daemons' ``SLURM_*`` variables, which
describe the daemons, not the ranks. Only when both name the same rank and size (and the
same local rank, where the MPI launcher gives one) — ``srun --mpi=pmi2`` starting MPI ranks
itself — is SLURM's description taken, as it alone also knows every rank's node.

MPI launchers give rank and size but not the other ranks' hosts. They are found, in order,
from ``OPEN_SEQ2SEQ_HOSTS`` (comma-separated, one per rank or one for all), from the local
size (every rank on this machine: 127.0.0.1), from SLURM's node list, or by an MPI all-gather
of host names through ``libmpi`` (:func:`gather_hosts_with_mpi`). Ports are agreed without
talking: rank ``r`` listens on ``base + r`` where ``base`` is ``OPEN_SEQ2SEQ_PORT`` or derived
from the job id (MPI's, or SLURM's job and step ids).

Listening addresses: TensorFlow's gRPC server (multi-worker) listens on every interface
whatever host the cluster names; TF 2.21 has no setting for it (``python -m
open_seq2seq.launch`` confines its ranks to a private network namespace instead). Open MPI's
TCP transport (Horovod) also listens on every interface; a job whose ranks all run on one
machine needs only shared memory, which :func:`mpi_transport_defaults` chooses.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import json
import os
import socket
import zlib
from typing import Mapping

from open_seq2seq.distributed import slurm
from open_seq2seq.errors import ConfigError

HOSTS_VAR = "OPEN_SEQ2SEQ_HOSTS"
PORT_VAR = "OPEN_SEQ2SEQ_PORT"
HOST_VAR = "OPEN_SEQ2SEQ_HOST"
LAUNCHER_VAR = "OPEN_SEQ2SEQ_LAUNCHER"
DEFAULT_PORT = 23456
_PORT_RANGE = (20000, 40000)


@dataclasses.dataclass(frozen=True)
class ClusterInfo:
  """This process's place in the job.

  Attributes:
    rank, size: index of this process and number of processes (chief is rank 0).
    local_rank, local_size: the same among the processes on this machine.
    source: "single", "tf_config", "openmpi", "mpich", "horovodrun", "launcher" or
      "slurm".
    job_id: an id shared by the job's processes (None if the launcher gives none).
    tf_config: the parsed ``TF_CONFIG`` when ``source == "tf_config"``.
    hosts: every rank's host, in rank order, when the launcher tells (SLURM), else None.
  """

  rank: int = 0
  size: int = 1
  local_rank: int = 0
  local_size: int = 1
  source: str = "single"
  job_id: str | None = None
  tf_config: dict | None = None
  hosts: tuple[str, ...] | None = None

  @property
  def is_multi_process(self) -> bool:
    return self.size > 1

  @property
  def all_local(self) -> bool:
    """Whether every process runs on this machine."""
    return self.local_size == self.size


def _int(env: Mapping[str, str], name: str, default: int | None = None) -> int:
  value = env.get(name)
  if value is None:
    if default is None:
      raise ConfigError(f"environment variable {name} is missing (set by the MPI launcher)")
    return default
  try:
    return int(value)
  except ValueError:
    raise ConfigError(f"environment variable {name}={value!r} is not an integer") from None


@dataclasses.dataclass(frozen=True)
class _Launcher:
  """The environment variables one kind of launcher sets for each process."""

  source: str
  rank: str
  size: str
  local_rank: str
  local_size: str
  job_ids: tuple[str, ...]


#: Launchers by the variables they set, in the order they are recognised.
_LAUNCHERS = (
    _Launcher("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
              "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
              ("OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE")),
    _Launcher("mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
              ("PMI_KVSNAME",)),
    _Launcher("horovodrun", "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK",
              "HOROVOD_LOCAL_SIZE", ("HOROVOD_GLOO_RENDEZVOUS_ADDR",)),
)


def detect(env: Mapping[str, str] | None = None) -> ClusterInfo:
  """The :class:`ClusterInfo` of this process from its environment."""
  env = os.environ if env is None else env
  if env.get("TF_CONFIG"):
    return _from_tf_config(env["TF_CONFIG"])
  try:  # a SLURM description that does not parse matters only if no MPI launcher wins
    step, slurm_error = slurm.detect_step(env), None
  except ConfigError as e:
    step, slurm_error = None, e
  from_slurm = None if step is None else ClusterInfo(
      rank=step.rank, size=step.size, local_rank=step.local_rank, local_size=step.local_size,
      source="slurm", job_id=step.job_id, hosts=step.hosts)
  for launcher in _LAUNCHERS:
    # Open MPI is recognised by its rank alone (a missing size is then an error)
    required = (launcher.rank,) if launcher.source == "openmpi" else (launcher.rank,
                                                                       launcher.size)
    if all(name in env for name in required):
      size = _int(env, launcher.size)
      source = launcher.source
      if source == "openmpi" and env.get(LAUNCHER_VAR):
        source = "launcher"  # our own launch.py starts ranks with Open MPI's variables
      job_id = next((env[name] for name in launcher.job_ids if env.get(name)), None)
      info = ClusterInfo(rank=_int(env, launcher.rank), size=size,
                         local_rank=_int(env, launcher.local_rank, 0),
                         local_size=_int(env, launcher.local_size, size), source=source,
                         job_id=job_id)
      if step and (info.rank, info.size) == (step.rank, step.size) and (
          launcher.local_rank not in env or info.local_rank == step.local_rank):
        return from_slurm  # srun started the MPI ranks itself: SLURM also knows the hosts
      return info
  if slurm_error:
    raise slurm_error
  return from_slurm or ClusterInfo()


def _from_tf_config(text: str) -> ClusterInfo:
  try:
    config = json.loads(text)
    cluster, task = config["cluster"], config["task"]
    task_type, index = task["type"], int(task["index"])
  except (ValueError, KeyError, TypeError) as e:
    raise ConfigError(f"TF_CONFIG is not valid: {e}; expected "
                      '{"cluster": {"worker": ["host:port", ...]}, '
                      '"task": {"type": "worker", "index": 0}}') from None
  if task_type not in ("chief", "worker"):
    raise ConfigError(f"TF_CONFIG task type {task_type!r} is not supported: open_seq2seq runs "
                      "synchronous data parallelism with 'chief' and 'worker' tasks only")
  tasks = [("chief", i) for i in range(len(cluster.get("chief", [])))]
  tasks += [("worker", i) for i in range(len(cluster.get("worker", [])))]
  if (task_type, index) not in tasks:
    raise ConfigError(f"TF_CONFIG task {task_type}:{index} is not in its cluster {cluster}")
  rank = tasks.index((task_type, index))
  hosts = [cluster[t][i].rsplit(":", 1)[0] for t, i in tasks]
  same_host = [i for i, host in enumerate(hosts) if host == hosts[rank]]
  return ClusterInfo(rank=rank, size=len(tasks), local_rank=same_host.index(rank),
                     local_size=len(same_host), source="tf_config", tf_config=config)


# ---------------------------------------------------------------------- hosts and ports
def base_port(info: ClusterInfo, env: Mapping[str, str] | None = None) -> int:
  """First port of the job: ``OPEN_SEQ2SEQ_PORT``, else a hash of the job id, else 23456.

  Every process computes the same value without communicating; rank r uses base + r.
  """
  env = os.environ if env is None else env
  if env.get(PORT_VAR):
    port = _int(env, PORT_VAR)
  elif info.job_id:
    low, high = _PORT_RANGE
    port = low + zlib.crc32(info.job_id.encode()) % (high - low)
  else:
    port = DEFAULT_PORT
  if not 1024 <= port <= 65535 - info.size:
    raise ConfigError(f"{PORT_VAR}={port}: choose a port in 1024..{65535 - info.size}")
  return port


def worker_hosts(info: ClusterInfo, env: Mapping[str, str] | None = None) -> list[str]:
  """Host (name or address) of every rank, in rank order."""
  env = os.environ if env is None else env
  if env.get(HOSTS_VAR):
    hosts = [h.strip() for h in env[HOSTS_VAR].split(",") if h.strip()]
    if len(hosts) == 1:
      hosts = hosts * info.size
    if len(hosts) != info.size:
      raise ConfigError(f"{HOSTS_VAR} lists {len(hosts)} hosts for {info.size} processes; "
                        "give one host per rank (in rank order) or a single host for all")
    return hosts
  if info.all_local:
    return ["127.0.0.1"] * info.size
  if info.hosts:
    return list(info.hosts)
  return gather_hosts_with_mpi(env.get(HOST_VAR) or socket.gethostname())


def tf_config_for(info: ClusterInfo, env: Mapping[str, str] | None = None) -> dict:
  """The ``TF_CONFIG`` of this process in a job started by an MPI launcher."""
  port = base_port(info, env)
  hosts = worker_hosts(info, env)
  addresses = [f"{host}:{port + rank}" for rank, host in enumerate(hosts)]
  return {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": info.rank}}


# ---------------------------------------------------------------------- MPI transports
def mpi_transport_defaults(info: ClusterInfo, env: Mapping[str, str] | None = None
                           ) -> dict[str, str]:
  """Open MPI settings that keep a job whose ranks all run on this machine off the network.

  Open MPI's TCP transport listens on every interface (whatever ``btl_tcp_if_include`` says)
  although ranks on one machine talk through shared memory: naming the transports ``self``
  (a rank to itself) and shared memory leaves no listening socket. Nothing for other
  launchers, for jobs across machines, or when the user chose the transports
  (``OMPI_MCA_btl``, which ``mpiexec --mca btl ...`` also sets). Read by ``MPI_Init``, so
  they must be in the environment before Horovod starts.
  """
  env = os.environ if env is None else env
  if info.source != "openmpi" or not info.all_local or "OMPI_MCA_btl" in env:
    return {}
  # Open MPI 5 renamed the shared-memory transport "vader" to "sm"; its launcher (PRRTE)
  # sets no ORTE variables
  legacy = any(name.startswith("OMPI_MCA_orte_") for name in env)
  return {"OMPI_MCA_btl": "self,vader" if legacy else "self,sm"}


# ---------------------------------------------------------------------- MPI all-gather
def gather_hosts_with_mpi(my_host: str, max_len: int = 256) -> list[str]:
  """Every rank's host name, by an all-gather through the MPI library (Open MPI or MPICH).

  MPI is initialised and finalised here, before TensorFlow starts its own servers, so that
  no MPI binding (mpi4py) is needed. Set ``OPEN_SEQ2SEQ_HOSTS`` to skip this.
  """
  lib = _load_libmpi()
  open_mpi = hasattr(lib, "ompi_mpi_comm_world")
  if open_mpi:
    comm = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(lib, "ompi_mpi_comm_world")))
    char = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(lib, "ompi_mpi_char")))
  else:  # MPICH ABI: handles are ints
    comm, char = ctypes.c_int(0x44000000), ctypes.c_int(0x4c000101)
  initialized = ctypes.c_int(0)
  lib.MPI_Initialized(ctypes.byref(initialized))
  if not initialized.value:
    lib.MPI_Init(None, None)
  size = ctypes.c_int(0)
  lib.MPI_Comm_size(comm, ctypes.byref(size))
  encoded = my_host.encode()[:max_len - 1]
  send = ctypes.create_string_buffer(encoded, max_len)
  recv = ctypes.create_string_buffer(max_len * size.value)
  code = lib.MPI_Allgather(send, max_len, char, recv, max_len, char, comm)
  if not initialized.value:
    lib.MPI_Finalize()
  if code != 0:
    raise ConfigError(f"MPI_Allgather of host names failed (code {code}); set {HOSTS_VAR} "
                      "to the comma-separated hosts of the ranks instead")
  raw = recv.raw
  return [raw[i * max_len:(i + 1) * max_len].split(b"\0", 1)[0].decode()
          for i in range(size.value)]


def _load_libmpi() -> ctypes.CDLL:
  names = [ctypes.util.find_library("mpi"), "libmpi.so", "libmpi.so.40", "libmpi.so.12"]
  for name in filter(None, names):
    try:
      return ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
    except OSError:
      continue
  raise ConfigError(f"processes run on several hosts but their list is unknown and libmpi "
                    f"cannot be loaded; set {HOSTS_VAR}=host0,host1,... (one per rank)")
