#!/usr/bin/env python
"""Speech recognizers side by side on the synthetic corpus: training speed in seconds of audio
per second, and held-out WER against wall time (equal-time comparison).

    python scripts/make_synthetic_speech.py --output_dir=data/synthetic_speech
    python scripts/bench_asr_models.py [--configs conformer_ctc_synthetic.py quartznet_synthetic.py]

Each config (from example_configs/speech2text/, as shipped: its own steps, schedule and
batches) runs ``run.py --mode=train_eval`` with an eval of the dev split every
``--eval_steps`` steps, one run after the other; the runs' ``metrics.jsonl`` give the time of
every eval. Then ``--mode=infer`` scores the test split. The table holds each model's
parameters, median training rate (seconds of audio per second, from the summaries), the dev
WER curve, the WER each had reached when the fastest run ended (equal wall time) and its
final test WER. Times include the evals, which cost every model alike.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG_DIR = os.path.join(ROOT, "example_configs", "speech2text")
DEFAULT_CONFIGS = ("conformer_ctc_synthetic.py", "quartznet_synthetic.py")


def cpu_name() -> str:
  """The CPU's model name (run_record's), its bfloat16/AVX2 kind and its core count."""
  sys.path.insert(0, ROOT)
  from open_seq2seq import run_record  # pylint: disable=import-outside-toplevel
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      flags = set(re.search(r"^flags\s*:\s*(.+)$", f.read(), re.M).group(1).split())
  except (OSError, AttributeError):
    flags = set()
  kind = " with AVX-512 BF16" if "avx512_bf16" in flags else " (AVX2)" if "avx2" in flags else ""
  return f"{run_record.cpu_name()}{kind}, {os.cpu_count()} cores"


def run(args: list[str], cwd: str) -> subprocess.CompletedProcess:
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
  result = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), *args], cwd=cwd,
                          capture_output=True, text=True, env=env)
  if result.returncode != 0:
    raise SystemExit(f"error: run.py {' '.join(args)} failed:\n{result.stderr[-2000:]}")
  return result


def records(logdir: str) -> list[dict]:
  with open(os.path.join(logdir, "metrics.jsonl"), encoding="utf-8") as f:
    return [json.loads(line) for line in f if line.strip()]


def benchmark(config: str, workdir: str, data_dir: str, eval_steps: int) -> dict:
  """Trains, evaluates and infers one config; returns its figures."""
  name = os.path.splitext(config)[0]
  logdir = os.path.join(workdir, name)
  common = [f"--config_file={os.path.join(CONFIG_DIR, config)}", f"--logdir={logdir}",
            "--data_layer_params/vocab_file=" + os.path.join(
                ROOT, "open_seq2seq/test_utils/toy_speech_data/vocab.txt")]
  data = [f"--train_params/data_layer_params/dataset_files=['{data_dir}/train.csv']",
          f"--eval_params/data_layer_params/dataset_files=['{data_dir}/dev.csv']"]
  start = time.time()
  trained = run(common + data + ["--mode=train_eval", f"--eval_steps={eval_steps}",
                                 "--save_summaries_steps=25"], cwd=workdir)
  wall = time.time() - start
  params = re.search(r"Training ([\d,]+) parameters", trained.stdout)
  rows = records(logdir)
  rates = [r[k] for r in rows for k in r if k.startswith("train/") and k.endswith("_per_s")]
  curve = [(r["time"] - start, r["step"], r["eval/WER"]) for r in rows if "eval/WER" in r]
  output = os.path.join(workdir, f"{name}_test.csv")
  inferred = run(common + [f"--infer_params/data_layer_params/dataset_files=['{data_dir}/"
                           "test.csv']", "--mode=infer", f"--infer_output_file={output}"],
                 cwd=workdir)
  test_wer = re.search(r"WER[ =:]+([\d.]+)", inferred.stdout)
  return {"name": name, "params": params.group(1) if params else "?", "wall": wall,
          "rate": statistics.median(rates[1:] or rates) if rates else float("nan"),
          "curve": curve, "test_wer": float(test_wer.group(1)) if test_wer else float("nan")}


def wer_at(curve: list[tuple[float, int, float]], seconds: float) -> tuple[float, int]:
  """The dev WER of the last eval done within ``seconds`` (nan before the first)."""
  done = [(wer, step) for t, step, wer in curve if t <= seconds]
  return done[-1] if done else (float("nan"), 0)


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--configs", nargs="+", default=list(DEFAULT_CONFIGS),
                      help="config files in example_configs/speech2text/")
  parser.add_argument("--data_dir", default=os.path.join(ROOT, "data", "synthetic_speech"),
                      help="folder with train.csv, dev.csv, test.csv")
  parser.add_argument("--eval_steps", type=int, default=100, help="dev eval every N steps")
  parser.add_argument("--workdir", help="where the runs go (default: a temporary folder)")
  args = parser.parse_args(argv)
  data_dir = os.path.abspath(args.data_dir)
  for split in ("train", "dev", "test"):
    if not os.path.isfile(os.path.join(data_dir, f"{split}.csv")):
      raise SystemExit(f"error: {data_dir}/{split}.csv not found: make the corpus with "
                       "scripts/make_synthetic_speech.py --output_dir=" + args.data_dir)
  for config in args.configs:
    if not os.path.isfile(os.path.join(CONFIG_DIR, config)):
      raise SystemExit(f"error: --configs: {config} is not in example_configs/speech2text/")
  if args.workdir:
    sys.path.insert(0, ROOT)
    from open_seq2seq.utils.io import exit_if_unwritable  # pylint: disable=import-outside-toplevel
    exit_if_unwritable(args.workdir, "--workdir", directory=True)
  workdir = args.workdir or tempfile.mkdtemp(prefix="bench_asr_")
  os.makedirs(workdir, exist_ok=True)
  results = [benchmark(config, workdir, data_dir, args.eval_steps) for config in args.configs]
  equal = min(r["wall"] for r in results)
  print(f"CPU: {cpu_name()}; runs in {workdir}")
  print(f"equal wall time: {equal:.0f} s (the fastest run's whole train_eval)\n")
  print("| config | parameters | train (s of audio/s) | wall time (s) | dev WER at "
        f"{equal:.0f} s (step) | final dev WER | test WER |")
  print("|---|---:|---:|---:|---:|---:|---:|")
  for r in results:
    wer, step = wer_at(r["curve"], equal)
    final = r["curve"][-1][2] if r["curve"] else float("nan")
    print(f"| {r['name']} | {r['params']} | {r['rate']:,.0f} | {r['wall']:.0f} | "
          f"{wer:.3f} ({step}) | {final:.3f} | {r['test_wer']:.3f} |")
  print("\ndev WER curves (seconds since start: WER):")
  for r in results:
    print(f"  {r['name']}: " + ", ".join(f"{t:.0f}: {w:.3f}" for t, _, w in r["curve"]))
  return 0


if __name__ == "__main__":
  sys.exit(main())
