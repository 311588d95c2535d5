"""ConvS2SEncoder / ConvS2SDecoder: incremental decoding, masks, causality, precision."""

import math
import types

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.decoders.convs2s_decoder import ConvS2SDecoder
from open_seq2seq.encoders.convs2s_encoder import ConvS2SEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts import beam_search
from open_seq2seq.parts.convs2s.conv_wn_layer import shifted_conv1d
from open_seq2seq.parts.convs2s.utils import gated_linear_units
from tests.helpers.text import EOS, GO, PAD, batch_of, random_tokens, run

EMB = 16
# Widths change (projection on the residual) and a width-1 kernel has no cache.
CONVS = [(16, 3), (16, 3), (24, 2), (24, 1)]


def build(encoder_params=None, decoder_params=None, src_vocab=13, tgt_vocab=11,
          dtype="float32", seed=1):
  """A tiny encoder/decoder pair, given sizes and shared layers as Text2Text wires them."""
  tf.random.set_seed(seed)
  encoder = ConvS2SEncoder({"src_emb_size": EMB, "conv_nchannels_kwidth": CONVS,
                            "att_layer_num": len(CONVS), **(encoder_params or {})},
                           vocab_size=src_vocab, dtype=dtype)
  decoder = ConvS2SDecoder({"tgt_emb_size": EMB, "conv_nchannels_kwidth": CONVS,
                            **(decoder_params or {})}, vocab_size=tgt_vocab, dtype=dtype)
  if decoder.params["shared_embed"]:
    decoder.reuse_embeddings(encoder.embedding_softmax_layer)
  return types.SimpleNamespace(encoder=encoder, decoder=decoder)


def incremental_logits(decoder, enc, inputs):
  """Logits [B, T, V] of feeding ``inputs`` [B, T] one token at a time through the caches."""
  memory = decoder._memory(enc)
  caches = decoder.initial_caches(tf.shape(inputs)[0])
  steps = []
  for i in range(inputs.shape[1]):
    logits, caches = decoder.step(inputs[:, i], i, caches, memory, decoder.embedding)
    steps.append(logits)
  return tf.stack(steps, axis=1)


# ----------------------------------------------------------------------------- parts
def test_gated_linear_units():
  x = tf.constant([[[1.0, -2.0, 0.0, 3.0]]])
  expected = np.array([1.0, -2.0]) / (1 + np.exp(-np.array([0.0, 3.0])))
  np.testing.assert_allclose(gated_linear_units(x).numpy()[0, 0], expected, rtol=1e-6)
  assert gated_linear_units(tf.zeros([2, 6])).shape == (2, 3)
  with pytest.raises(ValueError):
    gated_linear_units(tf.zeros([1, 3]))


@pytest.mark.parametrize("width", [1, 2, 3, 4])
@pytest.mark.parametrize("causal", [False, True])
def test_shifted_conv1d_equals_tf_conv1d(width, causal):
  x = tf.random.stateless_normal([2, 5, 3], seed=[1, width])
  kernel = tf.random.stateless_normal([width, 3, 4], seed=[2, width])
  if causal:
    expected = tf.nn.conv1d(tf.pad(x, [[0, 0], [width - 1, 0], [0, 0]]), kernel, 1, "VALID")
  else:
    expected = tf.nn.conv1d(x, kernel, 1, "SAME")
  np.testing.assert_allclose(shifted_conv1d(x, kernel, causal).numpy(), expected.numpy(),
                             rtol=1e-5, atol=1e-5)


def test_weight_norm_kernel_norm_is_g():
  model = build()
  conv, linear = model.decoder.convs[2], model.decoder.linear_before
  for layer, axes in ((conv, (0, 1)), (linear, (0,))):
    # At the start g = ||v||, so the effective kernel is v itself.
    np.testing.assert_allclose(layer.kernel.numpy(), layer.v.numpy(), rtol=1e-5, atol=1e-6)
    layer.g.assign(np.linspace(0.5, 2.0, layer.g.shape[0]).astype(np.float32))
    norms = np.linalg.norm(layer.kernel.numpy(), axis=axes)
    np.testing.assert_allclose(norms, layer.g.numpy(), rtol=1e-5)
  assert conv.v.shape == (2, 16, 48)  # GLU: the conv produces twice the channels


