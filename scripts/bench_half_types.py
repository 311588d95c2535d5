#!/usr/bin/env python
"""Which half type pays on this CPU: a 1-D convolution and a matmul, forward + backward, in
float32, bfloat16 and float16 (what ``dtype: "mixed"`` chooses between; see
open_seq2seq/utils/precision.py).

    python scripts/bench_half_types.py --batch 8 --time 400 --channels 256

Prints the CPU's model name and half-type flags, then a Markdown table: median seconds per
forward + backward pass over --repeats calls after one warm-up, and each type's time as a
multiple of float32's (below 1: faster). No assertion: read the table.
"""

from __future__ import annotations

# TensorFlow is imported after argparse: --help and argument errors need none.
# pylint: disable=import-outside-toplevel
import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TYPES = ("float32", "bfloat16", "float16")
HALF_FLAGS = ("avx512_bf16", "amx_bf16", "avx512_fp16", "amx_fp16")


def timed(op, inputs, repeats: int) -> float:
  """Median seconds of one forward + backward pass of ``op(*inputs)``."""
  import tensorflow as tf

  @tf.function
  def step(*tensors):
    with tf.GradientTape() as tape:
      tape.watch(tensors)
      y = tf.cast(op(*tensors), tf.float32)
      loss = tf.reduce_sum(y * y)
    return tape.gradient(loss, tensors)

  step(*inputs)[0].numpy()
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    step(*inputs)[0].numpy()
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--time", type=int, default=400, help="frames (conv) / rows per batch item")
  parser.add_argument("--channels", type=int, default=256, help="input channels")
  parser.add_argument("--width", type=int, default=11, help="convolution kernel width")
  parser.add_argument("--repeats", type=int, default=10)
  args = parser.parse_args()
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()
  import tensorflow as tf
  from open_seq2seq.run_record import cpu_name
  from open_seq2seq.utils import precision

  x = tf.random.stateless_normal([args.batch, args.time, args.channels], seed=[0, 1])
  kernel = tf.random.stateless_normal([args.width, args.channels, args.channels], seed=[0, 2])
  weights = tf.random.stateless_normal([args.channels, 4 * args.channels], seed=[0, 3])
  ops = {
      f"conv1d width {args.width} + ReLU":
          (lambda x, k: tf.nn.relu(tf.nn.conv1d(x, k, 1, "SAME")), (x, kernel * 0.05)),
      f"matmul {args.channels} -> {4 * args.channels} + ReLU":
          (lambda x, w: tf.nn.relu(tf.matmul(tf.reshape(x, [-1, args.channels]), w)),
           (x, weights * 0.05)),
  }
  flags = sorted(precision.cpu_flags() & set(HALF_FLAGS))
  print(f"{cpu_name()}; half-type flags: {', '.join(flags) or 'none'}; "
        f"\"mixed\" here: {precision.resolve_mixed()[0]}")
  print(f"batch {args.batch}, time {args.time}, channels {args.channels}\n")
  print("| op, forward + backward | " + " | ".join(f"{t} (s)" for t in TYPES) + " | " +
        " | ".join(f"{t} / float32" for t in TYPES[1:]) + " |")
  print("|---|" + "---:|" * (2 * len(TYPES) - 1))
  for name, (op, inputs) in ops.items():
    seconds = [timed(op, [tf.cast(t, getattr(tf, dtype)) for t in inputs], args.repeats)
               for dtype in TYPES]
    print(f"| {name} | " + " | ".join(f"{s:.4f}" for s in seconds) + " | " +
          " | ".join(f"{s / seconds[0]:.2f}" for s in seconds[1:]) + " |")


if __name__ == "__main__":
  main()
