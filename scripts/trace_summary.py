#!/usr/bin/env python
"""Where each worker's training steps went, from the traces of ``profile_steps``.

    python run.py --config_file=... --mode=train --profile_steps=[10,14] --logdir=runs/x
    python scripts/trace_summary.py runs/x

reads the chief's trace in ``runs/x`` and every other worker's in ``runs/x/worker-<i>``
(open_seq2seq/training/profiling.py) and prints, per traced step and worker, the step's wall
time, the time an op other than a collective was running (compute), the time the step spent in
collectives alone (exchange), the rest (other) and the busiest op types; with several
workers, it splits each step's exchange into the transfer and the wait for the slower
worker (open_seq2seq/utils/step_traces.py). Milliseconds.
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _worker_dirs(logdir: str) -> list[tuple[str, str]]:
  """The chief's logdir, then each ``worker-<i>`` folder that profiling.py wrote, by i."""
  others = {}
  for directory in glob.glob(os.path.join(logdir, "worker-*")):
    index = directory.rsplit("-", 1)[-1]
    if index.isdigit():
      others[int(index)] = directory
  return [("chief", logdir)] + [(f"worker-{i}", others[i]) for i in sorted(others)]


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("logdir", help="the run's logdir (or one trace file)")
  parser.add_argument("--step_event", default="train_step",
                      help="the traced function whose calls are the steps")
  parser.add_argument("--top", type=int, default=4, help="op types listed per step")
  parser.add_argument("--skip", type=int, default=0,
                      help="leave out the first N traced steps (the profiler's start-up)")
  args = parser.parse_args()
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()  # after argparse: --help and argument errors need no TensorFlow
  from open_seq2seq.utils import step_traces

  workers = []
  dirs = _worker_dirs(args.logdir)
  for name, directory in dirs:
    try:
      path = step_traces.latest_trace(directory)
    except FileNotFoundError as e:
      print(f"error: {e}", file=sys.stderr)
      return 2
    steps = step_traces.step_traces(*step_traces.read_events(path, args.step_event),
                                    untraced_allreduce=len(dirs) > 1)
    if len(steps) <= args.skip:
      print(f"error: {path}: {len(steps)} call(s) of {args.step_event}, none left after "
            f"--skip={args.skip}", file=sys.stderr)
      return 2
    workers.append((name, path, steps[args.skip:]))

  print("| worker | step | wall | compute | exchange | other | busiest op types |")
  print("|---|---:|---:|---:|---:|---:|---|")
  for name, _, steps in workers:
    for i, s in enumerate(steps):
      top = sorted(s.by_type.items(), key=lambda kv: -kv[1])[:args.top]
      ops = ", ".join(f"{kind} {t:.0f}" for kind, t in top)
      print(f"| {name} | {i + 1} | {s.wall:.0f} | {s.compute:.0f} | {s.exchange:.0f} | "
            f"{s.other:.0f} | {ops} |")
  print()
  for name, path, steps in workers:
    print(f"{name}: {path}: median wall {statistics.median(s.wall for s in steps):.0f}, compute "
          f"{statistics.median(s.compute for s in steps):.0f}, exchange "
          f"{statistics.median(s.exchange for s in steps):.0f}, other "
          f"{statistics.median(s.other for s in steps):.0f} ms per step")
  if len(workers) > 1:
    rows = step_traces.compare_workers([steps for _, _, steps in workers])
    print("\n| step | wall (slowest worker) | exchange: transfer | exchange: waiting for the "
          "slower worker |")
    print("|---:|---:|---:|---:|")
    for i, row in enumerate(rows):
      print(f"| {i + 1} | {row['wall']:.0f} | {row['transfer']:.0f} | {row['waiting']:.0f} |")
    print(f"\nmedians: transfer {statistics.median(r['transfer'] for r in rows):.0f} ms, "
          f"waiting {statistics.median(r['waiting'] for r in rows):.0f} ms per step")
  return 0


if __name__ == "__main__":
  sys.exit(main())
