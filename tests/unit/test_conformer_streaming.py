"""Streaming ConformerEncoder: chunked limited-context attention, causal convolutions, and
stream_step (chunk by chunk with carried caches) against the whole-utterance pass."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.encoders import ConformerEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.conformer.attention import rel_shift, relative_position_encoding
from open_seq2seq.parts.conformer.streaming import cached_frames_valid, chunk_visibility
from tests.helpers.speech import padded_features

NUM_FEATURES = 20
LENGTHS = [45, 16, 29, 1]
TINY = {"d_model": 32, "num_layers": 2, "num_heads": 4, "conv_kernel_size": 6,
        "subsampling_channels": 8, "dropout": 0.0, "attention_dropout": 0.0,
        "conv_causal": True}


def streaming_encoder(context=(4, 1), mode="eval", **params):
  keras.utils.set_random_seed(0)
  enc = ConformerEncoder({**TINY, "att_context_size": list(context), **params}, mode=mode)
  rng = np.random.default_rng(3)
  enc.subsampling.build((None, None, NUM_FEATURES))
  for block in enc.blocks:  # eval-mode batch norm that is not the identity
    norm = block.conv.norm
    if hasattr(norm, "moving_mean"):
      norm.moving_mean.assign(rng.normal(size=norm.moving_mean.shape).astype(np.float32))
      norm.moving_variance.assign(rng.uniform(0.5, 2.0, norm.moving_variance.shape)
                                  .astype(np.float32))
    for bias in (block.attention.pos_bias_u, block.attention.pos_bias_v):
      bias.assign(rng.normal(size=bias.shape).astype(np.float32))
  return enc


def whole(enc, x, lengths):
  out, out_len = enc.encode(tf.constant(x), tf.constant(lengths, tf.int32), training=False)
  return out.numpy(), out_len.numpy()


def chunk_by_chunk(enc, x, lengths, chunks_per_step):
  """stream_step over the batch, ``chunks_per_step`` attention chunks at a time."""
  step = enc.chunk_frames * chunks_per_step
  steps = -(-x.shape[1] // step)
  x = np.pad(x, [(0, 0), (0, steps * step - x.shape[1]), (0, 0)])
  state = enc.initial_state(len(lengths), NUM_FEATURES)
  outputs, out_lengths = [], 0
  for i in range(steps):
    chunk_lengths = np.clip(np.array(lengths) - i * step, 0, step).astype(np.int32)
    y, n, state = enc.stream_step(tf.constant(x[:, i * step:(i + 1) * step]),
                                  tf.constant(chunk_lengths), state)
    assert y.shape[1] == step // enc.subsampling.factor
    outputs.append(y.numpy())
    out_lengths += n.numpy()
  return np.concatenate(outputs, axis=1), out_lengths, state


def check_equal(streamed, streamed_len, reference, reference_len):
  np.testing.assert_array_equal(streamed_len, reference_len)
  for i, n in enumerate(reference_len):
    np.testing.assert_allclose(streamed[i, :n], reference[i, :n], atol=3e-5, rtol=1e-4)
    assert np.all(streamed[i, n:] == 0)


# ----------------------------------------------------------------------- chunk by chunk
@pytest.mark.parametrize("kind,norm,context", [
    ("conv2d4", "batch_norm", (4, 1)),    # chunks of 2 frames (8 features), 2 chunks back
    ("conv2d4", "layer_norm", (3, 2)),    # chunks of 3 frames, 1 chunk back
    ("dw_striding8", "layer_norm", (0, 0)),  # one frame a chunk, no left context
    ("dw_striding8", "batch_norm", (6, 1)),
])
def test_chunk_by_chunk_equals_the_whole_utterance(kind, norm, context):
  """A padded batch (large values in the padding), one and two chunks per step, and the
  chunked inference of ``call``: the whole-utterance outputs, to float tolerance."""
  enc = streaming_encoder(context, subsampling=kind, conv_norm_type=norm)
  x = padded_features(LENGTHS, NUM_FEATURES, garbage=True)
  reference, reference_len = whole(enc, x, LENGTHS)
  assert np.abs(reference).max() > 0.1
  for per_step in (1, 2):
    streamed, streamed_len, state = chunk_by_chunk(enc, x, LENGTHS, per_step)
    check_equal(streamed, streamed_len, reference, reference_len)
    np.testing.assert_array_equal(state["frames"].numpy(), reference_len)
  out = enc({"source_tensors": (tf.constant(x), tf.constant(LENGTHS))}, training=False)
  assert out["outputs"].shape == reference.shape
  check_equal(out["outputs"].numpy(), out["src_lengths"].numpy(), reference, reference_len)
  # and in a graph, as export and evaluation trace it
  traced = tf.function(lambda f, n: enc({"source_tensors": (f, n)}))(
      tf.constant(x), tf.constant(LENGTHS))
  check_equal(traced["outputs"].numpy(), traced["src_lengths"].numpy(), reference,
              reference_len)


def test_an_utterance_longer_than_any_chunk_count_streams_with_a_fixed_state():
  """300 subsampled frames through a state whose size does not grow."""
  enc = streaming_encoder((4, 1), conv_norm_type="layer_norm", num_layers=1)
  x = padded_features([1200], NUM_FEATURES, seed=5)
  reference, reference_len = whole(enc, x, [1200])
  state = enc.initial_state(1, NUM_FEATURES)
  shapes = {k: v.shape for k, v in state.items()}
  streamed, streamed_len, state = chunk_by_chunk(enc, x, [1200], 3)
  assert {k: v.shape for k, v in state.items()} == shapes
  check_equal(streamed, streamed_len, reference, reference_len)


def test_no_output_depends_on_a_later_chunk():
  """Training path (the mask the model learns with): changing the features after chunk c
  leaves every output up to chunk c unchanged, and changes the next chunk's (layer norm:
  training batch norm takes statistics over the whole batch, later frames included)."""
  enc = streaming_encoder((2, 1), conv_norm_type="layer_norm")  # chunks of 8 features
  x = padded_features([64], NUM_FEATURES, seed=1)
  base, _ = enc.encode(tf.constant(x), tf.constant([64]), training=True)
  for cut in (8, 24, 40):
    changed = x.copy()
    changed[:, cut:] += 5.0
    out, _ = enc.encode(tf.constant(changed), tf.constant([64]), training=True)
    frames = cut // 4
    np.testing.assert_allclose(out[:, :frames], base[:, :frames], atol=1e-5)
    assert np.abs(out[:, frames:frames + 2] - base[:, frames:frames + 2]).max() > 1e-3


def test_attention_sees_its_chunk_and_the_left_chunks():
  visible = chunk_visibility(6, 2, 1).numpy()
  want = np.array([[1, 1, 0, 0, 0, 0],
                   [1, 1, 0, 0, 0, 0],
                   [1, 1, 1, 1, 0, 0],
                   [1, 1, 1, 1, 0, 0],
                   [0, 0, 1, 1, 1, 1],
                   [0, 0, 1, 1, 1, 1]], bool)
  np.testing.assert_array_equal(visible, want)
  # with a memory of 2 cached frames (one chunk): the cache is chunk -1
  np.testing.assert_array_equal(chunk_visibility(4, 2, 1, memory=2).numpy(),
                                [[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 0, 0],
                                 [0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]])
  np.testing.assert_array_equal(cached_frames_valid(tf.constant([0, 1, 2, 9]), 2).numpy(),
                                [[0, 0], [0, 1], [1, 1], [1, 1]])


def test_relative_shift_with_a_memory():
  """Queries are the last T of M + T keys: entry (i, j) is distance M + i - j."""
  queries, memory = 3, 4
  keys = memory + queries
  encoding = relative_position_encoding(queries, 8, memory).numpy()
  assert encoding.shape == (2 * queries + memory - 1, 8)
  np.testing.assert_allclose(encoding[0], relative_position_encoding(keys, 8).numpy()[0],
                             atol=1e-6)  # both start at distance keys - 1
  scores = np.random.default_rng(0).normal(size=(2, queries, encoding.shape[0]))
  shifted = rel_shift(tf.constant(scores)).numpy()
  assert shifted.shape == (2, queries, keys)
  for i in range(queries):
    for j in range(keys):
      distance = memory + i - j
      np.testing.assert_array_equal(shifted[:, i, j], scores[:, i, keys - 1 - distance])


# ----------------------------------------------------------------------- configuration
def test_a_full_context_encoder_refuses_to_stream():
  for params in ({}, {"att_context_size": [4, 1]}, {"conv_causal": True}):
    enc = ConformerEncoder({**TINY, "conv_causal": False, "conv_kernel_size": 5, **params})
    with pytest.raises(ConfigError, match=r"^encoder_params: streaming needs att_context_size"
                       r".*conv_causal: True \(this encoder has") as error:
      enc.stream_step(tf.zeros([1, 8, NUM_FEATURES]), tf.constant([8]),
                      {"frames": tf.zeros([1], tf.int32)})
    assert "\n" not in str(error.value)
    with pytest.raises(ConfigError, match="streaming needs"):
      enc.initial_state(1, NUM_FEATURES)


def test_stream_step_takes_whole_chunks():
  enc = streaming_encoder((4, 1))
  with pytest.raises(ValueError, match="multiple of 8 feature frames"):
    enc.stream_step(tf.zeros([1, 12, NUM_FEATURES]), tf.constant([12]),
                    enc.initial_state(1, NUM_FEATURES))


@pytest.mark.parametrize("params,match", [
    ({"att_context_size": [3, 1]}, "left context 3 is not a multiple of the chunk"),
    ({"att_context_size": [4]}, "att_context_size"),
    ({"att_context_size": [-1, 1]}, "att_context_size"),
    ({"conv_causal": False}, "conv_kernel_size: 6 is even"),
])
def test_streaming_config_errors(params, match):
  with pytest.raises(ConfigError, match=match):
    ConformerEncoder({**TINY, **params})


def test_streaming_training_step_has_finite_gradients():
  keras.utils.set_random_seed(0)
  enc = ConformerEncoder({**TINY, "att_context_size": [4, 1], "dropout": 0.1,
                          "stochastic_depth_drop_prob": 0.2}, mode="train")
  x = padded_features(LENGTHS, NUM_FEATURES)
  with tf.GradientTape() as tape:
    out = enc({"source_tensors": (tf.constant(x), tf.constant(LENGTHS))}, training=True)
    loss = tf.reduce_sum(tf.square(out["outputs"]))
  grads = tape.gradient(loss, enc.trainable_variables)
  assert all(g is not None and np.isfinite(g.numpy()).all() for g in grads)


def test_streaming_in_half_precision():
  """Under a mixed policy the caches are in the compute dtype and chunked inference stays
  close to the whole-utterance pass (bfloat16 rounding only)."""
  keras.utils.set_random_seed(0)
  enc = ConformerEncoder({**TINY, "att_context_size": [4, 1]}, mode="eval", dtype="mixed")
  x = padded_features(LENGTHS, NUM_FEATURES)
  state = enc.initial_state(2, NUM_FEATURES)
  assert state["block1_keys"].dtype == enc.compute_dtype != tf.float32
  out = enc({"source_tensors": (tf.constant(x), tf.constant(LENGTHS))}, training=False)
  reference, _ = enc.encode(tf.constant(x), tf.constant(LENGTHS), training=False)
  assert out["outputs"].dtype == enc.compute_dtype
  difference = tf.abs(tf.cast(out["outputs"], tf.float32) - tf.cast(reference, tf.float32))
  assert float(tf.reduce_max(difference)) < 0.1
