"""One training update as a ``tf.function``: the same step for every backend and precision.

* each replica runs ``iter_size`` micro-batches, summing gradients of the *summed* loss
  — no normalisation yet (under loss scaling or float16 compute, the scale multiplies each
  micro-batch's mean loss so half-precision gradients stay in range, and the batch weight is
  multiplied back into the float32 gradients);
* in cross-replica context the backend sums gradients, loss sums and weights over all
  replicas and processes; gradients are divided by the global weight (real target tokens or
  utterances) and by the loss scale, so a step equals one large batch whatever the split;
* non-finite gradients skip the update (weights, optimizer state and step untouched);
  otherwise regularization, clipping by global norm, LARC (``larc_params``) and the optimizer
  update follow, in OpenSeq2Seq's order.

Per-variable summaries (``gradients``, ``gradient_norm``, ``larc_summaries`` ...) add tensors
to the step's results only when the config asks for them (see
:mod:`open_seq2seq.training.step_summaries`).

The global step is the optimizer's update counter, so skipped steps do not advance it and the
learning-rate schedule (which reads it) resumes exactly from a checkpoint.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import tensorflow as tf

from open_seq2seq.distributed.backend import Backend
from open_seq2seq.models.model import Model
from open_seq2seq.optimizers import (LRPolicySchedule, apply_larc, complete_lr_policy_params,
                                     freeze_filter, get_optimizer, regularization_loss,
                                     variable_path)
from open_seq2seq.training import step_summaries
from open_seq2seq.training.float32_update import Float32Update
from open_seq2seq.training.loss_scaling import make_loss_scaler
from open_seq2seq.training.reporting import log
from open_seq2seq.training.run_params import run_settings
from open_seq2seq.utils import precision


def learning_rate(params: dict, last_step: int | None, steps_per_epoch: int | None) -> Any:
  """The optimizer's learning rate: the lr policy as a schedule of the update counter."""
  if params["lr_policy"] is None:
    return None  # get_optimizer takes optimizer_params["learning_rate"] or its default
  policy_params = complete_lr_policy_params(
      params["lr_policy"], params["lr_policy_params"], last_step,
      steps_per_epoch if params["num_epochs"] is not None else None)
  return LRPolicySchedule(params["lr_policy"], policy_params)


