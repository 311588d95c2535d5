"""ConformerEncoder and its parts: shapes and lengths, padding masks, the relative-position
scores against a direct computation, stochastic depth, half precision, parameter count."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.encoders import ConformerEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.conformer.attention import (RelPositionMultiHeadAttention, rel_shift,
                                                    relative_position_encoding)
from open_seq2seq.parts.conformer.modules import stochastic_depth_probs
from open_seq2seq.parts.conformer.subsampling import subsampled_lengths
from tests.helpers.speech import (build_model, padded_features, run_encoder, speech_config,
                                  write_corpus)

NUM_FEATURES = 20
LENGTHS = [37, 16, 25, 1]
TINY = {"d_model": 32, "num_layers": 2, "num_heads": 4, "conv_kernel_size": 7,
        "subsampling_channels": 8}
NO_DROPOUT = {"dropout": 0.0, "attention_dropout": 0.0}
KINDS = ["conv2d4", "dw_striding8"]
NORMS = ["batch_norm", "layer_norm"]


def encoder(mode="eval", **params):
  keras.utils.set_random_seed(0)
  return ConformerEncoder({**TINY, **params}, mode=mode)


def batch(lengths, garbage=False, seed=0):
  return padded_features(lengths, NUM_FEATURES, garbage, seed)


def expected_lengths(lengths, stages):
  """Frames after ``stages`` convs of width 3, stride 2, one frame of padding each side."""
  lengths = np.asarray(lengths)
  for _ in range(stages):
    lengths = (lengths + 2 - 3) // 2 + 1
  return lengths


# ----------------------------------------------------------------------- shapes and lengths
@pytest.mark.parametrize("kind,stages", [("conv2d4", 2), ("dw_striding8", 3)])
def test_shapes_and_lengths(kind, stages):
  enc = encoder(subsampling=kind)
  out, lengths = run_encoder(enc, batch(LENGTHS), LENGTHS)
  want = expected_lengths(LENGTHS, stages)
  assert lengths.tolist() == want.tolist() == subsampled_lengths(np.array(LENGTHS), kind).tolist()
  assert want.tolist() == [math.ceil(n / 2 ** stages) for n in LENGTHS]
  assert out.shape == (len(LENGTHS), expected_lengths([max(LENGTHS)], stages)[0], 32)
  for i, n in enumerate(lengths):
    assert np.all(out[i, n:] == 0) and np.any(out[i, :n] != 0)
    # the lengths are the frames the convolutions give an utterance alone
    alone, _ = run_encoder(enc, batch(LENGTHS)[i:i + 1, :LENGTHS[i]], [LENGTHS[i]])
    assert alone.shape[1] == n


# ----------------------------------------------------------------------- padding masks
def check_same(batch_out, batch_len, alone_out, alone_len):
  assert batch_len == alone_len == alone_out.shape[0]
  np.testing.assert_allclose(batch_out[:batch_len], alone_out[:alone_len], atol=2e-5,
                             rtol=1e-4)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("kind", KINDS)
def test_padding_never_changes_an_utterance(kind, norm):
  """Alone or padded by longer utterances (with large values in the padding), in eval and
  in training (dropout off). Batch norm in training normalises with the batch's statistics,
  which the other utterances change: there an utterance padded by large values in a batch
  of its own equals it alone (statistics over real frames only), and a padded batch gives
  the same outputs with zeros or large values in its padding."""
  enc = encoder(subsampling=kind, conv_norm_type=norm, **NO_DROPOUT)
  clean, noisy = batch(LENGTHS), batch(LENGTHS, garbage=True)
  for training in (False, True):
    out, out_len = run_encoder(enc, noisy, LENGTHS, training=training)
    for i, n in enumerate(LENGTHS):
      alone, alone_len = run_encoder(enc, clean[i:i + 1, :n], [n], training=training)
      if not training or norm == "layer_norm":
        check_same(out[i], out_len[i], alone[0], alone_len[0])
      padded, padded_len = run_encoder(enc, noisy[i:i + 1], [n], training=training)
      check_same(padded[0], padded_len[0], alone[0], alone_len[0])
    if training and norm == "batch_norm":
      reference, _ = run_encoder(enc, clean, LENGTHS, training=True)
      for i, n in enumerate(out_len):
        np.testing.assert_allclose(out[i, :n], reference[i, :n], atol=2e-5, rtol=1e-4)


def test_batch_norm_statistics_come_from_real_frames_only():
  """The moving averages after one training call are those of the real frames."""
  enc = encoder(**NO_DROPOUT, num_layers=1)
  run_encoder(enc, batch(LENGTHS), LENGTHS, training=True)
  bn = enc.blocks[0].conv.norm
  clean_mean = bn.moving_mean.numpy().copy()
  enc2 = encoder(**NO_DROPOUT, num_layers=1)
  run_encoder(enc2, batch(LENGTHS, garbage=True), LENGTHS, training=True)
  np.testing.assert_allclose(enc2.blocks[0].conv.norm.moving_mean.numpy(), clean_mean,
                             atol=1e-5)


# ----------------------------------------------------------------------- relative positions
def test_rel_shift_moves_distance_rows_to_key_columns():
  length = 5
  scores = np.random.default_rng(0).normal(size=(2, 3, length, 2 * length - 1))
  shifted = rel_shift(tf.constant(scores)).numpy()
  for i in range(length):
    for j in range(length):
      # column k of the input holds distance length - 1 - k; (i, j) needs distance i - j
      np.testing.assert_array_equal(shifted[:, :, i, j], scores[:, :, i, length - 1 - (i - j)])


def sinusoid(distance, depth):
  """Transformer-XL's encoding of one relative distance: [sin(r w), cos(r w)]."""
  freqs = 1.0 / 10000 ** (np.arange(0, depth, 2) / depth)
  return np.concatenate([np.sin(distance * freqs), np.cos(distance * freqs)])


