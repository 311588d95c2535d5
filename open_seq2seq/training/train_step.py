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

A model may train with several optimizers (:meth:`Model.update_groups`, e.g. a GAN's
discriminator then generator): each group runs the above with its own loss, variables,
optimizer, loss scaler and clipping (:mod:`open_seq2seq.training.update_group`), one after
the other on the same batches, and the last group's counter is the global step.

With ``moving_average_decay`` the step then updates the moving averages of the trained
weights (:mod:`open_seq2seq.training.moving_average`), once, after the last group's update.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import tensorflow as tf

from open_seq2seq.distributed.backend import Backend
from open_seq2seq.models.model import Model
from open_seq2seq.optimizers import freeze_filter, variable_path
from open_seq2seq.training import step_summaries
from open_seq2seq.training.model_variables import named_variables
from open_seq2seq.training.moving_average import CHECKPOINT_NAME, MovingAverage
from open_seq2seq.training.reporting import log
from open_seq2seq.training.run_params import run_settings
from open_seq2seq.training import update_group
from open_seq2seq.training.update_group import (GroupUpdate, check_group_names, group_settings,
                                                weight_penalties)
from open_seq2seq.utils import precision


def learning_rate(params: Mapping[str, Any], last_step: int | None,
                  steps_per_epoch: int | None) -> Any:
  """The learning rate of a run's top-level optimizer settings (see
  :func:`open_seq2seq.training.update_group.learning_rate`)."""
  return update_group.learning_rate(params, params["num_epochs"], last_step, steps_per_epoch)


