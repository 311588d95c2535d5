#!/usr/bin/env python
"""Draws the training and eval curves of one or several runs into one PNG.

Reads ``LOGDIR/metrics.jsonl`` of each run (the scalars the trainer writes every
``save_summaries_steps``, and after each evaluation) and draws one subplot per quantity, every
run in its own colour on the same axes, eval points as markers:

    python scripts/plot_run.py runs/fp32 runs/mixed --labels fp32,mixed --output cmp.png
    python scripts/plot_run.py runs/big --metrics loss,eval/BLEU,lr

By default it draws the training loss, every eval metric, the learning rate and any
throughput key (``*_per_s``) the records have, into ``FIRST_LOGDIR/curves.png``. A metric is
a record key (``train/global_gradient_norm``) or a short name: ``loss`` and ``lr`` are the
training loss and learning rate, and a name without a prefix is looked up under ``train/``,
then ``eval/`` (``BLEU`` is ``eval/BLEU``). ``--x time`` plots against wall-clock time since
the run's first record, from the records' ``time`` key (seconds since the epoch).

The records are read the way the trainer keeps them: a line a kill cut short is skipped, and
when a resumed run logs a step again, the records of that step and later from the earlier
attempt are dropped (what ``Summaries.forget_after`` does to the file when a run resumes).
Needs matplotlib: ``pip install -e .[plots]``. Exit status 2 on a user error.
"""

from __future__ import annotations

# matplotlib is an optional extra: imported only to draw, so the reading is usable without it.
# pylint: disable=import-outside-toplevel
import argparse
import json
import math
import os
import re
import sys
from typing import Any, Iterable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from open_seq2seq.errors import WriteError  # noqa: E402
from open_seq2seq.utils.io import atomic_open  # noqa: E402  (no TensorFlow behind it)

METRICS_FILE = "metrics.jsonl"
TIME_KEY = "time"
NOT_METRICS = ("step", TIME_KEY)
ALIASES = {"loss": "train/loss", "lr": "train/learning_rate",
           "learning_rate": "train/learning_rate"}
THROUGHPUT = re.compile(r"(_per_s|_per_sec|_per_second|/s|throughput)$")
INSTALL_HINT = "pip install -e .[plots]"


class PlotError(Exception):
  """A mistake of the user's (missing file, unknown metric): one line, exit status 2."""


class Run:
  """One run's curves (a plain class: tests load this script without registering it as a
  module, which ``dataclasses`` needs).

  Args:
    label: name in the legend.
    path: its metrics.jsonl.
    series: per metric key, the points ``(step, wall time or None, value)`` in step order.
  """

  def __init__(self, label: str, path: str,
               series: dict[str, list[tuple[int, float | None, float]]]):
    self.label = label
    self.path = path
    self.series = series

  def has_times(self) -> bool:
    return any(t is not None for points in self.series.values() for _, t, _ in points)


def parse_records(lines: Iterable[str]) -> list[dict[str, Any]]:
  """The records of ``metrics.jsonl`` lines; a line that is not a whole record (one a kill
  cut short) is skipped, as the trainer itself treats it."""
  records = []
  for line in lines:
    try:
      record = json.loads(line)
    except ValueError:
      continue
    if isinstance(record, dict) and _is_number(record.get("step")):
      records.append(record)
  return records