def test_relative_scores_equal_a_direct_quadratic_computation():
  d_model, heads, length = 16, 2, 6
  depth = d_model // heads
  layer = RelPositionMultiHeadAttention(d_model, heads, name="att")
  layer.build()
  rng = np.random.default_rng(1)
  layer.pos_bias_u.assign(rng.normal(size=(heads, depth)).astype(np.float32))
  layer.pos_bias_v.assign(rng.normal(size=(heads, depth)).astype(np.float32))
  qkv_bias = layer.qkv_dense.bias
  qkv_bias.assign(rng.normal(size=qkv_bias.shape).astype(np.float32))
  x = rng.normal(size=(2, length, d_model)).astype(np.float32)
  positions = relative_position_encoding(length, d_model)
  ours = layer.scores(tf.constant(x), positions).numpy()

  w_qkv, b_qkv = layer.qkv_dense.kernel.numpy(), qkv_bias.numpy()
  w_pos = layer.pos_dense.kernel.numpy()
  u, v = layer.pos_bias_u.numpy(), layer.pos_bias_v.numpy()
  direct = np.zeros((2, heads, length, length))
  for b in range(2):
    q, k, _ = np.split(x[b] @ w_qkv + b_qkv, 3, axis=-1)
    for h in range(heads):
      cols = slice(h * depth, (h + 1) * depth)
      for i in range(length):
        for j in range(length):
          r = sinusoid(i - j, d_model) @ w_pos
          content = (q[i, cols] + u[h]) @ k[j, cols]
          position = (q[i, cols] + v[h]) @ r[cols]
          direct[b, h, i, j] = (content + position) / math.sqrt(depth)
  np.testing.assert_allclose(ours, direct, atol=1e-4, rtol=1e-4)


def test_relative_position_encoding_rows():
  enc = relative_position_encoding(4, 10).numpy()
  assert enc.shape == (7, 10)
  for k in range(7):
    np.testing.assert_allclose(enc[k], sinusoid(3 - k, 10), atol=1e-5)


# ----------------------------------------------------------------------- stochastic depth
def test_stochastic_depth_probabilities():
  assert stochastic_depth_probs(4, 0.3) == pytest.approx([0.0, 0.1, 0.2, 0.3])
  assert stochastic_depth_probs(4, 0.3, "uniform", 2) == pytest.approx([0, 0, 0.3, 0.3])
  assert stochastic_depth_probs(16, 0.0) == [0.0] * 16
  assert encoder(stochastic_depth_drop_prob=0.2).drop_probs == pytest.approx([0.0, 0.2])


