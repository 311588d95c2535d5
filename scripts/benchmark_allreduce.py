#!/usr/bin/env python
"""The gradients' all-reduce alone, as a training step runs it: milliseconds per step.

Each run starts 2 processes on this machine, one core each, builds the backend a training
run would (``MultiWorkerBackend``: TensorFlow's collective ring over gRPC; or
``HorovodBackend`` under ``mpiexec``), and times ``backend.reduce_sum`` over per-replica
tensors of the given total size (the trainer's call, in a ``tf.function``), after checking
that the sums are right. Variants run round robin, ``--repeat`` rounds, medians reported:

* ``multi-worker pack=P`` — ``OPEN_SEQ2SEQ_ALLREDUCE_PACK_MB=P`` (``0``: one pack for
  everything, TensorFlow's default; ``auto``: the backend's default);
* ``horovod`` — ``mpiexec -np 2 --bind-to core`` (Open MPI's shared memory between ranks).

    python scripts/benchmark_allreduce.py                       # 90 MB: the Bible Transformer's
    python scripts/benchmark_allreduce.py --mb 90 --tensor_mb 4.5 --packs 0,1,4,16,auto \\
        --backends multi-worker,horovod --steps 10 --repeat 3

Bandwidth is the algorithm's: total bytes / time (what a step's all-reduce achieves).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT = "ALLREDUCE_RESULT "


def tensor_sizes(total_mb: float, tensor_mb: float) -> list[int]:
  """Float32 element counts of tensors of ``tensor_mb`` MB (the last one shorter) that make
  ``total_mb`` MB in all."""
  if total_mb <= 0 or tensor_mb <= 0:
    raise ValueError("--mb and --tensor_mb must be > 0")
  total, each = int(total_mb * 2**20) // 4, max(1, int(tensor_mb * 2**20) // 4)
  sizes = [each] * (total // each)
  if total % each:
    sizes.append(total % each)
  return sizes


def worker(args: argparse.Namespace) -> None:
  """One rank: times the all-reduce; rank 0 prints the result line."""
  sys.path.insert(0, ROOT)
  # pylint: disable-next=import-outside-toplevel
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly(first_op=False)  # the backend sets up the cluster before any op
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from open_seq2seq.distributed import cluster  # pylint: disable=import-outside-toplevel
  if args.horovod:
    from open_seq2seq.distributed.horovod_backend import HorovodBackend  # noqa: E501 pylint: disable=import-outside-toplevel
    backend = HorovodBackend({})
  else:
    from open_seq2seq.distributed.strategies import MultiWorkerBackend  # noqa: E501 pylint: disable=import-outside-toplevel
    backend = MultiWorkerBackend(cluster.detect(), {})
  rank = backend.worker_index
  with backend.strategy.scope():
    # variables start equal on every rank (the chief's values are broadcast)
    values = [tf.Variable(tf.ones([n]), trainable=False)
              for n in tensor_sizes(args.mb, args.tensor_mb)]

  @tf.function(autograph=False)
  def step():
    # rank r sends r + 1 everywhere: the sum over 2 ranks is 3
    per_replica = backend.run(lambda: [v * float(rank + 1) for v in values])
    sums = backend.reduce_sum(per_replica)
    return tf.stack([tf.reduce_min(s) for s in sums] + [tf.reduce_max(s) for s in sums])

  expected = float(sum(range(1, backend.num_workers + 1)))
  seconds = []
  for i in range(args.steps + 1):  # the first call traces: not timed
    start = time.perf_counter()
    extremes = step().numpy()
    if i:
      seconds.append(time.perf_counter() - start)
    if not (extremes == expected).all():
      raise SystemExit(f"rank {rank}: wrong sums {sorted(set(extremes.tolist()))}, "
                       f"expected {expected}")
  if rank == 0:
    print(RESULT + json.dumps({"ms": 1000 * statistics.median(seconds),
                               "workers": backend.num_workers}), flush=True)
  backend.shutdown()


def commands(args: argparse.Namespace) -> list[tuple[str, list[str], dict]]:
  """(name, command, extra environment) of every variant."""
  me = [os.path.abspath(__file__), "--worker", f"--mb={args.mb}",
        f"--tensor_mb={args.tensor_mb}", f"--steps={args.steps}"]
  runs = []
  backends = args.backends.split(",")
  unknown = set(backends) - {"multi-worker", "horovod"}
  if unknown:
    raise ValueError(f"--backends: unknown {sorted(unknown)}; choose multi-worker, horovod")
  if "multi-worker" in backends:
    launch = [sys.executable, "-m", "open_seq2seq.launch", "-np", "2", "--bind_cores",
              "--timeout", str(args.timeout), sys.executable] + me
    for pack in args.packs.split(","):
      env = {} if pack == "auto" else {"OPEN_SEQ2SEQ_ALLREDUCE_PACK_MB": pack}
      runs.append((f"multi-worker, pack={pack}", launch, env))
  if "horovod" in backends:
    runs.append(("horovod", ["mpiexec", "--oversubscribe", "-np", "2", "--bind-to", "core",
                             "-x", "TF_NUM_INTRAOP_THREADS", sys.executable] + me +
                 ["--horovod"], {}))
  return runs


def parse_result(stdout: str) -> float | None:
  """The chief's milliseconds per all-reduce from a run's output (launcher lines carry a
  ``[rank]`` prefix), or None."""
  for line in stdout.splitlines():
    at = line.find(RESULT)
    if at >= 0:
      return float(json.loads(line[at + len(RESULT):])["ms"])
  return None


def table(mb: float, results: dict[str, list[float]]) -> str:
  lines = ["| variant | ms per all-reduce (median) | per round | GB/s |", "|---|---:|---|---:|"]
  for name, rounds in results.items():
    if not rounds:
      lines.append(f"| {name} | failed | | |")
      continue
    ms = statistics.median(rounds)
    lines.append(f"| {name} | {ms:,.1f} | {', '.join(f'{r:,.1f}' for r in rounds)} | "
                 f"{mb * 2**20 / 1e9 / (ms / 1000):.2f} |")
  return "\n".join(lines)


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--mb", type=float, default=90.0,
                      help="MB all-reduced per step (float32; the Bible Transformer: 90).")
  parser.add_argument("--tensor_mb", type=float, default=4.5, help="MB per tensor.")
  parser.add_argument("--packs", default="0,4,auto",
                      help="OPEN_SEQ2SEQ_ALLREDUCE_PACK_MB values of the multi-worker runs.")
  parser.add_argument("--backends", default="multi-worker,horovod")
  parser.add_argument("--steps", type=int, default=10, help="Timed all-reduces per run.")
  parser.add_argument("--repeat", type=int, default=3, help="Rounds over the variants.")
  parser.add_argument("--timeout", type=float, default=600, help="Seconds per run.")
  parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--horovod", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.worker:
    worker(args)
    return 0
  try:
    tensor_sizes(args.mb, args.tensor_mb)
    runs = commands(args)
  except ValueError as e:
    parser.error(str(e))
  if any(name == "horovod" for name, *_ in runs) and shutil.which("mpiexec") is None:
    print("horovod: mpiexec not found (scripts/install_horovod.sh), skipped", file=sys.stderr)
    runs = [run for run in runs if run[0] != "horovod"]
  results: dict[str, list[float]] = {name: [] for name, *_ in runs}
  for round_index in range(args.repeat):
    for name, command, extra in runs:
      env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2",
                 TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1",
                 OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **extra)
      env.pop("TF_CONFIG", None)
      for key in ("OPEN_SEQ2SEQ_ALLREDUCE_PACK_MB",):
        if key not in extra:
          env.pop(key, None)
      try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT,
                              timeout=args.timeout + 30)
        ms = parse_result(done.stdout) if done.returncode == 0 else None
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
      except subprocess.TimeoutExpired:
        ms, why = None, "timed out"
      print(f"round {round_index + 1}: {name}: "
            f"{'%.1f ms' % ms if ms is not None else 'failed: ' + why}",
            file=sys.stderr, flush=True)
      if ms is not None:
        results[name].append(ms)
  cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
              if line.startswith("model name")), "unknown CPU")
  print(f"\nall-reduce of {args.mb:g} MB float32 in tensors of {args.tensor_mb:g} MB, "
        f"2 processes, one core each ({cpu}), median of {args.steps} per run, "
        f"{args.repeat} round(s)\n")
  print(table(args.mb, results))
  return 0


if __name__ == "__main__":
  sys.exit(main())
