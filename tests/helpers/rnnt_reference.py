"""References for the RNN-Transducer loss (open_seq2seq/losses/transducer_loss.py), none of which
shares code or method with it.

* :func:`enumerated_nll`: the definition itself, every alignment of one utterance listed and
  its probability summed, in float64 (tiny lattices only: C(T - 1 + U, U) alignments);
* :func:`lattice_nll`: a plain node-by-node dynamic programme in float64 (any size);
* :func:`numerical_gradient`: central finite differences of either, in float64;
* :func:`paddle_rnnt`: PaddlePaddle's ``rnnt_loss`` (its CPU kernel is warp-transducer, the
  C++ reference implementation of the loss), run in a subprocess so that its libraries never
  share a process with TensorFlow. ``scripts/install_test_deps.sh`` installs it.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import subprocess
import sys
import tempfile

import numpy as np


def log_softmax(logits: np.ndarray) -> np.ndarray:
  logits = np.asarray(logits, np.float64)
  shifted = logits - logits.max(-1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def alignments(frames: int, labels: int):
  """Every alignment as a list of moves, "b" (blank: next frame) or "y" (next label).

  An alignment has ``frames`` blanks and ``labels`` label moves and ends with a blank.
  """
  steps = frames - 1 + labels
  for label_steps in itertools.combinations(range(steps), labels):
    moves = ["b"] * steps
    for i in label_steps:
      moves[i] = "y"
    yield moves + ["b"]


def enumerated_nll(logits: np.ndarray, labels, blank: int = 0) -> float:
  """-log of the summed probability of every alignment; ``logits`` [T, U+1, V] of one
  utterance, already cut to its own frames and labels."""
  log_probs = log_softmax(logits)
  frames, rows = log_probs.shape[:2]
  labels = list(labels)
  assert rows == len(labels) + 1
  total = -np.inf
  for moves in alignments(frames, len(labels)):
    t = u = 0
    score = 0.0
    for move in moves:
      if move == "b":
        score += log_probs[t, u, blank]
        t += 1
      else:
        score += log_probs[t, u, labels[u]]
        u += 1
    assert (t, u) == (frames, len(labels))
    total = np.logaddexp(total, score)
  return -total


def lattice_nll(logits: np.ndarray, labels, blank: int = 0) -> float:
  """The same quantity by a forward pass over the lattice, one node at a time."""
  log_probs = log_softmax(logits)
  frames, rows = log_probs.shape[:2]
  forward = np.full((frames, rows), -np.inf)
  for t in range(frames):
    for u in range(rows):
      if t == 0 and u == 0:
        forward[t, u] = 0.0
        continue
      from_left = forward[t - 1, u] + log_probs[t - 1, u, blank] if t > 0 else -np.inf
      from_below = forward[t, u - 1] + log_probs[t, u - 1, labels[u - 1]] if u > 0 else -np.inf
      forward[t, u] = np.logaddexp(from_left, from_below)
  return -(forward[-1, -1] + log_probs[-1, -1, blank])


def numerical_gradient(nll, logits: np.ndarray, labels, blank: int = 0, step: float = 1e-5,
                       coordinates=None) -> np.ndarray:
  """Central differences of ``nll(logits, labels, blank)`` in float64: all coordinates, or
  only the given list of index tuples (the others are left NaN)."""
  logits = np.array(logits, np.float64)
  grad = np.zeros_like(logits) if coordinates is None else np.full_like(logits, np.nan)
  if coordinates is None:
    coordinates = list(np.ndindex(*logits.shape))
  for index in coordinates:
    original = logits[index]
    logits[index] = original + step
    up = nll(logits, labels, blank)
    logits[index] = original - step
    down = nll(logits, labels, blank)
    logits[index] = original
    grad[index] = (up - down) / (2 * step)
  return grad


def paddle_available() -> bool:
  return importlib.util.find_spec("paddle") is not None


def paddle_rnnt(batches: list[tuple]) -> list[tuple[np.ndarray, np.ndarray]]:
  """PaddlePaddle's losses [B] and d sum(losses) / d logits, in float64, for each batch
  ``(logits [B, T, U+1, V], labels [B, U], logit_lengths, label_lengths, blank)``; one
  subprocess for them all (importing Paddle takes seconds)."""
  with tempfile.TemporaryDirectory() as tmp:
    inputs, outputs = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
    arrays = {}
    for i, (logits, labels, logit_lengths, label_lengths, blank) in enumerate(batches):
      arrays.update({f"logits{i}": np.asarray(logits, np.float64),
                     f"labels{i}": np.asarray(labels, np.int32),
                     f"logit_lengths{i}": np.asarray(logit_lengths, np.int32),
                     f"label_lengths{i}": np.asarray(label_lengths, np.int32),
                     f"blank{i}": np.int32(blank)})
    np.savez(inputs, **arrays)
    run = subprocess.run([sys.executable, os.path.abspath(__file__), inputs, outputs],
                         env={**os.environ, "GLOG_minloglevel": "2"}, capture_output=True,
                         text=True, check=False)
    if run.returncode != 0:
      raise RuntimeError(f"PaddlePaddle's rnnt_loss failed: {run.stderr[-2000:]}")
    with np.load(outputs) as result:
      return [(result[f"losses{i}"], result[f"grads{i}"]) for i in range(len(batches))]


def _run_paddle(inputs: str, outputs: str) -> None:
  import paddle  # pylint: disable=import-outside-toplevel
  import paddle.nn.functional as F  # pylint: disable=import-outside-toplevel
  paddle.set_device("cpu")
  results = {}
  with np.load(inputs) as given:
    for i in range(len([k for k in given.files if k.startswith("logits")])):
      logits = paddle.to_tensor(given[f"logits{i}"], stop_gradient=False)
      # Paddle's CPU kernel takes log-probabilities (so says its wrapper, paddle's loss.py);
      # fastemit_lambda=0: the plain loss (Paddle's default adds FastEmit's regularizer)
      losses = F.rnnt_loss(F.log_softmax(logits, axis=-1), paddle.to_tensor(given[f"labels{i}"]),
                           paddle.to_tensor(given[f"logit_lengths{i}"]),
                           paddle.to_tensor(given[f"label_lengths{i}"]),
                           blank=int(given[f"blank{i}"]), fastemit_lambda=0.0, reduction="none")
      losses.sum().backward()
      results[f"losses{i}"], results[f"grads{i}"] = losses.numpy(), logits.grad.numpy()
  np.savez(outputs, **results)


if __name__ == "__main__":
  _run_paddle(sys.argv[1], sys.argv[2])
