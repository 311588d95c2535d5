"""ResNetEncoder: published sizes, block types, the CIFAR style, layouts and precision."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.decoders import FullyConnectedDecoder
from open_seq2seq.encoders import ResNetEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.resnet.blocks import FixedPaddingConv2D, ResNetBlock


def images(batch=2, size=32, seed=0):
  return tf.constant(np.random.default_rng(seed).normal(size=(batch, size, size, 3)),
                     tf.float32)


def encode(encoder, x, training=False):
  return encoder({"source_tensors": (x,)}, training=training)["outputs"]


def trainable(*layers):
  return sum(int(np.prod(v.shape)) for layer in layers for v in layer.trainable_variables)


@pytest.mark.parametrize("version", [1, 2])
def test_resnet50_has_the_published_25_6m_parameters(version):
  encoder = ResNetEncoder({"resnet_size": 50, "version": version})
  decoder = FullyConnectedDecoder({"output_dim": 1000})
  features = encode(encoder, images(1, 32))
  decoder({"encoder_output": {"outputs": features}})
  assert features.shape == (1, 2048) and encoder.final_size == 2048
  assert [len(s.blocks) for s in encoder.stages] == [3, 4, 6, 3]
  assert len(encoder.stages[0].blocks[0].convs) == 3  # bottleneck 1x1-3x3-1x1
  total = trainable(encoder, decoder)
  assert abs(total / 25.6e6 - 1) < 0.01, f"{total:,}"
  if version == 1:
    assert total == 25_557_032  # torchvision/Keras ResNet-50 exactly


@pytest.mark.parametrize("size,blocks,bottleneck,final", [
    (18, [2, 2, 2, 2], False, 512), (34, [3, 4, 6, 3], False, 512),
    (50, [3, 4, 6, 3], True, 2048), (101, [3, 4, 23, 3], True, 2048),
    (152, [3, 8, 36, 3], True, 2048)])
def test_depths_and_block_types(size, blocks, bottleneck, final):
  params = ResNetEncoder.validate_params({"resnet_size": size})
  arch = ResNetEncoder.architecture(params)
  assert arch["block_sizes"] == blocks and arch["bottleneck"] is bottleneck
  assert arch["block_strides"] == [1, 2, 2, 2] and arch["first_kernel_size"] == 7
  if size < 50:  # ResNet-50 is built above
    encoder = ResNetEncoder({"resnet_size": size, "version": 1})
    assert encode(encoder, images(1, 32)).shape == (1, final)
    convs = len(encoder.stages[0].blocks[0].convs)
    assert convs == (3 if bottleneck else 2)
    if size == 18:
      assert trainable(encoder) + 512 * 1000 + 1000 == 11_689_512  # published ResNet-18


def test_cifar_style_resnet20():
  encoder = ResNetEncoder({"style": "cifar", "resnet_size": 20, "bn_momentum": 0.9})
  x = images(3, 28)
  assert encode(encoder, x).shape == (3, 64)
  assert encoder.pool is None and encoder.stem.strides == 1 and encoder.stem.kernel_size == 3
  assert [len(s.blocks) for s in encoder.stages] == [3, 3, 3]
  assert abs(trainable(encoder) + 650 - 0.27e6) / 0.27e6 < 0.01  # He et al.: 0.27 M
  # 16 filters into a 16-filter stage: identity shortcut; the strided stages project
  assert [s.blocks[0].projection is not None for s in encoder.stages] == [False, True, True]
  with pytest.raises(ConfigError, match="6n\\+2"):
    ResNetEncoder({"style": "cifar", "resnet_size": 52})


def test_explicit_keys_override_the_style():
  encoder = ResNetEncoder({"style": "cifar", "resnet_size": 8, "first_num_filters": 32,
                           "first_conv_stride": 2})
  assert encode(encoder, images(2, 28)).shape == (2, 128)
  assert encoder.stem.strides == 2
  encoder = ResNetEncoder({"block_sizes": [1, 1], "bottleneck": True, "first_num_filters": 8,
                           "first_pool_size": None})
  assert encode(encoder, images(2, 16)).shape == (2, 64)  # 8 * 2 * 4


def test_config_errors():
  with pytest.raises(ConfigError, match="exactly one of resnet_size"):
    ResNetEncoder({})
  with pytest.raises(ConfigError, match="exactly one of resnet_size"):
    ResNetEncoder({"resnet_size": 18, "block_sizes": [2, 2]})
  with pytest.raises(ConfigError, match="resnet_size: 42 is not one of"):
    ResNetEncoder({"resnet_size": 42})
  with pytest.raises(ConfigError, match="final_size: 512, but the network outputs 2048"):
    ResNetEncoder({"resnet_size": 50, "final_size": 512})
  with pytest.raises(ConfigError, match="block_strides: 2 strides for 4 stages"):
    ResNetEncoder({"resnet_size": 18, "block_strides": [1, 2]})
  with pytest.raises(ConfigError, match="version"):
    ResNetEncoder({"resnet_size": 18, "version": 3})


def test_fixed_padding_output_size_never_depends_on_parity():
  for size in (15, 16, 17):
    conv = FixedPaddingConv2D(4, 7, 2, "channels_last", keras.initializers.Ones())
    assert conv(tf.zeros([1, size, size, 3])).shape == (1, (size + 1) // 2, (size + 1) // 2, 4)
  # symmetric padding: a centred impulse stays centred
  conv = FixedPaddingConv2D(1, 3, 2, "channels_last", keras.initializers.Ones())
  x = np.zeros([1, 5, 5, 1], np.float32)
  x[0, 2, 2, 0] = 1.0
  out = conv(tf.constant(x))[0, :, :, 0].numpy()
  np.testing.assert_array_equal(out, [[0, 0, 0], [0, 1, 0], [0, 0, 0]])


@pytest.mark.parametrize("version", [1, 2])
def test_blocks_without_projection_add_their_input(version):
  block = ResNetBlock(4, 1, False, version, projection=False, data_format="channels_last",
                      bn_momentum=0.9, bn_epsilon=1e-5,
                      kernel_initializer=keras.initializers.Zeros())
  x = tf.constant(np.random.default_rng(0).normal(size=(2, 6, 6, 4)), tf.float32)
  expected = tf.nn.relu(x) if version == 1 else x  # zero branch: the shortcut alone
  np.testing.assert_allclose(block(x, training=True), expected, atol=1e-6)


def test_batch_norm_momentum_epsilon_and_training_flag():
  encoder = ResNetEncoder({"resnet_size": 18, "bn_momentum": 0.9, "bn_epsilon": 1e-3,
                           "data_format": "channels_last"})
  x = images(2, 32) * 3.0 + 1.0
  encode(encoder, x)
  norms = [l for l in encoder._flatten_layers() if isinstance(l, keras.layers.BatchNormalization)]
  assert norms and all(n.momentum == 0.9 and n.epsilon == 1e-3 for n in norms)
  stem_mean = encoder.stages[0].blocks[0].norms[0].moving_mean.numpy().copy()
  encode(encoder, x, training=False)
  np.testing.assert_array_equal(encoder.stages[0].blocks[0].norms[0].moving_mean, stem_mean)
  encode(encoder, x, training=True)
  assert not np.allclose(encoder.stages[0].blocks[0].norms[0].moving_mean, stem_mean)


def test_channels_first_config_runs_on_cpu_with_the_same_results():
  first = ResNetEncoder({"style": "cifar", "resnet_size": 8, "data_format": "channels_first"})
  last = ResNetEncoder({"style": "cifar", "resnet_size": 8, "data_format": "channels_last"})
  x = images(2, 16)
  encode(first, x)
  encode(last, x)
  for a, b in zip(first.weights, last.weights):
    assert a.shape == b.shape
    b.assign(a)
  np.testing.assert_allclose(encode(first, x), encode(last, x), rtol=1e-5, atol=1e-5)


def test_initializers_default_model_level_and_own():
  default = ResNetEncoder({"resnet_size": 18})
  assert isinstance(default.stem.conv.kernel_initializer, keras.initializers.VarianceScaling)
  model_level = ResNetEncoder({"resnet_size": 18}, initializer=keras.initializers.HeNormal())
  assert isinstance(model_level.stem.conv.kernel_initializer, keras.initializers.HeNormal)
  own = ResNetEncoder({"resnet_size": 18, "initializer": "zeros"},
                      initializer=keras.initializers.HeNormal())
  assert isinstance(own.stem.conv.kernel_initializer, keras.initializers.Zeros)


def test_mixed_precision_computes_in_half_with_float32_variables():
  encoder = ResNetEncoder({"style": "cifar", "resnet_size": 8}, dtype="mixed_bfloat16")
  decoder = FullyConnectedDecoder({}, num_classes=5, dtype="mixed_bfloat16")
  features = encode(encoder, images(2, 16))
  assert features.dtype == tf.bfloat16
  assert all(v.dtype == tf.float32 for v in encoder.trainable_variables)
  logits = decoder({"encoder_output": {"outputs": features}})["logits"]
  assert logits.dtype == tf.float32 and logits.shape == (2, 5)
