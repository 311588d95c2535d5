#!/usr/bin/env python
"""Where language-model transfer pays: tweet-sentiment accuracy against the number of labelled
tweets, for a classifier fine-tuned from a language model of the tweets' own text and for the
same network from scratch, with the majority class.

1. ``data/tweets-lm``: the tweets' texts without labels (train.csv's for training, val.csv's
   and test.csv's for the language model's eval and test splits; never trained on), tokenized
   and lower-cased (open_seq2seq/data/lm/unlabelled.py). ``--novels`` appends the novels'
   training text (data/austen).
2. The language model (example_configs/transfer/tweets-lm.py) in ``--lm_logdir``, trained
   unless that run already has a checkpoint.
3. For every label count and seed, the classifier
   (example_configs/transfer/tweets-from-tweets-lm.py) is trained on ``train_examples`` tweets
   drawn by ``subset_seed`` = the seed (also its ``random_seed``), from the language model
   and from scratch, then scored on the test tweets (``--mode=infer``: the same 2,229 tweets
   for every point; nothing is selected on them). Each run is ``python run.py ...`` (printed);
   results are kept in ``WORK/results.json``, so an interrupted curve continues where it
   stopped.
4. Prints a Markdown table (mean ± standard deviation over the seeds) and writes it to
   ``--out`` if given.

    python scripts/transfer_curve.py [--labels 100 300 1000 3000 all] [--seeds 3]
        [--work experiments/transfer-curve] [--out table.md] [--prepare_only]

Training length: ``max(150, 3 epochs)`` steps of 32 tweets, at most 600.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from open_seq2seq.utils.io import atomic_write_text, exit_if_unwritable  # noqa: E402

LM_CONFIG = "example_configs/transfer/tweets-lm.py"
CLASSIFIER_CONFIG = "example_configs/transfer/tweets-from-tweets-lm.py"
BATCH = 32
MIN_STEPS, MAX_STEPS, EPOCHS = 150, 600, 3


def steps_for(labels: int) -> int:
  """Updates for a training set of ``labels`` tweets."""
  return min(MAX_STEPS, max(MIN_STEPS, math.ceil(EPOCHS * labels / BATCH)))


def csv_labels(path: str) -> list[int]:
  with open(path, encoding="utf-8", newline="") as f:
    return [int(row["label"]) for row in csv.DictReader(f)]


def run(args: list[str]) -> str:
  """``python run.py ARGS`` (printed first); its standard output. Exits on failure."""
  command = [sys.executable, os.path.join(ROOT, "run.py"), *args]
  print("$ python run.py " + " ".join(args), flush=True)
  done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
  if done.returncode != 0:
    sys.exit(f"error: run.py failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
  return done.stdout


def prepare_corpus(tweets: str, lm_root: str, novels: str | None) -> None:
  if os.path.isfile(os.path.join(lm_root, "wiki.train.tokens")):
    print(f"{lm_root}: corpus present")
    return
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()
  from open_seq2seq.data.lm.unlabelled import write_unlabelled_corpus
  counts = write_unlabelled_corpus(tweets, lm_root, extra_train=novels)
  print(f"{lm_root}: " + ", ".join(f"{name} {n:,} lines" for name, n in counts.items()))


def train_language_model(lm_root: str, lm_logdir: str) -> None:
  if os.path.isfile(os.path.join(lm_logdir, "checkpoint")):
    print(f"{lm_logdir}: language model present")
    return
  out = run([f"--config_file={LM_CONFIG}", "--mode=train_eval", f"--logdir={lm_logdir}",
             f"--data_layer_params/data_root={lm_root}",
             f"--data_layer_params/processed_data_folder={os.path.join(lm_root, 'processed')}"])
  print(re.findall(r"eval at step .*", out)[-1])


def classifier_accuracy(options: argparse.Namespace, labels: int | None, seed: int,
                        transfer: bool) -> float:
  """Trains one classifier and returns its accuracy on the test tweets."""
  name = f"{labels or 'all'}-{'transfer' if transfer else 'scratch'}-{seed}"
  logdir = os.path.join(options.work, name)
  shutil.rmtree(logdir, ignore_errors=True)  # an interrupted run's, never recorded
  size = labels or len(csv_labels(os.path.join(options.tweets, "train.csv")))
  common = [f"--config_file={CLASSIFIER_CONFIG}", f"--logdir={logdir}",
            f"--lm_vocab_file={os.path.join(options.lm_root, 'processed', 'vocab.txt')}",
            f"--processed_data_folder={os.path.join(options.work, 'processed')}",
            f"--data_layer_params/data_root={options.tweets}"]
  run(common + ["--mode=train", f"--load_model={options.lm_logdir if transfer else None}",
                f"--random_seed={seed}", f"--data_layer_params/subset_seed={seed}",
                f"--data_layer_params/train_examples={labels}", f"--batch_size_per_gpu={BATCH}",
                f"--max_steps={steps_for(size)}", f"--save_checkpoint_steps={steps_for(size)}"])
  out = run(common + ["--mode=infer", f"--infer_output_file={os.path.join(logdir, 'test.csv')}"])
  found = re.findall(r"\baccuracy ([\d.]+)", out)
  if not found:
    sys.exit(f"error: no accuracy in the infer output of {logdir}")
  return float(found[-1])


def mean_sd(values: list[float]) -> str:
  if len(values) == 1:
    return f"{100 * values[0]:.1f}"
  return f"{100 * statistics.mean(values):.1f} ± {100 * statistics.stdev(values):.1f}"


def table(results: dict, counts: list[str], seeds: int, majority: float) -> str:
  """The curve; a label count's row holds its first seeds (up to ``seeds``) that have both
  runs in ``results``."""
  lines = ["| labelled tweets | from scratch | from the tweets' LM | gain | seeds |",
           "|---|---|---|---|---|"]
  for count in counts:
    done = [s for s in range(seeds) if f"{count}-scratch-{s}" in results
            and f"{count}-transfer-{s}" in results]
    if not done:
      continue
    scratch = [results[f"{count}-scratch-{s}"] for s in done]
    transfer = [results[f"{count}-transfer-{s}"] for s in done]
    gains = [t - s for t, s in zip(transfer, scratch)]
    lines.append(f"| {count} | {mean_sd(scratch)} | {mean_sd(transfer)} | "
                 f"{'+' if statistics.mean(gains) >= 0 else ''}{mean_sd(gains)} | {len(done)} |")
  lines.append(f"| majority class | {100 * majority:.1f} | | | |")
  return "\n".join(lines) + "\n"


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--labels", nargs="+", default=["100", "300", "1000", "3000", "all"],
                      help="label counts (a number, or all)")
  parser.add_argument("--seeds", type=int, default=3, help="seeds per label count")
  parser.add_argument("--tweets", default="data/tweets", help="SST-layout tweets")
  parser.add_argument("--lm_root", default="data/tweets-lm", help="the unlabelled corpus")
  parser.add_argument("--lm_logdir", default="experiments/tweets-lm")
  parser.add_argument("--novels", default=None,
                      help="a novels' wiki.train.tokens appended to the LM's training text")
  parser.add_argument("--work", default="experiments/transfer-curve")
  parser.add_argument("--out", default=None, help="also write the table here")
  parser.add_argument("--prepare_only", action="store_true",
                      help="write the unlabelled corpus and stop")
  parser.add_argument("--table_only", action="store_true",
                      help="print the table of the results kept in WORK, train nothing")
  options = parser.parse_args()
  for count in options.labels:
    if count != "all" and not (count.isdigit() and int(count) > 0):
      parser.error(f"--labels: {count!r} is not a positive number or all")
  if options.seeds < 1:
    parser.error("--seeds: at least 1")
  os.chdir(ROOT)
  if options.out:
    exit_if_unwritable(options.out, "--out")
  exit_if_unwritable(options.work, "--work", directory=True, makes_folders=True)
  prepare_corpus(options.tweets, options.lm_root, options.novels)
  if options.prepare_only:
    return
  if not options.table_only:
    train_language_model(options.lm_root, options.lm_logdir)
  os.makedirs(options.work, exist_ok=True)
  store = os.path.join(options.work, "results.json")
  results = {}
  if os.path.isfile(store):
    with open(store, encoding="utf-8") as f:
      results = json.load(f)
  for count in options.labels:
    for seed in range(options.seeds):
      for transfer in (False, True):
        key = f"{count}-{'transfer' if transfer else 'scratch'}-{seed}"
        if key not in results and not options.table_only:
          results[key] = classifier_accuracy(
              options, None if count == "all" else int(count), seed, transfer)
          atomic_write_text(store, json.dumps(results, indent=1, sort_keys=True))
        if key in results:
          print(f"{key}: accuracy {results[key]:.4f}", flush=True)
  test = csv_labels(os.path.join(options.tweets, "test.csv"))
  majority = max(test.count(0), test.count(1)) / len(test)
  text = table(results, options.labels, options.seeds, majority)
  print(text)
  if options.out:
    atomic_write_text(options.out, text)


if __name__ == "__main__":
  main()
