#!/usr/bin/env python
"""Steady-state training throughput of the Transformers of docs/benchmarks.md.

Runs ``run.py --benchmark`` once per model in its own process (so peak memory is per model)
and prints a Markdown table: median time per step, median tokens/s (real source + target
tokens, as the peer scripts in ../shared/bench count them) and peak resident memory.

    python scripts/benchmark_transformer.py --toy_data toy_text_data --bible_data data/bible_en_es

Build the toy data with scripts/create_toy_data.py and the Bible data with
scripts/get_bible_en_es.sh (the peers' folder from ../shared/bench/get_bible_en_es.sh reads too). Add overrides for every model with --extra, e.g.
``--extra=--dtype=mixed_bfloat16``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_benchmark(config: str, overrides: list[str], steps: int, start: int) -> dict:
  with tempfile.TemporaryDirectory() as logdir:
    cmd = [sys.executable, os.path.join(ROOT, "run.py"), f"--config_file={config}",
           "--mode=train", "--benchmark", f"--bench_steps={steps}", f"--bench_start={start}",
           f"--logdir={logdir}", "--print_loss_steps=None", "--print_samples_steps=None",
           *overrides]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
  if out.returncode != 0:
    raise SystemExit(f"benchmark failed: {' '.join(cmd)}\n{out.stderr[-3000:]}")
  figures = {}
  for key, pattern in (("s_per_step", r"median time/step \(s\)\s*\|\s*([\d.]+)"),
                       ("tokens_per_s", r"median tokens/s\s*\|\s*([\d,]+)"),
                       ("peak_mb", r"peak memory \(MB\)\s*\|\s*([\d,]+)")):
    figures[key] = float(re.search(pattern, out.stdout).group(1).replace(",", ""))
  return figures


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--toy_data", default="toy_text_data")
  parser.add_argument("--bible_data", default=os.path.join(
      os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "bible_en_es"))
  parser.add_argument("--steps", type=int, default=60)
  parser.add_argument("--start", type=int, default=20, help="warm-up steps not timed")
  parser.add_argument("--extra", action="append", default=[], help="override for every run")
  parser.add_argument("--models", default="toy,bible")
  args = parser.parse_args()
  toy = os.path.abspath(args.toy_data)
  models = {
      "toy": (os.path.join(ROOT, "example_configs/text2text/toy-reversal/nmt-reversal-TT.py"),
              [f"--data_layer_params/src_vocab_file={toy}/vocab/source.txt",
               f"--data_layer_params/tgt_vocab_file={toy}/vocab/target.txt",
               f"--data_layer_params/source_file={toy}/train/source.txt",
               f"--data_layer_params/target_file={toy}/train/target.txt"]),
      "bible": (os.path.join(ROOT, "example_configs/text2text/en-es/transformer-2x2-bible.py"),
                []),
  }
  os.environ["BIBLE_DATA"] = os.path.abspath(args.bible_data)
  rows = []
  for name in args.models.split(","):
    config, overrides = models[name]
    figures = run_benchmark(config, overrides + args.extra, args.steps, args.start)
    rows.append((name, figures))
    print(f"{name}: {figures}", file=sys.stderr)
  print("| model | s/step (median) | tokens/s (median) | peak memory (MB) |")
  print("|---|---|---|---|")
  for name, f in rows:
    print(f"| {name} | {f['s_per_step']:.3f} | {f['tokens_per_s']:,.0f} | {f['peak_mb']:,.0f} |")


if __name__ == "__main__":
  main()
