"""Point-to-point sends to the chief through TensorFlow's coordination service.

``MultiWorkerMirroredStrategy``'s collectives are symmetric (every process receives what an
all-gather gathers), but inference outputs are for the chief alone. The coordination service
that TensorFlow starts for a multi-worker job (on its leader task, heartbeats included) holds
a key-value store: a worker puts its payload under a key and goes on, the chief reads and
deletes it. Its only Python access is a TensorFlow internal (``context.context()``), kept
here; when it is missing the caller falls back to an all-gather.
"""

from __future__ import annotations

import base64
import pickle
from typing import Any

#: A payload travels in parts of at most this many bytes (one gRPC message each).
PART_BYTES = 32 * 2**20


def key_value_store() -> Any | None:
  """The eager context holding the coordination service's key-value calls, or None."""
  try:
    from tensorflow.python.eager import context  # pylint: disable=import-outside-toplevel
    store = context.context()
    if store.coordination_service is None:
      return None
    for name in ("set_config_key_value", "get_config_key_value", "delete_config_key_value"):
      if not hasattr(store, name):
        return None
    return store
  except (ImportError, AttributeError):
    return None


def send(store: Any, key: str, objects: Any) -> None:
  """Puts ``objects`` (pickled) under ``key``: the parts first, then their count, which the
  reader waits for."""
  payload = pickle.dumps(objects, protocol=pickle.HIGHEST_PROTOCOL)
  parts = [payload[i:i + PART_BYTES] for i in range(0, len(payload), PART_BYTES)] or [b""]
  for index, part in enumerate(parts):
    # the store's values are UTF-8 strings
    store.set_config_key_value(f"{key}/{index}", base64.b64encode(part).decode("ascii"))
  store.set_config_key_value(key, str(len(parts)))


def receive(store: Any, key: str, timeout_seconds: float) -> Any:
  """Waits up to ``timeout_seconds`` for what :func:`send` put under ``key``, deletes it and
  returns it."""
  timeout_ms = max(1, int(timeout_seconds * 1000))
  count = int(store.get_config_key_value(key, timeout_in_ms=timeout_ms))
  parts = []
  for index in range(count):
    part_key = f"{key}/{index}"
    parts.append(base64.b64decode(store.get_config_key_value(part_key,
                                                             timeout_in_ms=timeout_ms)))
    store.delete_config_key_value(part_key)
  store.delete_config_key_value(key)
  return pickle.loads(b"".join(parts))
