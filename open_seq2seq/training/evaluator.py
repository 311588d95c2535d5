"""Evaluation and inference: passes over a data layer, metrics, best checkpoints, predictions.

The :class:`Evaluator` runs the model without updating it: one pass over an eval or infer
data layer (sharded over workers, gathered in input order), a single batch for samples and
``interactive_infer``, and the choice of the best checkpoint by the family's metric.
"""

from __future__ import annotations

import math
import time
from typing import Any

import tensorflow as tf

from open_seq2seq.distributed.backend import Backend
from open_seq2seq.errors import CheckpointError
from open_seq2seq.models.model import Model
from open_seq2seq.outputs import InferenceOutput
from open_seq2seq.training import reporting
from open_seq2seq.training.checkpoints import (CheckpointStore, named_variables, non_finite,
                                               restore_model_weights)
from open_seq2seq.training.reporting import format_number, log


def to_numpy(value: Any) -> Any:
  return tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, value)


class InferenceRate:
  """This process's inference speed, timed from the end of the first batch (whose time
  includes tracing the model) to the end of the pass."""

  def __init__(self):
    self.batches = 0
    self.start = self.start_count = self.elapsed = self.count = 0

  def batch_done(self, count: int) -> None:
    """``count``: inputs inferred so far, after a batch."""
    self.batches += 1
    now = time.perf_counter()
    if self.batches == 1:
      self.start, self.start_count = now, count
    self.elapsed, self.count = now - self.start, count - self.start_count

  def line(self) -> str | None:
    """``inferred N inputs after the first batch in T s: R inputs/s`` (None before two
    batches: one batch has no untraced time)."""
    if self.batches < 2 or self.elapsed <= 0:
      return None
    return (f"inferred {self.count} inputs after the first batch in {self.elapsed:.1f} s: "
            f"{self.count / self.elapsed:.2f} inputs/s (this process)")