def test_position_embedding_past_the_table_is_zero():
  model = build(decoder_params={"max_input_length": 4})
  pos = model.decoder.position_embedding_layer(tf.range(6)).numpy()
  assert (np.abs(pos[:4]).sum(axis=1) > 0).all()
  np.testing.assert_array_equal(pos[4:], 0.0)


# ----------------------------------------------------------------------------- encoder
def test_shapes_and_outputs():
  model = build(decoder_params={"extra_decode_length": 3})
  rng = np.random.default_rng(0)
  src = batch_of(random_tokens(rng, [3, 5], 13), 13)
  tgt = batch_of(random_tokens(rng, [4, 2], 11), 11)
  enc, dec = run(model, src, tgt, training=True)
  assert enc["outputs"].shape == (2, 6, EMB) and enc["outputs_b"].shape == (2, 6, EMB)
  assert enc["state"].shape == (2, EMB)
  assert enc["inputs_attention_bias"].shape == (2, 1, 1, 6)
  assert enc["src_lengths"].numpy().tolist() == [4, 6]
  np.testing.assert_array_equal(enc["outputs"].numpy()[0, 4:], 0.0)
  np.testing.assert_array_equal(enc["encoder_input"].numpy(), src[0].numpy())
  assert dec["logits"].shape == (2, 5, 11) and dec["logits"].dtype == tf.float32
  assert dec["outputs"].shape == (2, 5) and dec["outputs"].dtype == tf.int32
  assert dec["final_sequence_lengths"].numpy().tolist() == [5, 3]

  for beam_size in (1, 3):
    model.decoder.params["beam_size"] = beam_size
    _, pred = run(model, src)
    ids, lengths = pred["outputs"].numpy(), pred["final_sequence_lengths"].numpy()
    assert pred["outputs"].dtype == tf.int32 and pred["scores"].shape == (2,)
    assert ids.shape[1] <= 6 + 3
    for row, n, limit in zip(ids, lengths, [4 + 3, 6 + 3]):
      assert 1 <= n <= limit
      assert (row[n:] == PAD).all()
      assert EOS not in row[:n - 1] and (row[n - 1] == EOS or n == limit)


@pytest.mark.parametrize("normalization_type", ["weight_norm", "batch_norm", "layer_norm",
                                                None])
def test_padding_never_changes_outputs(normalization_type):
  norm = {"normalization_type": normalization_type}
  model = build(encoder_params=norm, decoder_params=norm)
  rng = np.random.default_rng(1)
  sources, targets = random_tokens(rng, [3, 7], 13), random_tokens(rng, [2, 6], 11)
  enc_b, dec_b = run(model, batch_of(sources, 13), batch_of(targets, 11))
  enc_1, dec_1 = run(model, batch_of(sources[:1], 13), batch_of(targets[:1], 11))
  for key in ("outputs", "outputs_b"):
    np.testing.assert_allclose(enc_b[key].numpy()[0, :4], enc_1[key].numpy()[0], atol=1e-5)
  np.testing.assert_allclose(enc_b["state"].numpy()[0], enc_1["state"].numpy()[0], atol=1e-5)
  np.testing.assert_allclose(dec_b["logits"].numpy()[0, :3], dec_1["logits"].numpy()[0],
                             atol=1e-5)


def test_encoder_key_gradient_is_scaled():
  model = build(encoder_params={"att_layer_num": 2})
  src = batch_of([[4, 5, 6]], 13)
  with tf.GradientTape() as tape:
    keys = tf.reduce_sum(model.encoder({"source_tensors": src})["outputs"])
  variable = model.encoder.linear_after.b
  g_keys = tape.gradient(keys, variable).numpy()
  np.testing.assert_allclose(g_keys, np.full_like(g_keys, 4 * 0.25), rtol=1e-6)


