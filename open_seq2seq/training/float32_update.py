"""Optimizer updates of float16 variables computed in float32.

A pure ``"float16"`` run keeps its weights in float16, and a Keras optimizer would keep its
state and compute its update in the variable's dtype: Adam's ``epsilon`` of 1e-9 (the toy
configs', and OpenSeq2Seq's) is 0 in float16, and a second moment that underflows makes the
first update 0/0. Here the optimizer works on float32 copies of the float16 variables
instead: before each update a copy takes its variable's value, the optimizer updates the
copy with float32 state, and the variable takes the rounded result. The copies hold nothing
between steps (so checkpoints need not save them); the optimizer's state is float32.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf


class Float32Update:
  """The variables an optimizer updates: ``variables`` themselves, or float32 copies of
  those that are float16.

  Create under the strategy's scope, before ``optimizer.build(self.targets)``.
  """

  def __init__(self, variables: list):
    self.pairs: list[tuple[Any, Any]] = []
    self.targets: list = []
    for variable in variables:
      if tf.as_dtype(variable.dtype) != tf.float16:
        self.targets.append(variable)
        continue
      copy = keras.Variable(tf.cast(variable, tf.float32), dtype="float32", trainable=False,
                            name=variable.name.split(":")[0].split("/")[-1] + "_float32")
      self.pairs.append((variable, copy))
      self.targets.append(copy)

  def apply(self, optimizer: keras.optimizers.Optimizer, grads: list) -> None:
    """``optimizer.apply_gradients`` of float32 ``grads`` (cross-replica context)."""
    for variable, copy in self.pairs:
      copy.assign(tf.cast(variable, tf.float32))
    optimizer.apply_gradients(zip(grads, self.targets))
    for variable, copy in self.pairs:
      variable.assign(tf.cast(copy, variable.dtype))


__all__ = ["Float32Update"]