def test_stochastic_depth_drops_each_block_with_its_probability():
  enc = encoder(num_layers=4, stochastic_depth_drop_prob=0.6)
  probs = np.array(enc.drop_probs)  # 0, 0.2, 0.4, 0.6
  draws = 3000
  scales = np.stack([enc.layer_scales(True).numpy() for _ in range(draws)])
  dropped = (scales == 0).mean(0)
  # binomial standard deviation <= 0.0090 at 3000 draws: 4.5 sigma
  np.testing.assert_allclose(dropped, probs, atol=0.04)
  assert dropped[0] == 0
  for layer, p in enumerate(probs):  # a kept block's change is scaled by 1 / (1 - p)
    kept = scales[:, layer][scales[:, layer] > 0]
    np.testing.assert_allclose(kept, 1 / (1 - p), rtol=1e-6)
  assert enc.layer_scales(False) is None


def test_stochastic_depth_skips_blocks_and_is_identity_at_inference():
  enc = encoder(conv_norm_type="layer_norm", **NO_DROPOUT, stochastic_depth_drop_prob=0.5,
                stochastic_depth_mode="uniform")
  x, lengths = batch([21, 14]), [21, 14]
  embedded, sub_len = enc.embed(tf.constant(x), tf.constant(lengths))
  mask = tf.sequence_mask(sub_len, tf.shape(embedded)[1])
  length = int(embedded.shape[1])
  bias = tf.where(mask, 0.0, -1e9)[:, None, None, :]
  positions = relative_position_encoding(length, 32)
  block1 = enc.blocks[0](embedded, positions, mask, bias).numpy()
  block2 = enc.blocks[1](tf.constant(block1), positions, mask, bias).numpy()
  keep = mask.numpy()[:, :, None]

  eval_out, _ = run_encoder(enc, x, lengths, training=False)  # every block, unscaled
  np.testing.assert_allclose(eval_out, block2 * keep, atol=1e-5)

  # block 1 never skipped (start layer 1); block 2: skipped, then kept with scale 2
  for scales, want in [([1.0, 0.0], block1), ([1.0, 2.0], block1 + 2.0 * (block2 - block1))]:
    enc.layer_scales = lambda training, s=scales: tf.constant(s)
    out, _ = run_encoder(enc, x, lengths, training=True)
    np.testing.assert_allclose(out, want * keep, atol=1e-5)


def test_stochastic_depth_seed_is_checkpointed():
  from open_seq2seq.training.checkpoints import named_variables
  names = named_variables({"encoder": encoder(stochastic_depth_drop_prob=0.1)})
  assert any("stochastic_depth_seed" in name for name in names), sorted(names)
  assert not any("stochastic_depth_seed" in name for name in named_variables(
      {"encoder": encoder()}))


# ----------------------------------------------------------------------- precision
@pytest.mark.parametrize("dtype,compute", [("mixed", None), ("mixed_float16", tf.float16),
                                           ("float16", tf.float16)])
def test_half_precision_outputs_and_gradients_are_finite(dtype, compute):
  from open_seq2seq.utils.precision import compute_dtype
  compute = compute or compute_dtype("mixed")  # bfloat16 on this CPU, float16 on GPUs
  keras.utils.set_random_seed(0)
  params = {**TINY, "stochastic_depth_drop_prob": 0.3, "num_layers": 3}
  enc = ConformerEncoder(params, mode="train", dtype=dtype)
  reference = ConformerEncoder(params, mode="eval", dtype="float32")
  x = batch(LENGTHS, garbage=True)
  inputs = {"source_tensors": (tf.constant(x), tf.constant(LENGTHS))}
  with tf.GradientTape() as tape:
    out = enc(inputs, training=True)["outputs"]
    loss = tf.reduce_sum(tf.square(tf.cast(out, tf.float32)))
  grads = tape.gradient(loss, enc.trainable_variables)
  assert out.dtype == compute
  assert np.isfinite(tf.cast(out, tf.float32).numpy()).all()
  assert all(g is not None and np.isfinite(tf.cast(g, tf.float32).numpy()).all()
             for g in grads)
  # the softmax sees float32 scores
  block = enc.blocks[0]
  positions = tf.cast(relative_position_encoding(5, 32), compute)
  assert block.attention.scores(tf.zeros([1, 5, 32], compute), positions).dtype == tf.float32
  # and the half-precision encoder computes what float32 does with the same weights
  run_encoder(reference, x, LENGTHS)
  reference.set_weights([w.numpy().astype(np.float32) for w in enc.weights])
  half = tf.cast(enc(inputs, training=False)["outputs"], tf.float32).numpy()
  full, _ = run_encoder(reference, x, LENGTHS)
  assert np.abs(half - full).max() < 0.15, np.abs(half - full).max()


