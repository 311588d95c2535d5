#!/usr/bin/env python
"""Speed levers on the Bible Transformer, each as a ratio against the same run without it.

Every variant is one ``run.py --benchmark`` process on the same config, data and batches
(the batch order is seeded, so every variant times the same steps); the variants run round
robin, ``--repeat`` rounds, so that a change in the machine's speed during the script hits
every variant alike. Prints one Markdown table: median s/step, tokens/s and peak memory over
the rounds, and tokens/s as a ratio against the first variant.

    python scripts/benchmark_levers.py --variants default,no_bfc_allocator,inter_op_1 \\
        --repeat 2 --steps 16 --start 6

A variant is a name from ``VARIANTS`` or ``NAME=ENV_VAR=VALUE`` / ``NAME=--flag=value``
pieces joined by ``+`` (e.g. ``xla=--use_xla_jit+--bench_start=10``). ``--config`` takes any
config (default: the Bible Transformer); ``--extra`` adds an override to every variant.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchmark_translation import BIBLE, ROOT, train_figures  # noqa: E402  pylint: disable=wrong-import-position

#: name -> (environment variables, run.py flags)
VARIANTS: dict[str, tuple[dict, list[str]]] = {
    "default": ({}, []),
    # TensorFlow's own CPU allocator (malloc per tensor) instead of the BFC pool run.py enables
    "no_bfc_allocator": ({"TF_CPU_ALLOCATOR_USE_BFC": "false"}, []),
    "inter_op_1": ({"TF_NUM_INTEROP_THREADS": "1"}, []),
    "no_onednn": ({"TF_ENABLE_ONEDNN_OPTS": "0"}, []),
    "xla": ({}, ["--use_xla_jit"]),
}


def parse_variant(text: str) -> tuple[str, dict, list[str]]:
  if text in VARIANTS:
    return (text, *VARIANTS[text])
  name, sep, spec = text.partition("=")
  if not sep or not spec:
    raise SystemExit(f"--variants: unknown variant {text!r}; choose from {', '.join(VARIANTS)} "
                     "or write NAME=ENV=VALUE+--flag=value")
  env, flags = {}, []
  for piece in spec.split("+"):
    if piece.startswith("--"):
      flags.append(piece)
    elif "=" in piece:
      key, value = piece.split("=", 1)
      env[key] = value
    else:
      raise SystemExit(f"--variants: {piece!r} is neither ENV=VALUE nor --flag=value")
  return name, env, flags


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--config", default=os.path.join(BIBLE, "transformer-2x2-bible.py"))
  parser.add_argument("--variants", default="default,no_bfc_allocator")
  parser.add_argument("--repeat", type=int, default=2)
  parser.add_argument("--steps", type=int, default=16)
  parser.add_argument("--start", type=int, default=6, help="warm-up steps not timed")
  parser.add_argument("--extra", action="append", default=[], help="override for every run")
  args = parser.parse_args()
  variants = [parse_variant(v) for v in args.variants.split(",")]
  results: dict[str, list[dict]] = {name: [] for name, _, _ in variants}
  for round_ in range(args.repeat):
    for name, env, flags in variants:
      figures = train_figures(args.config, args.extra + flags, args.steps, args.start, env)
      results[name].append(figures)
      print(f"round {round_ + 1} {name}: {figures}", file=sys.stderr, flush=True)
  reference = statistics.median(f["tokens_per_s"] for f in results[variants[0][0]])
  print(f"config: {os.path.relpath(args.config, ROOT)}; {args.repeat} round(s), "
        f"{args.steps - args.start} timed steps per run")
  print("| variant | s/step | tokens/s | peak memory (MB) | tokens/s per round | "
        f"× {variants[0][0]} |")
  print("|---|---:|---:|---:|---|---:|")
  for name, _, _ in variants:
    runs = results[name]
    tokens = statistics.median(f["tokens_per_s"] for f in runs)
    per_round = ", ".join(f"{f['tokens_per_s']:,.0f}" for f in runs)
    print(f"| {name} | {statistics.median(f['s_per_step'] for f in runs):.2f} | {tokens:,.0f} | "
          f"{statistics.median(f['peak_mb'] for f in runs):,.0f} | "
          f"{per_round} | {tokens / reference:.2f} |")


if __name__ == "__main__":
  main()