class TrainStep:
  """The model's update groups (optimizers, loss scalers, variables) and the step function.

  Args:
    model: the model whose losses are minimised (:meth:`Model.update_groups`).
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
    self.specs = model.update_groups()
    check_group_names(params, [spec.name for spec in self.specs])
    # float16 compute (a component may override the model's dtype) can overflow even without
    # a scaler: such steps are skipped rather than written into the weights.
    self.float16_compute = any(layer.compute_dtype == "float16" for layer in model.layers)
    self.summary_names = list(params.get("summaries") or [])
    # Gradients cross replicas in this dtype (one replica: no all-reduce, nothing to round).
    self.allreduce_dtype = (tf.as_dtype(params["allreduce_dtype"]) if backend.num_replicas > 1
                            else tf.float32)
    with backend.strategy.scope():
      self.groups = [GroupUpdate(spec.name, spec.loss, group_settings(params, spec.name),
                                 params["num_epochs"], max_steps, steps_per_epoch,
                                 self.float16_compute) for spec in self.specs]
      self.units_seen = tf.Variable(0, dtype=tf.int64, trainable=False, name="tokens_seen")
    #: the moving averages of the trained weights (None: moving_average_decay is not set)
    self.moving_average = MovingAverage(params["moving_average_decay"]) \
        if params["moving_average_decay"] is not None else None

  @property
  def main(self) -> GroupUpdate:
    """The last group: its update counter is the global step, its loss the run's loss."""
    return self.groups[-1]

  @property
  def optimizer(self):
    return self.main.optimizer

  @property
  def loss_scaler(self):
    return self.main.loss_scaler

  @property
  def skipped_steps(self) -> tf.Variable:
    return self.main.skipped_steps

  @property
  def variables(self) -> list:
    """Every trained variable, group by group."""
    return [v for group in self.groups for v in group.variables]

  def describe_precision(self) -> str:
    """One line: the dtype policy and the loss scaling of this run (of each group)."""
    def scaling(group):
      return group.loss_scaler.describe() if group.loss_scaler is not None \
          else "no loss scaling"
    if len(self.groups) == 1:
      return precision.describe(self.model.params["dtype"]) + "; " + scaling(self.main)
    return precision.describe(self.model.params["dtype"]) + "; " + ", ".join(
        f"{group.name}: {scaling(group)}" for group in self.groups)

  @property
  def global_step(self) -> int:
    return int(self.main.optimizer.iterations.numpy())

  def state(self) -> dict[str, Any]:
    """Trackables of the training state besides the model (for checkpoints): each group's
    optimizer state, skip counter and loss scaler (the last group's under the names of a
    one-group run, the others' suffixed with the group's name)."""
    objects: dict[str, Any] = {"tokens_seen": self.units_seen}
    for group in self.groups:
      suffix = "" if group is self.main else f"_{group.name}"
      # The optimizer's state (update counter, slots) is saved on its own: the optimizer
      # also references the model's variables, and saving it whole would name the weights
      # "optimizer/_trainable_variables/<i>" instead of by their place in the model.
      optimizer_state = tf.Module()
      optimizer_state.state = list(group.optimizer.variables)
      objects["optimizer" + suffix] = optimizer_state
      objects["skipped_steps" + suffix] = group.skipped_steps
      if group.loss_scaler is not None:
        objects["loss_scaler" + suffix] = group.loss_scaler
    if self.moving_average is not None:
      objects[CHECKPOINT_NAME] = self.moving_average.checkpoint_object()
    return objects

  def build(self, batch: dict, is_chief: bool) -> None:
    """Creates the model's and the optimizers' variables and makes them equal everywhere."""
    named = self.model.named_layers
    claimed = {name for spec in self.specs for name in spec.layers or ()}
    with self.backend.strategy.scope():
      self.model.create_variables(batch)
      for spec, group in zip(self.specs, self.groups):
        names = spec.layers if spec.layers is not None else [
            name for name in named if name not in claimed]
        layers = [named[name] for name in names]
        variables = self._select_trainable(
            [v for layer in layers for v in layer.trainable_variables], is_chief, spec.name)
        group.build(variables, weight_penalties(layers, variables, self.params))
      if self.moving_average is not None:
        self.moving_average.build(named_variables(named), self.variables)
    self.model.training_step = self.main.optimizer.iterations
    self.backend.broadcast_variables(self.model.variables + [
        v for group in self.groups for v in group.optimizer.variables])
    if is_chief and self.moving_average is not None:
      log(f"Keeping {self.moving_average.describe()}")
    if is_chief and "larc_summaries" in self.summary_names and all(
        group.settings["larc_params"] is None for group in self.groups):
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

  def _select_trainable(self, variables: list, is_chief: bool, group: str) -> list:
    regex = self.params["freeze_variables_regex"]
    if regex:
      kept = freeze_filter(variables, regex)
      if is_chief:
        where = "" if len(self.groups) == 1 else f" of {group}"
        log(f"Freezing {len(variables) - len(kept)} variables{where} matching {regex!r}")
      variables = kept
    return variables

  def function(self) -> Callable:
    """``(iterator, stop_vote=None) -> dict of step values``: one update of each group, in
    order, over the same ``iter_size`` batches; ``"stop_votes"`` is the sum of every
    replica's ``stop_vote`` (float32 scalar). The values are the last group's (``loss``,
    ``learning_rate``, ``skipped`` ...), with ``loss/<group>``, ``learning_rate/<group>``
    and ``skipped/<group>`` of the groups before it.

    With per-variable summaries in the config, the dict also holds ``"summaries"``: a
    :class:`~open_seq2seq.training.step_summaries.VariableSummaries` of the last group's
    variables (tensors, not numbers: the Reporter reads them only at summary steps).
    """
    iter_size = self.params["iter_size"]
    main = self.main

    def replica_half(group: GroupUpdate) -> Callable:
      count = self.count_units if group is main else None

      def gradients(batches):
        return group.replica_gradients(batches, count)

      # XLA compiles each replica's forward and backward pass; reading the iterator and the
      # cross-replica sum stay outside (XLA has no iterator or collective-launch ops).
      if self.params["use_xla_jit"]:
        gradients = tf.function(gradients, jit_compile=True, autograph=False)

      def voting(batches, vote):
        grads, *rest = gradients(batches)
        return ([tf.cast(g, self.allreduce_dtype) for g in grads], *rest, tf.identity(vote))

      return voting

    halves = [replica_half(group) for group in self.groups]

    # autograph off: the step has no tensor-dependent Python control flow (components use
    # tf.while_loop / tf.cond themselves), and conversion only costs tracing time. Each
    # group's update is ordered before the next group's forward pass by the automatic
    # control dependencies of tf.function (they read and write the same resources).
    @tf.function(autograph=False)
    def train_step(iterator, stop_vote=None):
      # stop_vote: 1.0 when this process was asked to stop (training/stopping.py); summed
      # over every replica in the gradients' all-reduce, so all workers see the same total.
      vote = tf.zeros([], tf.float32) if stop_vote is None else stop_vote
      batches = tuple(next(iterator) for _ in range(iter_size))
      values: dict = {}
      barrier: list = []
      for group, half in zip(self.groups, halves):
        with tf.control_dependencies(barrier):
          per_replica = self.backend.run(half, args=(batches, vote))
        grads, loss_sum, weight, units, votes = self.backend.reduce_sum(per_replica)
        grads = [tf.cast(g, tf.float32) for g in grads]
        names = self.summary_names if group is main else []
        group_values = group.apply(grads, loss_sum, weight, names)
        # the next group's forward pass reads what this update wrote
        with tf.control_dependencies([group_values["skipped"]]):
          barrier = [tf.identity(v) for v in group.variables]
        if group is not main:
          for key in ("loss", "learning_rate", "skipped"):
            values[f"{key}/{group.name}"] = group_values[key]
          continue
        values.update(group_values)
        skipped = tf.cast(group_values["skipped"], tf.bool)
        values.update(units=units, stop_votes=votes)
        if self.moving_average is not None:  # once per step, from the synchronised weights
          with tf.control_dependencies([group_values["skipped"]]):
            self.moving_average.update(group.optimizer.iterations, skipped)
      # throughput counts the steps that updated the model
      self.units_seen.assign_add(tf.where(skipped, tf.zeros_like(units), units))
      return values

    if not set(step_summaries.PER_VARIABLE) & set(self.summary_names):
      return train_step
    paths = [variable_path(v) for v in main.variables]

    def train_step_with_summaries(iterator, stop_vote=None):
      values = train_step(iterator, stop_vote)
      values["summaries"] = step_summaries.VariableSummaries(
          self.summary_names, main.variables, paths, values.pop("summaries", {}))
      return values

    return train_step_with_summaries