# ----------------------------------------------------------------------- size and config
def conformer_parameters(d, layers, kernel, features, channels, expansion=4):
  """Trainable parameters of the encoder as built here (conv2d4), counted by hand."""
  freq = math.ceil(math.ceil(features / 2) / 2)
  subsampling = (9 * channels + channels) + (9 * channels * channels + channels) \
      + (freq * channels * d + d)
  norms = 5 * 2 * d  # four pre-norms and the output norm
  ffn = 2 * (d * expansion * d + expansion * d + expansion * d * d + d)
  attention = (3 * d * d + 3 * d) + d * d + (d * d + d) + 2 * d  # qkv, pos, out, u+v
  conv = (d * 2 * d + 2 * d) + (kernel * d + d) + 2 * d + (d * d + d)  # pw1, dw, bn, pw2
  return subsampling + layers * (norms + ffn + attention + conv)


def test_conformer_s_parameter_count():
  """Conformer-S (Gulati et al. 2020, table 1): 10.3 M parameters with its decoder, one
  LSTM layer of 320 units (a transducer's prediction and joint networks). Here: the encoder
  alone at d_model 144, 16 blocks, 4 heads, kernel 31, 80 mel features."""
  enc = ConformerEncoder({}, mode="eval")
  run_encoder(enc, np.zeros((1, 16, 80), np.float32), [16])
  count = sum(int(np.prod(w.shape)) for w in enc.trainable_weights)
  assert count == conformer_parameters(144, 16, 31, 80, 144) == 8_710_848
  # what the paper's total leaves for the encoder after a 1 x 320 LSTM decoder: ~1.6 M
  assert 8.5e6 < count < 8.9e6


@pytest.mark.parametrize("params,match", [
    ({"conv_kernel_size": 8}, "conv_kernel_size: 8 is even"),
    ({"num_heads": 5}, "num_heads: 5 does not divide d_model 32"),
    ({"dropout": 1.0}, r"dropout: must be in \[0, 1\)"),
    ({"stochastic_depth_start_layer": 3}, "stochastic_depth_start_layer"),
    ({"subsampling": "conv2d6"}, "subsampling"),
    ({"num_layer": 2}, "did you mean 'num_layers'"),
])
def test_config_errors(params, match):
  with pytest.raises(ConfigError, match=match):
    ConformerEncoder({**TINY, **params})


def test_unexpected_constructor_keyword_is_a_type_error():
  with pytest.raises(TypeError, match="vocab_sise"):
    ConformerEncoder({}, vocab_sise=3)


def test_speech2text_with_ctc_trains_a_step(tmp_path):
  corpus = write_corpus(str(tmp_path), ["one", "two three", "four", "five six"],
                        durations=[0.5, 0.9, 0.3, 0.7])
  config = speech_config([corpus], encoder=ConformerEncoder,
                         encoder_params={**TINY, "subsampling": "dw_striding8"})
  model = build_model(config, "train")
  data = next(iter(model.data_layer.build_dataset()))
  with tf.GradientTape() as tape:
    loss, weight, out = model.compute_loss(data, training=True)
  grads = tape.gradient(loss, model.trainable_variables)
  assert np.isfinite(loss.numpy()) and weight.numpy() == 4
  assert all(g is not None and np.isfinite(g.numpy()).all() for g in grads)
  features = data["source_tensors"][1].numpy()
  np.testing.assert_array_equal(out["src_lengths"].numpy(),
                                subsampled_lengths(features, "dw_striding8"))


def test_the_position_biases_are_not_regularized_as_weights():
  from open_seq2seq.parts.conformer.attention import RelPositionMultiHeadAttention  # pylint: disable=import-outside-toplevel
  from open_seq2seq.utils.regularizers import is_regularized  # pylint: disable=import-outside-toplevel
  layer = RelPositionMultiHeadAttention(d_model=8, num_heads=2)
  layer.build()
  assert not is_regularized(layer.pos_bias_u) and not is_regularized(layer.pos_bias_v)
  assert is_regularized(layer.qkv_dense.kernel)
