"""TransformerEncoder / TransformerDecoder: shapes, masks, decoding, sharing, precision."""

import types

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.decoders import TransformerDecoder
from open_seq2seq.encoders import TransformerEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.beam_search import length_penalty
from tests.helpers.text import EOS, GO, PAD, batch_of, random_tokens, run

SIZES = dict(hidden_size=16, num_heads=2, filter_size=32)


def build(encoder_params=None, decoder_params=None, src_vocab=13, tgt_vocab=11,
          dtype="float32"):
  """A tiny encoder/decoder pair, given sizes and shared layers as Text2Text wires them."""
  tf.random.set_seed(1)
  encoder = TransformerEncoder({"encoder_layers": 2, **SIZES, **(encoder_params or {})},
                               vocab_size=src_vocab, dtype=dtype)
  decoder = TransformerDecoder({"num_hidden_layers": 2, **SIZES, **(decoder_params or {})},
                               vocab_size=tgt_vocab, dtype=dtype)
  if decoder.params["shared_embed"]:
    decoder.reuse_embeddings(encoder.embedding_softmax_layer)
  return types.SimpleNamespace(encoder=encoder, decoder=decoder)


def test_shapes_and_outputs():
  model = build(decoder_params={"extra_decode_length": 3})
  rng = np.random.default_rng(0)
  src = batch_of(random_tokens(rng, [3, 5], 13), 13)
  tgt = batch_of(random_tokens(rng, [4, 2], 11), 11)
  enc, dec = run(model, src, tgt, training=True)
  assert enc["outputs"].shape == (2, 6, 16)
  assert enc["inputs_attention_bias"].shape == (2, 1, 1, 6)
  assert enc["src_lengths"].numpy().tolist() == [4, 6]
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


@pytest.mark.parametrize("norm_placement", ["pre", "post"])
def test_padding_invariance(norm_placement):
  params = {"norm_placement": norm_placement}
  model = build(params, params)
  rng = np.random.default_rng(1)
  src_tokens, tgt_tokens = random_tokens(rng, [3, 8], 13), random_tokens(rng, [2, 6], 11)
  enc_one, dec_one = run(model, batch_of(src_tokens[:1], 13), batch_of(tgt_tokens[:1], 11))
  enc_two, dec_two = run(model, batch_of(src_tokens, 13), batch_of(tgt_tokens, 11))
  # Example 0 is 4 source / 3 target ids long; in the pair it is padded to 9 / 7.
  np.testing.assert_allclose(enc_two["outputs"][0, :4], enc_one["outputs"][0], atol=1e-5)
  np.testing.assert_allclose(dec_two["logits"][0, :3], dec_one["logits"][0], atol=1e-5)
  # ... and so are the decoded outputs (lengths limited by each example's own source).
  _, pred_one = run(model, batch_of(src_tokens[:1], 13))
  _, pred_two = run(model, batch_of(src_tokens, 13))
  n = int(pred_one["final_sequence_lengths"][0])
  assert int(pred_two["final_sequence_lengths"][0]) == n
  np.testing.assert_array_equal(pred_two["outputs"][0, :n], pred_one["outputs"][0, :n])


def test_causal_mask():
  model = build()
  rng = np.random.default_rng(2)
  src = batch_of(random_tokens(rng, [5], 13), 13)
  tokens = random_tokens(rng, [6], 11)[0]
  changed = tokens[:3] + [(t - 3) % 7 + 4 for t in tokens[3:]]
  _, a = run(model, src, batch_of([tokens], 11))
  _, b = run(model, src, batch_of([changed], 11))
  # Logits at t see the inputs GO, y_0 .. y_{t-1}: changing y_3.. changes logits from t=4 on.
  np.testing.assert_allclose(a["logits"][0, :4], b["logits"][0, :4], atol=1e-6)
  assert np.abs(a["logits"][0, 4:] - b["logits"][0, 4:]).max() > 1e-4