class Evaluator:
  """Eval/infer passes and predictions of ``model`` on ``backend``.

  Args:
    model: a model whose variables exist (or will be created on the first batch).
    backend: shards the data and gathers results across processes.
    store: the run's checkpoints, when training (best-checkpoint choice); else None.
  """

  def __init__(self, model: Model, backend: Backend, store: CheckpointStore | None = None):
    self.model = model
    self.backend = backend
    self.store = store
    self.is_chief = backend.is_chief
    self.restored_step: int | None = None
    self._pass_fns: dict = {}
    self._predict_fn = None

  # ------------------------------------------------------------------ weights
  def ensure_variables(self, batch: dict) -> None:
    """Creates the model's variables from a local batch if they do not exist yet.

    (Asking the model, not counting its variables: Keras creates some, such as dropout
    seed states, before a layer is built.)
    """
    with self.backend.strategy.scope():
      self.model.create_variables(batch)

  def restore(self, path: str) -> None:
    """Loads the model weights of checkpoint ``path`` (no optimizer state)."""
    self.restored_step, cast = restore_model_weights(self.model, path)
    bad = non_finite(named_variables(self.model.named_layers))
    if bad:
      raise CheckpointError(
          f"{path} holds non-finite weights ({', '.join(bad[:3])}): the run had diverged "
          f"when it was saved; use an earlier checkpoint of it or retrain with a lower "
          f"learning rate")
    if self.is_chief:
      log(f"Restored weights from {path}" +
          (f" (cast {len(cast)} variables to this run's dtype)" if cast else ""))

  def restore_for(self, layer, path: str) -> None:
    """Builds the model on ``layer``'s first batch, then loads ``path``."""
    batch, _ = next(iter(self.backend.eval_batches(layer.shard_dataset)))
    self.ensure_variables(self.backend.local_results(batch)[0])
    self.restore(path)

  # ------------------------------------------------------------------ single batches
  def predict(self, batch: dict) -> dict:
    """The model's predictions for one local batch, as numpy (samples, interactive use)."""
    if self._predict_fn is None:
      self._predict_fn = tf.function(self.model.predict, reduce_retracing=True,
                                     autograph=False)
    return to_numpy(self._predict_fn(batch))

  # ------------------------------------------------------------------ passes
  def _pass_function(self, label: str, element_spec: Any):
    """The traced eval/infer step, kept across passes (train_eval evaluates many times).

    With one local replica it is traced once, for the dataset's element spec (variable
    batch and time dimensions), instead of once per new batch shape: tracing a decoder's
    while_loop costs seconds. Distributed batches are traced with relaxed shapes instead.
    """
    key = (label, repr(element_spec))
    if key not in self._pass_fns:
      def replica_fn(batch):
        return self.backend.run(self._eval_replica, args=(batch,))
      if self.backend.num_local_replicas == 1:
        self._pass_fns[key] = tf.function(replica_fn, input_signature=[element_spec],
                                          autograph=False)
      else:
        self._pass_fns[key] = tf.function(replica_fn, reduce_retracing=True, autograph=False)
    return self._pass_fns[key]

  def _eval_replica(self, batch: dict) -> dict:
    out = dict(self.model.eval_outputs(batch), batch=batch)
    return out

  def _total_batches(self, layer) -> int | None:
    try:
      return math.ceil(layer.batches_per_epoch() * self.backend.num_workers /
                       max(self.backend.num_replicas, 1))
    except NotImplementedError:
      return None

  def run_pass(self, layer, label: str) -> tuple[list, list, float, float]:
    """One pass over ``layer``'s data, gathered on every process in input order.

    Returns:
      (inference results, eval results — empty without targets —, loss sum, loss weight).
    """
    # eval_batches pads the last step of each process with copies whose outputs are
    # dropped (num_valid), so workers with uneven shards never wait for each other.
    specs = []

    def dataset_fn(num_shards: int, shard: int) -> tf.data.Dataset:
      dataset = layer.shard_dataset(num_shards, shard)
      specs.append(dataset.element_spec)
      return dataset

    bar = reporting.ProgressBar(label, self._total_batches(layer), enabled=self.is_chief)
    infer_results, eval_results, loss_sum, weight = [], [], 0.0, 0.0
    rate = InferenceRate()
    for batch, num_valid in self.backend.eval_batches(dataset_fn):
      self.ensure_variables(self.backend.local_results(batch)[0])
      out = self._pass_function(label, specs[0])(batch)
      for replica_out in self.backend.local_results(out)[:num_valid]:
        replica_out = to_numpy(replica_out)
        batch_np, predictions = replica_out["batch"], replica_out["predictions"]
        if "target_tensors" in batch_np:
          eval_results.extend(self.model.evaluate(batch_np, predictions))
        if label == "infer":
          infer_results.extend(self.model.infer(batch_np, predictions))
        if "loss_sum" in replica_out:
          loss_sum += float(replica_out["loss_sum"])
          weight += float(replica_out["weight"])
      bar.update()
      rate.batch_done(len(infer_results))
    bar.close()
    if label == "infer" and self.is_chief and rate.line():
      log(rate.line())
    infer_results = sorted(self.backend.gather_objects(infer_results), key=lambda r: r[0])
    eval_results = sorted(self.backend.gather_objects(eval_results), key=lambda r: r[0])
    totals = self.backend.gather_objects([(loss_sum, weight)])
    return infer_results, eval_results, sum(t[0] for t in totals), sum(t[1] for t in totals)

  def evaluate(self, layer, step: int | None = None,
               summaries: reporting.Summaries | None = None) -> dict[str, float]:
    """Eval loss and the family's metrics (e.g. BLEU) over one pass of ``layer``."""
    _, results, loss_sum, weight = self.run_pass(layer, "eval")
    metrics = {}
    if weight > 0:
      metrics["loss"] = loss_sum / weight
    metrics.update(self.model.finalize_evaluation(results))
    step = step if step is not None else self.restored_step
    if self.is_chief:
      log(f"eval at step {step}: " +
          ", ".join(f"{k} {format_number(float(v))}" for k, v in metrics.items()))
      if summaries is not None and step is not None:
        summaries.scalars(step, metrics, prefix="eval/")
    self._keep_if_best(metrics, step)
    return metrics

  def _keep_if_best(self, metrics: dict[str, float], step: int | None) -> None:
    metric, higher = self.model.best_metric
    if self.store is None or metric not in metrics or step is None:
      return
    if self.store.maybe_save_best(metric, float(metrics[metric]), higher, step) and \
        self.is_chief:
      log(f"new best {metric} {format_number(float(metrics[metric]))}: saved to best_models/")

  def infer(self, layer) -> tuple[list[InferenceOutput], dict[str, float]]:
    """The model's formatted outputs for ``layer``'s data, plus metrics if it has targets."""
    results, eval_results, _, _ = self.run_pass(layer, "infer")
    outputs = self.model.finalize_inference(results)
    if eval_results:
      metrics = self.model.finalize_evaluation(eval_results)
    else:
      metrics = self.model.score_inference(results)
    return outputs, metrics