# ----------------------------------------------------------------------------- decoder
@pytest.mark.parametrize("decoder_params", [{}, {"pos_embed": False, "shared_embed": True},
                                            {"normalization_type": "layer_norm",
                                             "out_emb_size": 12}])
def test_incremental_decoding_matches_teacher_forcing(decoder_params):
  model = build(decoder_params=decoder_params, tgt_vocab=13)
  rng = np.random.default_rng(2)
  src = batch_of(random_tokens(rng, [5, 3, 8], 13), 13)
  tgt = batch_of(random_tokens(rng, [6, 9, 2], 13), 13)
  enc, dec = run(model, src, tgt)
  ids = tgt[0]
  inputs = tf.concat([tf.fill([3, 1], GO), ids[:, :-1]], axis=1)
  stepped = incremental_logits(model.decoder, enc, inputs)
  np.testing.assert_allclose(stepped.numpy(), dec["logits"].numpy(), atol=1e-5, rtol=1e-5)


def test_decoder_is_causal():
  model = build()
  rng = np.random.default_rng(3)
  src = batch_of(random_tokens(rng, [5], 13), 13)
  tokens = random_tokens(rng, [7], 11)[0]
  _, dec = run(model, src, batch_of([tokens], 11))
  changed = tokens[:3] + [(t + 1 - 4) % 7 + 4 for t in tokens[3:]]
  _, dec_changed = run(model, src, batch_of([changed], 11))
  # Logits at t read inputs GO, y_0 .. y_{t-1}: positions 0..3 never see y_3 onwards.
  np.testing.assert_allclose(dec["logits"].numpy()[0, :4], dec_changed["logits"].numpy()[0, :4],
                             atol=1e-6)
  assert not np.allclose(dec["logits"].numpy()[0, 4:], dec_changed["logits"].numpy()[0, 4:])


def naive_greedy(model, src_tokens, max_len):
  """Greedy decoding by re-running teacher forcing on the whole prefix (no cache)."""
  src = batch_of([src_tokens], 13)
  prefix = []
  while len(prefix) < max_len:
    _, dec = run(model, src, (tf.constant([prefix + [PAD]], tf.int32), tf.constant([1])))
    logits = dec["logits"][0, -1].numpy()
    logits[[PAD, GO]] = -np.inf  # the search never emits them
    token = int(np.argmax(logits))
    prefix.append(token)
    if token == EOS:
      break
  return prefix


def test_beam_size_one_is_greedy_with_incremental_caches():
  extra = 2
  model = build(decoder_params={"beam_size": 1, "extra_decode_length": extra})
  rng = np.random.default_rng(4)
  src_tokens = random_tokens(rng, [2, 4], 13)
  _, pred = run(model, batch_of(src_tokens, 13))
  for b, tokens in enumerate(src_tokens):
    expected = naive_greedy(model, tokens, len(tokens) + 1 + extra)
    n = int(pred["final_sequence_lengths"][b])
    assert pred["outputs"][b, :n].numpy().tolist() == expected


def test_beam_scores_match_teacher_forcing():
  alpha = 0.6
  model = build(decoder_params={"beam_size": 4, "alpha": alpha, "extra_decode_length": 3})
  rng = np.random.default_rng(5)
  src_tokens = random_tokens(rng, [3, 6], 13)
  _, pred = run(model, batch_of(src_tokens, 13))
  for b in range(2):
    n = int(pred["final_sequence_lengths"][b])
    seq = pred["outputs"][b, :n].numpy()
    _, dec = run(model, batch_of(src_tokens[b:b + 1], 13),
                 (tf.constant([seq], tf.int32), tf.constant([n])))
    log_probs = tf.nn.log_softmax(dec["logits"][0]).numpy()
    score = log_probs[np.arange(n), seq].sum() / float(beam_search.length_penalty(n, alpha))
    np.testing.assert_allclose(pred["scores"][b], score, rtol=1e-4)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_decode_inside_tf_function(beam_size):
  model = build(decoder_params={"beam_size": beam_size, "extra_decode_length": 3})
  spec = tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)

  @tf.function(input_signature=spec)
  def predict(ids, lengths):
    return run(model, (ids, lengths))[1]

  src = batch_of([[4, 5, 6], [7]], 13)
  traced, eager = predict(*src), run(model, src)[1]
  np.testing.assert_array_equal(traced["outputs"].numpy(), eager["outputs"].numpy())


