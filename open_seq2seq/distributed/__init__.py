"""Distribution backends (single, towers, multi-worker, Horovod) and the launcher's cluster info.

Module dependencies run one way: ``cluster`` (no TensorFlow) <- ``backend`` <- ``strategies``,
``horovod_backend`` <- ``factory``. ``make_backend`` is exported here lazily, so that importing
``open_seq2seq.distributed.cluster`` (the local launcher does) does not start TensorFlow.
"""

from __future__ import annotations

from typing import Any

__all__ = ["make_backend"]


def __getattr__(name: str) -> Any:
  if name == "make_backend":
    from open_seq2seq.distributed.factory import make_backend  # pylint: disable=import-outside-toplevel
    return make_backend
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
