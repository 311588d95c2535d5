"""Learning test: the toy reversal Transformer (the example config, unchanged) reaches
BLEU >= 90 on the toy test set, through the command line a user runs.

The generated pairs are at most 20 symbols long (create_toy_data.py's default reaches 50),
as in the half-precision and RNN/ConvS2S learning tests: the same task, steps and model at
under half the cost per step (a 50-symbol run took about 8 minutes on the AVX2 machine).
"""

import re

import pytest

from tests.helpers import toy

pytestmark = pytest.mark.slow

BLEU_THRESHOLD = 90.0


def test_toy_reversal_transformer_reaches_bleu_90(tmp_path):
  # the config reads toy_text_data/ relative to the working directory, as a user runs it
  # 200 dev sentences for the two in-training evals, 1,000 for the test BLEU: the decoding
  # passes are a fifth and a half of the 1,000 and 2,000 they were
  toy.make_toy_data(str(tmp_path / "toy_text_data"), train=10000, dev=200, test=1000, seed=0,
                    extra=("--max_length", "20"))
  common = [f"--config_file={toy.TOY_CONFIG}", "--logdir=logdir"]
  train = toy.run_cli(common + ["--mode=train_eval", "--print_samples_steps=None"],
                      cwd=str(tmp_path), timeout=1800)
  assert train.returncode == 0, train.stderr[-3000:]
  infer = toy.run_cli(common + ["--mode=infer", "--infer_output_file=test_predictions.txt"],
                      cwd=str(tmp_path), timeout=900)
  assert infer.returncode == 0, infer.stderr[-3000:]
  assert len((tmp_path / "test_predictions.txt").read_text().splitlines()) == 1000
  bleu = float(re.search(r"BLEU ([\d.]+)", infer.stdout).group(1))
  print(f"toy reversal test BLEU: {bleu:.2f}")
  assert bleu >= BLEU_THRESHOLD
