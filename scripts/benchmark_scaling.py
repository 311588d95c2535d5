#!/usr/bin/env python
"""Data-parallel scaling efficiency on this machine: towers, multi-worker and Horovod.

Trains the toy Transformer (example_configs/text2text/toy-reversal) with ``run.py
--benchmark`` and reads the chief's median throughput (global tokens per second):

* baseline — 1 process pinned to one core, one TensorFlow thread;
* towers — 1 process, N logical CPU devices (``--cpu_towers``), pinned to N cores;
* multi-worker — N processes (``python -m open_seq2seq.launch --bind_cores``), one core each;
* horovod — N processes under ``mpiexec --bind-to core`` with ``--use_horovod=True``.

Scaling efficiency = throughput with N replicas / (N x baseline throughput), with the same
batch per replica (so the global batch grows with N, as in weak scaling).

    python scripts/benchmark_scaling.py [--replicas 2] [--steps 40] [--batch 32]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "example_configs", "text2text", "toy-reversal", "nmt-reversal-TT.py")


def make_data(directory: str) -> None:
  subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "create_toy_data.py"),
                  "--data_dir", directory, "--train_size", "2000", "--dev_size", "10",
                  "--test_size", "10"], check=True, capture_output=True)


def run_args(data: str, args: argparse.Namespace) -> list[str]:
  files = {"src_vocab_file": "vocab/source.txt", "tgt_vocab_file": "vocab/target.txt",
           "source_file": "train/source.txt", "target_file": "train/target.txt"}
  return [os.path.join(ROOT, "run.py"), f"--config_file={CONFIG}", "--mode=train",
          "--benchmark", f"--bench_steps={args.steps}", f"--bench_start={args.warmup}",
          f"--batch_size_per_gpu={args.batch}", "--print_loss_steps=None",
          "--print_samples_steps=None", "--save_summaries_steps=None",
          *[f"--data_layer_params/{key}={os.path.join(data, rel)}" for key, rel in files.items()]]


def environment(threads: int) -> dict:
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2",
             TF_NUM_INTRAOP_THREADS=str(threads), TF_NUM_INTEROP_THREADS="1",
             OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
  env.pop("TF_CONFIG", None)
  return env


def measure(command: list[str], threads: int, timeout: float) -> float | None:
  """The chief's median tokens/s, or None (with the reason printed) if the run failed."""
  try:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                            env=environment(threads), cwd=ROOT)
  except subprocess.TimeoutExpired:
    print(f"  timed out: {' '.join(command[:6])} ...", file=sys.stderr)
    return None
  match = re.search(r"median tokens/s\s*\|\s*([\d,\.]+)", result.stdout)
  if result.returncode != 0 or not match:
    print(f"  failed ({result.returncode}): {result.stderr.strip().splitlines()[-1:]}",
          file=sys.stderr)
    return None
  return float(match.group(1).replace(",", ""))


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--replicas", type=int, default=2, help="N (processes or towers).")
  parser.add_argument("--steps", type=int, default=40, help="Timed steps per run.")
  parser.add_argument("--warmup", type=int, default=10, help="Steps excluded as warm-up.")
  parser.add_argument("--batch", type=int, default=32, help="batch_size_per_gpu.")
  parser.add_argument("--timeout", type=float, default=900, help="Seconds per run.")
  parser.add_argument("--repeat", type=int, default=2,
                      help="Rounds over all backends; the best of each is kept (the machine "
                           "is shared: the best run is the least disturbed).")
  args = parser.parse_args()
  cores = sorted(os.sched_getaffinity(0))
  n = args.replicas
  if n > len(cores):
    parser.error(f"--replicas {n} needs {n} cores, this process may use {len(cores)}")
  have_horovod = shutil.which("mpiexec") is not None and subprocess.run(
      [sys.executable, "-c", "import horovod.tensorflow"], capture_output=True).returncode == 0

  with tempfile.TemporaryDirectory() as tmp:
    data = os.path.join(tmp, "data")
    make_data(data)
    base = run_args(data, args)
    one_core = ["taskset", "-c", str(cores[0])]
    n_cores = ["taskset", "-c", ",".join(map(str, cores[:n]))]
    runs = [("single (baseline)", 1, 1, one_core + [sys.executable] + base),
            ("towers", n, n, n_cores + [sys.executable] + base + [f"--cpu_towers={n}"]),
            ("multi-worker", n, 1, [sys.executable, "-m", "open_seq2seq.launch", "-np", str(n),
                                    "--bind_cores", "--timeout", str(args.timeout)] + base)]
    if have_horovod:
      for size in sorted({1, n}):  # 1 rank: Horovod's own overhead against the baseline
        runs.append((f"horovod ({size} process{'es' if size > 1 else ''})", size, 1,
                     ["mpiexec", "--oversubscribe", "-np", str(size), "--bind-to", "core",
                      "-x", "TF_NUM_INTRAOP_THREADS", sys.executable] + base +
                     ["--use_horovod=True"]))
    else:
      print("horovod: not installed (scripts/install_horovod.sh), skipped", file=sys.stderr)
    best: dict[str, float | None] = {name: None for name, *_ in runs}
    for round_index in range(args.repeat):
      for name, replicas, threads, command in runs:
        print(f"round {round_index + 1}: {name} ({replicas} replica(s)) ...", file=sys.stderr)
        tokens = measure(command, threads, args.timeout)
        print(f"  {tokens} tokens/s", file=sys.stderr)
        if tokens is not None:
          best[name] = max(tokens, best[name] or 0.0)
    results = [(name, replicas, best[name]) for name, replicas, *_ in runs]

  baseline = results[0][2]
  print(f"\nToy Transformer, batch_size_per_gpu={args.batch}, {args.steps} steps "
        f"({args.warmup} warm-up), {len(cores)} cores, best of {args.repeat}\n")
  print("| backend | replicas | processes | tokens/s | scaling efficiency |")
  print("|---|---|---|---|---|")
  for name, replicas, tokens in results:
    processes = 1 if name.startswith(("single", "towers")) else replicas
    if tokens is None:
      print(f"| {name} | {replicas} | {processes} | failed | - |")
      continue
    efficiency = tokens / (replicas * baseline) if baseline else float("nan")
    print(f"| {name} | {replicas} | {processes} | {tokens:,.0f} | {efficiency:.2f} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
