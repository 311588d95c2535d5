"""WeightDropLayerNormBasicLSTMCell: TF 1 LayerNormBasicLSTMCell maths, weight drop, Keras RNN."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.rnns import make_cell
from open_seq2seq.parts.rnns.weight_drop import (LAYER_NORM_EPSILON,
                                                 WeightDropLayerNormBasicLSTMCell,
                                                 WeightDropLSTM, awd_initializer)

UNITS, DEPTH = 4, 3
ALL_DROPS = {"recurrent_keep_prob": 0.5, "input_weight_keep_prob": 0.5,
             "recurrent_weight_keep_prob": 0.5}
#: The plain Keras loop over the cell, and the layer that projects all inputs up front.
LAYERS = [keras.layers.RNN, WeightDropLSTM]


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def _layer_norm(x, gamma, beta):
  mean = x.mean(-1, keepdims=True)
  var = x.var(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + LAYER_NORM_EPSILON) * gamma + beta


def _reference_step(cell, x, h, c):
  """TF 1 LayerNormBasicLSTMCell, written out gate by gate (order i, j, f, o)."""
  z = x @ cell.kernel.numpy() + h @ cell.recurrent_kernel.numpy()
  if not cell.layer_norm:
    z = z + cell.bias.numpy()
  gates = np.split(z, 4, axis=1)
  if cell.layer_norm:
    gammas = np.split(cell.gates_gamma.numpy(), 4)
    betas = np.split(cell.gates_beta.numpy(), 4)
    gates = [_layer_norm(v, g, b) for v, g, b in zip(gates, gammas, betas)]
  i, j, f, o = gates
  c = c * _sigmoid(f + cell.forget_bias) + _sigmoid(i) * np.tanh(j)
  if cell.layer_norm:
    c = _layer_norm(c, cell.state_gamma.numpy(), cell.state_beta.numpy())
  return np.tanh(c) * _sigmoid(o), c


def _randomize(cell, rng):
  """Non-trivial values for every weight, so that mixing up gates or gains shows."""
  for variable in cell.weights:
    variable.assign(rng.uniform(-0.8, 0.8, variable.shape).astype(np.float32) +
                    (1.0 if "gamma" in variable.name else 0.0))


def _rnn(cell, layer=keras.layers.RNN, **kwargs):
  return layer(cell, return_sequences=True, return_state=True, **kwargs)


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("layer_norm", [True, False])
@pytest.mark.parametrize("forget_bias", [1.0, 0.3])
def test_three_steps_match_numpy_reference(layer, layer_norm, forget_bias):
  rng = np.random.default_rng(0)
  cell = WeightDropLayerNormBasicLSTMCell(UNITS, forget_bias=forget_bias,
                                          layer_norm=layer_norm, **ALL_DROPS)
  rnn = _rnn(cell, layer)
  x = rng.normal(size=(2, 3, DEPTH)).astype(np.float32)
  h0 = rng.normal(size=(2, UNITS)).astype(np.float32)
  c0 = rng.normal(size=(2, UNITS)).astype(np.float32)
  rnn.build(x.shape)
  _randomize(cell, rng)
  outputs, h, c = rnn(x, initial_state=[h0, c0])  # inference: the dropouts are off

  ref_h, ref_c = h0, c0
  for t in range(3):
    ref_h, ref_c = _reference_step(cell, x[:, t], ref_h, ref_c)
    np.testing.assert_allclose(outputs[:, t].numpy(), ref_h, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(h.numpy(), ref_h, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(c.numpy(), ref_c, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layer", LAYERS)
def test_masked_steps_leave_the_final_state_alone(layer):
  rng = np.random.default_rng(1)
  cell = WeightDropLayerNormBasicLSTMCell(UNITS)
  rnn = layer(cell, return_state=True)
  x = rng.normal(size=(2, 5, DEPTH)).astype(np.float32)
  mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
  _, h, c = rnn(x, mask=mask)
  _, short_h, short_c = rnn(x[:1, :3])
  _, full_h, full_c = rnn(x[1:])
  np.testing.assert_allclose(h[:1].numpy(), short_h.numpy(), rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(c[:1].numpy(), short_c.numpy(), rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(c[1:].numpy(), full_c.numpy(), rtol=1e-6, atol=1e-6)
  assert not np.allclose(h[:1].numpy(), h[1:].numpy())


@pytest.mark.parametrize("drop", sorted(ALL_DROPS))
def test_each_dropout_acts_in_training_only(drop):
  rng = np.random.default_rng(2)
  rnn = _rnn(WeightDropLayerNormBasicLSTMCell(UNITS, dropout_seed=3, **{drop: 0.5}))
  plain = _rnn(WeightDropLayerNormBasicLSTMCell(UNITS))
  x = rng.normal(size=(2, 6, DEPTH)).astype(np.float32)
  rnn.build(x.shape)
  plain.build(x.shape)
  plain.set_weights(rnn.get_weights())
  inference = [rnn(x, training=False)[0].numpy() for _ in range(2)]
  np.testing.assert_array_equal(inference[0], inference[1])
  np.testing.assert_allclose(inference[0], plain(x)[0].numpy(), rtol=1e-6, atol=1e-6)
  trained = [rnn(x, training=True)[0].numpy() for _ in range(2)]
  assert not np.allclose(trained[0], inference[0])
  assert not np.allclose(trained[0], trained[1])


class _RecordingCell(WeightDropLayerNormBasicLSTMCell):
  """Records the kernels every step used (the RNN runs eagerly here)."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.used = []

  def call(self, inputs, states, training=None):
    self.used.append([np.array(k) for k in self.effective_kernels(bool(training))])
    return super().call(inputs, states, training=training)


