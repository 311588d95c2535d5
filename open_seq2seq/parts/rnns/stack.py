"""A stack of recurrent layers with OpenSeq2Seq's dropout wrappers, residual connections and
an optional state carried from one call to the next (truncated back-propagation through
time).

OpenSeq2Seq wrapped each cell in ``DropoutWrapper(input_keep_prob, output_keep_prob,
variational_recurrent)`` and, with ``residual_connections``, in ``ResidualWrapper``; here each
layer is a Keras recurrent layer (``keras.layers.RNN(cell)`` or a fused ``keras.layers.LSTM``)
and the wrappers are dropout and addition around it. The same layers also run one time step
at a time (:meth:`RecurrentStack.step`) for generation, with the weights they were trained
with.

**Carried state.** With ``carry_state``, every training call starts from the final state of
the previous training call (per replica: each data-parallel replica reads its own part of the
stream) and gradients stop at that boundary. The state is not a weight: checkpoints do not
hold it, so a resumed run restarts its streams from zeros, as does a batch whose number of
rows differs from the previous one. Calls with ``training=False`` (eval, inference) neither
read nor change it.
"""

from __future__ import annotations

from typing import Any, Sequence

import keras
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.utils import keras_compat


def state_sizes(layer: keras.layers.Layer) -> list[int]:
  """Sizes of a recurrent layer's state tensors (LSTM: [h, c]; GRU: [h])."""
  size = layer.cell.state_size
  return list(size) if isinstance(size, (list, tuple)) else [size]


def _output_size(layer: keras.layers.Layer) -> int:
  size = layer.cell.output_size if hasattr(layer.cell, "output_size") else None
  return int(size if size is not None else state_sizes(layer)[0])


