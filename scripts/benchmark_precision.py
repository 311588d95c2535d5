#!/usr/bin/env python
"""Training throughput and peak memory of float32 vs mixed_bfloat16 vs mixed_float16.

Each (model, dtype) runs ``run.py --benchmark`` in its own process, so each gets its own peak
resident memory, and the variants of one model alternate within each repeat so that load from
other processes on the machine spreads over all of them. Prints a markdown table of medians
over repeats and the ratios to float32 of the same repeat set. No assertion: read the table.

Models:
  toy    the toy reversal Transformer of example_configs (d_model 128, 2+2 layers), toy data,
         64 sentences per batch;
  large  d_model 512, 8 heads, ffn 2048, 2+2 layers, ~4096 tokens per side per batch
         (token batching), on synthetic reversal data with an 8,000-token vocabulary so the
         output layer and softmax cost what they do in real translation.

Usage:
  python scripts/benchmark_precision.py [--models toy,large] [--repeats 3] [--bench_steps 30]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "example_configs", "text2text", "toy-reversal", "nmt-reversal-TT.py")
DTYPES = ("float32", "mixed_bfloat16", "mixed_float16")


def transformer(d_model: int, heads: int, ffn: int, layers: int) -> list[str]:
  return [f"--encoder_params/hidden_size={d_model}", f"--encoder_params/num_heads={heads}",
          f"--encoder_params/filter_size={ffn}", f"--encoder_params/encoder_layers={layers}",
          f"--decoder_params/hidden_size={d_model}", f"--decoder_params/num_heads={heads}",
          f"--decoder_params/filter_size={ffn}", f"--decoder_params/num_hidden_layers={layers}",
          f"--lr_policy_params/d_model={d_model}"]


MODELS = {
    "toy": {"about": "toy Transformer (d 128, 2+2), 64 sentences/batch",
            "args": transformer(128, 8, 512, 2) + ["--batch_size_per_gpu=64"],
            "vocab": None},
    "large": {"about": "Transformer d 512, 8 heads, ffn 2048, 2+2, ~4096 tokens/side/batch",
              "args": transformer(512, 8, 2048, 2) + [
                  "--batch_size_per_gpu=4096", "--data_layer_params/batching=tokens",
                  "--data_layer_params/max_length=64"],
              "vocab": 8000},
}


def make_data(directory: str, vocab_size: int | None, sentences: int = 20000) -> str:
  """Reversal data: the toy task's script, or synthetic Zipf-distributed tokens."""
  if os.path.isfile(os.path.join(directory, "train", "target.txt")):
    return directory
  if vocab_size is None:
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "create_toy_data.py"),
                    "--data_dir", directory], check=True, capture_output=True)
    return directory
  rng = random.Random(0)
  words = [f"w{i}" for i in range(vocab_size)]
  weights = [1.0 / (i + 1) for i in range(vocab_size)]
  os.makedirs(os.path.join(directory, "vocab"), exist_ok=True)
  os.makedirs(os.path.join(directory, "train"), exist_ok=True)
  with open(os.path.join(directory, "train", "source.txt"), "w", encoding="utf-8") as src, \
      open(os.path.join(directory, "train", "target.txt"), "w", encoding="utf-8") as tgt:
    for _ in range(sentences):
      tokens = rng.choices(words, weights, k=rng.randint(10, 50))
      src.write(" ".join(tokens) + "\n")
      tgt.write(" ".join(reversed(tokens)) + "\n")
  for side in ("source", "target"):
    with open(os.path.join(directory, "vocab", f"{side}.txt"), "w", encoding="utf-8") as f:
      f.write("\n".join(words) + "\n")
  return directory


def data_args(directory: str) -> list[str]:
  return [f"--data_layer_params/src_vocab_file={directory}/vocab/source.txt",
          f"--data_layer_params/tgt_vocab_file={directory}/vocab/target.txt",
          f"--data_layer_params/source_file={directory}/train/source.txt",
          f"--data_layer_params/target_file={directory}/train/target.txt"]