@pytest.mark.parametrize("layer", LAYERS)
def test_weight_drop_mask_is_fixed_within_a_call_and_redrawn_between_calls(layer):
  cell = _RecordingCell(UNITS, input_weight_keep_prob=0.6, recurrent_weight_keep_prob=0.6)
  rnn = _rnn(cell, layer)
  x = np.random.default_rng(3).normal(size=(2, 5, DEPTH)).astype(np.float32)
  per_call = []
  for _ in range(2):
    cell.used.clear()
    rnn(x, training=True)
    assert len(cell.used) >= 5  # Keras' TF loop also runs one step to learn the shapes
    for kernels in cell.used[1:]:
      for used, first in zip(kernels, cell.used[0]):
        np.testing.assert_array_equal(used, first)
    per_call.append(cell.used[0])
  for dropped, variable in zip(per_call[0], [cell.kernel, cell.recurrent_kernel]):
    # Entries are dropped or scaled by 1/keep, and about 40% are dropped.
    kept = dropped != 0
    np.testing.assert_allclose(dropped[kept], variable.numpy()[kept] / 0.6, rtol=1e-6)
    assert 0.2 < 1 - kept.mean() < 0.6
  for first, second in zip(per_call[0], per_call[1]):
    assert not np.array_equal(first != 0, second != 0)
  cell.used.clear()
  rnn(x, training=False)
  np.testing.assert_array_equal(cell.used[0][0], cell.kernel.numpy())


@pytest.mark.parametrize("layer_norm", [True, False])
def test_gradient_reaches_every_weight_in_training(layer_norm):
  cell = WeightDropLayerNormBasicLSTMCell(UNITS, layer_norm=layer_norm, dropout_seed=5,
                                          **ALL_DROPS)
  rnn = _rnn(cell)
  x = tf.constant(np.random.default_rng(4).normal(size=(3, 4, DEPTH)), tf.float32)

  @tf.function
  def gradients():
    with tf.GradientTape() as tape:
      outputs, _, c = rnn(x, training=True)
      loss = tf.reduce_sum(outputs ** 2) + tf.reduce_sum(c)
    return tape.gradient(loss, rnn.trainable_variables)

  rnn.build(x.shape)
  names = {v.name for v in rnn.trainable_variables}
  assert names == ({"kernel", "recurrent_kernel", "gates_gamma", "gates_beta", "state_gamma",
                    "state_beta"} if layer_norm else {"kernel", "recurrent_kernel", "bias"})
  for variable, gradient in zip(rnn.trainable_variables, gradients()):
    assert gradient is not None, variable.name
    assert np.all(np.isfinite(gradient.numpy())), variable.name
    assert np.abs(gradient.numpy()).sum() > 0, variable.name


