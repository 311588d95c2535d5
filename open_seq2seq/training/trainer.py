"""The one training loop, with evaluation and inference.

One ``tf.function`` step serves every backend and precision:

* each replica runs ``iter_size`` micro-batches, summing gradients of the *summed* loss
  — no normalisation yet (under loss scaling or float16 compute, the scale multiplies each
  micro-batch's mean loss so half-precision gradients stay in range, and the batch weight is
  multiplied back into the float32 gradients);
* in cross-replica context the backend sums gradients, loss sums and weights over all
  replicas and processes; gradients are divided by the global weight (real target tokens or
  utterances) and by the loss scale, so a step equals one large batch whatever the split;
* non-finite gradients skip the update (weights, optimizer state and step untouched);
  otherwise regularization, clipping by global norm and the optimizer update follow.

The global step is the optimizer's update counter, so skipped steps do not advance it and the
learning-rate schedule (which reads it) resumes exactly from a checkpoint.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from open_seq2seq.distributed.backend import Backend
from open_seq2seq.models.model import Model
from open_seq2seq.optimizers import (LRPolicySchedule, complete_lr_policy_params,
                                     freeze_filter, get_optimizer, regularization_loss)
from open_seq2seq.training import reporting
from open_seq2seq.training.checkpoints import (CheckpointStore, load_pretrained,
                                               model_checkpoint_object, restore_across_dtypes)
from open_seq2seq.training.loss_scaling import make_loss_scaler
from open_seq2seq.training.reporting import format_number, log
from open_seq2seq.utils import precision


#: Training stops when this many steps in a row have non-finite gradients: loss scaling
#: recovers from overflows in a few steps (2^14 -> 1 takes 14 halvings), not in 100.
MAX_CONSECUTIVE_SKIPS = 100


def _learning_rate(params: dict, last_step: int | None, steps_per_epoch: int | None) -> Any:
  """The optimizer's learning rate: the lr policy as a schedule of the update counter."""
  if params["lr_policy"] is None:
    return None  # get_optimizer takes optimizer_params["learning_rate"] or its default
  policy_params = complete_lr_policy_params(
      params["lr_policy"], params["lr_policy_params"], last_step,
      steps_per_epoch if params["num_epochs"] is not None else None)
  return LRPolicySchedule(params["lr_policy"], policy_params)


def _to_numpy(value: Any) -> Any:
  return tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, value)


