"""Kernel initializers: config values, and the model-level default every component inherits."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import validate_top_level
from open_seq2seq.decoders import FullyConnectedCTCDecoder, TransformerDecoder
from open_seq2seq.encoders import DeepSpeech2Encoder, TDNNEncoder, TransformerEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.losses import PaddedCrossEntropyLossWithSmoothing
from open_seq2seq.models import Text2Text
from open_seq2seq.utils.component import LayerComponent
from open_seq2seq.utils.initializers import kernel_initializer, make_initializer
from tests.unit.test_wiring import SIZES, TextLayer


def test_make_initializer_takes_names_classes_and_instances():
  assert make_initializer(None) is None
  assert isinstance(make_initializer("he_normal"), keras.initializers.HeNormal)
  normal = make_initializer("random_normal", {"stddev": 2.0})
  assert normal.get_config()["stddev"] == 2.0
  const = make_initializer(keras.initializers.Constant, {"value": 0.5})
  assert const.get_config()["value"] == 0.5
  instance = keras.initializers.Zeros()
  assert make_initializer(instance) is instance


@pytest.mark.parametrize("initializer,params,message", [
    ("no_such_init", {}, "initializer: unknown Keras initializer 'no_such_init'"),
    (None, {"stddev": 1.0}, "initializer_params: given, but no initializer"),
    (keras.initializers.Zeros(), {"value": 1}, "is an instance, not a class"),
    (keras.initializers.Constant, {"valu": 1}, "initializer_params: rejected"),
])
def test_make_initializer_errors_are_one_line(initializer, params, message):
  with pytest.raises(ConfigError, match=message) as info:
    make_initializer(initializer, params)
  assert "\n" not in str(info.value)


def test_component_setting_wins_over_the_model_default():
  default = keras.initializers.Constant(0.25)
  own = kernel_initializer({"initializer": "zeros", "initializer_params": {}}, default, "p")
  assert isinstance(own, keras.initializers.Zeros)
  inherited = kernel_initializer({"initializer": None}, default, "p")
  assert inherited is not default and inherited.get_config()["value"] == 0.25
  assert isinstance(kernel_initializer({}, None, "p"), keras.initializers.GlorotUniform)


def _kernels(layer):
  # Input kernels; recurrent kernels keep Keras' orthogonal initializer.
  return [v for v in layer.weights if v.path.endswith("/kernel")]


@pytest.mark.parametrize("make", [
    lambda init: FullyConnectedCTCDecoder({"tgt_vocab_size": 5}, initializer=init),
    lambda init: TDNNEncoder({"convnet_layers": [{"type": "conv1d", "repeat": 1,
                                                  "kernel_size": [3], "stride": [1],
                                                  "dilation": [1], "num_channels": 4,
                                                  "padding": "SAME",
                                                  "dropout_keep_prob": 1.0}],
                              "activation_fn": tf.nn.relu}, initializer=init),
    lambda init: DeepSpeech2Encoder({"conv_layers": [], "num_rnn_layers": 1,
                                     "rnn_cell_dim": 4, "n_hidden": 4}, initializer=init),
])
def test_every_component_with_kernels_uses_the_model_default(make):
  component = make(keras.initializers.Constant(0.25))
  assert isinstance(component, LayerComponent)
  if isinstance(component, FullyConnectedCTCDecoder):
    component.fc.build((None, 3))
    layers = [component.fc]
  else:
    features = tf.zeros([2, 6, 8])
    component({"source_tensors": [features, tf.constant([6, 4])]}, training=False)
    layers = [component]
  kernels = [k for layer in layers for k in _kernels(layer)]
  assert kernels
  for kernel in kernels:
    np.testing.assert_allclose(kernel.numpy(), 0.25)


def _text_model(**top_level):
  config = {
      "data_layer": TextLayer, "data_layer_params": {},
      "encoder": TransformerEncoder, "encoder_params": {"encoder_layers": 1, **SIZES},
      "decoder": TransformerDecoder, "decoder_params": {"num_hidden_layers": 1, **SIZES},
      "loss": PaddedCrossEntropyLossWithSmoothing, "batch_size_per_gpu": 2, **top_level}
  return Text2Text(validate_top_level(Text2Text, config), "train")


def test_model_level_initializer_reaches_the_variables_and_component_settings_win():
  model = _text_model(initializer=keras.initializers.Constant,
                      initializer_params={"value": 0.25},
                      decoder_params={"num_hidden_layers": 1, "initializer": "zeros", **SIZES})
  ids = tf.constant([[4, 5, 2], [6, 2, 0]])
  lengths = tf.constant([3, 2])
  model.create_variables({"source_tensors": [ids, lengths], "target_tensors": [ids, lengths]})
  encoder_kernels = _kernels(model.encoder)
  decoder_kernels = _kernels(model.decoder)
  assert encoder_kernels and decoder_kernels
  for kernel in encoder_kernels:
    np.testing.assert_allclose(kernel.numpy(), 0.25)
  for kernel in decoder_kernels:
    np.testing.assert_allclose(kernel.numpy(), 0.0)


def test_model_level_initializer_needs_components_that_take_it():
  class NoInit(TransformerEncoder):
    def __init__(self, params, *, vocab_size=None, mode="train", name="e", dtype="float32"):
      super().__init__(params, vocab_size=vocab_size, mode=mode, name=name, dtype=dtype)

  with pytest.raises(ConfigError, match="NoInit .the encoder. takes no initializer"):
    _text_model(encoder=NoInit, initializer="zeros")


def test_tf1_xavier_uniform_flag_picks_the_glorot_variant():
  assert isinstance(make_initializer(keras.initializers.GlorotUniform, {"uniform": False}),
                    keras.initializers.GlorotNormal)
  assert isinstance(make_initializer(keras.initializers.GlorotNormal, {"uniform": True}),
                    keras.initializers.GlorotUniform)
  assert isinstance(make_initializer("glorot_uniform", {"uniform": False, "seed": 3}),
                    keras.initializers.GlorotNormal)
  with pytest.raises(ConfigError, match="rejected"):
    make_initializer(keras.initializers.HeNormal, {"uniform": False})


def test_every_exported_encoder_and_decoder_takes_the_model_initializer():
  # The model hands its initializer to the encoder and decoder it builds: a component whose
  # constructor drops the keyword would make a config's top-level initializer fail to load.
  import inspect
  from open_seq2seq import decoders, encoders
  for package in (encoders, decoders):
    for name in package.__all__:
      klass = getattr(package, name)
      if inspect.isclass(klass) and issubclass(klass, LayerComponent):
        assert "initializer" in inspect.signature(klass).parameters, name
