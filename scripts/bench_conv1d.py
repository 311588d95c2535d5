#!/usr/bin/env python
"""Forward + backward time of ConvS2S's convolution: tf.nn.conv1d against the one matmul
per tap of open_seq2seq.parts.convs2s.conv_wn_layer.shifted_conv1d (what the layers use).

    python scripts/bench_conv1d.py --batch 64 --time 64 --channels 512 --width 3

Prints a Markdown table: median seconds per forward+backward pass (input and kernel
gradients) over --repeats runs after one warm-up, and the ratio.
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


def timed(conv, x, kernel, repeats: int) -> float:
  import tensorflow as tf

  @tf.function
  def step(x):
    with tf.GradientTape() as tape:
      tape.watch([x, kernel])
      y = conv(x, kernel)
      loss = tf.reduce_sum(y * y)
    return tape.gradient(loss, [x, kernel])

  step(x)[0].numpy()
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    step(x)[0].numpy()
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--batch", type=int, default=64)
  parser.add_argument("--time", type=int, default=64)
  parser.add_argument("--channels", type=int, default=512, help="input channels")
  parser.add_argument("--width", type=int, default=3)
  parser.add_argument("--repeats", type=int, default=10)
  args = parser.parse_args()
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()
  import tensorflow as tf
  from open_seq2seq.parts.convs2s.conv_wn_layer import shifted_conv1d
  # a GLU layer's convolution produces twice its channels
  x = tf.random.stateless_normal([args.batch, args.time, args.channels], seed=[0, 1])
  kernel = tf.random.stateless_normal([args.width, args.channels, 2 * args.channels],
                                      seed=[0, 2]) * 0.01
  width = args.width

  def conv1d(x, kernel):
    return tf.nn.conv1d(tf.pad(x, [[0, 0], [width - 1, 0], [0, 0]]), kernel, 1, "VALID")

  rows = [("tf.nn.conv1d", timed(conv1d, x, kernel, args.repeats)),
          ("shifted_conv1d", timed(lambda x, k: shifted_conv1d(x, k, True), x, kernel,
                                   args.repeats))]
  print("| causal convolution, forward + backward | s (median) | x conv1d |")
  print("|---|---:|---:|")
  for name, seconds in rows:
    print(f"| {name} | {seconds:.3f} | {rows[0][1] / seconds:.2f} |")


if __name__ == "__main__":
  main()