class Trainer:
  """Builds the optimizer and step functions for ``model`` and runs train/eval/infer.

  Args:
    model: the model (its variables are created here, under the backend's scope).
    backend: distribution backend (single process by default).
    logdir: run directory (checkpoints, summaries, resolved config).
  """

  def __init__(self, model: Model, backend: Backend | None = None, logdir: str | None = None):
    self.model = model
    self.params = model.params
    self.backend = backend or Backend()
    self.logdir = logdir or self.params["logdir"]
    self.is_chief = self.backend.is_chief
    self.loss_scaler = make_loss_scaler(self.params["loss_scaling"],
                                        self.params["loss_scaling_params"])
    # float16 compute (a component may override the model's dtype) can overflow even without
    # a scaler: such steps are skipped rather than written into the weights.
    self._float16_compute = any(layer.compute_dtype == "float16" for layer in model.layers)
    self._guard_overflow = self.loss_scaler is not None or self._float16_compute
    if self.is_chief:
      log(precision.describe(self.params["dtype"]) + "; " +
          (self.loss_scaler.describe() if self.loss_scaler is not None else "no loss scaling"))
      if self._float16_compute and self.loss_scaler is None and model.mode == "train":
        log("warning: float16 compute without loss_scaling: small gradients underflow to 0; "
            "set loss_scaling to 'Backoff' (or use dtype mixed_bfloat16)")
    with self.backend.strategy.scope():
      self.steps_per_epoch = self._steps_per_epoch(model.data_layer) if model.mode == "train" \
          else None
      self.max_steps = self._planned_steps()
      self.optimizer = get_optimizer(
          self.params["optimizer"], self.params["optimizer_params"],
          _learning_rate(self.params, self.max_steps, self.steps_per_epoch))
      self.skipped_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="skipped_steps")
      self.tokens_seen = tf.Variable(0, dtype=tf.int64, trainable=False, name="tokens_seen")
    self._built = False
    self._train_vars: list = []
    self._data_iterator = None
    self._pass_fns: dict = {}
    self.store: CheckpointStore | None = None

  # ------------------------------------------------------------------ building
  @property
  def global_step(self) -> int:
    return int(self.optimizer.iterations.numpy())

  def _checkpoint_objects(self, with_data: bool) -> dict[str, Any]:
    # The optimizer's state (update counter, slots) is saved on its own: the optimizer object
    # also references the model's variables, and saving it whole would name the weights
    # "optimizer/_trainable_variables/<i>" instead of by their place in the model.
    optimizer_state = tf.Module()
    optimizer_state.state = list(self.optimizer.variables)
    objects = {
        "model": model_checkpoint_object(self._model_layers()),
        "optimizer": optimizer_state,
        "skipped_steps": self.skipped_steps,
        "tokens_seen": self.tokens_seen,
    }
    if self.loss_scaler is not None:
      objects["loss_scaler"] = self.loss_scaler
    if with_data and self._data_iterator is not None:
      objects["data"] = self._data_iterator
    return objects

  def _model_layers(self) -> dict[str, Any]:
    layers = {"encoder": self.model.encoder, "decoder": self.model.decoder}
    if isinstance(self.model.loss, keras.layers.Layer):
      layers["loss"] = self.model.loss
    return layers

  def build(self, batch: dict) -> None:
    """Creates every variable by running the model once on a local batch."""
    if self._built:
      return
    with self.backend.strategy.scope():
      if "target_tensors" in batch and self.model.loss is not None:
        self.model.compute_loss(batch, training=False)
      else:
        self.model.forward(batch, training=False)
      self._train_vars = self._select_trainable()
      self.optimizer.build(self._train_vars)
    self.backend.broadcast_variables(self.model.variables + list(self.optimizer.variables))
    self._built = True

  def _select_trainable(self) -> list:
    variables = self.model.trainable_variables
    regex = self.params["freeze_variables_regex"]
    if regex:
      kept = freeze_filter(variables, regex)
      if self.is_chief:
        log(f"Freezing {len(variables) - len(kept)} variables matching {regex!r}")
      variables = kept
    return variables

  def make_store(self, with_data: bool = False) -> CheckpointStore:
    self.store = CheckpointStore(self.logdir, self._checkpoint_objects(with_data),
                                 max_to_keep=self.params["num_checkpoints"],
                                 write=self.is_chief)
    return self.store

  def restore_checkpoint(self, path: str) -> None:
    """Loads model weights only (eval/infer): optimizer state is not needed there."""
    model = model_checkpoint_object(self._model_layers())
    cast = restore_across_dtypes(tf.train.Checkpoint(model=model), path, expect_partial=True)
    # checkpoints are named ckpt-<global step>: eval reports that step
    suffix = path.rsplit("-", 1)[-1]
    self._restored_step = int(suffix) if suffix.isdigit() else None
    if self.is_chief:
      log(f"Restored weights from {path}" +
          (f" (cast {len(cast)} variables to this run's dtype)" if cast else ""))

  def restore_for_inference(self, layer, path: str) -> None:
    """Builds the model on ``layer``'s first batch, then loads ``path``."""
    batch, _ = next(iter(self.backend.eval_batches(
        lambda n, i: self._shard_layer(layer, n, i).build_dataset())))
    self.build(self.backend.local_results(batch)[0])
    self.restore_checkpoint(path)

  # ------------------------------------------------------------------ the step
  def _replica_step(self, batches: tuple) -> tuple:
    """Gradients of the summed (scaled) loss over this replica's micro-batches."""
    variables = self._train_vars
    grads: list | None = None
    loss_sum = tf.constant(0.0)
    weight = tf.constant(0.0)
    tokens = tf.constant(0, tf.int64)
    for batch in batches:
      # Micro-batches run one after another: the next forward pass waits for the previous
      # gradients, which bounds memory to one micro-batch.
      with tf.control_dependencies(grads or []):
        with tf.GradientTape() as tape:
          batch_loss, batch_weight, _ = self.model.compute_loss(batch, training=True)
          scaled, unscale = self._scaled_loss(batch_loss, batch_weight)
        batch_grads = tape.gradient(scaled, variables)
      # Dense gradients: embedding IndexedSlices would make all-reduce buffers grow.
      batch_grads = [tf.cast(tf.convert_to_tensor(g), tf.float32) if g is not None
                     else tf.zeros(v.shape, tf.float32) for v, g in zip(variables, batch_grads)]
      if unscale is not None:
        batch_grads = [g * unscale for g in batch_grads]
      grads = batch_grads if grads is None else [a + g for a, g in zip(grads, batch_grads)]
      loss_sum += batch_loss
      weight += batch_weight
      tokens += self.model.num_tokens(batch)
    return grads, loss_sum, weight, tokens

  def _scaled_loss(self, batch_loss: tf.Tensor, batch_weight: tf.Tensor) -> tuple:
    """The loss to differentiate, and the float32 factor that turns its gradients back into
    gradients of ``batch_loss`` times the loss scale (None: they already are).

    Under loss scaling or float16 compute the scale multiplies the per-unit *mean* loss, as in
    OpenSeq2Seq, so that half-precision gradients stay in range whatever the batch size; the
    batch weight is multiplied back in float32.
    """
    if self.loss_scaler is None and not self._float16_compute:
      return batch_loss, None
    units = tf.maximum(tf.stop_gradient(batch_weight), 1.0)
    scale = self.loss_scaler.scale if self.loss_scaler is not None else tf.constant(1.0)
    return batch_loss * (scale / units), units

  def _apply(self, grads: list, loss_sum, weight, tokens) -> dict:
    """Cross-replica part of a step: normalise, check, regularise, clip, update."""
    scale = self.loss_scaler.scale if self.loss_scaler is not None else tf.constant(1.0)
    denom = tf.maximum(weight, 1.0)
    inverse = 1.0 / (denom * scale)
    grads = [g * inverse for g in grads]
    finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])
    if self.loss_scaler is not None:
      amax = tf.reduce_max([tf.reduce_max(tf.abs(g)) for g in grads])
      self.loss_scaler.update(amax, finite)
    loss = loss_sum / denom
    if self.params["regularizer"] is not None:
      with tf.GradientTape() as tape:
        reg = regularization_loss(self._train_vars, self.params["regularizer"],
                                  self.params["regularizer_params"])
      reg_grads = tape.gradient(reg, self._train_vars)
      grads = [g + tf.cast(tf.convert_to_tensor(r), tf.float32) if r is not None else g
               for g, r in zip(grads, reg_grads)]
      loss += reg
    grad_norm = tf.linalg.global_norm(grads)
    if self.params["max_grad_norm"] is not None:
      grads, _ = tf.clip_by_global_norm(grads, self.params["max_grad_norm"],
                                        use_norm=grad_norm)
    learning_rate = self.optimizer.learning_rate

    def update():
      self.optimizer.apply_gradients(zip(grads, self._train_vars))
      self.tokens_seen.assign_add(tokens)
      return tf.constant(0, tf.int64)

    def skip():
      self.skipped_steps.assign_add(1)
      return tf.constant(1, tf.int64)

    skipped = tf.cond(finite, update, skip) if self._guard_overflow else update()
    return {"loss": loss, "learning_rate": tf.cast(learning_rate, tf.float32),
            "global_gradient_norm": grad_norm, "loss_scale": scale, "tokens": tokens,
            "skipped": skipped}

  def _make_train_function(self):
    iter_size = self.params["iter_size"]

    # autograph off: the step has no tensor-dependent Python control flow (components use
    # tf.while_loop / tf.cond themselves), and conversion only costs tracing time.
    @tf.function(autograph=False)
    def train_step(iterator):
      batches = []
      for _ in range(iter_size):
        batches.append(next(iterator))
      batches = tuple(batches)
      per_replica = self.backend.run(self._replica_step, args=(batches,))
      grads, loss_sum, weight, tokens = self.backend.reduce_sum(per_replica)
      return self._apply(grads, loss_sum, weight, tokens)

    return train_step

  # ------------------------------------------------------------------ training
  def _planned_steps(self) -> int | None:
    """Updates this run makes: max_steps, or num_epochs x steps per epoch."""
    if self.params["max_steps"] is not None:
      return self.params["max_steps"]
    if self.params["num_epochs"] is not None and self.steps_per_epoch is not None:
      return self.params["num_epochs"] * self.steps_per_epoch
    return None

  def _steps_per_epoch(self, data_layer) -> int:
    global_batch = (self.params["batch_size_per_gpu"] * self.backend.num_replicas *
                    self.params["iter_size"])
    size = data_layer.get_size_in_samples() * self.backend.num_workers
    return max(1, size // global_batch)

  def train(self, train_layer, eval_layer=None, continue_learning: bool = False,
            benchmark_steps: int | None = None, summaries: reporting.Summaries | None = None
            ) -> dict:
    """Trains to ``max_steps`` (or ``num_epochs``), evaluating every ``eval_steps``.

    Returns:
      The last logged values plus benchmark figures when ``benchmark_steps`` is set.
    """
    params = self.params
    steps_per_epoch = self.steps_per_epoch or self._steps_per_epoch(train_layer)
    max_steps = benchmark_steps or self.max_steps
    dataset = self.backend.distribute_dataset(
        lambda n, i: self._shard_layer(train_layer, n, i).build_dataset())
    self._data_iterator = iter(dataset)
    first = next(iter(self.backend.distribute_dataset(
        lambda n, i: self._shard_layer(train_layer, n, i).build_dataset())))
    self.build(self.backend.local_results(first)[0])
    store = self.make_store(with_data=self.backend.supports_iterator_checkpoint)
    if continue_learning and store.manager.latest_checkpoint:
      store.restore_latest()
      if self.is_chief:
        log(f"Restored {store.manager.latest_checkpoint} at step {self.global_step}")
    elif params["load_model"] and not benchmark_steps:
      loaded, skipped = load_pretrained(store.checkpoint, params["load_model"])
      if self.is_chief:
        log(f"load_model: initialised {len(loaded)} variables from {params['load_model']}, "
            f"skipped {len(skipped)}" + (": " + "; ".join(skipped[:10]) if skipped else ""))
    train_step = self._make_train_function()
    samples_batch = _to_numpy(self.backend.local_results(first)[0])
    summaries = summaries if summaries is not None else reporting.Summaries(
        self.logdir if self.is_chief else None)
    if self.is_chief:
      n_params = sum(int(np.prod(v.shape)) for v in self._train_vars)
      log(f"Training {n_params:,} parameters for {max_steps} steps "
          f"({steps_per_epoch} steps per epoch, {self.backend.num_replicas} replica(s), "
          f"backend {self.backend.name})")
    step = self.global_step
    last: dict[str, Any] = {}
    timings: list[float] = []
    token_counts: list[int] = []
    window_start, window_tokens, window_steps = time.time(), 0, 0
    consecutive_skips = 0
    try:
      while step < max_steps:
        t0 = time.time()
        values = train_step(self._data_iterator)
        values = {k: v.numpy() for k, v in values.items()}
        step = self.global_step
        elapsed = time.time() - t0
        timings.append(elapsed)
        token_counts.append(int(values["tokens"]))
        window_tokens += int(values["tokens"])
        window_steps += 1
        if values["skipped"]:
          consecutive_skips += 1
          if self.is_chief:
            log(f"step {step}: non-finite gradients, update skipped "
                f"(loss scale {values['loss_scale']:.1f}, {int(self.skipped_steps.numpy())} "
                f"skipped so far)")
          if consecutive_skips >= MAX_CONSECUTIVE_SKIPS:
            raise FloatingPointError(
                f"{consecutive_skips} consecutive steps with non-finite gradients at step "
                f"{step} (loss {values['loss']}, loss scale {values['loss_scale']:g}): the "
                f"model diverged; lower the learning rate or loss_scaling_params/scale_min")
          # the step did not advance: no report, checkpoint or eval for it
          continue
        consecutive_skips = 0
        if not math.isfinite(float(values["loss"])) and self.loss_scaler is None:
          raise FloatingPointError(f"loss became {values['loss']} at step {step}")
        last = {k: float(v) for k, v in values.items()}
        if self.is_chief:
          self._report(step, steps_per_epoch, values, summaries, window_start,
                       window_tokens, window_steps, samples_batch)
          if _every(params["print_loss_steps"], step):
            window_start, window_tokens, window_steps = time.time(), 0, 0
        if benchmark_steps:
          continue
        if _every(params["save_checkpoint_steps"], step):
          store.save(step)
        if eval_layer is not None and _every(params["eval_steps"], step) and step < max_steps:
          self.evaluate(eval_layer, summaries=summaries, step=step)
    except KeyboardInterrupt:
      if not benchmark_steps:
        store.save(self.global_step)
        if self.is_chief:
          log(f"Interrupted: saved a checkpoint at step {self.global_step}; resume with "
              f"--continue_learning")
      raise
    if benchmark_steps:
      return {**last, **self._benchmark_figures(timings, token_counts)}
    store.save(step)
    if eval_layer is not None:
      metrics = self.evaluate(eval_layer, summaries=summaries, step=step)
      last.update({f"eval_{k}": v for k, v in metrics.items()})
    if self.is_chief:
      log(f"Finished training at step {step}")
    return last

  def _shard_layer(self, layer, num_shards: int, shard: int):
    if num_shards == layer.num_workers and shard == layer.worker_id:
      return layer
    return type(layer)(layer.params, model=self.model, mode=layer.mode,
                       batch_size=layer.batch_size, num_workers=num_shards, worker_id=shard)

  def _report(self, step, steps_per_epoch, values, summaries, window_start, window_tokens,
              window_steps, samples_batch) -> None:
    params = self.params
    if _every(params["save_summaries_steps"], step):
      scalars = {"loss": float(values["loss"])}
      for name in params["summaries"]:
        if name in values and (name != "loss_scale" or self.loss_scaler is not None):
          scalars[name] = float(values[name])
      summaries.scalars(step, scalars, prefix="train/")
    if _every(params["print_loss_steps"], step):
      seconds = (time.time() - window_start) / max(window_steps, 1)
      tokens_per_s = window_tokens / max(time.time() - window_start, 1e-9)
      log(f"step {step:>6} | epoch {step / steps_per_epoch:6.2f} | "
          f"loss {format_number(float(values['loss']))} | "
          f"lr {format_number(float(values['learning_rate']))} | "
          f"{seconds:.3f} s/step | {tokens_per_s:,.0f} tokens/s")
    if _every(params["print_samples_steps"], step):
      outputs = _to_numpy(self._predict_function()(samples_batch))
      for line in self.model.format_samples(samples_batch, outputs):
        log(line)

  def _benchmark_figures(self, timings: list[float], tokens: list[int]) -> dict:
    start = min(self.params["bench_start"], max(len(timings) - 1, 0))
    steady = np.array(timings[start:])
    toks = np.array(tokens[start:])
    per_step = float(np.median(steady)) if len(steady) else float("nan")
    return {"median_step_time": per_step,
            "tokens_per_s": float(np.median(toks / steady)) if len(steady) else float("nan"),
            "steps_measured": int(len(steady))}

  # ------------------------------------------------------------------ eval / infer
  def _predict_function(self):
    if not hasattr(self, "_predict_fn"):
      self._predict_fn = tf.function(self.model.predict, reduce_retracing=True,
                                     autograph=False)
    return self._predict_fn

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
    out = {"predictions": self.model.predict(batch), "batch": batch}
    if "target_tensors" in batch and self.model.loss is not None:
      loss_sum, weight, _ = self.model.compute_loss(batch, training=False)
      out["loss_sum"], out["weight"] = loss_sum, weight
    return out

  def _run_pass(self, layer, label: str) -> tuple[list, list, float, float]:
    """One pass over ``layer``'s data, gathered on every process in file order.

    Returns:
      (inference results, eval results — empty without targets —, loss sum, loss weight).
    """
    # eval_batches pads the last step of each process with copies whose outputs are
    # dropped (num_valid), so workers with uneven shards never wait for each other.
    specs = []

    def dataset_fn(num_shards: int, shard: int) -> tf.data.Dataset:
      dataset = self._shard_layer(layer, num_shards, shard).build_dataset()
      specs.append(dataset.element_spec)
      return dataset

    batches = self.backend.eval_batches(dataset_fn)
    total_batches = None
    try:
      size = layer.get_size_in_samples() * self.backend.num_workers
      total_batches = math.ceil(size / max(layer.batch_size * self.backend.num_replicas, 1))
    except NotImplementedError:
      pass
    bar = reporting.ProgressBar(label, total_batches, enabled=self.is_chief)
    infer_results, eval_results, loss_sum, weight = [], [], 0.0, 0.0
    for batch, num_valid in batches:
      if not self._built:
        self.build(self.backend.local_results(batch)[0])
      out = self._pass_function(label, specs[0])(batch)
      for replica_out in self.backend.local_results(out)[:num_valid]:
        replica_out = _to_numpy(replica_out)
        batch_np, predictions = replica_out["batch"], replica_out["predictions"]
        if "target_tensors" in batch_np:
          eval_results.extend(self.model.evaluate(batch_np, predictions))
        if label == "infer":
          infer_results.extend(self.model.infer(batch_np, predictions))
        if "loss_sum" in replica_out:
          loss_sum += float(replica_out["loss_sum"])
          weight += float(replica_out["weight"])
      bar.update()
    bar.close()
    infer_results = sorted(self.backend.gather_objects(infer_results), key=lambda r: r[0])
    eval_results = sorted(self.backend.gather_objects(eval_results), key=lambda r: r[0])
    totals = self.backend.gather_objects([(loss_sum, weight)])
    return infer_results, eval_results, sum(t[0] for t in totals), sum(t[1] for t in totals)

  def evaluate(self, eval_layer, summaries: reporting.Summaries | None = None,
               step: int | None = None) -> dict[str, float]:
    """Eval loss and the family's metrics (e.g. BLEU) over one pass of the eval data."""
    _, results, loss_sum, weight = self._run_pass(eval_layer, "eval")
    metrics = {}
    if weight > 0:
      metrics["loss"] = loss_sum / weight
    metrics.update(self.model.finalize_evaluation(results))
    if step is None:
      step = getattr(self, "_restored_step", None) or self.global_step
    if self.is_chief:
      log(f"eval at step {step}: " +
          ", ".join(f"{k} {format_number(float(v))}" for k, v in metrics.items()))
      if summaries is not None:
        summaries.scalars(step, metrics, prefix="eval/")
    metric, higher = self.model.best_metric
    if self.store is not None and metric in metrics and self.model.mode == "train":
      if self.store.maybe_save_best(metric, float(metrics[metric]), higher, step) and \
          self.is_chief:
        log(f"new best {metric} {format_number(float(metrics[metric]))}: saved to best_models/")
    return metrics

  def infer(self, infer_layer) -> tuple[str, list[str], dict[str, float]]:
    """Predictions for ``infer_layer``'s data in file order, plus metrics if it has targets."""
    results, eval_results, _, _ = self._run_pass(infer_layer, "infer")
    header, lines = self.model.finalize_inference(results)
    if eval_results:
      metrics = self.model.finalize_evaluation(eval_results)
    else:
      metrics = self.model.score_inference(results)
    return header, lines, metrics


def _every(period: int | None, step: int) -> bool:
  return bool(period) and step % period == 0