def test_dropout_only_when_training():
  dropouts = {"attention_dropout": 0.3, "relu_dropout": 0.3, "layer_postprocess_dropout": 0.3}
  model = build(dropouts, dropouts)
  rng = np.random.default_rng(3)
  src = batch_of(random_tokens(rng, [4, 5], 13), 13)
  tgt = batch_of(random_tokens(rng, [3, 4], 11), 11)
  _, first = run(model, src, tgt, training=False)
  _, second = run(model, src, tgt, training=False)
  _, trained = run(model, src, tgt, training=True)
  np.testing.assert_array_equal(first["logits"].numpy(), second["logits"].numpy())
  assert np.abs(first["logits"].numpy() - trained["logits"].numpy()).max() > 1e-3
  # Dropout masks come from RNG state variables: restoring them (as a checkpoint does)
  # replays the same masks, and a different state gives different ones.
  rng_states = [v for layer in (model.encoder, model.decoder) for v in layer.variables
                if "seed_generator" in v.path]
  # 2 layers x (4 encoder | 6 decoder) sublayers and wrappers, plus 2 embedding dropouts.
  assert len(rng_states) == 2 * 4 + 2 * 6 + 2
  saved = [v.numpy() for v in rng_states]
  _, again = run(model, src, tgt, training=True)
  assert np.abs(again["logits"].numpy() - trained["logits"].numpy()).max() > 1e-3
  for v, value in zip(rng_states, saved):
    v.assign(value)
  _, replayed = run(model, src, tgt, training=True)
  np.testing.assert_allclose(replayed["logits"].numpy(), again["logits"].numpy(), atol=1e-6)


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


def test_beam_size_one_is_greedy_with_incremental_cache():
  extra = 4
  model = build(decoder_params={"beam_size": 1, "extra_decode_length": extra})
  rng = np.random.default_rng(4)
  src_tokens = random_tokens(rng, [2, 5, 3], 13)
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
  src = batch_of(src_tokens, 13)
  _, pred = run(model, src)
  for b in range(2):
    n = int(pred["final_sequence_lengths"][b])
    seq = pred["outputs"][b, :n].numpy()
    _, dec = run(model, batch_of(src_tokens[b:b + 1], 13),
                 (tf.constant([seq], tf.int32), tf.constant([n])))
    log_probs = tf.nn.log_softmax(dec["logits"][0]).numpy()
    score = log_probs[np.arange(n), seq].sum() / float(length_penalty(n, alpha))
    np.testing.assert_allclose(pred["scores"][b], score, rtol=1e-4)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_decode_inside_tf_function(beam_size):
  model = build(decoder_params={"beam_size": beam_size, "extra_decode_length": 3})
  spec = tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)

  @tf.function(input_signature=spec)
  def predict(ids, lengths):
    return run(model, (ids, lengths))[1]

  rng = np.random.default_rng(6)
  for lengths in ([2, 4], [5, 1, 3]):
    src = batch_of(random_tokens(rng, lengths, 13), 13)
    graph, eager = predict(*src), run(model, src)[1]
    np.testing.assert_array_equal(graph["outputs"].numpy(), eager["outputs"].numpy())
    np.testing.assert_allclose(graph["scores"].numpy(), eager["scores"].numpy(), rtol=1e-5)


@pytest.mark.parametrize("norm_placement", ["pre", "post"])
def test_norm_placements(norm_placement):
  params = {"norm_placement": norm_placement}
  model = build(params, params)
  rng = np.random.default_rng(7)
  src = batch_of(random_tokens(rng, [4], 13), 13)
  tgt = batch_of(random_tokens(rng, [3], 11), 11)
  _, dec = run(model, src, tgt, training=True)
  assert np.isfinite(dec["logits"].numpy()).all()
  norms = [v for v in model.encoder.trainable_variables if v.path.endswith("gamma")]
  # 2 layers x 2 sublayers, plus the final norm of the pre-norm stack.
  assert len(norms) == (5 if norm_placement == "pre" else 4)
  assert (model.decoder.output_normalization is None) == (norm_placement == "post")


