"""allreduce_dtype: gradients cross replicas in bfloat16 when asked, float32 otherwise; the
update is then computed from the rounded sums; Horovod refuses it in one line."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.distributed.backend import Backend
from open_seq2seq.errors import ConfigError
from open_seq2seq.training.trainer import Trainer
from tests.helpers import linear


class _TwoIdenticalReplicas(Backend):
  """One device posing as two replicas that saw the same batch: the all-reduce doubles each
  value (in the dtype it receives) and records the dtypes it was handed."""

  def __init__(self):
    super().__init__()
    self.reduced_dtypes: list = []

  @property
  def num_replicas(self) -> int:
    return 2

  def reduce_sum(self, value):
    flat = tf.nest.flatten(value)
    self.reduced_dtypes.append([t.dtype for t in flat])
    return tf.nest.pack_sequence_as(value, [t + t for t in flat])


def _step(backend, **params):
  trainer = linear.trainer("/nonexistent", backend=backend, **params)
  model = trainer.model
  trainer.build(next(iter(model.data_layer.build_dataset())))
  function = trainer.step.function()
  function(iter(model.data_layer.build_dataset()))
  return model


def _expected_weights(round_to_bfloat16: bool):
  # SGD with lr 0.1 on the doubled sums, divided by the doubled weight: the plain gradient,
  # each replica's sum rounded to bfloat16 first when the all-reduce runs in bfloat16
  x = linear.X.astype(np.float64)
  y = x @ linear.W0 + linear.B0
  sums = [x.T @ y, y.sum(axis=0)]
  if round_to_bfloat16:
    sums = [tf.cast(tf.cast(s.astype(np.float32), tf.bfloat16), tf.float64).numpy()
            for s in sums]
  return [w - 0.1 * (2 * s) / (2 * len(x)) for w, s in zip([linear.W0, linear.B0], sums)]


def test_bfloat16_all_reduce_sums_the_gradients_in_bfloat16():
  backend = _TwoIdenticalReplicas()
  model = _step(backend, allreduce_dtype="bfloat16")
  grads_dtypes = backend.reduced_dtypes[0][:2]  # kernel, bias: the replica's gradients
  assert grads_dtypes == [tf.bfloat16, tf.bfloat16]
  assert tf.float32 in backend.reduced_dtypes[0]  # the loss sum and weight stay float32
  got = linear.weights(model)
  for g, want in zip(got, _expected_weights(round_to_bfloat16=True)):
    np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-7)
  # the rounding is visible: float32 sums would give other weights
  exact = _expected_weights(round_to_bfloat16=False)
  assert max(np.abs(g - e).max() for g, e in zip(got, exact)) > 1e-5


def test_float32_is_the_default_and_keeps_the_exact_sums():
  backend = _TwoIdenticalReplicas()
  model = _step(backend)
  assert backend.reduced_dtypes[0][:2] == [tf.float32, tf.float32]
  for g, want in zip(linear.weights(model), _expected_weights(round_to_bfloat16=False)):
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-7)


def test_one_replica_never_rounds_its_gradients():
  backend = Backend()  # single: nothing crosses replicas, bfloat16 would only lose bits
  calls = []
  original = backend.reduce_sum
  backend.reduce_sum = lambda value: calls.append(tf.nest.flatten(value)) or original(value)
  _step(backend, allreduce_dtype="bfloat16")
  assert [t.dtype for t in calls[0][:2]] == [tf.float32, tf.float32]


def test_unknown_dtype_is_refused_by_the_config_check():
  with pytest.raises(ConfigError, match="allreduce_dtype"):
    linear.model(allreduce_dtype="float16")  # validates its config


def test_horovod_refuses_bfloat16_in_one_line():
  from open_seq2seq.distributed.horovod_backend import HorovodBackend  # pylint: disable=import-outside-toplevel
  with pytest.raises(ConfigError, match="Horovod's all-reduce has no bfloat16"):
    HorovodBackend({"allreduce_dtype": "bfloat16"})
