"""A linear model whose gradients numpy computes exactly, for optimizer and train-step tests.

``y = x @ W + b`` with W [2, 3] and b [3]; the loss of an example is ``0.5 * sum(y ** 2)``
and a batch's weight is its number of examples, so the trainer's normalised gradients are
``dW = x^T y / n`` and ``db = sum(y) / n`` over the examples of a step. The data layer cycles
through the four rows of :data:`X` in order, so batches of 4 -- or 2 batches of 2 with
``iter_size=2`` -- see all of them at every step.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from open_seq2seq.config import validate_top_level
from open_seq2seq.data.data_layer import DataLayer
from open_seq2seq.decoders.decoder import Decoder
from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.losses.loss import Loss
from open_seq2seq.models.model import Model
from open_seq2seq.training.trainer import Trainer

X = np.array([[1.0, -2.0], [0.5, 3.0], [-1.5, 0.25], [2.0, 1.0]], np.float32)
W0 = np.array([[0.3, -0.2, 0.1], [0.05, 0.4, -0.3]], np.float32)
B0 = np.array([0.1, -0.1, 0.2], np.float32)


class RowsLayer(DataLayer):
  """Batches of consecutive rows of X, repeated forever (targets unused)."""

  PARAMS = {}

  def build_dataset(self) -> tf.data.Dataset:
    def to_batch(x):
      lengths = tf.ones([tf.shape(x)[0]], tf.int32)
      return {"source_tensors": (x, lengths), "target_tensors": (x, lengths),
              "id": tf.zeros([tf.shape(x)[0]], tf.int64)}
    return tf.data.Dataset.from_tensor_slices(X).batch(self.batch_size).map(to_batch).repeat()

  def get_size_in_samples(self) -> int:
    return len(X)


class AffineEncoder(Encoder):
  """y = x @ kernel + bias."""

  PARAMS = {}

  def build(self, input_shape=None):
    self.kernel = self.add_weight(shape=(2, 3), name="kernel",
                                  initializer=keras.initializers.Constant(W0))
    self.bias = self.add_weight(shape=(3,), name="bias",
                                initializer=keras.initializers.Constant(B0))

  def call(self, input_dict, training=None):
    x, lengths = input_dict["source_tensors"]
    if not self.built:
      self.build()
    x = tf.cast(x, self.compute_dtype)
    return {"outputs": tf.matmul(x, self.kernel) + self.bias, "src_lengths": lengths}


class PassDecoder(Decoder):
  PARAMS = {}

  def call(self, input_dict, training=None):
    return {"logits": input_dict["encoder_output"]["outputs"]}


class HalfSquareLoss(Loss):
  """0.5 * sum(y ** 2) over the batch; weight = number of examples."""

  PARAMS = {}

  def compute_loss(self, input_dict):
    y = tf.cast(input_dict["decoder_output"]["logits"], tf.float32)
    return 0.5 * tf.reduce_sum(tf.square(y)), tf.cast(tf.shape(y)[0], tf.float32)


def config(**params) -> dict:
  """The linear model's flat config with top-level ``params`` (batch 4 and SGD unless
  given), its top-level keys validated."""
  return validate_top_level(Model, {
      "data_layer": RowsLayer, "encoder": AffineEncoder, "decoder": PassDecoder,
      "loss": HalfSquareLoss, "batch_size_per_gpu": 4, "max_steps": 100,
      "optimizer": "SGD", "optimizer_params": {"learning_rate": 0.1},
      "print_loss_steps": None, "summaries": [], **params})


def model(**params) -> Model:
  """The linear model with top-level ``params`` (see :func:`config`)."""
  return Model(config(**params), "train")


def trainer(logdir: str = "/nonexistent", backend=None, **params) -> Trainer:
  """A trainer of a new linear model (``trainer.model``) whose run has ``params``."""
  run = config(**params)
  return Trainer(Model(run, "train"), run, backend=backend, logdir=logdir)


def built(logdir: str = "/nonexistent", **params):
  """``(trainer, step)``: the trainer of a linear model with ``params`` and its variables
  built, and ``step() -> dict``."""
  trainer_ = trainer(logdir, **params)
  model_ = trainer_.model
  trainer_.build(next(iter(model_.data_layer.build_dataset())))
  iterator = iter(model_.data_layer.build_dataset())
  function = trainer_.step.function()

  def step() -> dict:
    values = function(iterator)
    values.pop("summaries", None)
    return {k: v.numpy() for k, v in values.items()}

  return trainer_, step


def gradients(w: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
  """Normalised gradients [dW, db] of one step (all rows of X), in float64."""
  x = X.astype(np.float64)
  y = x @ w + b
  return [x.T @ y / len(x), y.sum(axis=0) / len(x)]


def weights(model_: Model) -> list[np.ndarray]:
  return [np.array(model_.encoder.kernel.numpy(), np.float64),
          np.array(model_.encoder.bias.numpy(), np.float64)]
