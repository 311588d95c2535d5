"""Helpers shared by the end-to-end tests: tiny toy data and a tiny Transformer config."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers import warm_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY_CONFIG = os.path.join(ROOT, "example_configs", "text2text", "toy-reversal",
                          "nmt-reversal-TT.py")


def make_toy_data(directory: str, train: int = 400, dev: int = 40, test: int = 40,
                  seed: int = 1, extra: tuple[str, ...] = ()) -> str:
  """Runs scripts/create_toy_data.py into ``directory`` and returns it."""
  subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "create_toy_data.py"),
                  "--data_dir", directory, "--train_size", str(train), "--dev_size", str(dev),
                  "--test_size", str(test), "--seed", str(seed), *extra],
                 check=True, capture_output=True)
  return directory


def data_overrides(data_dir: str) -> list[str]:
  """Points every mode of the toy config at ``data_dir``."""
  out = []
  for key, rel in (("src_vocab_file", "vocab/source.txt"), ("tgt_vocab_file", "vocab/target.txt")):
    out.append(f"--data_layer_params/{key}={os.path.join(data_dir, rel)}")
  # the toy data is whitespace-tokenized: a config reading raw text with SentencePiece
  # models (the Bible's) reads it with the toy vocabularies instead
  out += ["--data_layer_params/src_sentencepiece_model=None",
          "--data_layer_params/tgt_sentencepiece_model=None"]
  return out


def split_overrides(data_dir: str, split: str) -> list[str]:
  return [f"--data_layer_params/source_file={os.path.join(data_dir, split, 'source.txt')}",
          f"--data_layer_params/target_file={os.path.join(data_dir, split, 'target.txt')}"]


TINY_MODEL = [
    "--encoder_params/encoder_layers=1", "--encoder_params/hidden_size=32",
    "--encoder_params/num_heads=2", "--encoder_params/filter_size=64",
    "--decoder_params/num_hidden_layers=1", "--decoder_params/hidden_size=32",
    "--decoder_params/num_heads=2", "--decoder_params/filter_size=64",
    "--lr_policy_params/d_model=32", "--batch_size_per_gpu=16",
    "--print_loss_steps=5", "--print_samples_steps=None", "--save_summaries_steps=5",
    "--eval_steps=None",
]


def run_cli(args: list[str], cwd: str | None = None, timeout: int = 600,
            env: dict | None = None, stdin: str | None = None
            ) -> subprocess.CompletedProcess:
  """Runs ``python run.py ARGS`` (``stdin``: text typed into it) and returns the completed
  process (never raises on rc).

  A smoke run (``--max_steps=N``, N <= SMOKE_STEPS) runs with ``--graph_optimizations=False``
  unless ARGS set it: Grappler is a large share of a run of a few steps and pays off only
  over longer ones (training/graph_optimizations.py); runs that learn keep it."""
  if _is_smoke_run(args):
    args = [*args, "--graph_optimizations=False"]
  full_env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, **(env or {}))
  # started warm (tests/helpers/warm_cli.py): the same process a `python run.py` would be
  return warm_cli.run(args, full_env, cwd=cwd, timeout=timeout, stdin_text=stdin)


#: Training runs of at most this many steps are smoke runs (see :func:`run_cli`).
SMOKE_STEPS = 5


def _is_smoke_run(args: list[str]) -> bool:
  if any(a.startswith("--graph_optimizations=") for a in args):
    return False
  steps = [a.split("=", 1)[1] for a in args if a.startswith("--max_steps=")]
  return bool(steps) and steps[-1].isdigit() and int(steps[-1]) <= SMOKE_STEPS


def example_config_overrides(directory: str) -> tuple[list[str], int]:
  """Text2Text family: tiny toy data for a shipped config, as run.py overrides.

  Writes a few dozen toy pairs into ``directory`` and points every mode's data layer at them
  (vocabularies and the train split; infer ignores the targets). Nothing about the model
  changes, so ``tests/e2e/test_example_configs.py`` steps the config at its own size.

  Returns:
    The overrides, and the number of examples every mode reads (infer predicts them all).
  """
  pairs = 48
  # Short pairs: the configs keep their size (GNMT's eight 1,024-unit layers), and the cost
  # of two steps of a recurrent model grows with the sentence length.
  make_toy_data(directory, train=pairs, dev=8, test=8, extra=("--max_length", "12"))
  return data_overrides(directory) + split_overrides(directory, "train"), pairs


#: Launcher variables that would turn a run into a multi-process job.
JOB_VARIABLES = ("OMPI_", "PMI_", "PMIX_", "HOROVOD_", "MPI_LOCAL", "TF_CONFIG",
                 "OPEN_SEQ2SEQ_LAUNCHER")


def single_process_env(drop=()) -> dict:
  """This process's environment for a one-process run.py: without the launcher variables (a
  test started under mpiexec must not make its runs ranks), nor the names in ``drop``."""
  return {k: v for k, v in os.environ.items()
          if not k.startswith(JOB_VARIABLES) and k not in drop}