class RecurrentStack(keras.layers.Layer):
  """``layers`` applied in order, each with dropout on its input and output.

  Args:
    layers: Keras recurrent layers built with ``return_sequences=True, return_state=True``.
    input_keep_probs, output_keep_probs: keep probability of the dropout on each layer's
      input and output (1.0: none); active only in training.
    residual: add each layer's input to its output (sizes must match, as OpenSeq2Seq's
      ResidualWrapper required).
    variational: one dropout mask per sequence instead of one per time step.
    carry_state: carry the final state of a training call into the next (see module doc).
    seed: seed of the dropout masks (None: unseeded).
  """

  def __init__(self, layers: Sequence[keras.layers.Layer], input_keep_probs: Sequence[float],
               output_keep_probs: Sequence[float], residual: bool = False,
               variational: bool = False, carry_state: bool = False, seed: int | None = None,
               **kwargs: Any):
    super().__init__(**kwargs)
    if not len(layers) == len(input_keep_probs) == len(output_keep_probs):
      raise ValueError("one input and one output keep probability per layer")
    self.rnn_layers = list(layers)
    self.residual = residual
    self.carry_state = carry_state
    self.variational = variational
    self.input_dropouts = [self._dropout(p, seed, i) for i, p in enumerate(input_keep_probs)]
    self.output_dropouts = [self._dropout(p, seed, 100 + i)
                            for i, p in enumerate(output_keep_probs)]
    keras_compat.set_untracked(self, "_carried", [])

  def _dropout(self, keep_prob: float, seed: int | None, offset: int
               ) -> keras.layers.Layer | None:
    if not 0.0 < keep_prob <= 1.0:
      raise ConfigError(f"keep probabilities must be in (0, 1], got {keep_prob}")
    if keep_prob == 1.0:
      return None
    return keras.layers.Dropout(1.0 - keep_prob, seed=None if seed is None else seed + offset,
                                noise_shape=(None, 1, None) if self.variational else None,
                                dtype=self.dtype_policy)

  @property
  def output_size(self) -> int:
    return _output_size(self.rnn_layers[-1])

  def build(self, input_shape: Any) -> None:
    size = int(input_shape[-1])
    for layer in self.rnn_layers:
      out = _output_size(layer)
      if self.residual and out != size:
        raise ConfigError(f"encoder_use_skip_connections: a residual connection needs equal "
                          f"input and output sizes, got {size} -> {out}")
      size = out
    if self.carry_state and not self._carried:
      # Not Keras weights (never checkpointed); per replica under a distribution strategy.
      carried = [[tf.Variable(tf.zeros([0, n]), shape=tf.TensorShape([None, n]),
                              trainable=False, name=f"carried_state_{i}_{j}",
                              synchronization=tf.VariableSynchronization.ON_READ,
                              aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                  for j, n in enumerate(state_sizes(layer))]
                 for i, layer in enumerate(self.rnn_layers)]
      keras_compat.set_untracked(self, "_carried", carried)
    super().build(input_shape)

  def _apply_dropout(self, dropout: keras.layers.Layer | None, x: tf.Tensor,
                     training: bool | None) -> tf.Tensor:
    if dropout is None or not training:
      return x
    return dropout(x, training=training)

  def _initial_states(self, index: int, batch: tf.Tensor, dtype: tf.DType
                      ) -> list[tf.Tensor]:
    """The carried state of layer ``index`` when its batch size matches, else zeros."""
    states = []
    for var in self._carried[index]:
      zeros = tf.zeros(tf.stack([batch, tf.shape(var)[1]]), dtype)
      value = var.read_value()
      states.append(tf.cond(tf.equal(tf.shape(value)[0], batch),
                            lambda v=value: tf.cast(v, dtype), lambda z=zeros: z))
    return states

  def call(self, inputs: tf.Tensor, step_mask: tf.Tensor | None = None,
           training: bool | None = None,
           initial_states: Sequence[Sequence[tf.Tensor]] | None = None
           ) -> tuple[tf.Tensor, list[list[tf.Tensor]]]:
    """Runs every layer over the whole sequence.

    Args:
      inputs: [batch, time, features].
      step_mask: bool [batch, time] of real steps (None: all real); a padded step leaves
        the state unchanged.
      training: dropout and state carrying act only when True.
      initial_states: per layer, its state tensors (None: carried state or zeros).

    Returns:
      (outputs of the last layer [batch, time, units], final states per layer).
    """
    carry = bool(training) and self.carry_state
    x = inputs
    finals = []
    for i, layer in enumerate(self.rnn_layers):
      layer_input = self._apply_dropout(self.input_dropouts[i], x, training)
      if initial_states is not None:
        init = list(initial_states[i])
      elif carry:
        init = self._initial_states(i, tf.shape(x)[0], layer.compute_dtype)
      else:
        init = None
      result = layer(layer_input, mask=step_mask, training=training, initial_state=init)
      outputs, states = result[0], list(result[1:])
      outputs = self._apply_dropout(self.output_dropouts[i], outputs, training)
      x = outputs + x if self.residual else outputs
      finals.append(states)
    if carry:
      for variables, states in zip(self._carried, finals):
        for var, state in zip(variables, states):
          var.assign(tf.cast(tf.stop_gradient(state), var.dtype))
    return x, finals

  def zero_states(self, batch: tf.Tensor) -> list[list[tf.Tensor]]:
    """Zero states of every layer for ``batch`` sequences (for :meth:`step`)."""
    return [[tf.zeros(tf.stack([batch, n]), layer.compute_dtype) for n in state_sizes(layer)]
            for layer in self.rnn_layers]

  def step(self, inputs: tf.Tensor, states: Sequence[Sequence[tf.Tensor]]
           ) -> tuple[tf.Tensor, list[list[tf.Tensor]]]:
    """One time step without dropout: inputs [batch, features] -> (output, new states)."""
    x = inputs
    new_states = []
    for layer, layer_states in zip(self.rnn_layers, states):
      output, next_states = layer.cell(tf.cast(x, layer.compute_dtype), list(layer_states),
                                       training=False)
      next_states = list(next_states) if isinstance(next_states, (list, tuple)) \
          else [next_states]
      x = output + x if self.residual else output
      new_states.append(next_states)
    return x, new_states


__all__ = ["RecurrentStack", "state_sizes"]
