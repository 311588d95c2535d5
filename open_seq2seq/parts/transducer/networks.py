"""The transducer's two small networks: the prediction network (a label language model) and
the joint network that scores every (encoder frame, label prefix) pair.

As NeMo's ``RNNTDecoder`` / ``RNNTJoint`` and ESPnet's transducer decoder define them:

* **prediction network**: the previous label's embedding (the start of a transcript is the
  blank, whose embedding is the zero vector: NeMo's and ESPnet's ``blank_as_pad``) through
  ``num_layers`` LSTM layers; its output ``g_u`` summarizes the first ``u`` labels;
* **joint network**: ``logits(t, u) = W_out act(W_enc f_t + W_pred g_u) + b`` (the two
  projections carry biases), dropout before the output layer. The two projections are
  applied before the broadcast, so the [B, T, U+1, .] tensors are only the hidden sum and
  the logits.

Both networks also expose single steps on flat batches ([N, ...]) for the searches of
:mod:`open_seq2seq.parts.transducer.search`.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.parts.dropout import dropout, dropout_seed_generator
from open_seq2seq.utils.initializers import fresh

ACTIVATIONS = {"relu": tf.nn.relu, "tanh": tf.tanh}


class PredictionNetwork(keras.layers.Layer):
  """Embedding of the previous label + stacked LSTM layers (module doc).

  Args:
    num_classes: joint outputs, blank included; label ids are ``[0, num_classes)`` but the
      blank, which stands for "no label yet" and embeds to zeros.
    blank: the blank's id.
    embedding_size: width of the label embedding.
    hidden: units of each LSTM layer (the network's output width).
    num_layers: LSTM layers.
    dropout_rate: dropout on every LSTM layer's output while training.
    initializer: kernel initializer (a fresh copy per weight).
  """

  def __init__(self, num_classes: int, blank: int, embedding_size: int, hidden: int,
               num_layers: int, dropout_rate: float, initializer: Any, **kwargs: Any):
    super().__init__(**kwargs)
    self.num_classes, self.blank = num_classes, blank
    self.embedding_size, self.hidden = embedding_size, hidden
    self.dropout_rate = dropout_rate
    self._initializer = initializer
    # Keras' default unit_forget_bias=True starts the forget gate's bias at 1, as NeMo's
    # forget_gate_bias=1.0
    self.lstms = [keras.layers.LSTM(hidden, return_sequences=True,
                                    kernel_initializer=fresh(initializer),
                                    dtype=self.dtype_policy, name=f"lstm_{i}")
                  for i in range(num_layers)]
    self.seed_generator = dropout_seed_generator(dropout_rate)

  def build(self, input_shape: Any = None) -> None:
    if self.built:
      return
    self.embedding = self.add_weight(shape=(self.num_classes, self.embedding_size),
                                     initializer=fresh(self._initializer), name="embedding")
    width = self.embedding_size
    for lstm in self.lstms:
      lstm.build((None, None, width))
      width = self.hidden
    self.built = True

  def embed(self, ids: tf.Tensor) -> tf.Tensor:
    """Embeddings of ``ids`` (any shape), zeros for the blank / start."""
    table = tf.cast(tf.convert_to_tensor(self.embedding), self.compute_dtype)
    vectors = tf.gather(table, ids)
    return vectors * tf.cast(tf.not_equal(ids, self.blank), self.compute_dtype)[..., None]

  def sequence(self, labels: tf.Tensor, training: bool | None) -> tf.Tensor:
    """Teacher forcing: outputs [B, U+1, hidden] for ``[start] + labels`` ([B, U]).

    Output ``u`` depends on the first ``u`` labels only: the padding of a row beyond its
    length changes nothing before it.
    """
    start = tf.fill([tf.shape(labels)[0], 1], self.blank)
    x = self.embed(tf.concat([start, tf.cast(labels, tf.int32)], axis=1))
    for lstm in self.lstms:
      x = dropout(lstm(x, training=training), self.dropout_rate, training,
                  self.seed_generator)
    return x

  def initial_state(self, batch_size: tf.Tensor) -> list[list[tf.Tensor]]:
    """Zero ``[h, c]`` of every layer for ``batch_size`` rows."""
    zeros = tf.zeros([batch_size, self.hidden], self.compute_dtype)
    return [[zeros, zeros] for _ in self.lstms]

  def step(self, ids: tf.Tensor, state: list[list[tf.Tensor]]
           ) -> tuple[tf.Tensor, list[list[tf.Tensor]]]:
    """One label per row (inference: no dropout): ids [N] -> (output [N, hidden], state)."""
    x = self.embed(ids)
    new_state = []
    for lstm, (h, c) in zip(self.lstms, state):
      x, (h, c) = lstm.cell(x, [h, c], training=False)
      new_state.append([h, c])
    return x, new_state


class JointNetwork(keras.layers.Layer):
  """``W_out act(W_enc f + W_pred g)`` (module doc); inputs are cast to its compute dtype.

  Args:
    hidden: width of the two projections (``joint_hidden``).
    num_classes: outputs, blank included.
    activation: "relu" or "tanh".
    dropout_rate: dropout after the activation while training.
    initializer: kernel initializer (a fresh copy per layer).
  """

  def __init__(self, hidden: int, num_classes: int, activation: str, dropout_rate: float,
               initializer: Any, **kwargs: Any):
    super().__init__(**kwargs)
    self.activation = ACTIVATIONS[activation]
    self.dropout_rate = dropout_rate
    policy = self.dtype_policy
    self.encoder_projection = keras.layers.Dense(
        hidden, kernel_initializer=fresh(initializer), dtype=policy, name="encoder_projection")
    self.prediction_projection = keras.layers.Dense(
        hidden, kernel_initializer=fresh(initializer), dtype=policy,
        name="prediction_projection")
    self.output_layer = keras.layers.Dense(
        num_classes, kernel_initializer=fresh(initializer), dtype=policy, name="output")
    self.seed_generator = dropout_seed_generator(dropout_rate)

  def build_for(self, encoder_depth: int, prediction_depth: int) -> None:
    """Creates the variables (before any while_loop, where none may be created)."""
    with keras.name_scope(self.name):  # variable paths decoder/joint/... as when called
      self.encoder_projection.build((None, encoder_depth))
      self.prediction_projection.build((None, prediction_depth))
      self.output_layer.build((None, self.encoder_projection.units))
    self.built = True

  def project_encoder(self, features: tf.Tensor) -> tf.Tensor:
    return self.encoder_projection(tf.cast(features, self.compute_dtype))

  def project_prediction(self, outputs: tf.Tensor) -> tf.Tensor:
    return self.prediction_projection(tf.cast(outputs, self.compute_dtype))

  def logits(self, encoder_projected: tf.Tensor, prediction_projected: tf.Tensor,
             training: bool | None = False) -> tf.Tensor:
    """Logits of the broadcast sum of projected encoder and prediction outputs: [B, T, 1, H]
    and [B, 1, U+1, H] give the training lattice [B, T, U+1, V]; [N, H] and [N, H] one step."""
    hidden = self.activation(encoder_projected + prediction_projected)
    hidden = dropout(hidden, self.dropout_rate, training, self.seed_generator)
    return self.output_layer(hidden)


__all__ = ["PredictionNetwork", "JointNetwork", "ACTIVATIONS"]
