"""Where a training step's time goes, from TensorFlow profiler traces (``profile_steps``).

A trace (``<dir>/plugins/profile/<time>/<host>.xplane.pb``) holds, per thread, timed events:
the Python thread's call of the step function (``train_step``) and every TensorFlow op the
executor ran (``<op name>:<op type>``). Per step this module measures

* ``wall``: the step function's call, as the training loop sees it;
* ``compute``: the time some op other than a collective was running (the union of those op
  events over every thread);
* ``exchange``: the time the step spent in collectives (all-reduces between replicas:
  TensorFlow's, NCCL's, Horovod's) while no other op ran. A collective's event lasts from
  its launch to the sum's arrival, so this holds both the transfer and the wait for the
  other workers. Horovod's ops run on its own thread and leave no event: for them
  (``untraced_allreduce``) the exchange is the step's longest wait between ops;
* ``other``: the rest (the input pipeline, the executor, Python);
* the busy time by op type.

Of several workers' same step, the one that was ready last waited for nobody: its exchange
is the transfer, and what the others spent beyond it was the wait for that slower worker
(:func:`compare_workers`). Times are in milliseconds.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import os

#: Op types that exchange data between replicas (TensorFlow's collectives, NCCL, Horovod).
COLLECTIVE_PREFIXES = ("Collective", "Nccl", "Horovod")


@dataclasses.dataclass
class StepTrace:
  """One step of one worker (times in ms, ``start``/``end`` on the machine's clock)."""
  start: float
  end: float
  compute: float
  exchange: float
  by_type: dict[str, float]

  @property
  def wall(self) -> float:
    return self.end - self.start

  @property
  def other(self) -> float:
    return self.wall - self.compute - self.exchange


def latest_trace(directory: str) -> str:
  """The newest ``*.xplane.pb`` under ``directory`` (a run's logdir or a trace file)."""
  if os.path.isfile(directory):
    return directory
  found = sorted(glob.glob(os.path.join(directory, "plugins", "profile", "*", "*.xplane.pb")))
  if not found:
    raise FileNotFoundError(f"{directory}: no profiler trace (plugins/profile/*/*.xplane.pb); "
                            f"train with profile_steps=[first, last] first")
  return found[-1]


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
  merged: list[list[float]] = []
  for start, end in sorted(intervals):
    if merged and start <= merged[-1][1]:
      merged[-1][1] = max(merged[-1][1], end)
    else:
      merged.append([start, end])
  return [(a, b) for a, b in merged]


def read_events(path: str, step_event: str = "train_step"
                ) -> tuple[list[tuple[float, float]], list[tuple[float, float, str]]]:
  """(the step calls' intervals, the ops' (start, end, type)) of the host plane, in ms."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2
  space = xplane_pb2.XSpace()
  with open(path, "rb") as f:
    space.ParseFromString(f.read())
  steps, ops = [], []
  for plane in space.planes:
    if not plane.name.startswith("/host:"):
      continue
    for line in plane.lines:
      base = line.timestamp_ns * 1e-6
      for event in line.events:
        meta = plane.event_metadata[event.metadata_id]
        start = base + event.offset_ps * 1e-9
        end = start + event.duration_ps * 1e-9
        if meta.name == step_event:
          steps.append((start, end))
        elif meta.display_name and meta.name.endswith(":" + meta.display_name):
          ops.append((start, end, meta.display_name))
  return sorted(steps), ops


def _total(intervals: list[tuple[float, float]]) -> float:
  return sum(b - a for a, b in _union(intervals))


def is_collective(kind: str) -> bool:
  """Whether an op type exchanges data between replicas."""
  return kind.startswith(COLLECTIVE_PREFIXES)


def step_traces(steps: list[tuple[float, float]], ops: list[tuple[float, float, str]],
                untraced_allreduce: bool = False) -> list[StepTrace]:
  """Per step: compute and exchange time, busy time by op type.

  ``untraced_allreduce``: the steps all-reduce (one of several workers); a step without
  collective op events then counts its longest wait between ops as its exchange."""
  result = []
  for start, end in steps:
    inside = [(max(a, start), min(b, end), kind) for a, b, kind in ops if a < end and b > start]
    compute = [(a, b) for a, b, kind in inside if not is_collective(kind)]
    collectives = [(a, b) for a, b, kind in inside if is_collective(kind)]
    by_type: dict[str, float] = collections.defaultdict(float)
    for a, b, kind in inside:
      by_type[kind] += b - a
    computing = _total(compute)
    exchange = _total(compute + collectives) - computing
    if not collectives and untraced_allreduce:
      edges = [start] + [x for interval in _union(compute) for x in interval] + [end]
      exchange = max(edges[i + 1] - edges[i] for i in range(0, len(edges), 2))
    result.append(StepTrace(start, end, computing, exchange, dict(by_type)))
  return result


def compare_workers(workers: list[list[StepTrace]]) -> list[dict[str, float]]:
  """Per step (the i-th traced step of every worker): ``transfer``, the exchange of the
  worker that waited least (the last one ready), and ``waiting``, how much longer the
  others' exchange lasted: the wait for the slower worker."""
  rows = []
  for steps in zip(*workers):
    exchanges = [s.exchange for s in steps]
    rows.append({"transfer": min(exchanges), "waiting": max(exchanges) - min(exchanges),
                 "wall": max(s.wall for s in steps)})
  return rows
