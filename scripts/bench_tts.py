#!/usr/bin/env python
"""Speech-synthesis speed: Tacotron 2 training frames/s and the real-time factor of inference
(free-running decoder + Griffin-Lim), float32 vs mixed bfloat16. Prints markdown tables.

    python scripts/bench_tts.py                      # every row (~4 minutes on 2 cores)
    python scripts/bench_tts.py --rows train_fp32,rtf_fp32 --logdir runs/tacotron-synthetic-small

The model is example_configs/text2speech/tacotron-synthetic-small.py (482k parameters, 40
mels, 3 frames per decoder step, 16 kHz, hop 256) on the synthetic espeak-ng corpus
(data/synth_tts, made when absent).

* ``train_*``: ``run.py --mode=train --benchmark`` in its own process; frames/s are the
  target frames of a batch over the median step time.
* ``rtf_*``: in its own process, the infer-mode model synthesizes the test sentences (one
  batch): the free-running decoder (a ``tf.function``), then Griffin-Lim (60 iterations, as
  infer writes WAVs). The real-time factor is seconds of compute per second of audio (< 1:
  faster than real time). Without ``--logdir`` the weights are random and the stop token is
  switched off (``stop_threshold`` 2): the decoder runs to its length limit, which costs per
  frame what a trained one costs (the figure is per second of audio), but the audio is noise.
  With ``--logdir`` of a trained run its newest checkpoint is restored.

No assertion: read the tables, and compare rows of one run only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
CONFIG = os.path.join(ROOT, "example_configs", "text2speech", "tacotron-synthetic-small.py")
DTYPES = {"fp32": "float32", "bf16": "mixed_bfloat16"}
ROWS = [f"{kind}_{d}" for kind in ("train", "rtf") for d in DTYPES]
GL_ITERS = 60
REPEATS = 3


def corpus(directory: str) -> str:
  if os.path.isfile(os.path.join(directory, "train.csv")):
    return directory
  from tests.helpers.tts import make_synthetic_corpus
  make_synthetic_corpus(directory, {"train": 300, "val": 20, "test": 8}, seed=0)
  return directory


def train_row(dtype: str, data: str, args: argparse.Namespace) -> dict:
  cmd = [sys.executable, os.path.join(ROOT, "run.py"), f"--config_file={CONFIG}",
         "--mode=train", "--benchmark", f"--bench_steps={args.bench_steps}",
         f"--bench_start={args.bench_start}", f"--logdir={args.workdir}/unused",
         f"--dtype={dtype}", "--max_steps=1000", "--print_loss_steps=None",
         "--print_samples_steps=None"]
  out = subprocess.run(cmd, capture_output=True, text=True, env=_env(data))
  if out.returncode != 0:
    raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")

  def figure(label: str) -> float:
    match = re.search(rf"\|\s*{re.escape(label)}\s*\|\s*([\d,.]+)", out.stdout)
    if not match:
      raise RuntimeError(f"no '{label}' in the output:\n{out.stdout[-2000:]}")
    return float(match.group(1).replace(",", ""))

  audio_per_s = figure("median s of audio/s")
  return {"frames_per_s": audio_per_s * 16000 / 256, "audio_per_s": audio_per_s,
          "step_s": figure("median time/step (s)"), "peak_mb": figure("peak memory (MB)")}


def rtf_row(dtype: str, data: str, args: argparse.Namespace) -> dict:
  cmd = [sys.executable, os.path.abspath(__file__), "--measure_rtf", dtype,
         f"--workdir={args.workdir}"] + ([f"--logdir={args.logdir}"] if args.logdir else [])
  out = subprocess.run(cmd, capture_output=True, text=True, env=_env(data))
  if out.returncode != 0:
    raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
  return json.loads(out.stdout.strip().splitlines()[-1])


def _env(data: str) -> dict:
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, TTS_DATA=data)


def measure_rtf(dtype: str, logdir: str | None) -> dict:
  """In this process: decoder and Griffin-Lim seconds per second of audio (medians)."""
  import numpy as np
  import tensorflow as tf
  from open_seq2seq.config import load_config
  from open_seq2seq.distributed.backend import Backend
  from open_seq2seq.training.evaluator import Evaluator
  overrides = [f"--dtype={dtype}"] + ([f"--logdir={logdir}"] if logdir else
                                      ["--decoder_params/stop_threshold=2.0"])
  base_model, configs = load_config(CONFIG, "infer", overrides)
  model = base_model(configs["infer"], "infer")
  evaluator = Evaluator(model, Backend())
  batch = next(iter(model.data_layer.build_dataset()))
  evaluator.ensure_variables(batch)
  if logdir:
    evaluator.restore(tf.train.latest_checkpoint(logdir))
  features = model.features
  decode, vocode = [], []
  for _ in range(REPEATS + 1):  # the first run traces
    start = time.perf_counter()
    out = evaluator.predict(batch)
    decode.append(time.perf_counter() - start)
    start = time.perf_counter()
    features.to_audio(tf.constant(out["spectrogram"]), None, num_iters=GL_ITERS).numpy()
    vocode.append(time.perf_counter() - start)
  frames = int(np.sum(out["final_sequence_lengths"]))
  audio = frames * features.hop_length / features.sample_rate
  decode_s, vocode_s = float(np.median(decode[1:])), float(np.median(vocode[1:]))
  return {"sentences": int(len(out["final_sequence_lengths"])), "audio_s": audio,
          "decode_rtf": decode_s / audio, "gl_rtf": vocode_s / audio,
          "rtf": (decode_s + vocode_s) / audio}


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--rows", default=",".join(ROWS), help="Comma-separated rows: " +
                      ", ".join(ROWS))
  parser.add_argument("--bench_steps", type=int, default=30, help="Training steps per row.")
  parser.add_argument("--bench_start", type=int, default=10, help="Warm-up steps excluded.")
  parser.add_argument("--logdir", help="A trained run to restore for the rtf rows.")
  parser.add_argument("--data", default=os.path.join(ROOT, "data", "synth_tts"))
  parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "bench_tts"))
  parser.add_argument("--measure_rtf", choices=sorted(DTYPES.values()), help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  # the synthetic corpus and the rtf rows import TensorFlow
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()
  if args.measure_rtf:
    print(json.dumps(measure_rtf(args.measure_rtf, args.logdir)))
    return 0
  names = [n for n in args.rows.split(",") if n]
  unknown = [n for n in names if n not in ROWS]
  if unknown:
    parser.error(f"unknown rows {unknown}; choose from {', '.join(ROWS)}")
  os.makedirs(args.workdir, exist_ok=True)
  data = corpus(args.data)
  train = {n: train_row(DTYPES[n.split("_")[1]], data, args) for n in names if "train" in n}
  rtf = {n: rtf_row(DTYPES[n.split("_")[1]], data, args) for n in names if "rtf" in n}
  if train:
    base = train.get("train_fp32")
    print("\n| training | frames/s | s of audio/s | s/step | vs fp32 | peak MB |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in train.items():
      ratio = f"{r['frames_per_s'] / base['frames_per_s']:.2f}" if base else ""
      print(f"| {DTYPES[name.split('_')[1]]} | {r['frames_per_s']:,.0f} | "
            f"{r['audio_per_s']:.1f} | {r['step_s']:.3f} | {ratio} | {r['peak_mb']:,.0f} |")
    print(f"\nBatches of 16 sentences; {args.bench_steps} steps per row, first "
          f"{args.bench_start} excluded, medians.")
  if rtf:
    print("\n| inference | audio s | decoder RTF | Griffin-Lim RTF | total RTF |")
    print("|---|---:|---:|---:|---:|")
    for name, r in rtf.items():
      print(f"| {DTYPES[name.split('_')[1]]} | {r['audio_s']:.1f} | {r['decode_rtf']:.3f} | "
            f"{r['gl_rtf']:.3f} | {r['rtf']:.3f} |")
    weights = f"restored from {args.logdir}" if args.logdir else "random weights"
    print(f"\nOne batch of {next(iter(rtf.values()))['sentences']} test sentences, {weights}; "
          f"Griffin-Lim {GL_ITERS} iterations; medians of {REPEATS} after a warm-up.")
  return 0


if __name__ == "__main__":
  sys.exit(main())
