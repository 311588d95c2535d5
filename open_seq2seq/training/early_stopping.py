"""Early stopping: training ends when an eval metric has stopped improving.

Config (a top-level key of the run, training/run_params.py)::

    "early_stopping": {"metric": "BLEU", "patience": 5, "min_delta": 0.1}

After every eval of ``train_eval`` the watched metric (default: the one ``best_models/``
tracks, e.g. BLEU, WER or the loss) counts as improved when it beats the best value so far
by more than ``min_delta``; after ``patience`` evals in a row without improvement, training
stops (a checkpoint is saved) and ``best_models/`` holds the best weights. The counters are
variables in the checkpoint, and the trainer evaluates before it saves at a step where both
are due, so a resumed run stops at the same step as one that was never interrupted.
"""

from __future__ import annotations

import math

import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.params import Param, dict_of

#: The keys of ``early_stopping``.
EARLY_STOPPING_PARAMS = {
    "metric": Param((str, None), None, "Eval metric to watch (None: the one best_models/ "
                    "tracks, e.g. BLEU, WER or loss)."),
    "patience": Param(int, doc="Evals in a row without improvement after which training "
                      "stops."),
    "min_delta": Param((float, int), 0.0, "Least change of the metric that counts as an "
                       "improvement."),
    "higher_is_better": Param((bool, None), None, "Direction of the metric (None: the model's "
                              "for its own metric, lower for loss)."),
}


def _check(params: dict, path: str) -> dict:
  if params["patience"] < 1:
    raise ConfigError(f"{path}/patience: must be at least 1, got {params['patience']}")
  if not 0 <= params["min_delta"] < math.inf:
    raise ConfigError(f"{path}/min_delta: must be a non-negative number, "
                      f"got {params['min_delta']!r}")
  return params


#: The Param type of the model's ``early_stopping`` (None: train to max_steps).
EARLY_STOPPING_TYPE = dict_of(EARLY_STOPPING_PARAMS, "early_stopping", _check)


class EarlyStopping(tf.Module):
  """The watched metric's best value and the evals since it, as checkpointed variables.

  Args:
    params: the validated ``early_stopping`` dict.
    best_metric: the model's ``(name, higher_is_better)`` of ``best_models/``.
  """

  def __init__(self, params: dict, best_metric: tuple[str, bool]):
    super().__init__(name="early_stopping")
    self.metric = params["metric"] or best_metric[0]
    if params["higher_is_better"] is not None:
      self.higher_is_better = params["higher_is_better"]
    elif self.metric == best_metric[0]:
      self.higher_is_better = best_metric[1]
    elif self.metric == "loss":
      self.higher_is_better = False
    else:
      raise ConfigError(f"early_stopping/higher_is_better: say whether a higher "
                        f"{self.metric} is better (True or False)")
    self.patience = params["patience"]
    self.min_delta = float(params["min_delta"])
    self.best = tf.Variable(math.nan, dtype=tf.float64, trainable=False, name="best")
    self.best_step = tf.Variable(-1, dtype=tf.int64, trainable=False, name="best_step")
    self.evals_without_improvement = tf.Variable(0, dtype=tf.int64, trainable=False,
                                                 name="evals_without_improvement")

  def improved(self, value: float) -> bool:
    best = float(self.best.numpy())
    if not math.isfinite(value):
      return False
    if math.isnan(best):
      return True
    return value > best + self.min_delta if self.higher_is_better \
        else value < best - self.min_delta

  def update(self, metrics: dict[str, float], step: int) -> str | None:
    """Counts one eval; returns why training should stop now, or None.

    Raises:
      ConfigError: the eval reports no such metric.
    """
    if self.metric not in metrics:
      raise ConfigError(f"early_stopping/metric: eval reports no {self.metric!r} (it reports "
                        f"{', '.join(sorted(metrics)) or 'nothing'})")
    value = float(metrics[self.metric])
    if self.improved(value):
      self.best.assign(value)
      self.best_step.assign(step)
      self.evals_without_improvement.assign(0)
      return None
    self.evals_without_improvement.assign_add(1)
    count = int(self.evals_without_improvement.numpy())
    if count < self.patience:
      return None
    by = f" by more than {self.min_delta:g}" if self.min_delta else ""
    return (f"early stopping at step {step}: {self.metric} has not improved{by} in {count} "
            f"evals (best {float(self.best.numpy()):g} at step {int(self.best_step.numpy())}, "
            f"kept in best_models/)")
