"""A process's place in a SLURM job step (``srun``), read from the variables ``srun`` sets.

``srun`` starts every task of a step with ``SLURM_PROCID`` (its rank), ``SLURM_LOCALID``
(its rank on its node), ``SLURM_NODEID``, the step's size (``SLURM_STEP_NUM_TASKS``, also
``SLURM_NTASKS``), its nodes in SLURM's compact host-list syntax
(``SLURM_STEP_NODELIST=node[01-03,07],gpu5``) and how many tasks each node runs
(``SLURM_STEP_TASKS_PER_NODE=2(x3),1``). With the default block distribution node *i* runs
the next ``tasks[i]`` ranks, so every rank knows every rank's host without talking.

The shell of an ``sbatch`` script (the batch step) also carries ``SLURM_PROCID=0`` and the
allocation's ``SLURM_NTASKS``, but no ``SLURM_STEP_*`` variable and no ``SLURM_STEP_ID``: a
``python run.py`` there, outside ``srun``, is one process, not rank 0 of a job whose other
ranks never start.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Mapping

from open_seq2seq.errors import ConfigError

_COUNT = re.compile(r"(\d+)(?:\(x(\d+)\))?")


@dataclasses.dataclass(frozen=True)
class SlurmStep:
  """This task's place in its ``srun`` step; ``hosts`` holds the node of every rank."""

  rank: int
  size: int
  local_rank: int
  local_size: int
  hosts: tuple[str, ...]
  job_id: str


def expand_hostlist(text: str) -> list[str]:
  """SLURM's compact host list as names: ``"node[01-03,07],gpu5"`` gives node01, node02,
  node03, node07, gpu5. A range keeps the width of its first bound (``01-10``: 01 … 10); a
  name with several bracket groups (``r[1-2]n[1-2]``) gives every combination, in order."""
  names: list[str] = []
  for item in _split_outside_brackets(text.strip(), text):
    parts = re.split(r"(\[[^\[\]]*\])", item)
    choices = [_expand_brackets(part, text) if part.startswith("[") else [part]
               for part in parts]
    names.extend("".join(combination) for combination in itertools.product(*choices))
  if not names or any(not name or "[" in name or "]" in name for name in names):
    raise ConfigError(f"SLURM host list {text!r} is not valid: expected names such as "
                      "'node[01-03,07],gpu5'")
  return names


def _split_outside_brackets(text: str, whole: str) -> list[str]:
  items, depth, start = [], 0, 0
  for i, char in enumerate(text):
    depth += {"[": 1, "]": -1}.get(char, 0)
    if depth not in (0, 1):
      raise ConfigError(f"SLURM host list {whole!r} has unbalanced brackets")
    if char == "," and depth == 0:
      items.append(text[start:i])
      start = i + 1
  if depth:
    raise ConfigError(f"SLURM host list {whole!r} has unbalanced brackets")
  return items + [text[start:]]


def _expand_brackets(group: str, whole: str) -> list[str]:
  out = []
  for piece in group[1:-1].split(","):
    found = re.fullmatch(r"(\d+)(?:-(\d+))?", piece.strip())
    if not found:
      raise ConfigError(f"SLURM host list {whole!r}: {piece!r} is not a number or a range "
                        "such as 01-03")
    low, high = found.group(1), found.group(2) or found.group(1)
    if int(high) < int(low):
      raise ConfigError(f"SLURM host list {whole!r}: range {piece!r} runs backwards")
    out.extend(str(n).zfill(len(low)) for n in range(int(low), int(high) + 1))
  return out


def expand_counts(text: str) -> list[int]:
  """SLURM's per-node task counts: ``"2(x3),1"`` gives [2, 2, 2, 1]."""
  counts: list[int] = []
  for piece in text.split(","):
    found = _COUNT.fullmatch(piece.strip())
    if not found:
      raise ConfigError(f"SLURM tasks per node {text!r} is not valid: expected counts such "
                        "as '2(x3),1'")
    counts += [int(found.group(1))] * int(found.group(2) or 1)
  return counts


def _number(env: Mapping[str, str], name: str) -> int:
  try:
    return int(env[name])
  except ValueError:
    raise ConfigError(f"environment variable {name}={env[name]!r} is not an integer "
                      "(set by srun)") from None


def _first(env: Mapping[str, str], *names: str) -> str | None:
  return next((name for name in names if env.get(name)), None)


def detect_step(env: Mapping[str, str]) -> SlurmStep | None:
  """The step this task belongs to, or None outside ``srun`` (see the module's docstring)."""
  size_var = _first(env, "SLURM_STEP_NUM_TASKS")
  if size_var is None and _first(env, "SLURM_STEP_ID", "SLURM_STEPID"):
    size_var = _first(env, "SLURM_NTASKS", "SLURM_NPROCS")
  if "SLURM_PROCID" not in env or size_var is None:
    return None
  rank, size = _number(env, "SLURM_PROCID"), _number(env, size_var)
  nodes_var = _first(env, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
  if nodes_var is None:
    raise ConfigError("SLURM_PROCID is set but no node list (SLURM_STEP_NODELIST): start "
                      "the ranks with srun, or set OPEN_SEQ2SEQ_HOSTS")
  nodes = expand_hostlist(env[nodes_var])
  counts_var = _first(env, "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
  if counts_var:
    counts = expand_counts(env[counts_var])
  elif env.get("SLURM_NTASKS_PER_NODE"):
    counts = [_number(env, "SLURM_NTASKS_PER_NODE")] * len(nodes)
  else:
    counts = [size // len(nodes)] * len(nodes)
  if len(counts) != len(nodes) or sum(counts) != size or not 0 <= rank < size:
    raise ConfigError(f"SLURM step of {size} tasks: rank {rank}, nodes {nodes} "
                      f"({nodes_var}) and tasks per node {counts} do not agree")
  hosts = tuple(itertools.chain.from_iterable([n] * c for n, c in zip(nodes, counts)))
  node = hosts[rank]
  local_rank = hosts[:rank].count(node)
  # Only the block distribution (srun's default) puts ranks where the counts say; a task
  # placed otherwise (-m cyclic) finds its own node id or local id contradicting that.
  if (env.get("SLURM_LOCALID") not in (None, str(local_rank)) or
      env.get("SLURM_NODEID") not in (None, str(nodes.index(node)))):
    raise ConfigError(f"SLURM task {rank} runs on node {env.get('SLURM_NODEID')} as local "
                      f"task {env.get('SLURM_LOCALID')}, not where srun's block distribution "
                      f"puts it: use srun -m block, or set OPEN_SEQ2SEQ_HOSTS")
  step_id = env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID") or "0"
  job_id = f"slurm-{env.get('SLURM_JOB_ID') or env.get('SLURM_JOBID') or ''}.{step_id}"
  return SlurmStep(rank=rank, size=size, local_rank=local_rank,
                   local_size=counts[nodes.index(node)], hosts=hosts, job_id=job_id)
