#!/usr/bin/env python
"""Data-parallel scaling efficiency on this machine: towers, multi-worker and Horovod.

Trains a Transformer with ``run.py --benchmark`` and reads the chief's median throughput
(global tokens per second) and peak resident memory: ``--model toy`` (the toy reversal
Transformer, d_model 128, on generated data) or ``--model bible`` (the Bible en-es Transformer,
d_model 512, 2+2 layers, ~4,096 tokens per side per batch: a step long enough that the
all-reduce is not the whole of it; data from scripts/get_bible_en_es.sh):

* baseline — 1 process pinned to one core, one TensorFlow thread;
* towers — 1 process, N logical CPU devices (``--cpu_towers``), pinned to N cores;
* wide — 1 process, one device with N threads and an N times larger batch, pinned to N
  cores: the towers' work without the split into towers (what the thread pool alone gives);
* multi-worker — N processes (``python -m open_seq2seq.launch --bind_cores``), one core each;
* horovod — N processes under ``mpiexec --bind-to core`` with ``--use_horovod=True``
  (``horovod1``: one rank, Horovod's own overhead against the baseline).

Scaling efficiency = throughput with N replicas / (N x baseline throughput), with the same
batch per replica (so the global batch grows with N, as in weak scaling). The backends run
round robin, ``--repeat`` rounds, so that a change in the machine's speed hits them alike;
the table gives the median of the rounds and every round's figure.

    python scripts/benchmark_scaling.py [--model toy] [--replicas 2] [--steps 40] [--batch 32]
    python scripts/benchmark_scaling.py --model bible --steps 10 --warmup 3 --repeat 3
    python scripts/benchmark_scaling.py --model bible --balanced_workers \\
        --backends multi-worker,horovod --steps 30 --warmup 5 --repeat 3
    python scripts/benchmark_scaling.py --model bible --backends multi-worker \\
        --multi_worker_variant pack16:OPEN_SEQ2SEQ_ALLREDUCE_PACK_MB=16 \\
        --multi_worker_variant bf16:--allreduce_dtype=bfloat16
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: --model -> config; ``toy`` trains on data generated here, ``bible`` on the config's own data
CONFIGS = {
    "toy": os.path.join(ROOT, "example_configs", "text2text", "toy-reversal", "nmt-reversal-TT.py"),
    "bible": os.path.join(ROOT, "example_configs", "text2text", "en-es", "transformer-2x2-bible.py"),
}
#: --model -> batch_size_per_gpu when --batch is not given (bible: its config's, in tokens)
BATCHES = {"toy": 32, "bible": 4096}


def make_data(directory: str) -> None:
  subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "create_toy_data.py"),
                  "--data_dir", directory, "--train_size", "2000", "--dev_size", "10",
                  "--test_size", "10"], check=True, capture_output=True)


def batch_size(args: argparse.Namespace) -> int:
  return args.batch if args.batch is not None else BATCHES[args.model]


def run_args(data: str | None, args: argparse.Namespace, scale: int = 1) -> list[str]:
  """run.py's arguments for one run; ``data`` is the generated toy data (None: the config's);
  ``scale`` multiplies the batch (one device doing the work of ``scale`` replicas)."""
  files = {"src_vocab_file": "vocab/source.txt", "tgt_vocab_file": "vocab/target.txt",
           "source_file": "train/source.txt", "target_file": "train/target.txt"}
  balanced = ["--data_layer_params/balanced_workers=True"] if args.balanced_workers else []
  return [os.path.join(ROOT, "run.py"), f"--config_file={CONFIGS[args.model]}", "--mode=train",
          "--benchmark", f"--bench_steps={args.steps}", f"--bench_start={args.warmup}",
          f"--batch_size_per_gpu={scale * batch_size(args)}",
          "--print_loss_steps=None", "--print_samples_steps=None",
          "--save_summaries_steps=None", *balanced,
          *[f"--data_layer_params/{key}={os.path.join(data, rel)}"
            for key, rel in (files.items() if data else [])]]


def environment(threads: int, extra: dict | None = None) -> dict:
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2",
             TF_NUM_INTRAOP_THREADS=str(threads), TF_NUM_INTEROP_THREADS="1",
             OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **(extra or {}))
  env.pop("TF_CONFIG", None)
  return env


def parse_variant(text: str) -> tuple[str, dict, list[str]]:
  """``NAME:KEY=VALUE[,KEY=VALUE...]`` -> (NAME, {KEY: VALUE}, [run.py flags]): a KEY that
  starts with ``--`` is a run.py flag (``--allreduce_dtype=bfloat16``), any other an
  environment variable; raises ValueError."""
  name, sep, pairs = text.partition(":")
  if not sep or not name or not pairs:
    raise ValueError(f"{text!r} is not NAME:KEY=VALUE[,KEY=VALUE...]")
  env, flags = {}, []
  for pair in pairs.split(","):
    key, eq, value = pair.partition("=")
    if not eq or not key.strip("-"):
      raise ValueError(f"{text!r}: {pair!r} is not KEY=VALUE")
    if key.startswith("--"):
      flags.append(pair)
    else:
      env[key] = value
  return name, env, flags


def measure(command: list[str], threads: int, timeout: float,
            env: dict | None = None) -> tuple[float, float] | None:
  """The chief's (median tokens/s, peak memory in MB), or None (with the reason printed) if
  the run failed; ``env`` adds environment variables to the run."""
  try:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                            env=environment(threads, env), cwd=ROOT)
  except subprocess.TimeoutExpired:
    print(f"  timed out: {' '.join(command[:6])} ...", file=sys.stderr)
    return None
  match = re.search(r"median tokens/s\s*\|\s*([\d,\.]+)", result.stdout)
  peak = re.search(r"peak memory \(MB\)\s*\|\s*([\d,\.]+)", result.stdout)
  if result.returncode != 0 or not match or not peak:
    print(f"  failed ({result.returncode}): {result.stderr.strip().splitlines()[-1:]}",
          file=sys.stderr)
    return None
  return float(match.group(1).replace(",", "")), float(peak.group(1).replace(",", ""))


def summarize(rounds: list[tuple[float, float] | None]) -> dict | None:
  """Median tokens/s and peak memory over the rounds that ran, and every round's tokens/s."""
  done = [r for r in rounds if r is not None]
  if not done:
    return None
  return {"tokens": statistics.median(t for t, _ in done),
          "peak_mb": statistics.median(m for _, m in done),
          "rounds": [t for t, _ in done]}


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--model", choices=sorted(CONFIGS), default="toy",
                      help="toy: the toy reversal Transformer; bible: the Bible Transformer.")
  parser.add_argument("--replicas", type=int, default=2, help="N (processes or towers).")
  parser.add_argument("--steps", type=int, default=40, help="Steps per run, warm-up included.")
  parser.add_argument("--warmup", type=int, default=10, help="Steps excluded as warm-up.")
  parser.add_argument("--batch", type=int, default=None,
                      help="batch_size_per_gpu (default: 32 for toy, the config's 4096 "
                           "tokens for bible).")
  parser.add_argument("--timeout", type=float, default=1800, help="Seconds per run.")
  parser.add_argument("--repeat", type=int, default=3,
                      help="Rounds over all backends (round robin); medians are reported.")
  parser.add_argument("--backends", default="single,wide,towers,multi-worker,horovod1,horovod",
                      help="Comma-separated subset of the backends (single is the baseline "
                           "and always runs; horovod1 is Horovod with one rank, its own "
                           "overhead).")
  parser.add_argument("--horovod_env", action="append", default=[], metavar="KEY=VALUE",
                      help="An environment variable for the Horovod runs (repeatable), e.g. "
                           "HOROVOD_CYCLE_TIME=50.")
  parser.add_argument("--mpi_arg", action="append", default=[],
                      help="An extra mpiexec argument for the Horovod runs (repeatable), e.g. "
                           "--mpi_arg=--mca --mpi_arg=mpi_yield_when_idle --mpi_arg=1.")
  parser.add_argument("--balanced_workers", action="store_true",
                      help="Every run with data_layer_params/balanced_workers=True: the "
                           "workers of a step share one bucketed global batch "
                           "(open_seq2seq/data/global_batches.py).")
  parser.add_argument("--multi_worker_variant", action="append", default=[],
                      metavar="NAME:KEY=VALUE[,KEY=VALUE]",
                      help="One more multi-worker row, run with these environment variables "
                           "and run.py flags (repeatable), e.g. "
                           "pack16:OPEN_SEQ2SEQ_ALLREDUCE_PACK_MB=16 or "
                           "bf16:--allreduce_dtype=bfloat16.")
  args = parser.parse_args()
  try:
    variants = [parse_variant(text) for text in args.multi_worker_variant]
  except ValueError as e:
    parser.error(f"--multi_worker_variant: {e}")
  bad = [pair for pair in args.horovod_env if "=" not in pair]
  if bad:
    parser.error(f"--horovod_env: {bad[0]!r} is not KEY=VALUE")
  cores = sorted(os.sched_getaffinity(0))
  n = args.replicas
  if n > len(cores):
    parser.error(f"--replicas {n} needs {n} cores, this process may use {len(cores)}")
  wanted = set(args.backends.split(",")) | {"single"}
  unknown = wanted - {"single", "wide", "towers", "multi-worker", "horovod1", "horovod"}
  if unknown:
    parser.error(f"--backends: unknown {sorted(unknown)}; "
                 "choose from single, wide, towers, multi-worker, horovod1, horovod")
  have_horovod = shutil.which("mpiexec") is not None and subprocess.run(
      [sys.executable, "-c", "import horovod.tensorflow"], capture_output=True).returncode == 0

  with tempfile.TemporaryDirectory() as tmp:
    data = None
    if args.model == "toy":
      data = os.path.join(tmp, "data")
      make_data(data)
    base = run_args(data, args)
    one_core = ["taskset", "-c", str(cores[0])]
    n_cores = ["taskset", "-c", ",".join(map(str, cores[:n]))]
    runs = [("single (baseline)", 1, 1, one_core + [sys.executable] + base, {})]
    if "wide" in wanted:
      runs.append((f"wide ({n} threads, {n}x batch)", n, n,
                   n_cores + [sys.executable] + run_args(data, args, scale=n), {}))
    if "towers" in wanted:
      runs.append(("towers", n, n, n_cores + [sys.executable] + base + [f"--cpu_towers={n}"],
                   {}))
    launch = [sys.executable, "-m", "open_seq2seq.launch", "-np", str(n), "--bind_cores",
              "--timeout", str(args.timeout)] + base
    if "multi-worker" in wanted:
      runs.append(("multi-worker", n, 1, launch, {}))
    for name, env, flags in variants:
      runs.append((f"multi-worker ({name})", n, 1, launch + flags, env))
    sizes = sorted(({1} if "horovod1" in wanted else set()) |
                   ({n} if "horovod" in wanted else set()))
    if sizes and have_horovod:
      for size in sizes:  # 1 rank: Horovod's own overhead against the baseline
        runs.append((f"horovod ({size} process{'es' if size > 1 else ''})", size, 1,
                     ["mpiexec", "--oversubscribe", "-np", str(size), "--bind-to", "core",
                      *args.mpi_arg, "-x", "TF_NUM_INTRAOP_THREADS",
                      *[x for pair in args.horovod_env for x in ("-x", pair)],
                      sys.executable] + base + ["--use_horovod=True"], {}))
    elif sizes:
      print("horovod: not installed (scripts/install_horovod.sh), skipped", file=sys.stderr)
    rounds: dict[str, list] = {name: [] for name, *_ in runs}
    for round_index in range(args.repeat):
      for name, replicas, threads, command, env in runs:
        print(f"round {round_index + 1}: {name} ({replicas} replica(s)) ...", file=sys.stderr,
              flush=True)
        figures = measure(command, threads, args.timeout, env)
        print(f"  {figures} (tokens/s, peak MB)", file=sys.stderr, flush=True)
        rounds[name].append(figures)
    results = [(name, replicas, summarize(rounds[name])) for name, replicas, *_ in runs]

  baseline = results[0][2]["tokens"] if results[0][2] else None
  print(f"\n{args.model} Transformer ({os.path.relpath(CONFIGS[args.model], ROOT)}), "
        f"batch_size_per_gpu={batch_size(args)}, {args.steps} steps "
        f"({args.warmup} warm-up), {len(cores)} cores, median of {args.repeat} rounds"
        f"{', balanced workers' if args.balanced_workers else ''}\n")
  print("| backend | replicas | processes | tokens/s | tokens/s per round | "
        "peak memory (MB, chief) | scaling efficiency |")
  print("|---|---|---|---:|---|---:|---:|")
  for name, replicas, summary in results:
    processes = 1 if name.startswith(("single", "wide", "towers")) else replicas
    if summary is None:
      print(f"| {name} | {replicas} | {processes} | failed | | | - |")
      continue
    efficiency = summary["tokens"] / (replicas * baseline) if baseline else float("nan")
    per_round = ", ".join(f"{t:,.0f}" for t in summary["rounds"])
    print(f"| {name} | {replicas} | {processes} | {summary['tokens']:,.0f} | {per_round} | "
          f"{summary['peak_mb']:,.0f} | {efficiency:.2f} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
