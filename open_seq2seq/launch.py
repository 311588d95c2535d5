"""Starts N local processes of a training script, as ``mpiexec -np N`` would on one machine.

    python -m open_seq2seq.launch -np 2 run.py --config_file=... --mode=train_eval

Each process gets the environment an Open MPI launcher gives (``OMPI_COMM_WORLD_RANK``,
``..._SIZE``, ``..._LOCAL_RANK``, ``..._LOCAL_SIZE``) plus ``OPEN_SEQ2SEQ_HOSTS=127.0.0.1``
and a free base port (``OPEN_SEQ2SEQ_PORT``), so ``run.py`` sets up TensorFlow's
multi-worker backend on 127.0.0.1. Output lines are prefixed with the rank. When a process
fails, the others are stopped and the launcher exits with its status; ``--timeout`` bounds
the whole job. ``--bind_cores`` pins each process to its share of this machine's cores and
sizes TensorFlow's thread pools to match.

TensorFlow's gRPC server listens on every interface whatever address the cluster names (TF
2.21 offers no option to choose one), and it has no authentication. So the launcher first
moves itself into a private network namespace whose only interface is the loopback, and the
ranks it starts share it: they reach each other on 127.0.0.1 and nothing else reaches them
(nor do they reach the network; ``--network host`` keeps the machine's network, for jobs that
read remote storage). Where the system allows no namespace (an unprivileged user without
user namespaces), the ranks use the machine's network and the launcher says so.

No MPI library is involved: Horovod needs ``mpiexec`` or ``horovodrun`` instead.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import IO

from open_seq2seq.distributed import cluster

EXIT_TIMEOUT = 124
_GRACE_SECONDS = 10.0
_CLONE_NEWNET, _CLONE_NEWUSER = 0x40000000, 0x10000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def isolate_network() -> str | None:
  """Moves this process into a new network namespace that holds only the loopback interface,
  brought up; the processes it starts afterwards share it. Returns None, or why it could not
  (this process then stays in the machine's network).

  A process with CAP_SYS_ADMIN (root) needs only the network namespace; any other user also
  needs a user namespace, in which it keeps its own uid and gid. Must run before this
  process starts a thread (a user namespace is refused to a multi-threaded process).
  """
  libc = ctypes.CDLL(None, use_errno=True)
  uid, gid = os.getuid(), os.getgid()
  if libc.unshare(_CLONE_NEWNET) != 0:
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
      return os.strerror(ctypes.get_errno())
    try:  # the same ids inside as outside: files keep their owners
      for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                         ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w", encoding="ascii") as f:
          f.write(text)
    except OSError as e:
      return f"cannot map the user's ids into the namespace ({e.strerror})"
  try:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
      request = struct.pack("16sh22x", b"lo", 0)  # struct ifreq: name, flags, padding
      flags = struct.unpack_from("16sh", fcntl.ioctl(probe, _SIOCGIFFLAGS, request))[1]
      fcntl.ioctl(probe, _SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", flags | _IFF_UP))
  except OSError as e:
    return f"cannot bring up its loopback interface ({e.strerror})"
  return None


def free_base_port(count: int, start: int | None = None) -> int:
  """A port p such that p .. p + count - 1 are all free on 127.0.0.1."""
  candidates = [start] if start else []
  for _ in range(50):
    with socket.socket() as probe:
      probe.bind(("127.0.0.1", 0))
      port = probe.getsockname()[1]
    if port + count < 65535:
      candidates.append(port)
  for base in candidates:
    if all(_port_free(base + i) for i in range(count)):
      return base
  raise RuntimeError(f"no {count} consecutive free ports found on 127.0.0.1")


def _port_free(port: int) -> bool:
  with socket.socket() as probe:
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
      probe.bind(("127.0.0.1", port))
    except OSError:
      return False
  return True


def rank_environment(rank: int, size: int, port: int,
                     cores: list[int] | None = None) -> dict[str, str]:
  """The variables that make process ``rank`` of ``size`` a worker of the local job."""
  env = {
      "OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(size),
      "OMPI_COMM_WORLD_LOCAL_RANK": str(rank), "OMPI_COMM_WORLD_LOCAL_SIZE": str(size),
      "OMPI_COMM_WORLD_NODE_RANK": "0",
      cluster.LAUNCHER_VAR: "1", cluster.HOSTS_VAR: "127.0.0.1", cluster.PORT_VAR: str(port),
      "PYTHONUNBUFFERED": "1",
  }
  if cores:
    env["TF_NUM_INTRAOP_THREADS"] = str(len(cores))
    env["TF_NUM_INTEROP_THREADS"] = "1"
    env["OMP_NUM_THREADS"] = str(len(cores))
  return env


def core_shares(size: int, available: list[int]) -> list[list[int]]:
  """Splits ``available`` cores into ``size`` contiguous shares (at least one core each)."""
  if size > len(available):
    return [[available[rank % len(available)]] for rank in range(size)]
  per = len(available) // size
  return [available[rank * per:(rank + 1) * per] for rank in range(size)]


def _pump(stream: IO[bytes], prefix: bytes, out: IO[bytes], lock: threading.Lock) -> None:
  for line in iter(stream.readline, b""):
    with lock:
      out.write(prefix + line if line.endswith(b"\n") else prefix + line + b"\n")
      out.flush()
  stream.close()


def _command(program: list[str]) -> list[str]:
  if program[0].endswith(".py"):
    return [sys.executable] + program
  return program


def _stop(processes: list[subprocess.Popen]) -> None:
  """SIGTERM to every running process group, SIGKILL after a grace period."""
  for proc in processes:
    if proc.poll() is None:
      _signal_group(proc, signal.SIGTERM)
  deadline = time.time() + _GRACE_SECONDS
  for proc in processes:
    try:
      proc.wait(timeout=max(0.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
      _signal_group(proc, signal.SIGKILL)
      proc.wait()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
  try:
    os.killpg(proc.pid, sig)
  except ProcessLookupError:
    pass


def launch(size: int, program: list[str], timeout: float | None = None,
           bind_cores: bool = False, port: int | None = None, network: str = "private") -> int:
  """Runs ``program`` as ``size`` ranks; returns the job's exit status.

  ``network``: "private" runs the ranks in a network namespace of their own (see
  :func:`isolate_network`; this process moves into it), "host" in the machine's network.
  """
  if network == "private" and size > 1:
    why = isolate_network()
    if why is not None:
      _report(f"notice: the ranks use this machine's network, where TensorFlow listens on "
              f"every interface: a private network namespace is not allowed here ({why}); "
              f"see docs/distributed.md")
  base = free_base_port(size, port)
  shares = core_shares(size, sorted(os.sched_getaffinity(0))) if bind_cores else [None] * size
  lock = threading.Lock()
  processes: list[subprocess.Popen] = []
  pumps: list[threading.Thread] = []
  for rank in range(size):
    env = dict(os.environ, **rank_environment(rank, size, base, shares[rank]))
    env.pop("TF_CONFIG", None)
    cores = shares[rank]
    proc = subprocess.Popen(
        _command(program), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL, start_new_session=True,  # own group: stop its children too
        preexec_fn=(lambda c=cores: os.sched_setaffinity(0, c)) if cores else None)
    processes.append(proc)
    prefix = f"[{rank}] ".encode()
    for stream, out in ((proc.stdout, sys.stdout.buffer), (proc.stderr, sys.stderr.buffer)):
      pump = threading.Thread(target=_pump, args=(stream, prefix, out, lock), daemon=True)
      pump.start()
      pumps.append(pump)

  def forward(signum, _frame):
    for proc in processes:
      if proc.poll() is None:
        _signal_group(proc, signum)

  previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
  start = time.time()
  status = 0
  try:
    while True:
      codes = [proc.poll() for proc in processes]
      failed = [(rank, code) for rank, code in enumerate(codes) if code not in (None, 0)]
      if failed:
        rank, code = failed[0]
        status = code if code > 0 else 128 - code
        _report(f"rank {rank} exited with status {code}; stopping the other ranks")
        break
      if all(code == 0 for code in codes):
        break
      if timeout is not None and time.time() - start > timeout:
        _report(f"job still running after --timeout={timeout:g}s; stopping every rank")
        status = EXIT_TIMEOUT
        break
      time.sleep(0.2)
  finally:
    _stop(processes)
    for pump in pumps:
      pump.join(timeout=5)
    for sig, handler in previous.items():
      signal.signal(sig, handler)
  return status


def _report(message: str) -> None:
  sys.stderr.write(f"[launch] {message}\n")
  sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(
      prog="python -m open_seq2seq.launch",
      description="Run N local processes of a script as one multi-worker job on 127.0.0.1.")
  parser.add_argument("-np", "--num_processes", type=int, required=True,
                      help="Number of processes (ranks).")
  parser.add_argument("--timeout", type=float, default=None,
                      help="Stop every rank and exit 124 after this many seconds.")
  parser.add_argument("--bind_cores", action="store_true",
                      help="Pin each rank to its share of the cores (threads sized to match).")
  parser.add_argument("--port", type=int, default=None,
                      help="First port to try (rank r listens on port + r).")
  parser.add_argument("--network", choices=["private", "host"], default="private",
                      help="private (default): the ranks share a network namespace of their "
                           "own, reachable only from inside it (TensorFlow listens on every "
                           "interface); host: the machine's network (remote storage).")
  parser.add_argument("program", nargs=argparse.REMAINDER,
                      help="Script (.py runs with this Python) or command, and its arguments.")
  args = parser.parse_args(argv)
  if not args.program:
    parser.error("give the program to run, e.g. run.py --config_file=...")
  if args.num_processes < 1:
    parser.error("-np must be at least 1")
  return launch(args.num_processes, args.program, args.timeout, args.bind_cores, args.port,
                args.network)


if __name__ == "__main__":
  sys.exit(main())