def run_variant(model: str, dtype: str, data_dir: str, args: argparse.Namespace) -> dict:
  cmd = [sys.executable, os.path.join(ROOT, "run.py"), f"--config_file={CONFIG}",
         "--mode=train", "--benchmark", f"--bench_steps={args.bench_steps}",
         f"--bench_start={args.bench_start}", f"--logdir={args.workdir}/unused",
         f"--dtype={dtype}", "--print_loss_steps=None", "--print_samples_steps=None",
         "--data_layer_params/pad_lengths_to_eight=True",
         ] + MODELS[model]["args"] + data_args(data_dir)
  if dtype == "mixed_float16":
    cmd.append("--loss_scaling=Backoff")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
  out = subprocess.run(cmd, capture_output=True, text=True, env=env)
  if out.returncode != 0:
    raise RuntimeError(f"{model}/{dtype} failed:\n{' '.join(cmd)}\n{out.stderr[-3000:]}")

  def figure(name: str) -> float:
    match = re.search(rf"\|\s*{re.escape(name)}\s*\|\s*([\d,.]+)", out.stdout)
    if not match:
      raise RuntimeError(f"{model}/{dtype}: no '{name}' in the output:\n{out.stdout[-2000:]}")
    return float(match.group(1).replace(",", ""))

  return {"tokens_per_s": figure("median tokens/s"), "step_s": figure("median time/step (s)"),
          "peak_mb": figure("peak memory (MB)"), "command": " ".join(cmd)}


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--models", default="toy,large", help="Comma-separated: toy, large.")
  parser.add_argument("--dtypes", default=",".join(DTYPES), help="Comma-separated dtypes.")
  parser.add_argument("--repeats", type=int, default=3, help="Runs per variant (medians).")
  parser.add_argument("--bench_steps", type=int, default=30, help="Steps per run.")
  parser.add_argument("--bench_start", type=int, default=10, help="Warm-up steps excluded.")
  parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(),
                                                        "benchmark_precision"))
  parser.add_argument("--verbose", action="store_true", help="Print each run as it ends.")
  args = parser.parse_args(argv)
  models = [m for m in args.models.split(",") if m]
  dtypes = [d for d in args.dtypes.split(",") if d]
  for m in models:
    if m not in MODELS:
      parser.error(f"--models: unknown model {m!r} (choose from {', '.join(MODELS)})")

  rows = []
  for model in models:
    data_dir = make_data(os.path.join(args.workdir, f"data_{model}"), MODELS[model]["vocab"])
    runs: dict[str, list[dict]] = {d: [] for d in dtypes}
    for repeat in range(args.repeats):
      # rotate the order so that no dtype always runs first (or last) in a repeat
      order = dtypes[repeat % len(dtypes):] + dtypes[:repeat % len(dtypes)]
      for dtype in order:
        result = run_variant(model, dtype, data_dir, args)
        runs[dtype].append(result)
        if args.verbose:
          print(f"{model} {dtype} run {repeat + 1}: {result['tokens_per_s']:,.0f} tokens/s, "
                f"{result['peak_mb']:,.0f} MB", flush=True)
    base_tps = statistics.median(r["tokens_per_s"] for r in runs[dtypes[0]])
    base_mb = statistics.median(r["peak_mb"] for r in runs[dtypes[0]])
    for dtype in dtypes:
      tps = statistics.median(r["tokens_per_s"] for r in runs[dtype])
      mb = statistics.median(r["peak_mb"] for r in runs[dtype])
      step = statistics.median(r["step_s"] for r in runs[dtype])
      rows.append((model, dtype, tps, tps / base_tps, step, mb, mb / base_mb,
                   " · ".join(f"{r['tokens_per_s']:,.0f}" for r in runs[dtype])))

  print(f"\n{args.repeats} run(s) per variant, {args.bench_steps} steps each, first "
        f"{args.bench_start} excluded; medians. Ratios are to {dtypes[0]} of the same model.\n")
  for model in models:
    print(f"- {model}: {MODELS[model]['about']}")
  print("\n| model | dtype | tokens/s | × | s/step | peak MB | × | tokens/s per run |")
  print("|---|---|---:|---:|---:|---:|---:|---|")
  for model, dtype, tps, ratio, step, mb, mb_ratio, each in rows:
    print(f"| {model} | {dtype} | {tps:,.0f} | {ratio:.2f} | {step:.3f} | {mb:,.0f} | "
          f"{mb_ratio:.2f} | {each} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
