"""DeepSpeech2's row convolution is OpenSeq2Seq's: a window centred as TF's stride-1 "SAME"
padding centres it (3 past, the current and 4 future frames for width 8), followed by batch
norm and the activation; batch padding never changes an utterance, in any precision."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.encoders.ds2_encoder import DeepSpeech2Encoder, RowConvolution
from tests.helpers.speech import padded_features, run_encoder

LENGTHS = [37, 16, 25]
NUM_FEATURES = 20
DS2_ROW_CONV = {
    "conv_layers": [{"kernel_size": [5, 7], "stride": [2, 2], "num_channels": 4}],
    "num_rnn_layers": 1, "rnn_cell_dim": 8, "n_hidden": 12, "row_conv": True,
}
# time-local up to the row convolution: a 1x1 conv, no RNN, linear activations
LOCAL = {"conv_layers": [{"kernel_size": [1, 1], "num_channels": 3}], "num_rnn_layers": 0,
         "n_hidden": 6, "row_conv": True, "activation_fn": tf.identity}


def row_conv(width, activation=tf.identity, dtype="float32"):
  keras.utils.set_random_seed(width)
  layer = RowConvolution(width, activation, momentum=0.9, epsilon=1e-3, dtype=dtype)
  layer(tf.zeros([1, 4, 5]), tf.ones([1, 4], tf.bool))  # builds
  return layer


def frames_touched(outputs_a, outputs_b):
  """Frames (of the first utterance) where two outputs differ."""
  changed = np.abs(np.asarray(outputs_a) - np.asarray(outputs_b)).max(-1)[0] > 1e-6
  return np.flatnonzero(changed).tolist()


@pytest.mark.parametrize("width,past,future", [(8, 3, 4), (5, 2, 2), (2, 0, 1)])
def test_output_frame_sees_past_and_future_frames_as_openseq2seq(width, past, future):
  layer = row_conv(width)
  x = np.zeros((1, 30, 5), np.float32)
  mask = tf.ones([1, 30], tf.bool)
  base = layer(x, mask).numpy()
  x[0, 15] = 1.0  # an impulse at frame 15 reaches the outputs whose window holds frame 15
  assert frames_touched(layer(x, mask), base) == list(range(15 - future, 15 + past + 1))
  if width == 8:  # output t sees t-3..t+4: the impulse reaches outputs 11..18
    assert frames_touched(layer(x, mask), base) == list(range(11, 19))


def test_equals_tf_same_depthwise_convolution_then_batch_norm():
  """What OpenSeq2Seq computed: depthwise_conv2d(SAME) over [B, T, 1, C], BN, activation."""
  layer = row_conv(8, tf.nn.relu)
  rng = np.random.default_rng(0)
  x = rng.normal(size=(2, 21, 5)).astype(np.float32)
  norm = layer.norm
  for var, value in ((norm.moving_mean, rng.normal(size=5)),
                     (norm.moving_variance, rng.uniform(0.5, 2, 5)),
                     (norm.gamma, rng.uniform(0.5, 2, 5)), (norm.beta, rng.normal(size=5))):
    var.assign(value.astype(np.float32))
  kernel = layer.conv.kernel.numpy()  # [width, C, 1]
  conv = tf.nn.depthwise_conv2d(x[:, :, None, :], kernel[:, None, :, :], [1, 1, 1, 1], "SAME")
  expected = tf.nn.relu((conv[:, :, 0] - norm.moving_mean) / tf.sqrt(norm.moving_variance + 1e-3)
                        * norm.gamma + norm.beta)
  ours = layer(x, tf.ones([2, 21], tf.bool), training=False)
  np.testing.assert_allclose(ours, expected, atol=1e-5)


def test_batch_norm_and_activation_follow_the_convolution():
  encoder = DeepSpeech2Encoder(DS2_ROW_CONV, mode="train")
  run_encoder(encoder, padded_features(LENGTHS, NUM_FEATURES), LENGTHS)  # builds
  assert isinstance(encoder.row_conv.norm, keras.layers.BatchNormalization)
  assert encoder.row_conv.activation is tf.nn.relu  # the encoder's activation_fn
  layer = row_conv(8, tf.nn.relu)
  x = np.random.default_rng(1).normal(size=(3, 40, 5)).astype(np.float32)
  out = layer(x, tf.ones([3, 40], tf.bool), training=True).numpy()
  assert out.min() == 0.0 and (out == 0).mean() > 0.3  # relu'd: about half the values
  linear = row_conv(8)(x, tf.ones([3, 40], tf.bool), training=True).numpy()
  # batch statistics: each channel has mean ~0 and std ~1 over the batch's frames
  np.testing.assert_allclose(linear.mean((0, 1)), 0, atol=1e-4)
  np.testing.assert_allclose(linear.std((0, 1)), 1, atol=2e-2)  # eps=1e-3


def test_batch_statistics_ignore_padded_frames():
  layer = row_conv(8)
  rng = np.random.default_rng(2)
  lengths = [30, 12]
  x = rng.normal(size=(2, 30, 5)).astype(np.float32)
  mask = tf.sequence_mask(lengths, 30)
  clean = x.copy()
  clean[1, 12:] = 0
  noisy = x.copy()
  noisy[1, 12:] = 100 * rng.normal(size=(18, 5))
  a = layer(clean, mask, training=True).numpy()
  b = layer(noisy, mask, training=True).numpy()
  np.testing.assert_allclose(a[0], b[0], atol=1e-4)
  np.testing.assert_allclose(a[1, :12], b[1, :12], atol=1e-4)
  valid = np.concatenate([a[0], a[1, :12]])  # the statistics are those of the valid frames
  np.testing.assert_allclose(valid.mean(0), 0, atol=1e-4)


def test_encoder_impulse_reaches_three_past_and_four_future_frames():
  encoder = DeepSpeech2Encoder(LOCAL, mode="eval")
  x = np.zeros((1, 30, NUM_FEATURES), np.float32)
  base, _ = run_encoder(encoder, x, [30])
  x[0, 15] = 1.0
  out, _ = run_encoder(encoder, x, [30])
  assert frames_touched(out, base) == list(range(11, 19))


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("unidirectional", [False, True])
def test_padding_never_changes_an_utterance(training, unidirectional):
  encoder = DeepSpeech2Encoder({**DS2_ROW_CONV, "rnn_unidirectional": unidirectional},
                               mode="train")
  noisy, lengths = run_encoder(encoder, padded_features(LENGTHS, NUM_FEATURES, garbage=True),
                               LENGTHS, training=training)
  clean = padded_features(LENGTHS, NUM_FEATURES)
  if training:  # batch statistics: compare with the same batch, clean padding
    reference, _ = run_encoder(encoder, clean, LENGTHS, training=True)
  for i, n in enumerate(LENGTHS):
    if not training:
      alone, _ = run_encoder(encoder, clean[i:i + 1, :n], [n])
      reference_i = alone[0]
    else:
      reference_i = reference[i]
    np.testing.assert_allclose(noisy[i, :lengths[i]], reference_i[:lengths[i]], atol=1e-4)
    assert np.all(noisy[i, lengths[i]:] == 0)


def test_width_below_two_is_no_row_convolution():
  encoder = DeepSpeech2Encoder({**DS2_ROW_CONV, "row_conv_width": 1}, mode="eval")
  assert encoder.row_conv is None


@pytest.mark.parametrize("dtype", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision(dtype):
  encoder = DeepSpeech2Encoder(DS2_ROW_CONV, mode="train", dtype=dtype)
  x = tf.constant(padded_features(LENGTHS, NUM_FEATURES, garbage=True))
  with tf.GradientTape() as tape:
    out = encoder({"source_tensors": (x, tf.constant(LENGTHS))}, training=True)
    loss = tf.reduce_sum(tf.cast(out["outputs"], tf.float32))
  grads = tape.gradient(loss, encoder.row_conv.trainable_variables)
  assert out["outputs"].dtype == keras.mixed_precision.Policy(dtype).compute_dtype
  assert encoder.row_conv.conv.kernel.dtype == "float32"
  assert np.isfinite(out["outputs"].numpy().astype(np.float32)).all()
  assert all(g is not None and np.isfinite(g.numpy()).all() for g in grads)
