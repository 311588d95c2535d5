"""FullyConnectedDecoder: features to class logits, sized by the config or the data."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.decoders import FullyConnectedDecoder
from open_seq2seq.errors import ConfigError


def decode(decoder, features):
  return decoder({"encoder_output": {"outputs": tf.constant(features, tf.float32)}})


def test_logits_and_predicted_classes():
  decoder = FullyConnectedDecoder({"output_dim": 4}, num_classes=3)  # the config wins
  features = np.random.default_rng(0).normal(size=(5, 7))
  out = decode(decoder, features)
  assert out["logits"].shape == (5, 4) and out["logits"].dtype == tf.float32
  np.testing.assert_array_equal(out["outputs"], np.argmax(out["logits"], axis=-1))
  kernel, bias = decoder.fc.kernel.numpy(), decoder.fc.bias.numpy()
  np.testing.assert_allclose(out["logits"], features @ kernel + bias, rtol=1e-5, atol=1e-5)


def test_size_from_the_data_and_errors():
  assert FullyConnectedDecoder({}, num_classes=10).output_dim == 10
  with pytest.raises(ConfigError, match="decoder_params/output_dim: unknown"):
    FullyConnectedDecoder({})
  with pytest.raises(ConfigError, match="decoder_params/output_dim: must be a positive int"):
    FullyConnectedDecoder({"output_dim": 0})


def test_feature_maps_are_flattened_per_example():
  decoder = FullyConnectedDecoder({}, num_classes=2)
  out = decode(decoder, np.ones((3, 2, 2, 5)))
  assert out["logits"].shape == (3, 2) and decoder.fc.kernel.shape == (20, 2)
