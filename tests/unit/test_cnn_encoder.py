"""CNNEncoder: OpenSeq2Seq's cnn_layers lists of Keras layer classes and functions."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.encoders import CNNEncoder
from open_seq2seq.errors import ConfigError

LAYERS = [
    (keras.layers.Conv2D, {"filters": 8, "kernel_size": (3, 3), "strides": (1, 1),
                           "padding": "SAME", "activation": tf.nn.relu}),
    (keras.layers.Conv2D, {"filters": 8, "kernel_size": (3, 3), "padding": "SAME",
                           "activation": None, "use_bias": False}),
    (keras.layers.BatchNormalization, {"momentum": 0.9, "epsilon": 0.0001}),
    (tf.nn.relu, {}),
    (keras.layers.MaxPooling2D, {"pool_size": 3, "strides": 2, "padding": "SAME"}),
    (keras.layers.Dropout, {"rate": 0.5}),
    (keras.layers.Conv2D, {"filters": 6, "kernel_size": (1, 1), "padding": "SAME"}),
]


def images(batch=3, size=12):
  return tf.constant(np.random.default_rng(0).normal(size=(batch, size, size, 3)), tf.float32)


def encode(encoder, x, training=False):
  return encoder({"source_tensors": (x,)}, training=training)["outputs"]


def test_layers_are_built_applied_and_flattened():
  encoder = CNNEncoder({"cnn_layers": LAYERS, "data_format": "channels_first"})
  out = encode(encoder, images())
  assert out.shape == (3, 6 * 6 * 6)  # 12 -> 6 by the pool, 6 channels
  kinds = [type(layer).__name__ for layer in encoder.cnn]
  assert kinds == ["Conv2D", "Conv2D", "BatchNormalization", "FunctionLayer", "MaxPooling2D",
                   "Dropout", "Conv2D"]
  assert encoder.cnn[2].momentum == 0.9 and encoder.cnn[2].epsilon == 0.0001
  assert encoder.cnn[0].data_format == "channels_last"  # CPU: channels_first is not run
  params = 3 * 3 * 3 * 8 + 8 + 3 * 3 * 8 * 8 + 2 * 8 + 8 * 6 + 6
  assert sum(int(np.prod(v.shape)) for v in encoder.trainable_variables) == params


def test_dropout_and_batch_norm_follow_the_training_flag():
  encoder = CNNEncoder({"cnn_layers": LAYERS})
  x = images()
  np.testing.assert_array_equal(encode(encoder, x), encode(encoder, x))
  assert not np.allclose(encode(encoder, x, training=True), encode(encoder, x, training=True))
  mean = encoder.cnn[2].moving_mean.numpy().copy()
  encode(encoder, x, training=True)
  assert not np.allclose(encoder.cnn[2].moving_mean, mean)


def test_fc_layers_after_flattening_and_model_initializer():
  encoder = CNNEncoder({"cnn_layers": LAYERS[:2], "fc_layers": [
      (keras.layers.Dense, {"units": 5}), (tf.nn.relu, {})]},
      initializer=keras.initializers.Zeros())
  out = encode(encoder, images(2, 4))
  assert out.shape == (2, 5)
  assert isinstance(encoder.cnn[0].kernel_initializer, keras.initializers.Zeros)
  assert isinstance(encoder.fc[0].kernel_initializer, keras.initializers.Zeros)
  own = CNNEncoder({"cnn_layers": [(keras.layers.Conv2D, {
      "filters": 2, "kernel_size": 1, "kernel_initializer": "ones"})]},
      initializer=keras.initializers.Zeros())
  assert isinstance(own.cnn[0].kernel_initializer, keras.initializers.Ones)


def test_mixed_precision():
  encoder = CNNEncoder({"cnn_layers": LAYERS}, dtype="mixed_bfloat16")
  assert encode(encoder, images()).dtype == tf.bfloat16
  assert all(v.dtype == tf.float32 for v in encoder.trainable_variables)


def test_malformed_lists_and_bad_layer_params_are_config_errors():
  for bad in ([keras.layers.Conv2D], [("conv2d", {})], [(keras.layers.Conv2D, "filters=3")]):
    with pytest.raises(ConfigError, match="cnn_layers: expected list of"):
      CNNEncoder({"cnn_layers": bad})
  with pytest.raises(ConfigError, match="cnn_layers/0: Conv2D rejects its params"):
    CNNEncoder({"cnn_layers": [(keras.layers.Conv2D, {"filters": 3, "kernel": 3})]})
