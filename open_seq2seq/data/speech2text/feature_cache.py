"""Optional on-disk cache of computed features (``cache_features=True``).

One ``.npy`` file per audio file, named by a hash of the audio file's absolute path, size
and modification time and of every parameter that changes the features, so editing either
invalidates the entry. Entries are written to a temporary name and renamed into place, so
parallel readers never see half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import Any, Mapping

import numpy as np


class FeatureCache:
  """Reads and writes one utterance's features by audio path.

  Args:
    directory: where the ``.npy`` files go (created if needed).
    feature_params: everything that determines the features (type, sizes, windows ...).
    regenerate: ignore existing entries and overwrite them.
  """

  def __init__(self, directory: str, feature_params: Mapping[str, Any],
               regenerate: bool = False):
    self.directory = directory
    self.regenerate = regenerate
    self._params_key = json.dumps(dict(feature_params), sort_keys=True, default=str)
    os.makedirs(directory, exist_ok=True)

  def entry(self, path: str) -> str:
    stat = os.stat(path)
    key = f"{os.path.abspath(path)}|{stat.st_size}|{stat.st_mtime_ns}|{self._params_key}"
    digest = hashlib.sha1(key.encode("utf-8")).hexdigest()
    return os.path.join(self.directory, digest[:2], digest + ".npy")

  def load(self, path: str) -> np.ndarray | None:
    if self.regenerate:
      return None
    try:
      return np.load(self.entry(path), allow_pickle=False)
    except (OSError, ValueError):
      return None

  def save(self, path: str, features: np.ndarray) -> None:
    target = self.entry(path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".tmp", dir=os.path.dirname(target))
    try:
      with os.fdopen(fd, "wb") as f:
        np.save(f, features, allow_pickle=False)
      os.replace(tmp, target)
    except BaseException:
      if os.path.exists(tmp):
        os.remove(tmp)
      raise
