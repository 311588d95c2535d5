"""Numpy helpers shared by the families that predict one class per example (Image2Label,
LSTMLM's classifiers): probabilities, predicted classes, and scores against known labels."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np


def softmax(logits: np.ndarray) -> np.ndarray:
  """Row-wise softmax in float64 (stable)."""
  shifted = np.asarray(logits, np.float64) - np.max(logits, axis=-1, keepdims=True)
  exp = np.exp(shifted)
  return exp / exp.sum(axis=-1, keepdims=True)


def predicted_classes(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(predicted class [batch], its softmax probability [batch])."""
  probabilities = softmax(logits)
  predicted = np.argmax(probabilities, axis=-1)
  return predicted, probabilities[np.arange(len(predicted)), predicted]


def accuracy_against_labels(results: list, label: Callable[[int], Any]) -> dict[str, float]:
  """``{"accuracy": ...}`` of inference results ``[(id, (class, probability)), ...]`` when
  ``label(id)`` knows every true class, else ``{}``."""
  if not results:
    return {}
  truth = [(label(i), c) for i, (c, _) in results]
  if any(t is None for t, _ in truth):
    return {}
  return {"accuracy": float(np.mean([t == c for t, c in truth]))}
