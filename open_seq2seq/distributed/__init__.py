"""Distribution backends (single, towers, multi-worker, Horovod) and the launcher's cluster info.

Module dependencies run one way: ``backend`` <- ``strategies``, ``horovod_backend`` (both also
use ``cluster``, which needs no TensorFlow) <- ``factory``. ``make_backend`` (from ``factory``)
is exported here lazily, so that importing ``open_seq2seq.distributed.cluster`` (the local
launcher does) does not start TensorFlow.
"""

from __future__ import annotations

from typing import Any

__all__ = ["make_backend"]


def __getattr__(name: str) -> Any:
  """``make_backend`` on first use (PEP 562); other names do not exist."""
  if name == "make_backend":
    from open_seq2seq.distributed import factory  # pylint: disable=import-outside-toplevel
    return factory.make_backend
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