def decoder_embedding_matrices(model):
  vocab, hidden = model.decoder.vocab_size, SIZES["hidden_size"]
  return [v for v in model.decoder.trainable_variables if tuple(v.shape) in
          ((vocab, hidden), (hidden, vocab))]


def test_tie_weights():
  tied = build(decoder_params={"tie_weights": True})
  untied = build(decoder_params={"tie_weights": False})
  assert tied.decoder.output_projection is None
  assert len(decoder_embedding_matrices(tied)) == 1
  assert len(decoder_embedding_matrices(untied)) == 2
  # With tied weights, changing the embedding changes the projection too.
  rng = np.random.default_rng(8)
  src = batch_of(random_tokens(rng, [3], 13), 13)
  tgt = batch_of(random_tokens(rng, [3], 11), 11)
  enc = tied.encoder({"source_tensors": src})
  before = tied.decoder({"encoder_output": enc, "target_tensors": tgt})["logits"]
  emb = tied.decoder.embedding_softmax_layer.embeddings
  emb.assign(emb * 2.0)
  after = tied.decoder({"encoder_output": enc, "target_tensors": tgt})["logits"]
  assert np.abs(after.numpy() - before.numpy()).max() > 1e-3


def test_shared_embed_uses_encoder_embedding():
  model = build(decoder_params={"shared_embed": True}, src_vocab=13, tgt_vocab=13)
  assert model.decoder.embedding is model.encoder.embedding_softmax_layer
  assert decoder_embedding_matrices(model) == []
  all_vars = model.encoder.trainable_variables + model.decoder.trainable_variables
  assert len({id(v) for v in all_vars}) == len(all_vars)
  src = batch_of([[4, 5]], 13)
  tgt = batch_of([[10, 11, 12]], 13)  # tokens absent from the source
  with tf.GradientTape() as tape:
    _, dec = run(model, src, tgt, training=True)
    loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(tgt[0], dec["logits"]))
  grad = tape.gradient(loss, model.encoder.embedding_softmax_layer.embeddings)
  grad = tf.convert_to_tensor(grad).numpy()
  assert np.abs(grad[10:13]).sum() > 0  # the decoder trains the encoder's matrix


def test_shared_embed_needs_equal_vocabularies():
  with pytest.raises(ConfigError, match=r"^decoder_params/shared_embed: source \(13\) and "
                                        r"target \(11\) vocabulary sizes differ"):
    build(decoder_params={"shared_embed": True}, src_vocab=13, tgt_vocab=11)


def test_shared_embed_needs_the_decoders_width():
  with pytest.raises(ConfigError, match=r"^decoder_params/hidden_size: 32 differs from the "
                                        r"shared encoder embedding's width 16"):
    build(decoder_params={"shared_embed": True, "hidden_size": 32}, src_vocab=13,
          tgt_vocab=13)


def test_shared_embed_needs_an_encoder_embedding_handed_over():
  decoder = TransformerDecoder({"num_hidden_layers": 1, **SIZES, "shared_embed": True},
                               vocab_size=11)
  with pytest.raises(ConfigError, match="^decoder_params/shared_embed: the model's encoder "
                                        "has no embedding_softmax_layer"):
    decoder.reuse_embeddings(None)
  with pytest.raises(ConfigError, match="reuse_embeddings"):
    _ = decoder.embedding  # built for sharing, but nothing was handed over
  own = TransformerDecoder({"num_hidden_layers": 1, **SIZES}, vocab_size=11)
  with pytest.raises(ConfigError, match="shared_embed: is False"):
    own.reuse_embeddings(build().encoder.embedding_softmax_layer)


