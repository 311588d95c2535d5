#!/usr/bin/env python
"""Beam-search speed of a trained Text2Text Transformer: ``run.py --mode=infer``, its
SavedModel (``--mode=export``) and its CTranslate2 exports (float32, int8).

    python scripts/bench_ctranslate2.py --config_file=CONFIG --logdir=RUN \\
        --source=toy_text_data/test/source.txt [--sentences 1000] [--beam_size 4] \\
        [--batch_size 32] [--threads N] [--extra=--override=value ...]

Every engine translates the first ``--sentences`` lines of ``--source`` with beam search
(``--beam_size``, ``alpha`` 0: CTranslate2 has no GNMT length penalty) in batches of
``--batch_size``; the first batch (tracing, loading) is not timed. ``--mode=infer`` runs in its
own process (its "inputs/s after the first batch" log line); the SavedModel and CTranslate2
run here, CTranslate2 with ``--threads`` intra-op threads (default: every core, as
TensorFlow). Prints the CPU and one Markdown table: sentences/s and how many output lines
equal ``--mode=infer``'s. Nothing is written outside a temporary directory. An error is one
``error:`` line and exit status 2.
"""

from __future__ import annotations

# The open_seq2seq and TensorFlow imports wait until the arguments are known.
# pylint: disable=import-outside-toplevel
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def parse_args(argv: list[str]) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--config_file", required=True, help="the run's config file")
  parser.add_argument("--logdir", required=True, help="the trained run's directory")
  parser.add_argument("--source", required=True, help="source sentences, one per line")
  parser.add_argument("--sentences", type=int, default=1000, help="lines of --source used")
  parser.add_argument("--beam_size", type=int, default=4)
  parser.add_argument("--batch_size", type=int, default=32, help="sentences per batch")
  parser.add_argument("--threads", type=int, default=os.cpu_count(),
                      help="CTranslate2's intra-op threads")
  parser.add_argument("--extra", action="append", default=[],
                      help="a run.py override for --mode=infer and the exports")
  args = parser.parse_args(argv)
  for flag in ("sentences", "beam_size", "batch_size", "threads"):
    if getattr(args, flag) < 1:
      parser.error(f"--{flag} must be at least 1, got {getattr(args, flag)}")
  return args


def run_py(args: list[str]) -> str:
  """``run.py ARGS``'s stdout; its error line (exit status 2 here) if it fails."""
  cmd = [sys.executable, os.path.join(ROOT, "run.py"), *args]
  done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  if done.returncode != 0:
    lines = done.stderr.strip().splitlines() or ["(no output)"]
    raise SystemExit(f"error: run.py {' '.join(args[:3])} ...: {lines[-1]}")
  return done.stdout


def timed(translate, lines: list[str], batch_size: int) -> tuple[list[str], float]:
  """``translate``'s outputs for every line and its sentences/s after the first batch."""
  outputs = list(translate(lines[:batch_size]))
  rest = lines[batch_size:]
  start = time.perf_counter()
  for i in range(0, len(rest), batch_size):
    outputs += translate(rest[i:i + batch_size])
  elapsed = time.perf_counter() - start
  return outputs, (len(rest) / elapsed if rest else float("nan"))


def saved_model_translate(export_dir: str):
  """A function of lines -> texts, served by the SavedModel's ``serving_default``."""
  import json
  import tensorflow as tf
  with open(os.path.join(export_dir, "assets.extra", "open_seq2seq.json"),
            encoding="utf-8") as f:
    signature = json.load(f)["signatures"]["serving_default"]
    if "tensorflow_text" in signature.get("required_imports", []):
      import tensorflow_text  # noqa: F401  pylint: disable=unused-import
  serve = tf.saved_model.load(export_dir).signatures["serving_default"]
  return lambda lines: [t.decode("utf-8") for t in
                        serve(text=tf.constant(lines))["text"].numpy()]


def main(argv: list[str] | None = None) -> int:
  args = parse_args(sys.argv[1:] if argv is None else argv)
  try:
    with open(args.source, encoding="utf-8") as f:
      lines = [line.rstrip("\n") for _, line in zip(range(args.sentences), f)]
  except OSError as e:
    raise SystemExit(f"error: --source {args.source}: {e.strerror}") from None
  if len(lines) <= args.batch_size:
    raise SystemExit(f"error: --source {args.source}: {len(lines)} sentences; more than "
                     f"--batch_size ({args.batch_size}) are needed (the first batch is not "
                     f"timed)")
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()  # after argparse: --help and argument errors need no TensorFlow
  from open_seq2seq.run_record import cpu_name
  from open_seq2seq.serving.ctranslate2_export import TextTranslator
  common = [f"--config_file={args.config_file}", f"--logdir={args.logdir}",
            f"--decoder_params/beam_size={args.beam_size}", "--decoder_params/alpha=0.0",
            f"--batch_size_per_gpu={args.batch_size}",
            f"--eval_batch_size_per_gpu={args.batch_size}", *args.extra]
  rows = []
  with tempfile.TemporaryDirectory() as work:
    source = os.path.join(work, "source.txt")
    with open(source, "w", encoding="utf-8") as f:
      f.writelines(line + "\n" for line in lines)
    output = os.path.join(work, "infer.txt")
    log = run_py(common + ["--mode=infer", f"--infer_output_file={output}",
                           f"--data_layer_params/source_file={source}",
                           f"--data_layer_params/target_file={source}"])
    speed = re.search(r"after the first batch in [\d.]+ s: ([\d.]+) inputs/s", log)
    with open(output, encoding="utf-8") as f:
      reference = f.read().splitlines()
    rows.append(("run.py --mode=infer", float(speed.group(1)) if speed else float("nan"),
                 reference))

    saved = os.path.join(work, "saved_model")
    run_py(common + ["--mode=export", f"--export_dir={saved}"])
    outputs, speed = timed(saved_model_translate(saved), lines, args.batch_size)
    rows.append(("SavedModel (TensorFlow)", speed, outputs))

    for quantization in ("float32", "int8"):
      export = os.path.join(work, f"ct2-{quantization}")
      run_py(common + ["--mode=export", "--export_format=ctranslate2",
                       f"--export_quantization={quantization}", f"--export_dir={export}"])
      translator = TextTranslator(export, threads=args.threads)
      outputs, speed = timed(lambda batch, t=translator: t.translate(
          batch, args.beam_size, max_batch_size=args.batch_size), lines, args.batch_size)
      rows.append((f"CTranslate2 {quantization}", speed, outputs))

  print(f"CPU: {cpu_name()} ({os.cpu_count()} logical cores); {len(lines)} sentences of "
        f"{args.source}, beam {args.beam_size}, batches of {args.batch_size}; CTranslate2 "
        f"intra_threads {args.threads}")
  print("| engine | sentences/s | same output as --mode=infer |")
  print("|---|---:|---:|")
  for name, speed, outputs in rows:
    same = sum(a == b for a, b in zip(outputs, reference))
    print(f"| {name} | {speed:.1f} | {same}/{len(reference)} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
