"""Relative position representations in the Transformer (``max_relative_positions``)."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.beam_search import length_penalty
from open_seq2seq.parts.transformer.attention import SelfAttention, relative_indices
from tests.helpers.text import EOS, batch_of, random_tokens, run
from tests.unit.test_transformer import build, decoder_embedding_matrices, naive_greedy

RELATIVE = {"max_relative_positions": 3}


def test_relative_indices_clip_the_distance_from_query_to_key():
  indices = relative_indices(tf.constant([0, 4]), 6, 2).numpy()
  # row of distance j - i clipped to [-2, 2], shifted by 2
  np.testing.assert_array_equal(indices, [[2, 3, 4, 4, 4, 4], [0, 0, 0, 1, 2, 3]])


def shaw_attention(layer, x, bias):
  """numpy: softmax_j(q_i . (k_j + a^K_ij) / sqrt(d)) (v_j + a^V_ij), heads merged, projected."""
  heads, depth, big_k = layer.num_heads, layer.depth, layer.max_relative_positions
  qkv = x @ layer.qkv_dense.kernel.numpy()
  batch, length, _ = x.shape
  q, k, v = (qkv.reshape(batch, length, 3, heads, depth)[:, :, part].transpose(0, 2, 1, 3)
             for part in range(3))
  distance = np.clip(np.arange(length)[None, :] - np.arange(length)[:, None], -big_k, big_k)
  rel_k = layer.relative_keys.numpy()[distance + big_k]  # [i, j, d]
  rel_v = layer.relative_values.numpy()[distance + big_k]
  logits = (np.einsum("bnid,bnjd->bnij", q, k) + np.einsum("bnid,ijd->bnij", q, rel_k))
  logits = logits / np.sqrt(depth) + bias
  weights = np.exp(logits - logits.max(-1, keepdims=True))
  weights /= weights.sum(-1, keepdims=True)
  out = np.einsum("bnij,bnjd->bnid", weights, v) + np.einsum("bnij,ijd->bnid", weights, rel_v)
  merged = out.transpose(0, 2, 1, 3).reshape(batch, length, heads * depth)
  return merged @ layer.output_dense.kernel.numpy()


def test_self_attention_computes_the_shaw_formula():
  tf.random.set_seed(0)
  layer = SelfAttention(16, 2, max_relative_positions=2)
  layer.build()
  rng = np.random.default_rng(0)
  for table in (layer.relative_keys, layer.relative_values):  # not the initial small values
    table.assign(rng.normal(size=table.shape).astype(np.float32))
  x = rng.normal(size=(2, 7, 16)).astype(np.float32)
  bias = np.zeros((2, 1, 1, 7), np.float32)
  bias[1, ..., 5:] = -1e9  # the second row is 5 long
  np.testing.assert_allclose(layer(tf.constant(x), tf.constant(bias)).numpy(),
                             shaw_attention(layer, x, bias), atol=1e-4)
  names = {w.path.split("/")[-1] for w in layer.weights}
  assert {"relative_position_keys", "relative_position_values"} <= names
  assert layer.relative_keys.shape == (5, 8)


def test_no_sinusoidal_positions_are_added():
  """With the relative tables at zero, nothing tells the positions of a constant sequence
  apart; with sinusoidal positions every position differs."""
  src = batch_of([[5] * 8], 13)
  relative, absolute = build(RELATIVE, RELATIVE), build()
  for weight in relative.encoder.weights:
    if "relative_position" in weight.path:
      weight.assign(tf.zeros_like(weight))
  outputs = run(relative, src)[0]["outputs"].numpy()[0, :8]  # (then EOS)
  np.testing.assert_allclose(outputs, np.broadcast_to(outputs[:1], outputs.shape), atol=1e-5)
  sinusoidal = run(absolute, src)[0]["outputs"].numpy()[0, :8]
  assert np.abs(sinusoidal - sinusoidal[:1]).max() > 1e-2


@pytest.mark.parametrize("norm_placement", ["pre", "post"])
def test_padding_never_changes_an_example(norm_placement):
  params = {**RELATIVE, "norm_placement": norm_placement}
  model = build(params, params)
  rng = np.random.default_rng(1)
  src_tokens, tgt_tokens = random_tokens(rng, [3, 8], 13), random_tokens(rng, [2, 6], 11)
  enc_one, dec_one = run(model, batch_of(src_tokens[:1], 13), batch_of(tgt_tokens[:1], 11))
  enc_two, dec_two = run(model, batch_of(src_tokens, 13), batch_of(tgt_tokens, 11))
  np.testing.assert_allclose(enc_two["outputs"][0, :4], enc_one["outputs"][0], atol=1e-5)
  np.testing.assert_allclose(dec_two["logits"][0, :3], dec_one["logits"][0], atol=1e-5)


def without_eos(model):
  """Decodes run to their limit, well past the clipping distance: EOS's logit is 0 (the
  other tokens' largest is positive)."""
  (embedding,) = decoder_embedding_matrices(model)
  embedding.assign(tf.tensor_scatter_nd_update(embedding, [[EOS]], tf.zeros([1, 16])))
  return model