@pytest.mark.parametrize("layer", LAYERS)
def test_mixed_bfloat16_runs_in_float32_where_it_matters(layer):
  rng = np.random.default_rng(6)
  x = rng.normal(size=(2, 7, DEPTH)).astype(np.float32)
  mixed = _rnn(WeightDropLayerNormBasicLSTMCell(UNITS, dtype="mixed_bfloat16", **ALL_DROPS),
               layer, dtype="mixed_bfloat16")
  full = _rnn(WeightDropLayerNormBasicLSTMCell(UNITS))
  mixed.build(x.shape)
  full.build(x.shape)
  full.set_weights(mixed.get_weights())
  assert all(v.dtype == "float32" for v in mixed.weights)
  for training in (False, True):
    outputs, h, c = mixed(x, training=training)
    assert outputs.dtype == tf.bfloat16 and c.dtype == tf.bfloat16
    assert all(np.all(np.isfinite(t.numpy().astype(np.float32))) for t in (outputs, h, c))
  outputs = mixed(x)[0].numpy().astype(np.float32)
  np.testing.assert_allclose(outputs, full(x)[0].numpy(), atol=0.05)


def test_config_round_trip_and_serialization_inside_rnn():
  cell = WeightDropLayerNormBasicLSTMCell(
      8, forget_bias=0.5, activation=tf.tanh, layer_norm=False, norm_gain=2.0,
      dropout_keep_prob=0.8, input_weight_keep_prob=0.7, recurrent_weight_keep_prob=0.6,
      dropout_prob_seed=11, kernel_initializer=awd_initializer(8),
      recurrent_initializer="orthogonal", input_size=5, reuse=True, name="lm_cell")
  config = cell.get_config()
  assert config["recurrent_keep_prob"] == 0.8 and config["dropout_seed"] == 11
  assert config["activation"] == "tanh"
  clone = WeightDropLayerNormBasicLSTMCell.from_config(config)
  assert clone.get_config() == config
  rnn = keras.layers.RNN(cell)
  restored = keras.layers.deserialize(keras.layers.serialize(rnn))
  assert restored.cell.get_config() == config


@pytest.mark.parametrize("go_backwards", [False, True])
def test_weight_drop_lstm_computes_what_rnn_of_the_cell_computes(go_backwards):
  """Same cell, same random draws (seed state rewound), in training with every dropout."""
  rng = np.random.default_rng(7)
  cell = WeightDropLayerNormBasicLSTMCell(UNITS, dropout_seed=9, **ALL_DROPS)
  x = rng.normal(size=(2, 5, DEPTH)).astype(np.float32)
  initial = [rng.normal(size=(2, UNITS)).astype(np.float32) for _ in range(2)]
  mask = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], bool)
  results = []
  for layer in LAYERS:
    rnn = _rnn(cell, layer, go_backwards=go_backwards)
    rnn.build(x.shape)
    cell.seed_generator.state.assign([9, 0])
    results.append([t.numpy() for t in rnn(x, initial_state=initial, mask=mask,
                                            training=True)])
  for plain, fast in zip(*results):
    np.testing.assert_allclose(fast, plain, rtol=1e-5, atol=1e-5)
  with pytest.raises(ConfigError, match="needs a WeightDropLayerNormBasicLSTMCell"):
    WeightDropLSTM(keras.layers.LSTMCell(UNITS))
  restored = keras.layers.deserialize(keras.layers.serialize(_rnn(cell, WeightDropLSTM)))
  assert isinstance(restored, WeightDropLSTM) and restored.return_state


def test_make_cell_builds_it_from_openseq2seq_params():
  cell = make_cell(WeightDropLayerNormBasicLSTMCell, {"num_units": 6, "forget_bias": 1.0},
                   where="encoder_params/core_cell_params")
  assert cell.num_units == 6 and cell.forget_bias == 1.0


def test_awd_initializer_is_uniform_in_one_over_sqrt_units():
  values = keras.ops.convert_to_numpy(awd_initializer(16)((64, 64)))
  assert values.min() >= -0.25 and values.max() <= 0.25
  assert values.min() < -0.2 and values.max() > 0.2


@pytest.mark.parametrize("kwargs,message", [
    ({"weight_variational": True}, "weight_variational was never implemented"),
    ({"recurrent_keep_prob": 0.5, "dropout_keep_prob": 0.7}, "two spellings"),
    ({"input_weight_keep_prob": 0.0}, "input_weight_keep_prob must be a number in"),
])
def test_user_errors_are_one_line_config_errors(kwargs, message):
  with pytest.raises(ConfigError, match=message) as info:
    WeightDropLayerNormBasicLSTMCell(UNITS, **kwargs)
  assert "\n" not in str(info.value)
