"""Early stopping's counting, direction and config errors (training/early_stopping.py)."""

import math

import pytest

from open_seq2seq.errors import ConfigError
from open_seq2seq.training.early_stopping import EARLY_STOPPING_TYPE, EarlyStopping
from open_seq2seq.utils.params import Param, validate_params


def config(**values):
  return validate_params({"early_stopping": values},
                         {"early_stopping": Param((EARLY_STOPPING_TYPE, None), None, "")}
                         )["early_stopping"]


def run(early, values):
  """Feeds eval values at steps 10, 20, ...; returns the step it stops at (None: never)."""
  for i, value in enumerate(values):
    if early.update({early.metric: value, "other": 1.0}, 10 * (i + 1)):
      return 10 * (i + 1)
  return None


def test_stops_after_patience_evals_without_improvement():
  early = EarlyStopping(config(patience=2), ("BLEU", True))
  assert run(early, [1.0, 2.0, 1.5, 3.0, 2.9, 2.9, 5.0]) == 60
  assert (float(early.best.numpy()), int(early.best_step.numpy())) == (3.0, 40)


def test_min_delta_and_lower_is_better():
  values = [2.0, 1.0, 0.9, 0.7]  # each lower than the last, by 1.0, then 0.1 and 0.2
  assert run(EarlyStopping(config(patience=2), ("WER", False)), values) is None
  assert run(EarlyStopping(config(patience=2, min_delta=0.5), ("WER", False)), values) == 40


def test_non_finite_values_never_improve():
  early = EarlyStopping(config(patience=3), ("BLEU", True))
  assert run(early, [math.nan, math.inf, 1.0]) is None
  assert float(early.best.numpy()) == 1.0


def test_the_message_names_metric_best_and_step():
  early = EarlyStopping(config(patience=1, min_delta=0.1), ("BLEU", True))
  early.update({"BLEU": 5.0}, 100)
  message = early.update({"BLEU": 5.05}, 200)
  assert message == ("early stopping at step 200: BLEU has not improved by more than 0.1 in 1 "
                     "evals (best 5 at step 100, kept in best_models/)")


def test_direction_of_another_metric():
  assert EarlyStopping(config(metric="loss", patience=1), ("BLEU", True)).higher_is_better \
      is False
  assert EarlyStopping(config(metric="accuracy", patience=1, higher_is_better=True),
                       ("loss", False)).higher_is_better is True
  with pytest.raises(ConfigError, match="early_stopping/higher_is_better: say whether a "
                                        "higher accuracy is better"):
    EarlyStopping(config(metric="accuracy", patience=1), ("loss", False))


def test_a_metric_the_eval_does_not_report_is_one_line():
  early = EarlyStopping(config(metric="BLEU", patience=1), ("BLEU", True))
  with pytest.raises(ConfigError, match=r"early_stopping/metric: eval reports no 'BLEU' "
                                        r"\(it reports WER, loss\)"):
    early.update({"loss": 1.0, "WER": 0.5}, 10)
  assert int(early.evals_without_improvement.numpy()) == 0


@pytest.mark.parametrize("values, message", [
    ({"patience": 0}, "early_stopping/patience: must be at least 1"),
    ({"patience": 2, "min_delta": -1.0}, "early_stopping/min_delta: must be a non-negative"),
    ({"min_delta": 0.1}, "patience"),
    ({"patience": 2, "metirc": "BLEU"}, "metric"),
])
def test_config_errors(values, message):
  with pytest.raises(ConfigError, match=message):
    config(**values)
