#!/usr/bin/env python
"""Language-model training throughput: fused vs cell LSTMs, full vs sampled softmax, float32
vs mixed precision, in words per second. Prints a markdown table.

    python scripts/bench_lm.py                 # every row (~5 minutes on 2 cores)
    python scripts/bench_lm.py --rows fused_fp32,cell_fp32

Each row runs ``run.py --mode=train --benchmark`` in its own process on a variant of
example_configs/lm/lstm-austen.py (one 256-unit LSTM layer, tied 256-wide embeddings, batches
of 64 x 35 words) over the novels of scripts/get_lm_data.sh (data/austen; generated WikiText
when absent). Words per second count the source words of a batch (batch x bptt) over the
median step time. No assertion: read the table, and compare rows of one run only.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
CONFIG = os.path.join(ROOT, "example_configs", "lm", "lstm-austen.py")
AUSTEN = os.path.join(ROOT, "data", "austen")
BATCH, BPTT = 64, 35

_WEIGHT_DROP = ("WeightDropLayerNormBasicLSTMCell",
                "from open_seq2seq.parts.rnns.weight_drop import "
                "WeightDropLayerNormBasicLSTMCell")
#: name -> (description, dtype, encoder_params updates as Python source, loss, import line)
ROWS = {
    "fused_fp32": ("fused keras.layers.LSTM, sampled softmax (512)", "float32", "{}", None, ""),
    "fused_bf16": ("fused keras.layers.LSTM, sampled softmax (512)", "mixed_bfloat16", "{}",
                   None, ""),
    "fused_full_fp32": ("fused keras.layers.LSTM, full softmax", "float32",
                        "{'num_sampled': None}", "BasicSequenceLoss", ""),
    "cell_fp32": ("WeightDropLayerNormBasicLSTMCell (WeightDropLSTM), sampled softmax",
                  "float32", "{'use_cudnn_rnn': False, 'cudnn_rnn_type': None, 'core_cell': "
                  "WeightDropLayerNormBasicLSTMCell, 'core_cell_params': {'num_units': 256}, "
                  "'recurrent_keep_prob': 0.9}", None, _WEIGHT_DROP[1]),
    "cell_bf16": ("WeightDropLayerNormBasicLSTMCell (WeightDropLSTM), sampled softmax",
                  "mixed_bfloat16", "{'use_cudnn_rnn': False, 'cudnn_rnn_type': None, "
                  "'core_cell': WeightDropLayerNormBasicLSTMCell, 'core_cell_params': "
                  "{'num_units': 256}, 'recurrent_keep_prob': 0.9}", None, _WEIGHT_DROP[1]),
    "keras_cell_fp32": ("keras.layers.RNN(LSTMCell), sampled softmax", "float32",
                        "{'use_cudnn_rnn': False, 'cudnn_rnn_type': None, 'core_cell': "
                        "keras.layers.LSTMCell, 'core_cell_params': {'num_units': 256}}", None,
                        "import keras"),
}


def variant_config(directory: str, name: str) -> str:
  """A config file that is lstm-austen.py with the row's encoder and loss changes."""
  _, _, updates, loss, imports = ROWS[name]
  path = os.path.join(directory, f"{name}.py")
  loss_line = (f"from open_seq2seq.losses import {loss}\n"
               f"base_params['loss'] = {loss}\n") if loss else ""
  with open(path, "w", encoding="utf-8") as f:
    f.write(f"""import copy, importlib.util
{imports}
_spec = importlib.util.spec_from_file_location("lstm_austen", {CONFIG!r})
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)
base_model = _base.base_model
base_params = copy.deepcopy(_base.base_params)
base_params["encoder_params"].update({updates})
{loss_line}train_params = _base.train_params
""")
  return path


def data_root(directory: str) -> str:
  if os.path.isfile(os.path.join(AUSTEN, "wiki.train.tokens")):
    return AUSTEN
  from tests.helpers.lm import write_wikitext
  return write_wikitext(os.path.join(directory, "wikitext"), num_paragraphs=(4000, 50, 50))


def run_row(name: str, root: str, args: argparse.Namespace) -> dict:
  _, dtype, _, _, _ = ROWS[name]
  cmd = [sys.executable, os.path.join(ROOT, "run.py"),
         f"--config_file={variant_config(args.workdir, name)}", "--mode=train", "--benchmark",
         f"--bench_steps={args.bench_steps}", f"--bench_start={args.bench_start}",
         f"--logdir={args.workdir}/unused", f"--dtype={dtype}", "--num_epochs=None",
         "--max_steps=1000", "--print_loss_steps=None", "--print_samples_steps=None",
         f"--data_layer_params/data_root={root}",
         f"--data_layer_params/processed_data_folder={args.workdir}/processed"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
  out = subprocess.run(cmd, capture_output=True, text=True, env=env)
  if out.returncode != 0:
    raise RuntimeError(f"{name} failed:\n{' '.join(cmd)}\n{out.stderr[-3000:]}")

  def figure(label: str) -> float:
    match = re.search(rf"\|\s*{re.escape(label)}\s*\|\s*([\d,.]+)", out.stdout)
    if not match:
      raise RuntimeError(f"{name}: no '{label}' in the output:\n{out.stdout[-2000:]}")
    return float(match.group(1).replace(",", ""))

  step_s = figure("median time/step (s)")
  return {"words_per_s": BATCH * BPTT / step_s, "step_s": step_s,
          "peak_mb": figure("peak memory (MB)")}


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--rows", default=",".join(ROWS), help="Comma-separated rows: " +
                      ", ".join(ROWS))
  parser.add_argument("--bench_steps", type=int, default=30, help="Training steps per row.")
  parser.add_argument("--bench_start", type=int, default=10, help="Warm-up steps excluded.")
  parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "bench_lm"))
  args = parser.parse_args(argv)
  os.makedirs(args.workdir, exist_ok=True)
  root = data_root(args.workdir)
  names = [n for n in args.rows.split(",") if n]
  unknown = [n for n in names if n not in ROWS]
  if unknown:
    parser.error(f"unknown rows {unknown}; choose from {', '.join(ROWS)}")
  results = {name: run_row(name, root, args) for name in names}
  base = results.get("fused_fp32")
  print("\n| recurrent layer and softmax | dtype | words/s | s/step | vs fused fp32 | peak MB |")
  print("|---|---|---:|---:|---:|---:|")
  for name, r in results.items():
    what, dtype, _, _, _ = ROWS[name]
    ratio = f"{r['words_per_s'] / base['words_per_s']:.2f}" if base else ""
    print(f"| {what} | {dtype} | {r['words_per_s']:,.0f} | {r['step_s']:.3f} | {ratio} | "
          f"{r['peak_mb']:,.0f} |")
  print(f"\nBatches of {BATCH} x {BPTT} words; {args.bench_steps} steps per row, first "
        f"{args.bench_start} excluded, medians; one process per row; data: {root}.")
  return 0


if __name__ == "__main__":
  sys.exit(main())