class TrainStep:
  """The optimizer, the loss scaler, the trainable variables and the update function.

  Args:
    model: the model whose loss is minimised.
    run: the run's settings (:func:`open_seq2seq.training.run_params.run_settings`).
    backend: runs the replica step and sums its results over replicas and processes.
    max_steps: the last update of the run (the lr policy's horizon), or None.
    steps_per_epoch: updates per epoch (for lr policies given in epochs), or None.
    count_units: ``batch -> int64 scalar`` of throughput units (e.g. real tokens).
  """

  def __init__(self, model: Model, run: Mapping[str, Any], backend: Backend,
               max_steps: int | None, steps_per_epoch: int | None,
               count_units: Callable[[dict], tf.Tensor]):
    self.model = model
    self.params = params = run_settings(run)
    self.backend = backend
    self.count_units = count_units
    self.loss_scaler = make_loss_scaler(params["loss_scaling"], params["loss_scaling_params"])
    # float16 compute (a component may override the model's dtype) can overflow even without
    # a scaler: such steps are skipped rather than written into the weights.
    self.float16_compute = any(layer.compute_dtype == "float16" for layer in model.layers)
    self._guard_overflow = self.loss_scaler is not None or self.float16_compute
    self.larc_params = params.get("larc_params")
    self.summary_names = list(params.get("summaries") or [])
    # Gradients cross replicas in this dtype (one replica: no all-reduce, nothing to round).
    self.allreduce_dtype = (tf.as_dtype(params["allreduce_dtype"]) if backend.num_replicas > 1
                            else tf.float32)
    with backend.strategy.scope():
      self.optimizer = get_optimizer(params["optimizer"], params["optimizer_params"],
                                     learning_rate(params, max_steps, steps_per_epoch))
      self.skipped_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="skipped_steps")
      self.units_seen = tf.Variable(0, dtype=tf.int64, trainable=False, name="tokens_seen")
    self.variables: list = []

  def describe_precision(self) -> str:
    """One line: the dtype policy and the loss scaling of this run."""
    return (precision.describe(self.model.params["dtype"]) + "; " +
            (self.loss_scaler.describe() if self.loss_scaler is not None else "no loss scaling"))

  @property
  def global_step(self) -> int:
    return int(self.optimizer.iterations.numpy())

  def state(self) -> dict[str, Any]:
    """Trackables of the training state besides the model (for checkpoints)."""
    # The optimizer's state (update counter, slots) is saved on its own: the optimizer object
    # also references the model's variables, and saving it whole would name the weights
    # "optimizer/_trainable_variables/<i>" instead of by their place in the model.
    optimizer_state = tf.Module()
    optimizer_state.state = list(self.optimizer.variables)
    objects = {"optimizer": optimizer_state, "skipped_steps": self.skipped_steps,
               "tokens_seen": self.units_seen}
    if self.loss_scaler is not None:
      objects["loss_scaler"] = self.loss_scaler
    return objects

  def build(self, batch: dict, is_chief: bool) -> None:
    """Creates the model's and the optimizer's variables and makes them equal everywhere."""
    with self.backend.strategy.scope():
      self.model.create_variables(batch)
      self.variables = self._select_trainable(is_chief)
      self.updated = Float32Update(self.variables)
      self.optimizer.build(self.updated.targets)
    self.model.training_step = self.optimizer.iterations
    self.backend.broadcast_variables(self.model.variables + list(self.optimizer.variables))
    if is_chief and "larc_summaries" in self.summary_names and self.larc_params is None:
      log("warning: summaries has 'larc_summaries' but larc_params is not set: nothing to write")

  def initialize_from_data(self, batches: Any) -> int:
    """Data-dependent initialization of a fresh run (:mod:`open_seq2seq.parts.data_init`).

    Runs the model's initialization pass on ``batches`` (this process's per-replica first
    batch, as the backend distributes it), the layers' moments summed over every replica
    of every process, and assigns the values — the same on every replica. Returns the
    number of layers initialized (0: the model has none, and nothing ran).
    """
    layers = self.model.data_init_layers()
    if not layers:
      return 0
    backend, model = self.backend, self.model

    @tf.function
    def initial_values(per_replica):
      return backend.run(lambda batch: model.data_init_values(batch, backend.replica_sum),
                         (per_replica,))

    values = initial_values(batches)
    variables = [v for layer in layers for v in layer.data_init_variables()]
    for variable, value in zip(variables, values):
      variable.assign(backend.local_results(value)[0])
    return len(layers)

  def _select_trainable(self, is_chief: bool) -> list:
    variables = self.model.trainable_variables
    regex = self.params["freeze_variables_regex"]
    if regex:
      kept = freeze_filter(variables, regex)
      if is_chief:
        log(f"Freezing {len(variables) - len(kept)} variables matching {regex!r}")
      variables = kept
    return variables

  # ------------------------------------------------------------------ per replica
  def replica_step(self, batches: tuple) -> tuple:
    """Gradients of the summed (scaled) loss over this replica's micro-batches."""
    variables = self.variables
    grads: list | None = None
    loss_sum = tf.constant(0.0)
    weight = tf.constant(0.0)
    units = tf.constant(0, tf.int64)
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
      units += tf.cast(self.count_units(batch), tf.int64)
    return grads, loss_sum, weight, units

  def _scaled_loss(self, batch_loss: tf.Tensor, batch_weight: tf.Tensor) -> tuple:
    """The loss to differentiate, and the float32 factor that turns its gradients back into
    gradients of ``batch_loss`` times the loss scale (None: they already are).

    Under loss scaling or float16 compute the scale multiplies the per-unit *mean* loss, as in
    OpenSeq2Seq, so that half-precision gradients stay in range whatever the batch size; the
    batch weight is multiplied back in float32.
    """
    if self.loss_scaler is None and not self.float16_compute:
      return batch_loss, None
    units = tf.maximum(tf.stop_gradient(batch_weight), 1.0)
    scale = self.loss_scaler.scale if self.loss_scaler is not None else tf.constant(1.0)
    return batch_loss * (scale / units), units

  # ------------------------------------------------------------------ cross replica
  def apply(self, grads: list, loss_sum, weight, units) -> dict:
    """Cross-replica part of a step: normalise, check, regularise, clip, LARC, update."""
    # The rate of this update (the schedule reads the update counter, advanced below).
    lr = tf.cast(self.optimizer.learning_rate, tf.float32)
    scale = self.loss_scaler.scale if self.loss_scaler is not None else tf.constant(1.0)
    denom = tf.maximum(weight, 1.0)
    inverse = 1.0 / (denom * scale)
    grads = [g * inverse for g in grads]
    finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])
    if self.loss_scaler is not None:
      amax = tf.reduce_max([tf.reduce_max(tf.abs(g)) for g in grads])
      self.loss_scaler.update(amax, finite)
    loss = loss_sum / denom
    if self._regularized:
      grads, reg = self._add_regularization(grads)
      loss += reg
    grad_norm = tf.linalg.global_norm(grads)
    values = {"global_gradient_norm": grad_norm}
    if self.params["max_grad_norm"] is not None:
      grads, _ = tf.clip_by_global_norm(grads, self.params["max_grad_norm"],
                                        use_norm=grad_norm)
      if "global_gradient_norm" in self.summary_names:
        values["global_clipped_gradient_norm"] = tf.linalg.global_norm(grads)
    summarised, larc_values = grads, None  # gradient summaries show them before LARC
    if self.larc_params is not None:
      grads, larc_values = apply_larc(grads, self.variables, lr, **self.larc_params)
    extras = step_summaries.step_tensors(self.summary_names, summarised, larc_values)

    def update():
      self.updated.apply(self.optimizer, grads)
      self.units_seen.assign_add(units)
      return tf.constant(0, tf.int64)

    def skip():
      self.skipped_steps.assign_add(1)
      return tf.constant(1, tf.int64)

    skipped = tf.cond(finite, update, skip) if self._guard_overflow else update()
    values.update(loss=loss, learning_rate=lr, loss_scale=scale, units=units, skipped=skipped)
    if extras:
      values["summaries"] = extras
    return values

  def _regularizers(self) -> list[tuple[list, Any, dict]]:
    """``(variables, regularizer, params)`` per component: its own ``regularizer`` if its
    params set one (OpenSeq2Seq's per-encoder/decoder regularizer), else the top-level one."""
    trainable = {id(v) for v in self.variables}
    groups = []
    for layer in self.model.layers:
      own = getattr(layer, "params", None) or {}
      regularizer, params = own.get("regularizer"), own.get("regularizer_params")
      if regularizer is None:
        regularizer, params = self.params["regularizer"], self.params["regularizer_params"]
      variables = [v for v in layer.trainable_variables if id(v) in trainable]
      if regularizer is not None and variables:
        groups.append((variables, regularizer, params))
    return groups

  @property
  def _regularized(self) -> bool:
    """Whether the loss has any weight penalty: a regularizer (top-level or a component's)
    or weight regularizers a component attached itself (Keras layer losses)."""
    return bool(self._regularizers()) or any(layer.losses for layer in self.model.layers)

  def _add_regularization(self, grads: list) -> tuple[list, tf.Tensor]:
    """Adds the regularizers' penalties and the components' own weight penalties (e.g.
    ``norm_params/regularizer`` on batch-norm scales) to the loss and gradients."""
    with tf.GradientTape() as tape:
      reg = tf.constant(0.0, tf.float32)
      for variables, regularizer, params in self._regularizers():
        reg += regularization_loss(variables, regularizer, params)
      for layer in self.model.layers:
        for penalty in layer.losses:
          reg += tf.cast(penalty, tf.float32)
    reg_grads = tape.gradient(reg, self.variables)
    grads = [g + tf.cast(tf.convert_to_tensor(r), tf.float32) if r is not None else g
             for g, r in zip(grads, reg_grads)]
    return grads, reg

  def function(self) -> Callable:
    """``(iterator, stop_vote=None) -> dict of step values``: one update over ``iter_size``
    batches; ``"stop_votes"`` is the sum of every replica's ``stop_vote`` (float32 scalar).

    With per-variable summaries in the config, the dict also holds ``"summaries"``: a
    :class:`~open_seq2seq.training.step_summaries.VariableSummaries` (tensors, not numbers:
    the Reporter reads them only at summary steps).
    """
    iter_size = self.params["iter_size"]

    # autograph off: the step has no tensor-dependent Python control flow (components use
    # tf.while_loop / tf.cond themselves), and conversion only costs tracing time.
    # XLA compiles each replica's forward and backward pass; reading the iterator and the
    # cross-replica sum stay outside (XLA has no iterator or collective-launch ops).
    replica_step = self.replica_step
    if self.params["use_xla_jit"]:
      replica_step = tf.function(self.replica_step, jit_compile=True, autograph=False)

    def replica_step_voting(batches, vote):
      grads, *rest = replica_step(batches)
      return ([tf.cast(g, self.allreduce_dtype) for g in grads], *rest, tf.identity(vote))

    @tf.function(autograph=False)
    def train_step(iterator, stop_vote=None):
      # stop_vote: 1.0 when this process was asked to stop (training/stopping.py); summed
      # over every replica in the gradients' all-reduce, so all workers see the same total.
      vote = tf.zeros([], tf.float32) if stop_vote is None else stop_vote
      batches = tuple(next(iterator) for _ in range(iter_size))
      per_replica = self.backend.run(replica_step_voting, args=(batches, vote))
      grads, loss_sum, weight, units, votes = self.backend.reduce_sum(per_replica)
      grads = [tf.cast(g, tf.float32) for g in grads]
      values = self.apply(grads, loss_sum, weight, units)
      values["stop_votes"] = votes
      return values

    if not set(step_summaries.PER_VARIABLE) & set(self.summary_names):
      return train_step
    paths = [variable_path(v) for v in self.variables]

    def train_step_with_summaries(iterator, stop_vote=None):
      values = train_step(iterator, stop_vote)
      values["summaries"] = step_summaries.VariableSummaries(
          self.summary_names, self.variables, paths, values.pop("summaries", {}))
      return values

    return train_step_with_summaries