def drop_superseded(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """Keeps what a resumed run's log means: a record whose step is below a step already logged
  starts a new attempt, and the earlier attempt's records of that step and later go."""
  kept: list[dict[str, Any]] = []
  latest = -math.inf
  for record in records:
    if record["step"] < latest:
      kept = [r for r in kept if r["step"] < record["step"]]
      latest = record["step"]  # the new attempt's steps from here on
    kept.append(record)
    latest = max(latest, record["step"])
  return kept


def to_series(records: list[dict[str, Any]]) -> dict[str, list[tuple[int, float | None, float]]]:
  """Per metric key (in order of first appearance), its points in step order; of two records
  of one step, the later wins (as in TensorBoard)."""
  by_key: dict[str, dict[int, tuple[float | None, float]]] = {}
  for record in records:
    wall = record.get(TIME_KEY)
    wall = float(wall) if _is_number(wall) else None
    for key, value in record.items():
      if key not in NOT_METRICS and _is_number(value):
        by_key.setdefault(key, {})[record["step"]] = (wall, float(value))
  return {key: [(step, wall, value) for step, (wall, value) in sorted(points.items())]
          for key, points in by_key.items()}


def read_run(logdir: str, label: str) -> Run:
  """A run's curves from ``logdir/metrics.jsonl``."""
  path = os.path.join(logdir, METRICS_FILE)
  if not os.path.isfile(path):
    what = "does not exist" if not os.path.isdir(logdir) else f"has no {METRICS_FILE}"
    raise PlotError(f"{logdir} {what}: give the logdir of a training run (it writes "
                    f"{METRICS_FILE} every save_summaries_steps)")
  with open(path, encoding="utf-8", errors="replace") as f:
    series = to_series(drop_superseded(parse_records(f)))
  if not series:
    raise PlotError(f"{path} holds no complete record yet: wait for the run's first "
                    f"save_summaries_steps (or evaluation)")
  return Run(label, path, series)


def run_labels(logdirs: list[str], labels: str | None) -> list[str]:
  """``--labels`` split, or each logdir's name (with its parent's when two names clash)."""
  if labels is not None:
    names = [name.strip() for name in labels.split(",")]
    if len(names) != len(logdirs):
      raise PlotError(f"--labels has {len(names)} names for {len(logdirs)} logdirs: give one "
                      f"per logdir, comma-separated")
    return names
  parts = [os.path.normpath(os.path.abspath(d)).split(os.sep) for d in logdirs]
  names = [p[-1] for p in parts]
  if len(set(names)) < len(names):
    names = ["/".join(p[-2:]) for p in parts]
  return names


def available_keys(runs: list[Run]) -> list[str]:
  """Every metric key of the runs, in order of first appearance."""
  return list(dict.fromkeys(key for run in runs for key in run.series))


def default_metrics(keys: list[str]) -> list[str]:
  """Training loss, the eval metrics (eval loss first), learning rate and throughput."""
  evals = [k for k in keys if k.startswith("eval/")]
  evals.sort(key=lambda k: k != "eval/loss")
  chosen = ["train/loss"] + evals + ["train/learning_rate"]
  chosen += [k for k in keys if THROUGHPUT.search(k)]
  return [k for k in dict.fromkeys(chosen) if k in keys]


def resolve_metrics(names: str | None, keys: list[str]) -> list[str]:
  """The record keys ``--metrics`` names (or the defaults)."""
  if names is None:
    chosen = default_metrics(keys)
    if not chosen:
      raise PlotError(f"no training loss, eval metric or learning rate in the records; pick "
                      f"some with --metrics from: {', '.join(keys)}")
    return chosen
  chosen = []
  for name in (n.strip() for n in names.split(",")):
    if not name:
      continue
    candidates = [name, ALIASES.get(name, ""), "train/" + name, "eval/" + name]
    key = next((c for c in candidates if c in keys), None)
    if key is None:
      raise PlotError(f"--metrics: no metric {name!r} in the records; available: "
                      f"{', '.join(keys)} (or loss, lr, or a name without train/ or eval/)")
    chosen.append(key)
  if not chosen:
    raise PlotError("--metrics is empty: give comma-separated names, e.g. loss,eval/BLEU,lr")
  return list(dict.fromkeys(chosen))


def time_unit(runs: list[Run]) -> tuple[str, float]:
  """Label and divisor for wall-clock x values: seconds, minutes or hours by the span."""
  span = max((max(_elapsed(run).values(), default=0.0) for run in runs), default=0.0)
  if span > 2 * 3600:
    return "h", 3600.0
  if span > 120:
    return "min", 60.0
  return "s", 1.0


def _elapsed(run: Run) -> dict[tuple[str, int], float]:
  """Seconds since the run's first record, per (key, step) that has a time."""
  times = {(key, step): wall for key, points in run.series.items()
           for step, wall, _ in points if wall is not None}
  start = min(times.values(), default=0.0)
  return {point: wall - start for point, wall in times.items()}


def points(run: Run, key: str, x: str, divisor: float = 1.0) -> tuple[list[float], list[float]]:
  """x and y values of ``key`` in ``run`` (x: step, or elapsed wall time / ``divisor``)."""
  if x == "step":
    return ([float(s) for s, _, _ in run.series.get(key, [])],
            [v for _, _, v in run.series.get(key, [])])
  elapsed = _elapsed(run)
  pairs = [(elapsed[(key, s)] / divisor, v) for s, _, v in run.series.get(key, [])
           if (key, s) in elapsed]
  return [p[0] for p in pairs], [p[1] for p in pairs]


def draw(runs: list[Run], metrics: list[str], x: str = "step") -> Any:
  """One subplot per metric, every run on each; returns the matplotlib Figure."""
  try:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
  except ImportError:
    raise PlotError(f"plotting needs matplotlib, an optional extra: {INSTALL_HINT}") from None
  cols = 1 if len(metrics) == 1 else 2 if len(metrics) <= 4 else 3
  rows = math.ceil(len(metrics) / cols)
  fig = Figure(figsize=(5.0 * cols, 3.0 * rows + 0.7), layout="constrained")
  FigureCanvasAgg(fig)  # non-interactive: no display, no pyplot state
  grid = fig.subplots(rows, cols, squeeze=False).ravel()
  unit, divisor = time_unit(runs) if x == "time" else ("", 1.0)
  xlabel = "step" if x == "step" else f"time since start ({unit})"
  for i, ax in enumerate(grid):
    if i >= len(metrics):
      ax.set_visible(False)
      continue
    key = metrics[i]
    if i:
      ax.sharex(grid[0])  # runs compared step for step across the quantities
    for n, run in enumerate(runs):
      xs, ys = points(run, key, x, divisor)
      marker = "o" if key.startswith("eval/") or len(xs) == 1 else None
      ax.plot(xs, ys, color=f"C{n % 10}", marker=marker, markersize=4, linewidth=1.3)
    ax.set_title(key, fontsize=10)
    ax.grid(True, alpha=0.3)
    if i + cols >= len(metrics):  # nothing drawn below it
      ax.set_xlabel(xlabel)
  handles = [Line2D([], [], color=f"C{n % 10}", label=run.label) for n, run in enumerate(runs)]
  fig.legend(handles=handles, loc="outside upper center", ncols=min(len(runs), 4),
             frameon=False)
  return fig


def save_png(fig: Any, path: str) -> None:
  """Writes the figure as a PNG under a temporary name, then renames it into place."""
  with atomic_open(path, binary=True) as f:
    fig.savefig(f, format="png", dpi=100)


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("logdirs", nargs="+", metavar="LOGDIR", help="training run directories")
  parser.add_argument("--output", help="PNG to write (default: FIRST_LOGDIR/curves.png)")
  parser.add_argument("--metrics", help="comma-separated metrics, e.g. loss,eval/BLEU,lr "
                                        "(default: loss, eval metrics, lr, throughput)")
  parser.add_argument("--labels", help="comma-separated legend names, one per logdir "
                                       "(default: the logdirs' names)")
  parser.add_argument("--x", choices=("step", "time"), default="step",
                      help="x axis: global step, or wall-clock time since the first record")
  args = parser.parse_args(argv)
  output = args.output or os.path.join(args.logdirs[0], "curves.png")
  try:
    labels = run_labels(args.logdirs, args.labels)
    runs = [read_run(d, label) for d, label in zip(args.logdirs, labels)]
    metrics = resolve_metrics(args.metrics, available_keys(runs))
    if args.x == "time" and not any(run.has_times() for run in runs):
      raise PlotError(f"--x time: the records of {', '.join(r.path for r in runs)} carry no "
                      f"wall-clock '{TIME_KEY}'; plot against --x step")
    fig = draw(runs, metrics, args.x)
    try:
      save_png(fig, output)
    except OSError as e:
      raise PlotError(f"cannot write {output}: {e.strerror}; give a writable --output") from None
    except WriteError as e:  # a full disk, a file-size limit ... named as such
      raise PlotError(str(e)) from None
  except PlotError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  except OSError as e:  # an unreadable metrics.jsonl
    print(f"error: cannot read {e.filename}: {e.strerror}", file=sys.stderr)
    return 2
  print(output)
  return 0


def _is_number(value: Any) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool)


if __name__ == "__main__":
  sys.exit(main())