def test_decoder_built_without_a_model_decodes():
  decoder = TransformerDecoder({"num_hidden_layers": 1, **SIZES, "extra_decode_length": 2},
                               vocab_size=11, mode="infer")
  assert decoder.vocab_size == 11 and decoder.params["beam_size"] == 1  # defaults filled
  memory = {"outputs": tf.zeros([2, 3, SIZES["hidden_size"]]),
            "src_lengths": tf.constant([3, 2])}
  out = decoder({"encoder_output": memory})
  assert out["outputs"].shape[0] == 2


def test_configured_vocab_size_wins_over_the_given_one():
  decoder = TransformerDecoder({"num_hidden_layers": 1, **SIZES, "tgt_vocab_size": 7},
                               vocab_size=11)
  encoder = TransformerEncoder({"encoder_layers": 1, **SIZES, "src_vocab_size": 9},
                               vocab_size=13)
  assert (decoder.vocab_size, encoder.vocab_size) == (7, 9)
  assert tuple(decoder.embedding.embeddings.shape) == (7, SIZES["hidden_size"])


def test_pad_embeddings_to_eight():
  params = {"pad_embeddings_2_eight": True}
  model = build(params, {**params, "tie_weights": False})
  assert tuple(model.encoder.embedding_softmax_layer.embeddings.shape) == (16, 16)
  assert model.decoder.output_projection.units == 16
  rng = np.random.default_rng(10)
  src = batch_of(random_tokens(rng, [3], 13), 13)
  tgt = batch_of(random_tokens(rng, [3], 11), 11)
  assert run(model, src, tgt)[1]["logits"].shape == (1, 4, 11)


@pytest.mark.parametrize("dtype", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision(dtype):
  model = build(decoder_params={"beam_size": 2, "extra_decode_length": 2}, dtype=dtype)
  half = tf.bfloat16 if dtype == "mixed_bfloat16" else tf.float16
  assert all(v.dtype == tf.float32 for v in model.decoder.trainable_variables)
  rng = np.random.default_rng(11)
  src = batch_of(random_tokens(rng, [3, 6], 13), 13)
  tgt = batch_of(random_tokens(rng, [2, 5], 11), 11)
  enc, dec = run(model, src, tgt, training=True)
  assert enc["outputs"].dtype == half
  assert np.isfinite(tf.cast(enc["inputs_attention_bias"], tf.float32).numpy()).all()
  assert dec["logits"].dtype == tf.float32 and np.isfinite(dec["logits"].numpy()).all()
  _, pred = run(model, src)
  assert np.isfinite(pred["scores"].numpy()).all()


def test_config_errors():
  with pytest.raises(ConfigError, match="num_heads"):
    TransformerEncoder({"encoder_layers": 1, "hidden_size": 10, "num_heads": 3,
                        "filter_size": 8}, vocab_size=13)
  with pytest.raises(ConfigError, match="did you mean 'num_heads'"):
    TransformerEncoder({"encoder_layers": 1, **SIZES, "num_head": 2}, vocab_size=13)
  # OpenSeq2Seq's WMT configs set EOS_ID to the subword tokenizer's 1 beside END_SYMBOL 3:
  # accepted, decoding stops at END_SYMBOL, and the run prints why (slots.ignored_settings)
  decoder = TransformerDecoder({"num_hidden_layers": 1, **SIZES, "EOS_ID": 1}, vocab_size=11)
  assert decoder.params["END_SYMBOL"] == 3
  assert TransformerDecoder.declared_params()["EOS_ID"].ignored.startswith("every decoder")
  with pytest.raises(ConfigError, match=r"^decoder_params/tgt_vocab_size: unknown"):
    TransformerDecoder({"num_hidden_layers": 1, **SIZES})
  with pytest.raises(ConfigError, match=r"^encoder_params/src_vocab_size: unknown"):
    TransformerEncoder({"encoder_layers": 1, **SIZES})
  with pytest.raises(ConfigError, match="norm_placement"):
    TransformerEncoder({"encoder_layers": 1, **SIZES, "norm_placement": "middle"},
                       vocab_size=13)
