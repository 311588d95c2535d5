#!/usr/bin/env python
"""The matmul floor of a Transformer training step: the time its dense matmuls alone take.

A training step of an encoder-decoder Transformer is mostly matrix products: per layer the
attention projections and the feed-forward layers, then the output layer, each once forward
and twice backward (the input's and the weight's gradients). This script builds exactly those
products for a batch of ``--src_positions`` source and ``--tgt_positions`` target positions
(padding included, as the step computes them), runs them in one ``tf.function`` and prints
their FLOPs, their median time and the rate reached. A whole step cannot take less than this
(attention scores, softmax, dropout, layer norm, the optimizer come on top), so
``step time / floor`` bounds what any non-matmul lever can still give, and a peer toolkit
that runs the same products shares the floor.

    python scripts/benchmark_matmul_floor.py --src_positions 4100 --tgt_positions 4100 \
        --vocab 5296 --step_time 3.806

Defaults: the Bible Transformer of docs/benchmarks.md (d_model 512, FFN 2048, 2+2 layers).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def step_matmuls(src: int, tgt: int, d_model: int, ffn: int, enc_layers: int,
                 dec_layers: int, vocab: int) -> list[tuple[int, int, int]]:
  """``(M, K, N)`` of every forward product ``[M, K] @ [K, N]`` of one training step."""
  encoder = [(src, d_model, 3 * d_model), (src, d_model, d_model),  # self-attention
             (src, d_model, ffn), (src, ffn, d_model)]  # feed-forward
  decoder = [(tgt, d_model, 3 * d_model), (tgt, d_model, d_model),  # self-attention
             (tgt, d_model, d_model), (src, d_model, 2 * d_model),  # cross: query, keys+values
             (tgt, d_model, d_model),  # cross-attention output
             (tgt, d_model, ffn), (tgt, ffn, d_model)]  # feed-forward
  return encoder * enc_layers + decoder * dec_layers + [(tgt, d_model, vocab)]


def with_backward(forward: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
  """Forward products and, for each, the two of its gradient: dX = dY W^T, dW = X^T dY."""
  out = []
  for m, k, n in forward:
    out += [(m, k, n), (m, n, k), (k, m, n)]
  return out


def flops(products: list[tuple[int, int, int]]) -> float:
  return float(sum(2 * m * k * n for m, k, n in products))


def time_products(products: list[tuple[int, int, int]], repeats: int) -> list[float]:
  """Seconds of each of ``repeats`` calls of one tf.function running every product."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  rng = tf.random.Generator.from_seed(0)
  pairs = [(rng.normal([m, k]), rng.normal([k, n])) for m, k, n in products]

  @tf.function(autograph=False)
  def run():
    # One product after another, as a step's layers run, each with every thread (products
    # run side by side would share the threads and time something else); a sum of one
    # element per product keeps every product alive and costs nothing.
    total = tf.constant(0.0)
    for a, b in pairs:
      with tf.control_dependencies([total]):
        total += tf.matmul(a, b)[0, 0]
    return total

  run().numpy()  # trace and warm up
  seconds = []
  for _ in range(repeats):
    start = time.perf_counter()
    run().numpy()
    seconds.append(time.perf_counter() - start)
  return seconds


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--src_positions", type=int, default=4100,
                      help="source positions per step, padding included")
  parser.add_argument("--tgt_positions", type=int, default=4100,
                      help="target positions per step, padding included")
  parser.add_argument("--d_model", type=int, default=512)
  parser.add_argument("--ffn", type=int, default=2048)
  parser.add_argument("--encoder_layers", type=int, default=2)
  parser.add_argument("--decoder_layers", type=int, default=2)
  parser.add_argument("--vocab", type=int, default=5296, help="output classes")
  parser.add_argument("--repeats", type=int, default=7)
  parser.add_argument("--step_time", type=float, default=None,
                      help="a measured step time (s) to compare with the floor")
  args = parser.parse_args(argv)
  if min(args.src_positions, args.tgt_positions, args.d_model, args.ffn, args.vocab,
         args.repeats) < 1 or min(args.encoder_layers, args.decoder_layers) < 0:
    parser.error("sizes and --repeats must be positive, layer counts not negative")
  products = with_backward(step_matmuls(args.src_positions, args.tgt_positions, args.d_model,
                                        args.ffn, args.encoder_layers, args.decoder_layers,
                                        args.vocab))
  total = flops(products)
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()
  seconds = statistics.median(time_products(products, args.repeats))
  print("| matmuls per step | GFLOP | median s | GFLOP/s |" +
        (" step s | step / floor |" if args.step_time else ""))
  print("|---:|---:|---:|---:|" + ("---:|---:|" if args.step_time else ""))
  line = f"| {len(products)} | {total / 1e9:.0f} | {seconds:.3f} | {total / 1e9 / seconds:.0f} |"
  if args.step_time:
    line += f" {args.step_time:.3f} | {args.step_time / seconds:.2f} |"
  print(line)
  return 0


if __name__ == "__main__":
  sys.exit(main())