def test_every_variable_gets_a_gradient():
  model = build(decoder_params={"shared_embed": True}, src_vocab=11)
  rng = np.random.default_rng(5)
  src = batch_of(random_tokens(rng, [4, 2], 11), 11)
  tgt = batch_of(random_tokens(rng, [3, 5], 11), 11)
  with tf.GradientTape() as tape:
    _, dec = run(model, src, tgt, training=True)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(tgt[0], dec["logits"]))
  variables = model.encoder.trainable_variables + model.decoder.trainable_variables
  grads = tape.gradient(loss, variables)
  missing = [v.path for v, g in zip(variables, grads) if g is None]
  assert not missing
  # The shared embedding is the encoder's: listed once.
  assert not any(v.path.endswith("/embedding/weights")
                 for v in model.decoder.trainable_variables)


def test_mixed_bfloat16_runs_with_float32_logits():
  model = build(dtype="mixed_bfloat16", decoder_params={"beam_size": 2,
                                                        "extra_decode_length": 2})
  rng = np.random.default_rng(6)
  src = batch_of(random_tokens(rng, [3, 4], 13), 13)
  tgt = batch_of(random_tokens(rng, [2, 3], 11), 11)
  enc, dec = run(model, src, tgt, training=True)
  assert enc["outputs"].dtype == tf.bfloat16 and enc["outputs_b"].dtype == tf.bfloat16
  assert dec["logits"].dtype == tf.float32
  assert all(v.dtype == tf.float32 for v in model.decoder.trainable_variables)
  _, pred = run(model, src)
  assert pred["outputs"].dtype == tf.int32 and pred["scores"].dtype == tf.float32


def test_shared_embed_without_encoder_embedding_falls_back():
  decoder = ConvS2SDecoder({"tgt_emb_size": EMB, "conv_nchannels_kwidth": [(8, 3)],
                            "shared_embed": True}, vocab_size=9)
  assert not decoder.embedding_softmax_layer.weights
  decoder.reuse_embeddings(None)
  assert decoder.embedding is decoder.embedding_softmax_layer
  assert any(v.path.endswith("/embedding/weights") for v in decoder.trainable_variables)
  # An RNN encoder gives "outputs" only: they serve as keys and values.
  enc = {"outputs": tf.random.normal([1, 4, EMB]), "src_lengths": tf.constant([3])}
  out = decoder({"encoder_output": enc, "target_tensors": batch_of([[4, 5]], 9)})
  assert out["logits"].shape == (1, 3, 9)


# ----------------------------------------------------------------------------- config
@pytest.mark.parametrize("value", [[], [(16, 0)], [(16,)], [(16, 3.0)], [[16, 3, 1]], (16, 3)])
def test_bad_conv_nchannels_kwidth(value):
  with pytest.raises(ConfigError, match="conv_nchannels_kwidth") as info:
    ConvS2SEncoder({"src_emb_size": EMB, "conv_nchannels_kwidth": value}, vocab_size=9)
  assert "\n" not in str(info.value)


@pytest.mark.parametrize("params,match", [
    ({"encoder_layers": 3}, "encoder_layers"),
    ({"hidden_dropout_keep_prob": 0.0}, "hidden_dropout_keep_prob"),
    ({"normalization_type": "group_norm"}, "normalization_type"),
])
def test_bad_encoder_params(params, match):
  with pytest.raises(ConfigError, match=match):
    ConvS2SEncoder({"src_emb_size": EMB, "conv_nchannels_kwidth": [(8, 3)] * 2, **params},
                   vocab_size=9)