def test_incremental_decoding_equals_teacher_forcing():
  """The cached step (position = the cache's step) gives what the whole prefix gives."""
  extra = 4
  model = without_eos(build(RELATIVE, {**RELATIVE, "beam_size": 1,
                                       "extra_decode_length": extra}))
  rng = np.random.default_rng(4)
  src_tokens = random_tokens(rng, [2, 7, 3], 13)
  _, pred = run(model, batch_of(src_tokens, 13))
  for b, tokens in enumerate(src_tokens):
    expected = naive_greedy(model, tokens, len(tokens) + 1 + extra)
    n = int(pred["final_sequence_lengths"][b])
    assert n > 4 and pred["outputs"][b, :n].numpy().tolist() == expected


def test_beam_scores_match_teacher_forcing():
  alpha = 2.0  # a strong length reward: hypotheses longer than the clipping distance
  model = without_eos(build(RELATIVE, {**RELATIVE, "beam_size": 4, "alpha": alpha,
                                       "extra_decode_length": 5}))
  rng = np.random.default_rng(5)
  src_tokens = random_tokens(rng, [3, 8], 13)
  _, pred = run(model, batch_of(src_tokens, 13))
  for b in range(2):
    n = int(pred["final_sequence_lengths"][b])
    assert n > 4  # longer than the clipping distance
    seq = pred["outputs"][b, :n].numpy()
    _, dec = run(model, batch_of(src_tokens[b:b + 1], 13),
                 (tf.constant([seq], tf.int32), tf.constant([n])))
    log_probs = tf.nn.log_softmax(dec["logits"][0]).numpy()
    score = log_probs[np.arange(n), seq].sum() / float(length_penalty(n, alpha))
    np.testing.assert_allclose(pred["scores"][b], score, rtol=1e-4)


def test_mixed_precision_keeps_the_tables_in_float32():
  model = build(RELATIVE, RELATIVE, dtype="mixed_bfloat16")
  rng = np.random.default_rng(6)
  enc, dec = run(model, batch_of(random_tokens(rng, [4, 6], 13), 13),
                 batch_of(random_tokens(rng, [3, 5], 11), 11))
  tables = [w for w in model.decoder.weights if "relative_position" in w.path]
  assert len(tables) == 2 * 2 and all(w.dtype == "float32" for w in tables)
  assert enc["outputs"].dtype == tf.bfloat16 and np.isfinite(dec["logits"].numpy()).all()


def test_a_negative_distance_is_a_config_error():
  with pytest.raises(ConfigError, match="encoder_params/max_relative_positions: must be 0"):
    build({"max_relative_positions": -1})
