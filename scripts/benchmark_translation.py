#!/usr/bin/env python
"""Training and beam-search throughput of the translation models of docs/benchmarks.md.

For each model, in its own process (so peak memory is per model): ``run.py --benchmark``
gives the median time per step, tokens/s (real source + target tokens, as the peer scripts in
../shared/bench count them) and peak resident memory. With ``--infer_sentences N`` it also
trains ``--infer_after`` steps into a checkpoint and translates the first N test sentences
with the config's beam search, reporting sentences/s after the first batch (run.py's infer
log line) and the mean hypothesis length (in SentencePiece pieces for the Bible models,
re-encoded from the detokenized output; in words for the toy). A briefly trained model ends its
hypotheses at once (or never): ``--infer_min_length L`` sets ``min_decode_length`` so that
every hypothesis has at least L pieces, a length like the references'; the cost of
a decoding step does not depend on how well the weights are trained. Prints one Markdown
table (``--infer_only``: the beam-search columns alone).

    python scripts/benchmark_translation.py --models transformer,gnmt,convs2s \
        --steps 40 --start 10 --infer_sentences 256 --infer_min_length 32

Models: ``toy`` (nmt-reversal-TT on --toy_data) and the Bible en-es configs ``transformer``
(alias ``bible``), ``gnmt`` and ``convs2s`` (data from scripts/get_bible_en_es.sh; the
peers' folder from ../shared/bench/get_bible_en_es.sh reads too, once the script has written
the configs' per-side vocabularies ``spm.{en,es}.vocab`` into it). Add overrides for every
model with --extra, e.g. ``--extra=--dtype=mixed_bfloat16``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIBLE = os.path.join(ROOT, "example_configs", "text2text", "en-es")
BIBLE_MODELS = {"transformer": "transformer-2x2-bible.py", "bible": "transformer-2x2-bible.py",
                "gnmt": "gnmt-small-bible.py", "convs2s": "convs2s-small-bible.py"}


def _run(args: list[str], env: dict | None = None) -> str:
  cmd = [sys.executable, os.path.join(ROOT, "run.py"), "--print_samples_steps=None", *args]
  out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {})))
  if out.returncode != 0:
    raise SystemExit(f"benchmark failed: {' '.join(cmd)}\n{out.stderr[-3000:]}")
  return out.stdout


def _number(pattern: str, text: str) -> float:
  return float(re.search(pattern, text).group(1).replace(",", ""))


def train_figures(config: str, overrides: list[str], steps: int, start: int,
                  env: dict | None = None) -> dict:
  """``run.py --benchmark``'s figures; ``env`` adds environment variables to the run."""
  with tempfile.TemporaryDirectory() as logdir:
    out = _run([f"--config_file={config}", "--mode=train", "--benchmark",
                f"--bench_steps={steps}", f"--bench_start={start}", f"--logdir={logdir}",
                "--print_loss_steps=None", *overrides], env)
  return {"s_per_step": _number(r"median time/step \(s\)\s*\|\s*([\d.]+)", out),
          "tokens_per_s": _number(r"median tokens/s\s*\|\s*([\d,]+)", out),
          "peak_mb": _number(r"peak memory \(MB\)\s*\|\s*([\d,]+)", out),
          "params": _number(r"Training ([\d,]+) parameters", out)}


def infer_figures(config: str, overrides: list[str], train_steps: int, sentences: int,
                  test_source: str, tokenize=str.split) -> dict:
  """Beam-search sentences/s and the mean hypothesis length in ``tokenize``'s tokens."""
  with tempfile.TemporaryDirectory() as work:
    logdir = os.path.join(work, "logdir")
    _run([f"--config_file={config}", "--mode=train", f"--logdir={logdir}",
          f"--max_steps={train_steps}", f"--save_checkpoint_steps={train_steps}",
          "--eval_steps=None", "--save_summaries_steps=None", "--print_loss_steps=None",
          *overrides])
    source = os.path.join(work, "source.txt")
    with open(test_source, encoding="utf-8") as f, open(source, "w", encoding="utf-8") as g:
      g.writelines(line for _, line in zip(range(sentences), f))
    output = os.path.join(work, "hypotheses.txt")
    # after the model's overrides (the toy's name its train files): the last one wins
    out = _run([f"--config_file={config}", "--mode=infer", f"--logdir={logdir}",
                f"--infer_output_file={output}", *overrides,
                f"--data_layer_params/source_file={source}",
                f"--data_layer_params/target_file={source}"])
    with open(output, encoding="utf-8") as f:
      lengths = [len(tokenize(line)) for line in f]
  return {"sentences_per_s": _number(r"after the first batch in [\d.]+ s: ([\d.]+) inputs/s",
                                     out),
          "mean_length": statistics.mean(lengths)}


