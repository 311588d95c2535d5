"""An exponential moving average of the trained weights (the run key ``moving_average_decay``,
named as in OpenNMT-tf).

Training keeps a float32 *shadow* of every variable the run trains (every update group's;
frozen variables and non-trainable state such as batch-norm statistics have none). After
each update of the run — the last update group's, the one that advances the global step
``t`` (read after the update: 1 for the run's first) — every shadow moves towards its
variable::

    d_t    = min(decay, (1 + t) / (10 + t))
    shadow = d_t * shadow + (1 - d_t) * weight

the warm-up rule of ``tf.train.ExponentialMovingAverage`` with ``num_updates``, which
OpenNMT-tf applies with its optimizer's update counter after each step. As OpenNMT-tf's, the
shadows start from the weights after the first update (there they are created then; here
``started`` says whether they hold an average yet), so data-dependent initialization and
``load_model`` need no extra step. A step whose update was skipped (non-finite gradients
under loss scaling) does not advance ``t`` and leaves the shadows as they are.

The update runs inside the traced training step, in cross-replica context right after the
last group's update: with towers and TF multi-worker the shadows are mirrored variables
updated once per step from the synchronised weights, and under Horovod each process updates
its own copy from the same all-reduced weights, so every replica holds the same averages.

Checkpoints hold the shadows under ``moving_average/shadows/<name>``, beside the weights'
``model/weights/<name>`` (the same name), and ``moving_average/started``: a resumed run goes
on exactly. Evaluation (train_eval's evals, ``--mode=eval``), inference, interactive
inference and ``--mode=export`` use the averages: in training the shadows are swapped into
the model for the eval pass and the weights put back after (:meth:`MovingAverage.swapped_in`);
eval/infer/export load them from the checkpoint into the model (:func:`load_averages`).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping

import tensorflow as tf

from open_seq2seq.training.model_variables import named_variables
from open_seq2seq.training.reporting import log
from open_seq2seq.training.restoring import variable_keys

#: The name of the averages' object in a checkpoint (keys ``moving_average/...``).
CHECKPOINT_NAME = "moving_average"
#: Whether the checkpoint's shadows hold an average (they do after the run's first update).
STARTED_KEY = f"{CHECKPOINT_NAME}/started/.ATTRIBUTES/VARIABLE_VALUE"


def decay_at(decay: float, step: int) -> float:
  """The decay of the update that made global step ``step`` (OpenNMT-tf's warm-up rule)."""
  return min(decay, (1.0 + step) / (10.0 + step))


class MovingAverage:
  """Float32 shadows of the trained variables and their update.

  Args:
    decay: the run's ``moving_average_decay`` (0 < decay < 1).
  """

  def __init__(self, decay: float):
    self.decay = float(decay)
    self.names: list[str] = []
    self.variables: list = []
    self.shadows: list[tf.Variable] = []
    self.started: tf.Variable | None = None

  def build(self, named: Mapping[str, Any], trained: list) -> None:
    """Creates a shadow of each variable of ``trained`` (under its name in ``named``, the
    model's :func:`~open_seq2seq.training.model_variables.named_variables`). Call under the
    strategy's scope, in the same order on every process."""
    chosen = {id(v) for v in trained}
    for name, variable in named.items():
      if id(variable) not in chosen:
        continue
      self.names.append(name)
      self.variables.append(variable)
      self.shadows.append(tf.Variable(tf.cast(variable, tf.float32), trainable=False,
                                      name="moving_average"))
    self.started = tf.Variable(False, trainable=False, name="moving_average_started")

  def checkpoint_object(self) -> tf.Module:
    """The shadows (by the names of their variables) and ``started``, for checkpoints."""
    module = tf.Module()
    module.shadows = dict(zip(self.names, self.shadows))
    module.started = self.started
    return module

  def describe(self) -> str:
    return (f"moving averages of {len(self.shadows)} trained variables "
            f"(moving_average_decay {self.decay:g}): evaluations use them")

  def update(self, step: Any, skipped: Any) -> None:
    """Moves the shadows towards the weights (inside the traced step, cross-replica
    context, after the last group's update).

    Args:
      step: the global step after the update (an integer tensor or variable).
      skipped: bool scalar, the update was skipped: nothing changes.
    """
    t = tf.cast(step, tf.float32)
    decay = tf.minimum(tf.constant(self.decay, tf.float32), (1.0 + t) / (10.0 + t))
    # the run's first update: the shadows take the weights themselves
    decay = tf.where(self.started, decay, tf.zeros_like(decay))
    for variable, shadow in zip(self.variables, self.shadows):
      moved = decay * shadow + (1.0 - decay) * tf.cast(variable, tf.float32)
      shadow.assign(tf.where(skipped, tf.convert_to_tensor(shadow), moved))
    self.started.assign(tf.logical_or(self.started, tf.logical_not(skipped)))

  @contextlib.contextmanager
  def swapped_in(self) -> Iterator[None]:
    """The model's trained variables hold the averages within the block, their own values
    again after it (also when it raises). Nothing changes before the first update."""
    if not self.shadows or not bool(self.started.numpy()):
      yield
      return
    weights = [tf.identity(v) for v in self.variables]
    try:
      for variable, shadow in zip(self.variables, self.shadows):
        variable.assign(tf.cast(shadow, variable.dtype))
      yield
    finally:
      for variable, value in zip(self.variables, weights):
        variable.assign(value)


def has_averages(path: str) -> bool:
  """Whether checkpoint ``path`` holds moving averages of its weights (after an update)."""
  reader = tf.train.load_checkpoint(path)
  return reader.has_tensor(STARTED_KEY) and bool(reader.get_tensor(STARTED_KEY))


def load_averages(model: Any, path: str) -> int | None:
  """Assigns the moving averages saved in checkpoint ``path`` to the model's variables
  (cast to their dtype); returns how many, or None when ``path`` holds none (the run was
  trained without ``moving_average_decay``, or saved before its first update). Variables
  without a shadow (frozen, non-trainable) keep the values restored before."""
  if not has_averages(path):
    return None
  module = tf.Module()
  module.shadows = named_variables(model.named_layers)
  reader = tf.train.load_checkpoint(path)
  shapes = reader.get_variable_to_shape_map()
  loaded = 0
  for key, variable in variable_keys(tf.train.Checkpoint(**{CHECKPOINT_NAME: module})).items():
    if key in shapes and list(shapes[key]) == list(variable.shape):
      variable.assign(tf.cast(reader.get_tensor(key), variable.dtype))
      loaded += 1
  return loaded


def announce_resume(averages: MovingAverage | None, path: str) -> None:
  """The notice of a resume from ``path`` whose moving averages do not go on: the run keeps
  none now, or the checkpoint holds none (they start from the next update's weights)."""
  held = has_averages(path)
  if averages is None and held:
    log(f"notice: {path} holds moving averages of the weights, but moving_average_decay is "
        f"not set: this run keeps none (its checkpoints will not hold them)")
  elif averages is not None and not held:
    log(f"notice: moving_average_decay: {path} holds no moving averages of the weights (it "
        f"was trained without them): they start from the weights of the next update")


__all__ = ["CHECKPOINT_NAME", "MovingAverage", "STARTED_KEY", "announce_resume", "decay_at",
           "has_averages", "load_averages"]
