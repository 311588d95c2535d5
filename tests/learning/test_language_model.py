"""Real text: the shipped CPU language model learns ten public-domain novels (Debian's
r-cran-janeaustenr and r-cran-tidytext, made into WikiText-style files by
scripts/get_lm_data.sh) to a validation perplexity below half an add-one unigram model's in
300 steps through run.py, generates from its prompts, and its weights start a tweet
sentiment classifier that beats the majority class, as does the same classifier from scratch
(both accuracies are printed: on these tweets the novels' model does not beat scratch).

The data is part of the test set-up (scripts/install_test_deps.sh makes it): when it is
missing the test fails and says how to get it, rather than skipping.
"""

import os
import re

import numpy as np
import pytest

from tests.helpers import toy

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LM_CONFIG = os.path.join(ROOT, "example_configs", "lm", "lstm-austen.py")
CLASSIFIER_CONFIG = os.path.join(ROOT, "example_configs", "transfer", "tweets-from-austen.py")
AUSTEN = os.path.join(ROOT, "data", "austen")
TWEETS = os.path.join(ROOT, "data", "tweets")
LM_STEPS = 300
#: 300, not 150: at 150 the classifier from the novels' model reached 72.4 % on AMD EPYC and
#: 70.0 % on an Intel Xeon (AVX512-FP16/AMX), against a bar of 71.8 % (majority 69.8 % + 2)
CLASSIFIER_STEPS = 300


def _need(path: str) -> None:
  if not os.path.isfile(path):
    pytest.fail(f"{path} is missing: run `bash scripts/get_lm_data.sh`", pytrace=False)


@pytest.fixture(scope="module")
def language_model(tmp_path_factory):
  _need(os.path.join(AUSTEN, "wiki.train.tokens"))
  work = tmp_path_factory.mktemp("austen")
  processed = str(work / "processed")
  args = [f"--config_file={LM_CONFIG}", f"--logdir={work / 'logdir'}",
          f"--data_layer_params/data_root={AUSTEN}",
          f"--data_layer_params/processed_data_folder={processed}"]
  result = toy.run_cli(args + ["--mode=train_eval", "--num_epochs=None",
                               f"--max_steps={LM_STEPS}", f"--eval_steps={LM_STEPS}"],
                       timeout=1200)
  assert result.returncode == 0, result.stderr[-3000:]
  return args, result, processed, str(work / "logdir")


def _ids(path: str) -> np.ndarray:
  with open(path, encoding="utf-8") as f:
    return np.array(f.read().split("\t"), np.int64)


def test_perplexity_is_below_half_a_unigram_models(language_model):
  _, result, processed, _ = language_model
  evals = re.findall(r"eval at step (\d+): loss [\d.]+, perplexity ([\d.]+)", result.stdout)
  assert evals, result.stdout[-3000:]
  step, perplexity = evals[-1]
  train, valid = _ids(os.path.join(processed, "train.ids")), \
      _ids(os.path.join(processed, "valid.ids"))
  vocab_size = int(max(train.max(), valid.max())) + 1
  counts = np.bincount(train, minlength=vocab_size) + 1.0  # add-one
  unigram = float(np.exp(-np.mean(np.log(counts[valid] / counts.sum()))))
  print(f"\nvalidation perplexity {float(perplexity):.1f} after {step} steps; add-one "
        f"unigram {unigram:.1f}")
  assert int(step) == LM_STEPS
  assert float(perplexity) < 0.5 * unigram


def test_generates_a_continuation_of_every_prompt(language_model, tmp_path):
  args, _, _, _ = language_model
  output = str(tmp_path / "generated.txt")
  result = toy.run_cli(args + ["--mode=infer", f"--infer_output_file={output}"], timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"wrote 4 predictions to {output}" in result.stdout
  with open(output, encoding="utf-8") as f:
    header, *rows = f.read().splitlines()
  assert header == "prompt\tcontinuation"
  assert [row.split("\t")[0] for row in rows] == ["Elizabeth", "She", "It", "The"]
  assert all(len(row.split("\t")[1].split()) >= 3 for row in rows), rows


def _classifier_accuracy(language_model, tmp_path, load_model: str) -> float:
  _, _, processed, _ = language_model
  result = toy.run_cli([
      f"--config_file={CLASSIFIER_CONFIG}", "--mode=train_eval", f"--logdir={tmp_path}",
      f"--load_model={load_model}", f"--lm_vocab_file={os.path.join(processed, 'vocab.txt')}",
      f"--processed_data_folder={tmp_path / 'processed'}",
      f"--data_layer_params/data_root={TWEETS}", "--num_epochs=None",
      f"--max_steps={CLASSIFIER_STEPS}", f"--eval_steps={CLASSIFIER_STEPS}"], timeout=900)
  assert result.returncode == 0, result.stderr[-3000:]
  if load_model != "None":
    assert re.search(r"load_model: initialised \d+ variables", result.stdout)
  evals = re.findall(r"eval at step \d+: loss [\d.]+, accuracy ([\d.]+)", result.stdout)
  assert evals, result.stdout[-3000:]
  return float(evals[-1])


def test_tweet_classifiers_from_the_language_model_and_from_scratch_beat_the_majority(
    language_model, tmp_path):
  _need(os.path.join(TWEETS, "val.csv"))
  with open(os.path.join(TWEETS, "val.csv"), encoding="utf-8") as f:
    labels = [line.rsplit(",", 1)[-1].strip() for line in f.read().splitlines()[1:]]
  majority = max(labels.count("0"), labels.count("1")) / len(labels)
  transferred = _classifier_accuracy(language_model, tmp_path / "transfer",
                                     language_model[3])
  scratch = _classifier_accuracy(language_model, tmp_path / "scratch", "None")
  print(f"\ntweets after {CLASSIFIER_STEPS} steps: from the language model {transferred:.4f}, "
        f"from scratch {scratch:.4f}, majority class {majority:.4f}")
  assert transferred > majority + 0.02 and scratch > majority + 0.02
