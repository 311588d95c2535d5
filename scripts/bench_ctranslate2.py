#!/usr/bin/env python
"""Beam-search speed of a trained Text2Text Transformer: ``run.py --mode=infer``, its
SavedModel (``--mode=export``) and its CTranslate2 exports (float32; int8 weights computed
as CTranslate2's ``int8`` and ``int8_float32``).

    python scripts/bench_ctranslate2.py --config_file=CONFIG --logdir=RUN \\
        --source=toy_text_data/test/source.txt [--reference=REFERENCE] [--sentences 1000] \\
        [--beam_size 4] [--batch_size 32] [--threads N] [--ct2 float32,int8,int8_float32] \\
        [--extra=--override=value ...]

Every engine translates the first ``--sentences`` lines of ``--source`` with beam search
(``--beam_size``, ``alpha`` 0: CTranslate2 has no GNMT length penalty) in batches of
``--batch_size``; the first batch (tracing, loading) is not timed. ``--mode=infer`` runs in its
own process (its "inputs/s after the first batch" log line); the SavedModel and CTranslate2
run here, CTranslate2 with ``--threads`` intra-op threads (default: every core, as
TensorFlow). Prints the CPU and one Markdown table: sentences/s, how many output lines
equal ``--mode=infer``'s and, with ``--reference`` (the raw target lines of ``--source``),
each engine's BLEU (sacreBLEU on the detokenized outputs; its signature is printed). Nothing is written outside a temporary directory. An error is one
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

#: ``--ct2`` engine -> (the export's stored weights, CTranslate2's compute_type). ``int8``
#: keeps the weights it does not quantize as stored (float32 here); ``int8_float32`` says so.
CT2_ENGINES = {"float32": ("float32", "default"), "int8": ("int8", "default"),
               "int8_float32": ("int8", "int8_float32")}


def parse_args(argv: list[str]) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--config_file", required=True, help="the run's config file")
  parser.add_argument("--logdir", required=True, help="the trained run's directory")
  parser.add_argument("--source", required=True, help="source sentences, one per line")
  parser.add_argument("--reference", help="raw reference translations of --source: adds BLEU")
  parser.add_argument("--sentences", type=int, default=1000, help="lines of --source used")
  parser.add_argument("--beam_size", type=int, default=4)
  parser.add_argument("--batch_size", type=int, default=32, help="sentences per batch")
  parser.add_argument("--threads", type=int, default=os.cpu_count(),
                      help="CTranslate2's intra-op threads")
  parser.add_argument("--ct2", default="float32,int8",
                      help=f"CTranslate2 rows, comma-separated: {', '.join(CT2_ENGINES)}")
  parser.add_argument("--extra", action="append", default=[],
                      help="a run.py override for --mode=infer and the exports")
  args = parser.parse_args(argv)
  for flag in ("sentences", "beam_size", "batch_size", "threads"):
    if getattr(args, flag) < 1:
      parser.error(f"--{flag} must be at least 1, got {getattr(args, flag)}")
  args.ct2 = [name.strip() for name in args.ct2.split(",") if name.strip()]
  unknown = [name for name in args.ct2 if name not in CT2_ENGINES]
  if unknown or not args.ct2:
    parser.error(f"--ct2: {', '.join(unknown) or 'empty'}; choose from {', '.join(CT2_ENGINES)}")
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


def bleu(outputs: list[str], references: list[str]) -> tuple[float, str]:
  """sacreBLEU's corpus BLEU of detokenized ``outputs`` against one reference each, and
  the metric's signature."""
  import sacrebleu
  if len(outputs) != len(references):
    raise SystemExit(f"error: {len(outputs)} outputs for {len(references)} references")
  metric = sacrebleu.metrics.BLEU()
  return metric.corpus_score(outputs, [references]).score, str(metric.get_signature())


def read_lines(path: str, flag: str, count: int) -> list[str]:
  """The first ``count`` lines of ``path`` (``--flag``'s file); an unreadable file is an
  ``error:`` line."""
  try:
    with open(path, encoding="utf-8") as f:
      return [line.rstrip("\n") for _, line in zip(range(count), f)]
  except OSError as e:
    raise SystemExit(f"error: {flag} {path}: {e.strerror}") from None


def table(rows: list[tuple[str, float, list[str]]], references: list[str] | None = None,
          reference_name: str = "") -> list[str]:
  """The Markdown table of ``rows`` (engine, sentences/s, outputs; the first row is
  ``--mode=infer``'s): how many outputs equal the first row's and, with ``references``, a
  BLEU column, after a line naming sacreBLEU's signature and ``reference_name``."""
  infer_lines = rows[0][2]
  scores = [bleu(outputs, references) for _, _, outputs in rows] if references else None
  lines = [f"BLEU: sacreBLEU {scores[0][1]} against {reference_name}"] if scores else []
  lines += ["| engine | sentences/s | same output as --mode=infer |" + (" BLEU |" if scores else ""),
            "|---|---:|---:|" + ("---:|" if scores else "")]
  for i, (name, speed, outputs) in enumerate(rows):
    same = sum(a == b for a, b in zip(outputs, infer_lines))
    lines.append(f"| {name} | {speed:.1f} | {same}/{len(infer_lines)} |"
                 + (f" {scores[i][0]:.2f} |" if scores else ""))
  return lines


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
  lines = read_lines(args.source, "--source", args.sentences)
  references = None
  if args.reference:
    references = read_lines(args.reference, "--reference", args.sentences)
    if len(references) != len(lines):
      raise SystemExit(f"error: --reference {args.reference}: {len(references)} lines for "
                       f"{len(lines)} of --source")
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
      infer_lines = f.read().splitlines()
    rows.append(("run.py --mode=infer", float(speed.group(1)) if speed else float("nan"),
                 infer_lines))

    saved = os.path.join(work, "saved_model")
    run_py(common + ["--mode=export", f"--export_dir={saved}"])
    outputs, speed = timed(saved_model_translate(saved), lines, args.batch_size)
    rows.append(("SavedModel (TensorFlow)", speed, outputs))

    for name in args.ct2:
      quantization, compute_type = CT2_ENGINES[name]
      export = os.path.join(work, f"ct2-{quantization}")
      if not os.path.isdir(export):
        run_py(common + ["--mode=export", "--export_format=ctranslate2",
                         f"--export_quantization={quantization}", f"--export_dir={export}"])
      translator = TextTranslator(export, compute_type=compute_type, threads=args.threads)
      outputs, speed = timed(lambda batch, t=translator: t.translate(
          batch, args.beam_size, max_batch_size=args.batch_size), lines, args.batch_size)
      rows.append((f"CTranslate2 {name}", speed, outputs))

  print(f"CPU: {cpu_name()} ({os.cpu_count()} logical cores); {len(lines)} sentences of "
        f"{args.source}, beam {args.beam_size}, batches of {args.batch_size}; CTranslate2 "
        f"intra_threads {args.threads}")
  print("\n".join(table(rows, references, args.reference)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
