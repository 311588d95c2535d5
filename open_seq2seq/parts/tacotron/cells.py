"""The LSTM cell of Tacotron 2's encoder and decoder, with zoneout (Krueger et al., 2016).

Zoneout keeps each unit of the cell and hidden states at its previous value with probability
``zoneout_prob`` during training (a per-unit Bernoulli mask, drawn every step), and at
inference uses the expectation: ``p * previous + (1 - p) * new``. Tacotron 2 regularizes its
LSTMs this way (p = 0.1). With ``zoneout_prob`` 0 the cell is a plain LSTM cell.

The cell follows Keras's RNN-cell protocol (``state_size``, ``output_size``,
``call(inputs, states, training)``), so ``keras.layers.RNN`` runs it over a sequence (the
encoder) and the decoder calls it one step at a time.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.errors import ConfigError


@keras.saving.register_keras_serializable("open_seq2seq")
class ZoneoutLSTMCell(keras.layers.Layer):
  """An LSTM cell with zoneout on its cell and hidden states.

  Args:
    units: state size.
    zoneout_prob: probability of keeping a unit's previous value (training).
    kernel_initializer: initializer of the input and recurrent kernels.
    seed: seed of the zoneout masks (None: unseeded).
  """

  def __init__(self, units: int, zoneout_prob: float = 0.0, kernel_initializer: Any = None,
               seed: int | None = None, **kwargs: Any):
    super().__init__(**kwargs)
    if not 0.0 <= zoneout_prob < 1.0:
      raise ConfigError(f"zoneout_prob must be in [0, 1), got {zoneout_prob}")
    self.units = units
    self.zoneout_prob = zoneout_prob
    self.cell = keras.layers.LSTMCell(
        units, kernel_initializer=kernel_initializer or "glorot_uniform",
        dtype=self.dtype_policy, name="lstm_cell")
    self.seed = seed

  def get_config(self) -> dict:
    """Keras copies the cell through its config (``Bidirectional`` makes the backward layer
    that way)."""
    return dict(super().get_config(), units=self.units, zoneout_prob=self.zoneout_prob,
                seed=self.seed,
                kernel_initializer=keras.initializers.serialize(self.cell.kernel_initializer))

  @classmethod
  def from_config(cls, config: dict) -> "ZoneoutLSTMCell":
    config = dict(config)
    config["kernel_initializer"] = keras.initializers.deserialize(config["kernel_initializer"])
    return cls(**config)

  @property
  def state_size(self) -> list[int]:
    return [self.units, self.units]

  @property
  def output_size(self) -> int:
    return self.units

  def build(self, input_shape: Any) -> None:
    self.cell.build(input_shape)
    self.built = True

  def get_initial_state(self, batch_size: Any = None) -> list[tf.Tensor]:
    return [tf.zeros([batch_size, self.units], self.compute_dtype) for _ in range(2)]

  def _zoneout(self, previous: tf.Tensor, new: tf.Tensor, training: bool | None) -> tf.Tensor:
    p = self.zoneout_prob
    if p == 0.0:
      return new
    if training:
      keep = tf.cast(tf.random.uniform(tf.shape(new), seed=self.seed) < p, new.dtype)
      return keep * previous + (1.0 - keep) * new
    return p * previous + (1.0 - p) * new

  def call(self, inputs: tf.Tensor, states: Any, training: bool | None = None
           ) -> tuple[tf.Tensor, list[tf.Tensor]]:
    h_prev, c_prev = states[0], states[1]
    _, (h_new, c_new) = self.cell(inputs, [h_prev, c_prev], training=training)
    h = self._zoneout(h_prev, h_new, training)
    c = self._zoneout(c_prev, c_new, training)
    return h, [h, c]
