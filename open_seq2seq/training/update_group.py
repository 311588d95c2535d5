"""One optimizer's share of a training step: its loss, its variables and its update.

A model is trained by one or more *update groups* (:class:`open_seq2seq.models.model.
UpdateGroup`): the usual model has one, over every variable; an adversarial model declares
a discriminator group and a generator group, updated one after the other within each step
(the generator's loss then sees the discriminator as just updated). Each group has its own
optimizer, learning-rate policy, loss scaler, gradient clipping and LARC, taken from the
run's top-level keys unless the run's ``optimizers/<group>`` dict overrides them
(:data:`GROUP_KEYS`). What is shared: the batches of the step, ``iter_size``, the
regularizers, ``freeze_variables_regex`` and the backend.

:class:`GroupUpdate` holds a group's optimizer and scaler and runs its two halves of a step
(the replica half, gradients of the group's summed loss over the micro-batches; the
cross-replica half, normalise, check, regularise, clip, LARC, update), which
:class:`~open_seq2seq.training.train_step.TrainStep` calls for each group in order.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.optimizer_groups import GROUP_KEYS
from open_seq2seq.optimizers import (LRPolicySchedule, apply_larc, complete_lr_policy_params,
                                     get_optimizer, regularization_loss)
from open_seq2seq.training import step_summaries
from open_seq2seq.training.float32_update import Float32Update
from open_seq2seq.training.loss_scaling import make_loss_scaler



def group_settings(run: Mapping[str, Any], name: str) -> dict[str, Any]:
  """The settings of group ``name``: the top-level ones with ``optimizers/<name>``'s on top."""
  own = (run.get("optimizers") or {}).get(name) or {}
  return {key: own[key] if key in own else run[key] for key in GROUP_KEYS}


def check_group_names(run: Mapping[str, Any], names: list[str]) -> None:
  """``optimizers`` may only name the model's groups (a model of one group takes none)."""
  for name in run.get("optimizers") or {}:
    if name not in names or len(names) == 1:
      raise ConfigError(f"optimizers/{name}: this model updates " + (
          f"its groups {', '.join(repr(n) for n in names)}" if len(names) > 1 else
          "all its variables with one optimizer (the top-level keys)") +
          "; remove the key or name one of them")


def learning_rate(settings: Mapping[str, Any], num_epochs: int | None, last_step: int | None,
                  steps_per_epoch: int | None) -> Any:
  """The optimizer's learning rate: the lr policy as a schedule of the update counter."""
  if settings["lr_policy"] is None:
    return None  # get_optimizer takes optimizer_params["learning_rate"] or its default
  policy_params = complete_lr_policy_params(
      settings["lr_policy"], settings["lr_policy_params"], last_step,
      steps_per_epoch if num_epochs is not None else None)
  return LRPolicySchedule(settings["lr_policy"], policy_params)


def dense_gradients(variables: list, grads: list) -> list:
  """float32 dense gradients, each with its variable's static shape (zeros for None).

  Dense: embedding IndexedSlices would make all-reduce buffers grow. Static shapes: under
  MultiWorkerMirroredStrategy the Transformer's kernel gradients come out as (None, units),
  and one gradient of unknown shape makes TensorFlow's collectives all-reduce every gradient
  in one pack (``group_by_size``), which the CPU ring moves 2-3x slower than 4 MB packs."""
  return [tf.ensure_shape(tf.cast(tf.convert_to_tensor(g), tf.float32), v.shape)
          if g is not None else tf.zeros(v.shape, tf.float32) for v, g in zip(variables, grads)]


