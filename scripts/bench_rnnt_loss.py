#!/usr/bin/env python
"""Time and peak memory of the RNN-Transducer loss + its gradient (open_seq2seq.losses.rnnt_loss)
beside TensorFlow's CTC loss + gradient on the same batch, frames and classes.

    python scripts/bench_rnnt_loss.py [--sizes 8,100,20,128 8,200,40,256] [--repeats 10]

Each measurement runs in a fresh process: one ``tf.function`` computing the per-utterance
losses and the gradient of their sum with respect to the logits, traced and run twice before
``--repeats`` timed runs (the minimum and median are printed). "Peak extra" is the peak of
the memory TensorFlow's CPU allocator hands out during one more run, less what it held
before (the inputs): what the loss and its gradient need beyond their inputs, the returned
gradient included (``tf.config.experimental.get_memory_info``; tensors, not the process).
"Logits" is the size of the input logits ([B, T, U+1, V] for RNN-T, [B, T, V] for CTC).
CTC is ``tf.nn.ctc_loss`` with sparse labels (its C++ kernel, the fast path on CPUs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measure(method: str, batch: int, frames: int, labels: int, classes: int, dtype: str,
            repeats: int) -> dict:
  """One measurement in this process (run it in a fresh one)."""
  sys.path.insert(0, ROOT)
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from open_seq2seq.losses import rnnt_loss  # pylint: disable=import-outside-toplevel

  rng = np.random.default_rng(0)
  ids = tf.constant(rng.integers(1, classes, size=(batch, labels)), tf.int32)
  frame_counts = tf.fill([batch], frames)
  label_counts = tf.fill([batch], labels)
  if method == "rnnt":
    shape = [batch, frames, labels + 1, classes]
  else:
    shape = [batch, frames, classes]
  logits = tf.cast(tf.random.stateless_normal(shape, seed=[0, 1]), dtype)
  sparse = tf.sparse.from_dense(ids)

  @tf.function
  def loss_and_grad(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      if method == "rnnt":
        losses = rnnt_loss(x, ids, frame_counts, label_counts)
      else:
        losses = tf.nn.ctc_loss(sparse, x, label_counts, frame_counts, logits_time_major=False,
                                blank_index=0)
    return losses, tape.gradient(losses, x)

  times = []
  for i in range(repeats + 2):
    start = time.perf_counter()
    losses, grads = loss_and_grad(logits)
    _ = losses.numpy(), grads.numpy()
    if i >= 2:
      times.append(time.perf_counter() - start)
  del losses, grads
  held = tf.config.experimental.get_memory_info("CPU:0")["current"]
  tf.config.experimental.reset_memory_stats("CPU:0")
  losses, grads = loss_and_grad(logits)
  peak = tf.config.experimental.get_memory_info("CPU:0")["peak"]
  return {"min_ms": 1000 * min(times), "median_ms": 1000 * statistics.median(times),
          "peak_extra_mib": (peak - held) / 2 ** 20,
          "logits_mib": float(np.prod(shape)) * tf.as_dtype(dtype).size / 2 ** 20}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
  parser.add_argument("--sizes", nargs="+", default=["8,100,20,128", "8,200,40,256"],
                      help="B,T,U,V of each row")
  parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"],
                      help="logits dtypes of the RNN-T rows")
  parser.add_argument("--repeats", type=int, default=10)
  parser.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    method, dtype, *size = args.child
    print(json.dumps(measure(method, *map(int, size), dtype, args.repeats)))
    return

  print("| loss | B | T | U | V | logits dtype | logits (MiB) | loss+grad min (ms) "
        "| median (ms) | peak extra (MiB) |")
  print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
  for size in args.sizes:
    batch, frames, labels, classes = (int(v) for v in size.split(","))
    runs = [("rnnt", dtype) for dtype in args.dtypes] + [("ctc", "float32")]
    for method, dtype in runs:
      out = subprocess.run([sys.executable, os.path.abspath(__file__), "--repeats",
                            str(args.repeats), "--child", method, dtype, str(batch),
                            str(frames), str(labels), str(classes)],
                           check=True, capture_output=True, text=True).stdout
      result = json.loads(out.strip().splitlines()[-1])
      name = "RNN-T (rnnt_loss)" if method == "rnnt" else "CTC (tf.nn.ctc_loss)"
      shown_labels = labels if method == "rnnt" else f"({labels})"
      print(f"| {name} | {batch} | {frames} | {shown_labels} | {classes} | {dtype} "
            f"| {result['logits_mib']:.1f} | {result['min_ms']:.1f} | {result['median_ms']:.1f} "
            f"| {result['peak_extra_mib']:.1f} |", flush=True)


if __name__ == "__main__":
  main()
