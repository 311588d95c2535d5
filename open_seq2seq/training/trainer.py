"""The one training loop: build, restore, then step, report, checkpoint and evaluate.

The loop is written once, against the :class:`~open_seq2seq.distributed.backend.Backend`
interface; the update itself is :class:`~open_seq2seq.training.train_step.TrainStep`,
evaluation and inference are :class:`~open_seq2seq.training.evaluator.Evaluator`, and what
the chief prints and writes is :class:`~open_seq2seq.training.reporting.Reporter`.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf

from open_seq2seq.distributed.backend import Backend
from open_seq2seq.errors import ConfigError, DivergenceError
from open_seq2seq.models.model import Model
from open_seq2seq.training import graph_optimizations, reporting, stopping
from open_seq2seq.training.checkpoints import CheckpointStore
from open_seq2seq.training.early_stopping import EarlyStopping
from open_seq2seq.training.evaluator import Evaluator, to_numpy
from open_seq2seq.training.model_variables import (model_checkpoint_object, named_variables,
                                                   non_finite)
from open_seq2seq.training.moving_average import announce_resume
from open_seq2seq.training.profiling import StepProfiler, profiled_steps
from open_seq2seq.training.reporting import Reporter, StepStats, every, log
from open_seq2seq.training.restoring import model_mismatches
from open_seq2seq.training.run_params import run_settings
from open_seq2seq.training.train_step import TrainStep
from open_seq2seq.training.vocab_remap import load_model, record_vocabularies

#: Training stops when this many steps in a row have non-finite gradients: loss scaling
#: recovers from overflows in a few steps (2^14 -> 1 takes 14 halvings), not in 100.
MAX_CONSECUTIVE_SKIPS = 100
#: A loss this many times the run's first one gets a warning (once): still finite, but
#: probably diverging.
LOSS_EXPLOSION = 100.0
#: A run this long that ends at its model's chance level gets a warning (shorter ones are
#: smoke tests).
NOTHING_LEARNED_AFTER = 200


def nothing_learned(best_metric: tuple[str, bool], chance_level: float | None,
                    metrics: dict[str, float], step: int) -> str | None:
  """The warning for a run of ``step`` steps whose final eval ``metrics`` are no better than
  a model that learned nothing, or None."""
  name, higher_is_better = best_metric
  if chance_level is None or step < NOTHING_LEARNED_AFTER or name not in metrics:
    return None
  value = metrics[name]
  if (value > chance_level) if higher_is_better else (value < chance_level):
    return None
  return (f"{name} {value:g} after {step} steps is what a model that learned nothing gets "
          f"({chance_level:g}): check the data and its labels, the learning rate (too high "
          f"or too low) and the loss, or train longer")


class Trainer:
  """Trains ``model`` on ``backend``, evaluating and checkpointing into ``logdir``.

  Args:
    model: the model (its variables are created here, under the backend's scope).
    run: the run's settings: a resolved config of the train mode, of which the run's keys
      are read (:func:`open_seq2seq.training.run_params.run_settings`).
    backend: distribution backend (single process by default).
    logdir: run directory (checkpoints, summaries, resolved config); the run's ``logdir``
      by default.
  """

  def __init__(self, model: Model, run: Mapping[str, Any], backend: Backend | None = None,
               logdir: str | None = None):
    self.model = model
    self.params = run_settings(run)
    self.backend = backend or Backend()
    self.logdir = logdir or self.params["logdir"]
    self.is_chief = self.backend.is_chief
    layer = model.data_layer
    self.steps_per_epoch = self._steps_per_epoch(layer) if model.mode == "train" else None
    self.max_steps = self._planned_steps()
    self.step = TrainStep(model, self.params, self.backend, self.max_steps,
                          self.steps_per_epoch, count_units=layer.count_units)
    self.evaluator = Evaluator(model, self.backend, eval_batches=self.params["eval_batches"],
                               allow_model_changes=self.params["allow_model_changes"],
                               averages=self.step.moving_average)
    self.early_stopping = EarlyStopping(self.params["early_stopping"], model.best_metric) \
        if self.params.get("early_stopping") and model.mode == "train" else None
    #: The metrics of the eval after which early stopping ended the loop (None: it did not).
    self._stopped_early_metrics: dict[str, float] | None = None
    self.store: CheckpointStore | None = None
    self._data_iterator = None
    if self.is_chief:
      log(self.step.describe_precision())
      if self.step.float16_compute and self.step.loss_scaler is None and model.mode == "train":
        log("warning: float16 compute without loss_scaling: small gradients underflow to 0; "
            "set loss_scaling to 'Backoff' (or use dtype mixed_bfloat16)")

  # ------------------------------------------------------------------ state
  @property
  def global_step(self) -> int:
    return self.step.global_step

  @property
  def optimizer(self):
    return self.step.optimizer

  @property
  def loss_scaler(self):
    return self.step.loss_scaler

  @property
  def skipped_steps(self):
    return self.step.skipped_steps

  def build(self, batch: dict) -> None:
    """Creates every variable (model and optimizer) from one local batch."""
    self.step.build(batch, self.is_chief)

  def make_store(self, with_data: bool = False) -> CheckpointStore:
    objects = {"model": model_checkpoint_object(self.model.named_layers), **self.step.state()}
    if self.early_stopping is not None:
      objects["early_stopping"] = self.early_stopping
    if with_data and self._data_iterator is not None:
      objects["data"] = self._data_iterator
    self.store = CheckpointStore(self.logdir, objects, max_to_keep=self.params["num_checkpoints"],
                                 write=self.is_chief,
                                 guarded=named_variables(self.model.named_layers))
    self.evaluator.store = self.store
    return self.store

  def restore_checkpoint(self, path: str) -> None:
    """Loads model weights only (eval/infer): optimizer state is not needed there."""
    self.evaluator.restore(path)

  def _restore_or_initialise(self, continue_learning: bool, benchmark: bool,
                             first_batches) -> None:
    """Resumes from the latest checkpoint; or, on a fresh run, initializes from data (the
    layers that ask for it, on the first batch) and then loads ``load_model``'s weights."""
    store = self.store
    if continue_learning and store.manager.latest_checkpoint:
      allow = self.params["allow_model_changes"]
      path, skipped = store.restore_latest(allow_changes=allow)
      problems = model_mismatches(store.checkpoint, path) if allow and path and self.is_chief \
          else []
      if problems:
        log(f"warning: allow_model_changes: loaded what fits of {path} ({'; '.join(problems)})")
      if self.is_chief:
        for unreadable in skipped:
          log(f"warning: skipped unreadable checkpoint {unreadable.path} "
              f"({unreadable.reason})")
        log(f"Restored {path} at step {self.global_step}")
        announce_resume(self.step.moving_average, path)
      return
    if continue_learning and self.is_chief:
      log(f"--continue_learning: no checkpoint in {self.logdir}: training from scratch")
    initialized = self.step.initialize_from_data(first_batches)
    if initialized and self.is_chief:
      log(f"Data-dependent initialization of {initialized} layers on the first batch")
    if not benchmark:  # by key and shape; rows of a changed vocabulary by token
      load_model(store.checkpoint, self.model, self.params, log if self.is_chief else None)

  # ------------------------------------------------------------------ plan
  def _planned_steps(self) -> int | None:
    """Updates this run makes: max_steps, or num_epochs x steps per epoch."""
    if self.params["max_steps"] is not None:
      return self.params["max_steps"]
    if self.params["num_epochs"] is not None and self.steps_per_epoch is not None:
      return self.params["num_epochs"] * self.steps_per_epoch
    return None

  def _steps_per_epoch(self, layer) -> int:
    """Updates per pass over this worker's shard: its batches over those one update takes,
    rounded up (as ceil(ceil(n / b) / k) == ceil(n / (b k)), splitting a batch over towers or
    micro-batches then gives the epoch of one large batch)."""
    per_update = self.backend.num_local_replicas * self.params["iter_size"]
    return max(1, -(-layer.batches_per_epoch() // per_update))

  # ------------------------------------------------------------------ the loop
  def train(self, train_layer, eval_layer=None, continue_learning: bool = False,
            benchmark_steps: int | None = None, summaries: reporting.Summaries | None = None,
            on_start: Callable[[], None] | None = None) -> dict:
    """Trains to ``max_steps`` (or ``num_epochs``), evaluating every ``eval_steps``.

    ``on_start`` is called once the variables exist and the checkpoint to resume from (or
    ``load_model``) is loaded, before the first step: the command line writes the run's
    config then, so that a run that fails to start changes nothing in its logdir.

    Returns:
      The last logged values (and eval metrics), plus benchmark figures when
      ``benchmark_steps`` is set.
    """
    steps_per_epoch = self.steps_per_epoch or self._steps_per_epoch(train_layer)
    max_steps = benchmark_steps or self.max_steps
    if self.early_stopping is not None and not benchmark_steps and \
        (eval_layer is None or self.params["eval_steps"] is None):
      raise ConfigError("early_stopping: needs evals during training: run --mode=train_eval "
                        "with eval_steps set")
    first = self._start(train_layer, continue_learning, bool(benchmark_steps))
    if self.early_stopping is not None and not benchmark_steps:
      max_steps = self._steps_left_after_early_stop(max_steps)
    if on_start is not None:  # the run is built and restored: e.g. write its config now
      on_start()
      if self.is_chief:  # beside the config: what a later load_model maps rows by
        record_vocabularies(self.logdir, self.model)
    summaries = summaries if summaries is not None else reporting.Summaries(
        self.logdir if self.is_chief else None)
    if continue_learning:
      # Steps logged after the checkpoint we resume from are trained (and logged) again.
      summaries.forget_after(self.global_step)
    stats = StepStats(train_layer.throughput_unit, train_layer.unit_scale)
    reporter = Reporter(self.params, summaries, stats, self.is_chief, steps_per_epoch,
                        has_loss_scale=self.loss_scaler is not None)
    if self.is_chief:
      n_params = sum(int(np.prod(v.shape)) for v in self.step.variables)
      log(f"Training {n_params:,} parameters for {reporting.counted(max_steps, 'step')} "
          f"({reporting.counted(steps_per_epoch, 'step')} per epoch, "
          f"{self.backend.num_replicas} replica(s), backend {self.backend.name}"
          f"{'' if graph_optimizations.enabled() else ', graph optimizations off'})")
    try:
      with stopping.deferred(), profiled_steps(self.params["profile_steps"], self.logdir,
                                               self.backend.worker_index) as profiler:
        last = self._loop(max_steps, reporter, self._samples_fn(first), eval_layer,
                          saving=not benchmark_steps, profiler=profiler)
    except KeyboardInterrupt as e:
      if not benchmark_steps:
        self.store.save(self.global_step)
        if self.is_chief:
          log(f"{stopping.stopped_by(e)}: saved a checkpoint at step {self.global_step}; resume "
              f"with --continue_learning")
      raise
    if benchmark_steps:
      return {**last, **stats.benchmark(self.params["bench_start"])}
    return self._finish(last, eval_layer, summaries)

  def _start(self, train_layer, continue_learning: bool, benchmark: bool) -> dict:
    """Input iterator, variables, checkpoint store and restore; returns a local batch."""
    distribute = self.backend.distribute_dataset
    self._data_iterator = iter(distribute(train_layer.shard_dataset))
    first_batches = next(iter(distribute(train_layer.shard_dataset)))
    first = self.backend.local_results(first_batches)[0]
    self.build(first)
    self.make_store(with_data=self.backend.supports_iterator_checkpoint)
    self._restore_or_initialise(continue_learning, benchmark, first_batches)
    return first

  def _samples_fn(self, batch: dict):
    """Console lines and TensorBoard samples of the model's predictions for ``batch``."""
    batch_np = to_numpy(batch)

    def samples():
      outputs = self.evaluator.predict(batch_np)
      return (self.model.format_samples(batch_np, outputs),
              self.model.sample_summaries(batch_np, outputs))

    return samples

  def _loop(self, max_steps: int, reporter: Reporter, samples, eval_layer, saving: bool,
            profiler: StepProfiler) -> dict[str, float]:
    train_step = self.step.function()
    step = self.global_step
    last: dict[str, float] = {}
    consecutive_skips = 0
    first_loss: float | None = None
    while step < max_steps:
      profiler.before(step + 1)
      start = time.time()
      outputs = train_step(self._data_iterator, tf.constant(stopping.vote()))
      stopping.stop(float(outputs.pop("stop_votes")))  # all workers stop after this step
      extras = outputs.pop("summaries", None)  # per-variable summaries, read when due
      values = {k: v.numpy() for k, v in outputs.items()}
      step = self.global_step
      reporter.stats.add(time.time() - start, int(values["units"]))
      profiler.after(step)
      self._report_group_skips(step, values)
      if values["skipped"]:
        consecutive_skips += 1
        self._report_skip(step, values, consecutive_skips)
        continue  # the step did not advance: no report, checkpoint or eval for it
      consecutive_skips = 0
      if not math.isfinite(float(values["loss"])) and self.loss_scaler is None:
        raise DivergenceError(f"loss became {values['loss']} at step {step}: the model "
                              f"diverged; lower the learning rate or clip gradients "
                              f"(max_grad_norm)")
      last = {k: float(v) for k, v in values.items()}
      if first_loss is None:
        first_loss = last["loss"]
      elif first_loss > 0 and last["loss"] > LOSS_EXPLOSION * first_loss:
        if self.is_chief:
          log(f"warning: step {step}: loss {last['loss']:.4g} is over {LOSS_EXPLOSION:g}x this "
              f"run's first ({first_loss:.4g}): training is probably diverging; lower the "
              f"learning rate or clip gradients (max_grad_norm)")
        first_loss = math.inf  # warn once
      reporter.step(step, values, samples, extras)
      if not saving:
        continue
      # Eval comes before the checkpoint of the same step: the checkpoint then holds what the
      # eval changed (early stopping's counters), and a run resumed from it goes on as this one.
      # The last step's eval and checkpoint are _finish's.
      stop = None
      if eval_layer is not None and every(self.params["eval_steps"], step) and step < max_steps:
        metrics = self.evaluate(eval_layer, summaries=reporter.summaries, step=step)
        stop = self._count_eval(metrics, step)
      if (every(self.params["save_checkpoint_steps"], step) and step < max_steps) or stop:
        self.store.save(step)
      if stop:
        if self.is_chief:
          log(stop)
        self._stopped_early_metrics = metrics
        break
    return last

  def _count_eval(self, metrics: dict[str, float], step: int) -> str | None:
    """Early stopping's verdict on this eval (None: go on, or no early stopping)."""
    if self.early_stopping is None:
      return None
    try:
      return self.early_stopping.update(metrics, step)
    except ConfigError:
      self.store.save(step)  # the steps trained so far are kept for --continue_learning
      raise

  def _steps_left_after_early_stop(self, max_steps: int) -> int:
    """A resumed run that early stopping had already ended trains no further (unless its
    patience was raised)."""
    early = self.early_stopping
    if int(early.evals_without_improvement.numpy()) < early.patience:
      return max_steps
    if self.is_chief:
      log(f"early stopping had ended this run at step {self.global_step} ({early.metric} "
          f"best at step {int(early.best_step.numpy())}); raise early_stopping/patience to "
          f"train on")
    self._stopped_early_metrics = {}  # nothing trained: no final eval to count or report
    return self.global_step

  def _report_group_skips(self, step: int, values: dict) -> None:
    """One line per earlier update group whose update this step skipped (non-finite
    gradients; the group's loss scaler, if any, has reacted)."""
    for name in [k[len("skipped/"):] for k, v in values.items()
                 if k.startswith("skipped/") and v]:
      if self.is_chief:
        log(f"step {step}: non-finite gradients of {name}, its update skipped")

  def _report_skip(self, step: int, values: dict, consecutive: int) -> None:
    if self.is_chief:
      log(f"step {step}: non-finite gradients, update skipped "
          f"(loss scale {values['loss_scale']:.1f}, {int(self.skipped_steps.numpy())} "
          f"skipped so far)")
    if consecutive >= MAX_CONSECUTIVE_SKIPS:
      raise DivergenceError(
          f"{consecutive} consecutive steps with non-finite gradients at step {step} "
          f"(loss {values['loss']}, loss scale {values['loss_scale']:g}): "
          f"{self._divergence_cause()}")

  def _divergence_cause(self) -> str:
    """Why updates keep failing, and what to do, for the error that stops training."""
    bad = non_finite(named_variables(self.model.named_layers))
    if bad:
      return (f"the weights themselves are not finite ({', '.join(bad[:3])}): an update made "
              f"them so; lower the learning rate or clip gradients (max_grad_norm)")
    if self.step.float16_compute:
      return ("the forward or backward pass overflows float16 even at this loss scale; "
              "use dtype 'mixed_bfloat16' or 'mixed' (float32 weights), or lower the "
              "learning rate")
    return "the model diverged; lower the learning rate or loss_scaling_params/scale_min"

  def _finish(self, last: dict, eval_layer, summaries: reporting.Summaries) -> dict:
    step = self.global_step
    metrics = self._stopped_early_metrics
    if eval_layer is not None and metrics is None:
      if self.early_stopping is None:
        self.store.save(step)  # before the final eval: a failing eval keeps the steps
      metrics = self.evaluate(eval_layer, summaries=summaries, step=step)
      # With early stopping the final eval counts too, and the checkpoint after it holds
      # the count: a run resumed with a larger max_steps goes on as one that never ended.
      stop = self._count_eval(metrics, step)
      if stop and self.is_chief:
        log(stop)
    self.store.save(step)
    if metrics is not None:
      last.update({f"eval_{k}": v for k, v in metrics.items()})
      warning = nothing_learned(self.model.best_metric, self.model.chance_level, metrics, step)
      if warning and self.is_chief:
        log(f"warning: {warning}")
    if self.is_chief:
      log(f"Finished training at step {step}")
    return last

  # ------------------------------------------------------------------ eval / infer
  def evaluate(self, eval_layer, summaries: reporting.Summaries | None = None,
               step: int | None = None) -> dict[str, float]:
    """Eval loss and metrics at ``step`` (default: the current global step)."""
    return self.evaluator.evaluate(eval_layer, step if step is not None else self.global_step,
                                   summaries)

  def infer(self, infer_layer) -> tuple[list, dict[str, float]]:
    """The model's formatted inference outputs and metrics (see Evaluator.infer)."""
    return self.evaluator.infer(infer_layer)