class GroupUpdate:
  """A group's optimizer, loss scaler and variables, and its halves of a training step.

  Create under the strategy's scope.

  Args:
    name: the group's name (checkpoint and summary names of the groups after the first).
    loss: ``(batch, training) -> (loss_sum, weight, outputs)``, float32 terms.
    settings: the group's :func:`group_settings`.
    num_epochs, max_steps, steps_per_epoch: the run's length, for the lr policy.
    float16_compute: some layer computes in float16 (overflow is then guarded).
  """

  def __init__(self, name: str, loss: Callable, settings: Mapping[str, Any],
               num_epochs: int | None, max_steps: int | None, steps_per_epoch: int | None,
               float16_compute: bool):
    self.name = name
    self.loss = loss
    self.settings = settings
    self.loss_scaler = make_loss_scaler(settings["loss_scaling"],
                                        settings["loss_scaling_params"])
    self.float16_compute = float16_compute
    self.guard_overflow = self.loss_scaler is not None or float16_compute
    self.optimizer = get_optimizer(settings["optimizer"], settings["optimizer_params"],
                                   learning_rate(settings, num_epochs, max_steps,
                                                 steps_per_epoch))
    self.skipped_steps = tf.Variable(0, dtype=tf.int64, trainable=False,
                                     name=f"skipped_steps_{name}")
    self.variables: list = []
    self.updated: Float32Update | None = None
    self.penalties: Callable[[], tf.Tensor] | None = None

  def build(self, variables: list, penalties: Callable[[], tf.Tensor] | None) -> None:
    """Sets the variables this group updates and creates the optimizer's state for them.

    Args:
      penalties: ``() -> float32 scalar``, the weight penalties on these variables (None:
        none), added to the loss and differentiated with the group's gradients.
    """
    self.variables = variables
    self.penalties = penalties
    self.updated = Float32Update(variables)
    self.optimizer.build(self.updated.targets)

  # ------------------------------------------------------------------ per replica
  def replica_gradients(self, batches: tuple, count_units: Callable | None) -> tuple:
    """Gradients of the summed (scaled) loss over this replica's micro-batches, the loss
    and weight sums, and the units counted (0 without ``count_units``)."""
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
          batch_loss, batch_weight, _ = self.loss(batch, training=True)
          scaled, unscale = self._scaled_loss(batch_loss, batch_weight)
        batch_grads = tape.gradient(scaled, variables)
      batch_grads = dense_gradients(variables, batch_grads)
      if unscale is not None:
        batch_grads = [g * unscale for g in batch_grads]
      grads = batch_grads if grads is None else [a + g for a, g in zip(grads, batch_grads)]
      loss_sum += batch_loss
      weight += batch_weight
      if count_units is not None:
        units += tf.cast(count_units(batch), tf.int64)
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
  def apply(self, grads: list, loss_sum, weight, summary_names: list[str]) -> dict:
    """Cross-replica half: normalise, check, regularise, clip, LARC, update (or skip)."""
    settings = self.settings
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
    if self.penalties is not None:
      with tf.GradientTape() as tape:
        penalty = self.penalties()
      penalty_grads = tape.gradient(penalty, self.variables)
      grads = [g + tf.cast(tf.convert_to_tensor(r), tf.float32) if r is not None else g
               for g, r in zip(grads, penalty_grads)]
      loss += penalty
    grad_norm = tf.linalg.global_norm(grads)
    values = {"global_gradient_norm": grad_norm}
    if settings["max_grad_norm"] is not None:
      grads, _ = tf.clip_by_global_norm(grads, settings["max_grad_norm"], use_norm=grad_norm)
      if "global_gradient_norm" in summary_names:
        values["global_clipped_gradient_norm"] = tf.linalg.global_norm(grads)
    summarised, larc_values = grads, None  # gradient summaries show them before LARC
    if settings["larc_params"] is not None:
      grads, larc_values = apply_larc(grads, self.variables, lr, **settings["larc_params"])
    extras = step_summaries.step_tensors(summary_names, summarised, larc_values)

    def update():
      self.updated.apply(self.optimizer, grads)
      return tf.constant(0, tf.int64)

    def skip():
      self.skipped_steps.assign_add(1)
      return tf.constant(1, tf.int64)

    skipped = tf.cond(finite, update, skip) if self.guard_overflow else update()
    values.update(loss=loss, learning_rate=lr, loss_scale=scale, skipped=skipped)
    if extras:
      values["summaries"] = extras
    return values


def weight_penalties(layers: list, variables: list, run: Mapping[str, Any]
                     ) -> Callable[[], tf.Tensor] | None:
  """``() -> float32 sum`` of the weight penalties on ``variables``: each layer's own
  ``regularizer`` if its params set one (OpenSeq2Seq's per-encoder/decoder regularizer),
  else the run's, and the layers' own Keras weight penalties (``layer.losses``, e.g.
  ``norm_params/regularizer`` on batch-norm scales). None when there are none."""
  chosen = {id(v) for v in variables}
  groups = []
  for layer in layers:
    own = getattr(layer, "params", None) or {}
    regularizer, params = own.get("regularizer"), own.get("regularizer_params")
    if regularizer is None:
      regularizer, params = run["regularizer"], run["regularizer_params"]
    mine = [v for v in layer.trainable_variables if id(v) in chosen]
    if regularizer is not None and mine:
      groups.append((mine, regularizer, params))
  keras_penalties = [layer for layer in layers if layer.losses]
  if not groups and not keras_penalties:
    return None

  def total() -> tf.Tensor:
    reg = tf.constant(0.0, tf.float32)
    for mine, regularizer, params in groups:
      reg += regularization_loss(mine, regularizer, params)
    for layer in keras_penalties:
      for penalty in layer.losses:
        reg += tf.cast(penalty, tf.float32)
    return reg

  return total


__all__ = ["GROUP_KEYS", "GroupUpdate", "check_group_names", "group_settings",
           "learning_rate", "weight_penalties"]
