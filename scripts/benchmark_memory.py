#!/usr/bin/env python
"""Does training's resident memory grow with the number of steps? A leak test as a benchmark.

Trains one ``run.py --mode=train`` process (default: the Bible en-es Transformer) for
``--steps`` steps and, at every ``--every`` steps (its console line), reads the process's
resident set (VmRSS) and its peak so far (VmHWM) from /proc. Summaries, sample prints and
checkpoints stay on (``--save_checkpoint_steps`` of them inside the run), as in a real run.
Prints one Markdown table, then the growth between ``--from_step`` (default 100: the length
buckets, the allocator's pools and the traced step functions are in place by then) and the
last step, and the least-squares slope of the RSS over those steps in MB per 100 steps.

    python scripts/benchmark_memory.py --steps 1000 --every 50 --batch 1024

Linux only (/proc). ``--extra`` adds a run.py override (repeatable), e.g.
``--extra=--dtype=mixed``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIBLE = os.path.join(ROOT, "example_configs", "text2text", "en-es", "transformer-2x2-bible.py")
STEP_LINE = re.compile(r"^(?:\[[\d:]+\] )?step\s+(\d+) \|.*\| ([\d.]+) s/step")


def memory_mb(pid: int) -> tuple[float, float]:
  """(resident set, its peak so far) of process ``pid`` in MB, from /proc/PID/status."""
  values = {}
  with open(f"/proc/{pid}/status", encoding="ascii") as f:
    for line in f:
      key, _, rest = line.partition(":")
      if key in ("VmRSS", "VmHWM"):
        values[key] = int(rest.split()[0]) / 1024  # kB
  return values["VmRSS"], values["VmHWM"]


def slope_per_100(points: list[tuple[int, float]]) -> float:
  """Least-squares slope of (step, MB) points, in MB per 100 steps (0 for fewer than 2)."""
  if len(points) < 2:
    return 0.0
  n = len(points)
  mean_x = sum(x for x, _ in points) / n
  mean_y = sum(y for _, y in points) / n
  var = sum((x - mean_x) ** 2 for x, _ in points)
  if var == 0:
    return 0.0
  return 100 * sum((x - mean_x) * (y - mean_y) for x, y in points) / var


def sample_run(command: list[str], env: dict, timeout: float) -> list[dict]:
  """Runs ``command`` (a run.py training) and samples its memory at every step line."""
  rows = []
  deadline = time.monotonic() + timeout
  with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                        env=env, cwd=ROOT) as process:
    try:
      for line in process.stdout:
        match = STEP_LINE.match(line)
        if match:
          rss, peak = memory_mb(process.pid)
          rows.append({"step": int(match.group(1)), "rss_mb": rss, "peak_mb": peak,
                       "s_per_step": float(match.group(2))})
          print(f"step {rows[-1]['step']}: RSS {rss:,.0f} MB (peak {peak:,.0f})",
                file=sys.stderr, flush=True)
        if time.monotonic() > deadline:
          process.kill()
          raise SystemExit(f"timed out after {timeout:.0f} s")
      stderr = process.stderr.read()
    finally:
      if process.poll() is None:
        process.kill()
  if process.returncode != 0:
    raise SystemExit(f"run.py failed ({process.returncode}):\n{stderr[-3000:]}")
  return rows


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--config", default=BIBLE)
  parser.add_argument("--steps", type=int, default=1000)
  parser.add_argument("--every", type=int, default=50, help="sample every N steps")
  parser.add_argument("--from_step", type=int, default=100,
                      help="growth and slope are measured from this step on")
  parser.add_argument("--batch", type=int, default=None,
                      help="batch_size_per_gpu (default: the config's)")
  parser.add_argument("--save_checkpoint_steps", type=int, default=250)
  parser.add_argument("--timeout", type=float, default=6 * 3600)
  parser.add_argument("--extra", action="append", default=[], help="run.py override")
  args = parser.parse_args()
  if args.from_step >= args.steps:
    parser.error("--from_step must be below --steps")
  with tempfile.TemporaryDirectory() as logdir:
    command = [sys.executable, os.path.join(ROOT, "run.py"), f"--config_file={args.config}",
               "--mode=train", f"--logdir={logdir}", f"--max_steps={args.steps}",
               f"--print_loss_steps={args.every}",
               f"--save_checkpoint_steps={args.save_checkpoint_steps}",
               *([f"--batch_size_per_gpu={args.batch}"] if args.batch else []), *args.extra]
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
    rows = sample_run(command, env, args.timeout)
  if not rows:
    raise SystemExit("run.py printed no step line")
  print(f"config: {os.path.relpath(args.config, ROOT)}; {args.steps} steps, "
        f"batch_size_per_gpu={args.batch or 'as configured'}, checkpoints every "
        f"{args.save_checkpoint_steps}{', ' + ' '.join(args.extra) if args.extra else ''}")
  print("| step | RSS (MB) | peak RSS so far (MB) | s/step |")
  print("|---:|---:|---:|---:|")
  for row in rows:
    print(f"| {row['step']} | {row['rss_mb']:,.0f} | {row['peak_mb']:,.0f} | "
          f"{row['s_per_step']:.3f} |")
  later = [r for r in rows if r["step"] >= args.from_step]
  if later:
    first, last = later[0], later[-1]
    growth = last["rss_mb"] - first["rss_mb"]
    slope = slope_per_100([(r["step"], r["rss_mb"]) for r in later])
    print(f"\nRSS at step {first['step']}: {first['rss_mb']:,.0f} MB; at step {last['step']}: "
          f"{last['rss_mb']:,.0f} MB ({growth:+,.0f} MB, {100 * growth / first['rss_mb']:+.1f} %); "
          f"slope {slope:+.1f} MB per 100 steps; peak {last['peak_mb']:,.0f} MB")


if __name__ == "__main__":
  main()
