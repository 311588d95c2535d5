"""Evaluation and inference: passes over a data layer, metrics, best checkpoints, predictions.

The :class:`Evaluator` runs the model without updating it: one pass over an eval data layer
(sharded over workers, results gathered on every process), one pass over an infer data layer
(each process formats its own share, the chief writes the outputs in input order as they
arrive: :meth:`Evaluator.infer_to`), a single batch for samples and ``interactive_infer``,
and the choice of the best checkpoint by the family's metric.

With ``moving_average_decay`` the passes use the moving averages of the weights
(:mod:`open_seq2seq.training.moving_average`): a training run's eval passes swap its live
averages in and out; eval/infer/export load the checkpoint's averages into the model.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any

import tensorflow as tf

from open_seq2seq.distributed.backend import Backend
from open_seq2seq.errors import CheckpointError
from open_seq2seq.models.model import Model
from open_seq2seq.outputs import InferenceOutput
from open_seq2seq.output_sink import OutputSink
from open_seq2seq.training import moving_average, reporting
from open_seq2seq.training.checkpoints import CheckpointStore
from open_seq2seq.training.model_variables import (model_checkpoint_object, named_variables,
                                                   non_finite, restore_model_weights)
from open_seq2seq.training.reporting import format_number, log
from open_seq2seq.training.restoring import model_mismatches


#: Batches each process infers per round before it formats them and sends the outputs to
#: the chief: a process holds at most this many batches of raw results (spectrograms,
#: logits), and the chief receives at most one round's outputs per process at a time.
ROUND_BATCHES = 4


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
    round_batches: batches per round of inference (:data:`ROUND_BATCHES`).
    eval_batches: eval passes read at most this many batches (shared among the processes),
      for quick runs; a truncated pass never saves a new best. None: whole passes.
    allow_model_changes: restore checkpoints that do not fit the model (what fits is loaded,
      and a warning names the rest) instead of raising ``ModelMismatch``.
    moving_average_decay: the run's key; when set, :meth:`restore` loads the checkpoint's
      moving averages of the weights into the model (a notice says so, or that it has none).
    averages: a training run's live moving averages: its eval passes use them.
  """

  def __init__(self, model: Model, backend: Backend, store: CheckpointStore | None = None,
               round_batches: int = ROUND_BATCHES, eval_batches: int | None = None,
               allow_model_changes: bool = False, count_unused: bool = True,
               moving_average_decay: float | None = None,
               averages: moving_average.MovingAverage | None = None):
    self.model = model
    self.averages = averages
    self.use_averages = moving_average_decay is not None or averages is not None
    #: whether checkpoint variables the built model lacks are a mismatch (model_mismatches)
    self.count_unused = count_unused
    self.allow_model_changes = allow_model_changes
    self.eval_batches = eval_batches
    self.round_batches = round_batches
    self.backend = backend
    self.store = store
    self.is_chief = backend.is_chief
    self.restored_step: int | None = None
    self.truncated = False
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
    if self.allow_model_changes and self.is_chief:
      problems = model_mismatches(
          tf.train.Checkpoint(model=model_checkpoint_object(self.model.named_layers)), path)
      if problems:
        log(f"warning: allow_model_changes: loading what fits of {path} ({'; '.join(problems)})")
    self.restored_step, cast = restore_model_weights(self.model, path,
                                                     allow_changes=self.allow_model_changes,
                                                     count_unused=self.count_unused)
    if self.use_averages:
      self._load_averages(path)
    bad = non_finite(named_variables(self.model.named_layers))
    if bad:
      raise CheckpointError(
          f"{path} holds non-finite weights ({', '.join(bad[:3])}): the run had diverged "
          f"when it was saved; use an earlier checkpoint of it or retrain with a lower "
          f"learning rate")
    if self.is_chief:
      log(f"Restored weights from {path}" +
          (f" (cast {len(cast)} variables to this run's dtype)" if cast else ""))

  def _load_averages(self, path: str) -> None:
    loaded = moving_average.load_averages(self.model, path)
    if not self.is_chief:
      return
    if loaded is None:
      log(f"notice: moving_average_decay is set, but {path} holds no moving averages of the "
          f"weights (trained without them): using its weights")
    else:
      log(f"notice: moving_average_decay: the model's weights are the moving averages saved "
          f"in {path} ({loaded} variables)")

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

  def _total_batches(self, layer, limit: int | None = None) -> int | None:
    """Steps of this process's pass (for the progress bar), or None when unknown."""
    local_replicas = max(self.backend.num_local_replicas, 1)
    if limit is not None:
      return math.ceil(limit / local_replicas)
    try:
      return math.ceil(layer.batches_per_epoch() * self.backend.num_workers /
                       max(self.backend.num_replicas, 1))
    except NotImplementedError:
      return None

  def _local_limit(self) -> int | None:
    """Batches this process reads in a truncated eval pass (its share of ``eval_batches``)."""
    if self.eval_batches is None:
      return None
    return math.ceil(self.eval_batches / self.backend.num_workers)

  def _replica_outputs(self, layer, label: str, bar: reporting.ProgressBar,
                       limit: int | None = None, truncated: list | None = None):
    """This process's pass over its shard of ``layer``: per step, the numpy outputs of its
    replicas that read real batches (``batch`` and ``predictions``, and the loss with
    targets).

    ``limit``: read at most this many batches; ``truncated`` (a list) then receives True
    when the shard held more (one batch beyond the limit is read, never evaluated).
    """
    # eval_batches pads the last step of each process with copies whose outputs are
    # dropped (num_valid), so workers with uneven shards never wait for each other.
    specs = []

    def dataset_fn(num_shards: int, shard: int) -> tf.data.Dataset:
      dataset = layer.shard_dataset(num_shards, shard)
      specs.append(dataset.element_spec)
      return dataset if limit is None else dataset.take(limit + 1)

    read = 0
    for batch, num_valid in self.backend.eval_batches(dataset_fn):
      keep = num_valid
      if limit is not None:
        keep, read = min(num_valid, limit - read), read + num_valid
        if read > limit:
          truncated.append(True)
          if keep <= 0:  # this step holds only the batch past the limit
            break
      self.ensure_variables(self.backend.local_results(batch)[0])
      out = self._pass_function(label, specs[0])(batch)
      yield [to_numpy(o) for o in self.backend.local_results(out)[:keep]]
      bar.update()
    bar.close()

  def run_pass(self, layer) -> tuple[list, float, float]:
    """One eval pass over ``layer``'s data, its results gathered on every process (each
    needs the metrics: early stopping, best checkpoints).

    Returns:
      (eval results in input order — empty without targets —, loss sum, loss weight).
      With ``eval_batches``, :attr:`truncated` tells whether any process's shard held more.
    """
    limit = self._local_limit()
    bar = reporting.ProgressBar("eval", self._total_batches(layer, limit),
                                enabled=self.is_chief)
    eval_results, loss_sum, weight, truncated = [], 0.0, 0.0, []
    with self._averaged():  # the weights are back before a best checkpoint is saved
      for replicas in self._replica_outputs(layer, "eval", bar, limit, truncated):
        for out in replicas:
          if "target_tensors" in out["batch"]:
            eval_results.extend(self.model.evaluate(out["batch"], out["predictions"]))
          if "loss_sum" in out:
            loss_sum += float(out["loss_sum"])
            weight += float(out["weight"])
    eval_results = sorted(self.backend.gather_objects(eval_results), key=lambda r: r[0])
    totals = self.backend.gather_objects([(loss_sum, weight, bool(truncated))])
    #: Whether the last pass stopped at ``eval_batches`` before the end of the data.
    self.truncated = any(t[2] for t in totals)
    return eval_results, sum(t[0] for t in totals), sum(t[1] for t in totals)

  def evaluate(self, layer, step: int | None = None,
               summaries: reporting.Summaries | None = None) -> dict[str, float]:
    """Eval loss and the family's metrics (e.g. BLEU) over one pass of ``layer``."""
    results, loss_sum, weight = self.run_pass(layer)
    metrics = {}
    if weight > 0:
      metrics["loss"] = loss_sum / weight
    metrics.update(self.model.finalize_evaluation(results))
    step = step if step is not None else self.restored_step
    if self.is_chief:
      part = f" (first {reporting.counted(self.eval_batches, 'batch', 'batches')}: " \
          f"eval_batches)" if self.truncated else ""
      log(f"eval at step {step}{part}: " +
          ", ".join(f"{k} {reporting.format_metric(v)}" for k, v in metrics.items()))
      if summaries is not None and step is not None:
        summaries.scalars(step, metrics, prefix="eval/")
    self._keep_if_best(metrics, step)
    return metrics

  def _keep_if_best(self, metrics: dict[str, float], step: int | None) -> None:
    metric, higher = self.model.best_metric
    if self.store is None or metric not in metrics or step is None:
      return
    if self.truncated:
      if self.is_chief:
        log(f"not compared with best_models/: this eval read only "
            f"{reporting.counted(self.eval_batches, 'batch', 'batches')} (eval_batches)")
      return
    if self.store.maybe_save_best(metric, float(metrics[metric]), higher, step) and \
        self.is_chief:
      log(f"new best {metric} {format_number(float(metrics[metric]))}: saved to best_models/")

  def _averaged(self):
    """Within it, a training run's live moving averages are the model's weights."""
    return self.averages.swapped_in() if self.averages is not None else \
        contextlib.nullcontext()

  def infer_to(self, layer, sink: OutputSink, round_batches: int | None = None
               ) -> tuple[list[tuple[str, int]], dict[str, float]]:
    """Infers ``layer``'s data and writes the outputs through ``sink`` as they come.

    Every ``round_batches`` batches (a round) each process formats what it inferred
    (``model.finalize_inference`` on its own results only: text, CSV rows, vocoded audio)
    and sends the outputs to the chief, which writes them in input order as they arrive
    (:class:`~open_seq2seq.output_sink.OutputStream`). Every process takes part in every round
    (one that has finished its shard sends nothing) until all have finished. Eval results
    (with targets) and what ``model.score_inference`` needs reach the chief alone.

    Returns:
      On the chief, ``(path, records)`` per file written and the metrics; ``([], {})``
      elsewhere.
    """
    with self._averaged():
      return self._infer_to(layer, sink, round_batches)

  def _infer_to(self, layer, sink: OutputSink, round_batches: int | None
                ) -> tuple[list[tuple[str, int]], dict[str, float]]:
    model, backend = self.model, self.backend
    round_batches = round_batches or self.round_batches
    bar = reporting.ProgressBar("infer", self._total_batches(layer), enabled=self.is_chief)
    steps = self._replica_outputs(layer, "infer", bar)
    rate, inferred, finished = InferenceRate(), 0, False
    eval_results, scoring, received = [], [], False
    with sink.stream() if self.is_chief else contextlib.nullcontext() as stream:
      while True:
        results, ids, evals = [], [], []
        for _ in range(0 if finished else round_batches):
          replicas = next(steps, None)
          if replicas is None:
            finished = True
            break
          before = len(results)
          for out in replicas:
            batch, predictions = out["batch"], out["predictions"]
            ids.extend(int(i) for i in batch["id"])
            if "target_tensors" in batch:
              evals.extend(model.evaluate(batch, predictions))
            results.extend(model.infer(batch, predictions))
          inferred += len(results) - before
          rate.batch_done(inferred)
        share = (model.finalize_inference(results) if results else [], ids, evals,
                 [] if evals else model.scoring_results(results))
        del results  # a round's raw results (spectrograms, logits) go no further
        arrived = backend.gather_to_chief([share])
        for outputs, done, round_evals, round_scoring in arrived or []:
          stream.add(outputs, finished=done)
          received = received or bool(outputs)
          eval_results.extend(round_evals)
          scoring.extend(round_scoring)
        if all(backend.gather_objects([finished])):
          break
      if self.is_chief and not received:
        stream.add(model.finalize_inference([]))  # no input anywhere: e.g. a header alone
    if not self.is_chief:
      return [], {}
    if rate.line():
      log(rate.line())
    if eval_results:
      metrics = model.finalize_evaluation(sorted(eval_results, key=lambda r: r[0]))
    else:
      metrics = model.score_inference(sorted(scoring, key=lambda r: r[0]))
    return stream.written, metrics

  def infer(self, layer) -> tuple[list[InferenceOutput], dict[str, float]]:
    """The model's formatted outputs for ``layer``'s data (in chunks, on the chief; [] on
    the other processes) and its metrics, held in memory: for tests and scripts (run.py
    writes them as they come with :meth:`infer_to`)."""
    collected = _Collected()
    _, metrics = self.infer_to(layer, collected)
    return collected.outputs, metrics


class _Collected:
  """A sink that keeps the outputs instead of writing them."""

  def __init__(self):
    self.outputs: list[InferenceOutput] = []
    self.written: list[tuple[str, int]] = []

  def stream(self) -> _Collected:
    return self

  def __enter__(self) -> _Collected:
    return self

  def __exit__(self, *error) -> None:
    pass

  def add(self, outputs: list[InferenceOutput], finished=()) -> None:
    self.outputs.extend(outputs)
