"""Keras cells from OpenSeq2Seq's TF 1 cell params (``num_units``, ``forget_bias`` ...)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.rnns import make_cell, translate_cell_params


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


@pytest.mark.parametrize("forget_bias", [1.0, 0.5, 0.0])
def test_lstm_cell_from_tf1_params_steps_like_tf1_basic_lstm_cell(forget_bias):
  cell = make_cell(keras.layers.LSTMCell, {"num_units": 3, "forget_bias": forget_bias,
                                           "state_is_tuple": True})
  assert cell.units == 3
  x = np.array([[0.5, -1.0]], np.float32)
  h0 = np.array([[0.1, -0.2, 0.3]], np.float32)
  c0 = np.array([[0.4, 0.0, -0.5]], np.float32)
  out, (h1, c1) = cell(tf.constant(x), [tf.constant(h0), tf.constant(c0)])
  # TF 1 BasicLSTMCell: bias 0, forget_bias added to the forget gate at each step.
  z = x @ cell.kernel.numpy() + h0 @ cell.recurrent_kernel.numpy()
  i, f, g, o = np.split(z, 4, axis=1)  # Keras gate order
  c = _sigmoid(f + forget_bias) * c0 + _sigmoid(i) * np.tanh(g)
  h = _sigmoid(o) * np.tanh(c)
  np.testing.assert_allclose(c1.numpy(), c, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(h1.numpy(), h, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out.numpy(), h, rtol=1e-5, atol=1e-6)


def test_gru_with_tf1_spelling_keeps_tf1_gate_order():
  assert translate_cell_params(keras.layers.GRUCell, {"num_units": 8}) == {
      "units": 8, "reset_after": False}
  assert translate_cell_params(keras.layers.GRUCell, {"units": 8}) == {"units": 8}
  assert make_cell(keras.layers.GRU, {"num_units": 4}, return_sequences=True).reset_after \
      is False


def test_keras_spellings_pass_through_and_lstm_initializer_is_the_kernels():
  init = keras.initializers.Zeros()
  params = translate_cell_params(keras.layers.LSTMCell, {"units": 4, "initializer": init,
                                                         "dropout": 0.1})
  assert params == {"units": 4, "kernel_initializer": init, "dropout": 0.1}


@pytest.mark.parametrize("params,message", [
    ({"num_units": 4, "use_peepholes": True}, "cell_params/use_peepholes: LSTMCell has no"),
    ({"num_units": 4, "num_proj": 2}, "cell_params/num_proj: LSTMCell has no"),
    ({"num_units": 4, "units": 4}, "given together with 'units'"),
    ({"num_units": 4, "state_is_tuple": False}, "always keep their state as a list"),
    ({"num_units": 4, "colour": "red"}, "cell_params: LSTMCell rejected the parameters"),
])
def test_cell_param_errors_are_one_line(params, message):
  with pytest.raises(ConfigError, match=message) as info:
    make_cell(keras.layers.LSTMCell, params)
  assert "\n" not in str(info.value)