def _tokenizer(name: str):
  """How hypotheses are counted: the Bible models' SentencePiece pieces (the detokenized
  output encoded again), the toy model's words."""
  if name == "toy":
    return str.split
  import sentencepiece
  model = sentencepiece.SentencePieceProcessor(
      model_file=os.path.join(os.environ["BIBLE_DATA"], "spm.model"))
  return lambda line: model.encode(line.rstrip("\n"))


def ensure_side_vocabularies(data: str) -> None:
  """Writes ``spm.{en,es}.vocab`` (what the Bible configs read) into a corpus folder that
  lacks them, such as the peers' folder of ../shared/bench/get_bible_en_es.sh."""
  sides = [lang for lang in ("en", "es")
           if not os.path.isfile(os.path.join(data, f"spm.{lang}.vocab"))]
  if not sides:
    return
  cmd = [sys.executable, os.path.join(ROOT, "scripts", "build_sentencepiece.py"),
         "--model", os.path.join(data, "spm.model")]
  for lang in sides:
    cmd += ["--side_vocab", os.path.join(data, f"train.{lang}"),
            os.path.join(data, f"spm.{lang}.vocab")]
  out = subprocess.run(cmd, capture_output=True, text=True, check=False,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  if out.returncode != 0:
    raise SystemExit(f"per-side vocabularies of {data}: {out.stderr.strip()[-1000:]}")
  print(out.stdout.strip(), file=sys.stderr)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--toy_data", default="toy_text_data")
  parser.add_argument("--bible_data", default=os.path.join(ROOT, "data", "bible_en_es"))
  parser.add_argument("--models", default="toy,transformer")
  parser.add_argument("--steps", type=int, default=60)
  parser.add_argument("--start", type=int, default=20, help="warm-up steps not timed")
  parser.add_argument("--infer_sentences", type=int, default=0,
                      help="also time beam search on this many test sentences")
  parser.add_argument("--infer_after", type=int, default=5,
                      help="training steps of the checkpoint that --infer_sentences decodes")
  parser.add_argument("--infer_min_length", type=int, default=0,
                      help="decoder_params/min_decode_length of the timed beam search")
  parser.add_argument("--infer_only", action="store_true",
                      help="time beam search alone (with --infer_sentences)")
  parser.add_argument("--extra", action="append", default=[], help="override for every run")
  args = parser.parse_args()
  toy = os.path.abspath(args.toy_data)
  os.environ["BIBLE_DATA"] = os.path.abspath(args.bible_data)
  if set(args.models.split(",")) & set(BIBLE_MODELS):
    ensure_side_vocabularies(os.environ["BIBLE_DATA"])
  rows = []
  for name in args.models.split(","):
    if name == "toy":
      config = os.path.join(ROOT, "example_configs/text2text/toy-reversal/nmt-reversal-TT.py")
      overrides = [f"--data_layer_params/src_vocab_file={toy}/vocab/source.txt",
                   f"--data_layer_params/tgt_vocab_file={toy}/vocab/target.txt",
                   f"--data_layer_params/source_file={toy}/train/source.txt",
                   f"--data_layer_params/target_file={toy}/train/target.txt"]
    elif name in BIBLE_MODELS:
      config, overrides = os.path.join(BIBLE, BIBLE_MODELS[name]), []
    else:
      raise SystemExit(f"--models: unknown model {name!r}; choose from toy, "
                       f"{', '.join(BIBLE_MODELS)}")
    figures = {}
    if not args.infer_only:
      figures = train_figures(config, overrides + args.extra, args.steps, args.start)
    if args.infer_sentences:
      extra = overrides + args.extra + [
          f"--decoder_params/min_decode_length={args.infer_min_length}"]
      test_source = (os.path.join(toy, "test", "source.txt") if name == "toy" else
                     os.path.join(os.environ["BIBLE_DATA"], "test.en"))
      figures.update(infer_figures(config, extra, args.infer_after, args.infer_sentences,
                                   test_source, _tokenizer(name)))
    rows.append((name, figures))
    print(f"{name}: {figures}", file=sys.stderr)
  train = not args.infer_only
  infer = any("sentences_per_s" in f for _, f in rows)
  print("| model |" + (" parameters | s/step (median) | tokens/s (median) | peak memory (MB) |"
                      if train else "") + (" beam sentences/s | mean length |" if infer else ""))
  print("|---|" + ("---:|" * 4 if train else "") + ("---:|---:|" if infer else ""))
  for name, f in rows:
    line = f"| {name} |"
    if train:
      line += (f" {f['params'] / 1e6:.1f}M | {f['s_per_step']:.3f} | "
               f"{f['tokens_per_s']:,.0f} | {f['peak_mb']:,.0f} |")
    if infer:
      line += (f" {f['sentences_per_s']:.2f} | {f['mean_length']:.1f} |"
               if "sentences_per_s" in f else " | |")
    print(line)


if __name__ == "__main__":
  main()