def test_bad_decoder_params():
  base = {"tgt_emb_size": EMB, "conv_nchannels_kwidth": [(8, 3)]}
  with pytest.raises(ConfigError, match="out_emb_size"):
    ConvS2SDecoder({**base, "shared_embed": True, "out_emb_size": 8}, vocab_size=9)
  decoder = ConvS2SDecoder(base, vocab_size=9)
  enc = {"outputs": tf.zeros([1, 2, 8]), "src_lengths": tf.constant([2])}
  with pytest.raises(ConfigError, match="tgt_emb_size"):
    decoder({"encoder_output": enc})
  shared = ConvS2SDecoder({**base, "shared_embed": True}, vocab_size=9)
  encoder = ConvS2SEncoder({"src_emb_size": EMB, "conv_nchannels_kwidth": [(8, 3)]},
                           vocab_size=10)
  with pytest.raises(ConfigError, match="vocabulary"):
    shared.reuse_embeddings(encoder.embedding_softmax_layer)
  wider = ConvS2SEncoder({"src_emb_size": 2 * EMB, "conv_nchannels_kwidth": [(8, 3)]},
                         vocab_size=9)
  with pytest.raises(ConfigError, match=rf"^decoder_params/tgt_emb_size: {EMB} differs from "
                                        rf"the shared encoder embedding's width {2 * EMB}"):
    shared.reuse_embeddings(wider.embedding_softmax_layer)


def test_ported_openseq2seq_params_validate():
  """The keys of OpenSeq2Seq's toy-reversal CC/CR/RC and en-de-convs2s-8-gpu configs."""
  cc_encoder = {"encoder_layers": 2, "src_emb_size": 128, "embedding_dropout_keep_prob": 0.9,
                "pad_embeddings_2_eight": False, "att_layer_num": 2,
                "conv_nchannels_kwidth": [(128, 3)] * 2, "hidden_dropout_keep_prob": 0.9,
                "max_input_length": 100, "PAD_SYMBOL": 0}
  cc_decoder = {"decoder_layers": 2, "shared_embed": True, "tgt_emb_size": 128,
                "embedding_dropout_keep_prob": 0.9, "pad_embeddings_2_eight": False,
                "conv_nchannels_kwidth": [(128, 3)] * 2, "hidden_dropout_keep_prob": 0.9,
                "out_dropout_keep_prob": 0.9, "max_input_length": 120,
                "extra_decode_length": 10, "beam_size": 5, "alpha": 0.6, "EOS_ID": 1,
                "GO_SYMBOL": 2, "END_SYMBOL": 3, "PAD_SYMBOL": 0}
  big = {"conv_nchannels_kwidth": [(512, 3)] * 9 + [(1024, 3)] * 4 + [(2048, 1)] * 2,
         "conv_activation": gated_linear_units, "normalization_type": "weight_norm",
         "scaling_factor": math.sqrt(0.5), "embedding_dropout_keep_prob": 0.8,
         "hidden_dropout_keep_prob": 0.8, "max_input_length": 64, "pad_embeddings_2_eight": True}
  big_encoder = {**big, "src_emb_size": 512, "att_layer_num": 15, "PAD_SYMBOL": 0}
  big_decoder = {**big, "shared_embed": True, "tgt_emb_size": 512, "out_emb_size": 512,
                 "pos_embed": False, "out_dropout_keep_prob": 0.8, "extra_decode_length": 56,
                 "beam_size": 5, "alpha": 0.6, "EOS_ID": 1, "GO_SYMBOL": 2, "END_SYMBOL": 3,
                 "PAD_SYMBOL": 0}
  for params in (cc_encoder, {**cc_encoder, "pad_embeddings_2_eight": True}, big_encoder):
    ConvS2SEncoder.validate_params(params, "encoder_params")
  for params in (cc_decoder, big_decoder):
    ConvS2SDecoder.validate_params(params, "decoder_params")
  model = build(encoder_params=cc_encoder, decoder_params=cc_decoder, src_vocab=11,
                tgt_vocab=11)
  _, dec = run(model, batch_of([[4, 5]], 11), batch_of([[6]], 11))
  assert dec["logits"].shape == (1, 2, 11)
