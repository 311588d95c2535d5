"""Settings TensorFlow reads from the environment once per process, chosen for training.

They must be in the environment before TensorFlow first allocates, so ``run.py`` applies
them before it imports anything that imports TensorFlow (this module imports nothing
heavy). A value the user already set wins: ``TF_CPU_ALLOCATOR_USE_BFC=false python run.py
...`` runs with TensorFlow's own default.

* ``TF_CPU_ALLOCATOR_USE_BFC=true``: host tensors come from TensorFlow's best-fit-with-
  coalescing pool (the allocator it uses for GPU memory) instead of one ``malloc`` per
  tensor. glibc serves every allocation above 32 MB (a batch's logits, the FFN activations)
  with a fresh ``mmap``, so each such tensor pays its page faults and the kernel's zeroing
  again at every step; the pool keeps the pages. Measured on the Bible Transformer in
  docs/benchmarks.md (*Levers: the CPU allocator, 16-bit dropout masks*).
"""

from __future__ import annotations

import os
from typing import MutableMapping

DEFAULTS = {"TF_CPU_ALLOCATOR_USE_BFC": "true"}


def apply_process_defaults(environ: MutableMapping[str, str] | None = None) -> None:
  """Sets every ``DEFAULTS`` variable that ``environ`` (default ``os.environ``) lacks."""
  environ = os.environ if environ is None else environ
  for name, value in DEFAULTS.items():
    environ.setdefault(name, value)


def main() -> int:
  """The ``open-seq2seq`` console command: ``run.py``'s entry with the defaults applied first
  (``open_seq2seq.cli`` imports TensorFlow)."""
  apply_process_defaults()
  from open_seq2seq.cli import main as cli_main  # pylint: disable=import-outside-toplevel
  return cli_main()
