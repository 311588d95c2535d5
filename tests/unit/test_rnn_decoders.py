"""RNNDecoderWithAttention / BeamSearchRNNDecoderWithAttention: shapes, causality, masks,
teacher forcing against step-by-step decoding, beam scores, precision, config errors."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.decoders.rnn_decoders import (BeamSearchRNNDecoderWithAttention,
                                                RNNDecoderWithAttention)
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.beam_search import COVERAGE_FLOOR, length_penalty

GO, EOS, PAD = 2, 3, 0
VOCAB, DEPTH = 11, 10
TYPES = ["bahdanau", "luong", "gnmt", "gnmt_v2"]


def decoder_params(attention_type="gnmt_v2", layers=3, **extra):
  return {"core_cell": keras.layers.LSTMCell,
          "core_cell_params": {"num_units": 8, "forget_bias": 1.0},
          "decoder_layers": layers, "tgt_emb_size": 6, "attention_type": attention_type,
          "attention_layer_size": 8, **extra}


def build(attention_type="gnmt_v2", beam=False, dtype="float32", **extra):
  tf.random.set_seed(1)
  keras.utils.set_random_seed(1)
  cls = BeamSearchRNNDecoderWithAttention if beam else RNNDecoderWithAttention
  return cls(decoder_params(attention_type, **extra), vocab_size=VOCAB, dtype=dtype)


def encoder_output(lengths, seed=0, garbage=0.0):
  """A fake encoder output: outputs [B, max(lengths), DEPTH] (``garbage`` past each length)."""
  rng = np.random.default_rng(seed)
  outputs = rng.normal(size=(len(lengths), max(lengths), DEPTH)).astype(np.float32)
  for b, n in enumerate(lengths):
    outputs[b, n:] = garbage
  return {"outputs": tf.constant(outputs), "src_lengths": tf.constant(lengths, tf.int32),
          "state": None}


def targets(rows):
  width = max(len(r) for r in rows)
  ids = np.full((len(rows), width), PAD, np.int32)
  for i, r in enumerate(rows):
    ids[i, :len(r)] = r
  return tf.constant(ids), tf.constant([len(r) for r in rows], tf.int32)


def teacher(decoder, enc, rows, training=False):
  return decoder({"encoder_output": enc, "target_tensors": targets(rows)}, training=training)


def infer(decoder, enc):
  return decoder({"encoder_output": enc})


@pytest.mark.parametrize("attention_type", TYPES)
def test_shapes_and_outputs(attention_type):
  decoder = build(attention_type, beam=True, beam_width=3, length_penalty=1.0)
  enc = encoder_output([5, 3])
  out = teacher(decoder, enc, [[4, 5, 6, EOS], [7, EOS]], training=True)
  assert out["logits"].shape == (2, 4, VOCAB) and out["logits"].dtype == tf.float32
  assert out["outputs"].shape == (2, 4) and out["outputs"].dtype == tf.int32
  assert out["alignments"].shape == (2, 4, 5)
  np.testing.assert_array_equal(out["final_sequence_lengths"], [4, 2])
  np.testing.assert_array_equal(out["alignments"].numpy()[1, :, 3:], 0.0)
  pred = infer(decoder, enc)
  assert pred["outputs"].dtype == tf.int32 and pred["outputs"].shape[0] == 2
  assert pred["outputs"].shape[1] <= 2 * 5
  lengths = pred["final_sequence_lengths"].numpy()
  assert (lengths <= [10, 6]).all()
  for row, n in zip(pred["outputs"].numpy(), lengths):
    assert (row[n:] == PAD).all()


@pytest.mark.parametrize("attention_type", TYPES)
def test_logits_are_causal(attention_type):
  decoder = build(attention_type)
  enc = encoder_output([4])
  base = teacher(decoder, enc, [[4, 5, 6, 7, EOS]])["logits"].numpy()
  changed = teacher(decoder, enc, [[4, 5, 9, 9, 9]])["logits"].numpy()
  # The logits at step t read targets before t only: positions 0..2 see 4, 5.
  np.testing.assert_allclose(base[:, :3], changed[:, :3], rtol=1e-6)
  assert not np.allclose(base[:, 3:], changed[:, 3:])


@pytest.mark.parametrize("attention_type", TYPES)
def test_source_padding_changes_nothing(attention_type):
  decoder = build(attention_type, beam=True, beam_width=3, coverage_penalty=0.2)
  batch = encoder_output([3, 6], seed=2, garbage=100.0)
  alone = {"outputs": batch["outputs"][:1, :3], "src_lengths": batch["src_lengths"][:1]}
  rows = [[4, 5, EOS]]
  np.testing.assert_allclose(teacher(decoder, batch, rows + [[6, EOS]])["logits"][:1],
                             teacher(decoder, alone, rows)["logits"], rtol=1e-5, atol=1e-6)
  pred_batch, pred_alone = infer(decoder, batch), infer(decoder, alone)
  n = int(pred_alone["final_sequence_lengths"][0])
  assert int(pred_batch["final_sequence_lengths"][0]) == n
  np.testing.assert_array_equal(pred_batch["outputs"][0, :n], pred_alone["outputs"][0, :n])
  np.testing.assert_allclose(pred_batch["scores"][0], pred_alone["scores"][0], rtol=1e-5)


@pytest.mark.parametrize("attention_type", TYPES)
def test_greedy_decoding_agrees_with_teacher_forcing(attention_type):
  """The step-by-step path and the teacher-forcing path compute the same model: fed the
  greedy output, teacher forcing gives the same argmax at every step and the same score."""
  decoder = build(attention_type, extra_decode_length=3)
  enc = encoder_output([4, 2], seed=3)
  pred = infer(decoder, enc)
  for b in range(2):
    n = int(pred["final_sequence_lengths"][b])
    seq = pred["outputs"][b, :n].numpy().tolist()
    single = {"outputs": enc["outputs"][b:b + 1], "src_lengths": enc["src_lengths"][b:b + 1]}
    logits = teacher(decoder, single, [seq])["logits"][0].numpy()
    allowed = logits.copy()
    allowed[:, [PAD, GO]] = -np.inf  # the search never emits them
    assert np.argmax(allowed, -1).tolist() == seq
    log_probs = tf.nn.log_softmax(logits).numpy()
    np.testing.assert_allclose(pred["scores"][b], log_probs[np.arange(n), seq].sum(),
                               rtol=1e-5)


def test_beam_width_one_is_greedy():
  greedy = build("bahdanau", bahdanau_normalize=True)
  beam = build("bahdanau", beam=True, bahdanau_normalize=True, beam_width=1)
  enc = encoder_output([5, 3, 4], seed=4)
  a = infer(greedy, enc)
  infer(beam, enc)  # creates its variables
  beam.set_weights(greedy.get_weights())
  b = infer(beam, enc)
  np.testing.assert_array_equal(a["outputs"], b["outputs"])
  np.testing.assert_allclose(a["scores"], b["scores"], rtol=1e-6)


@pytest.mark.parametrize("attention_type", ["luong", "gnmt"])
def test_beam_scores_match_teacher_forcing(attention_type):
  """The beam's score of its best hypothesis, recomputed from the teacher-forcing logits and
  alignments: log P / lp + beta * sum_j log(min(sum_t a_tj, 1))."""
  alpha, beta = 0.8, 0.3
  decoder = build(attention_type, beam=True, beam_width=4, length_penalty=alpha,
                  coverage_penalty=beta, extra_decode_length=2)
  enc = encoder_output([5, 3], seed=5)
  pred = infer(decoder, enc)
  for b in range(2):
    n = int(pred["final_sequence_lengths"][b])
    seq = pred["outputs"][b, :n].numpy().tolist()
    src = int(enc["src_lengths"][b])
    single = {"outputs": enc["outputs"][b:b + 1, :src], "src_lengths": enc["src_lengths"][b:b + 1]}
    out = teacher(decoder, single, [seq])
    log_probs = tf.nn.log_softmax(out["logits"][0]).numpy()
    coverage = out["alignments"][0].numpy().sum(0)
    cp = np.log(np.clip(coverage, COVERAGE_FLOOR, 1.0)).sum()
    score = log_probs[np.arange(n), seq].sum() / float(length_penalty(n, alpha)) + beta * cp
    np.testing.assert_allclose(pred["scores"][b], score, rtol=1e-4)


def test_training_dropout_and_gradients_inside_tf_function():
  decoder = build("gnmt", decoder_dp_input_keep_prob=0.7, decoder_dp_output_keep_prob=0.8,
                  decoder_use_skip_connections=True)
  enc = encoder_output([4, 3], seed=6)
  tgt = targets([[4, 5, EOS], [6, EOS]])
  memory = tf.Variable(enc["outputs"])

  @tf.function
  def train_logits():
    with tf.GradientTape() as tape:
      out = decoder({"encoder_output": dict(enc, outputs=memory * 1.0),
                     "target_tensors": tgt}, training=True)
      loss = tf.reduce_sum(out["logits"] ** 2)
    return out["logits"], tape.gradient(loss, decoder.trainable_variables + [memory])

  first, grads = train_logits()
  second, _ = train_logits()
  plain = decoder({"encoder_output": enc, "target_tensors": tgt}, training=False)["logits"]
  assert not np.allclose(first, second)  # a new dropout mask per call
  assert not np.allclose(first, plain)
  assert all(g is not None and np.isfinite(tf.convert_to_tensor(g).numpy()).all() for g in grads)
  assert len(decoder.trainable_variables) == 2 + 3 * 3 + 2 + 3  # projection, embedding,
  # three LSTM cells, memory and query layers, v, g and b of the normalised Bahdanau score


@pytest.mark.parametrize("beam_width", [1, 3])
def test_decode_inside_tf_function(beam_width):
  decoder = build("luong", beam=True, beam_width=beam_width, coverage_penalty=0.1)
  spec = tf.TensorSpec([None, None, DEPTH]), tf.TensorSpec([None], tf.int32)

  @tf.function(input_signature=spec, autograph=False)
  def predict(outputs, lengths):
    return decoder({"encoder_output": {"outputs": outputs, "src_lengths": lengths}})

  for lengths in ([2, 4], [5, 1, 3]):
    enc = encoder_output(lengths, seed=len(lengths))
    graph, eager = predict(enc["outputs"], enc["src_lengths"]), infer(decoder, enc)
    np.testing.assert_array_equal(graph["outputs"], eager["outputs"])
    np.testing.assert_allclose(graph["scores"], eager["scores"], rtol=1e-5)


def test_mixed_bfloat16_gives_float32_logits():
  decoder = build("gnmt_v2", beam=True, dtype="mixed_bfloat16", beam_width=2,
                  coverage_penalty=0.2)
  enc = encoder_output([4, 3], seed=7)
  out = teacher(decoder, enc, [[4, 5, EOS], [6, EOS]], training=True)
  assert all(v.dtype == "float32" for v in decoder.trainable_variables)
  assert out["logits"].dtype == tf.float32 and np.isfinite(out["logits"].numpy()).all()
  assert out["alignments"].dtype == tf.float32
  pred = infer(decoder, enc)
  assert np.isfinite(pred["scores"].numpy()).all()


def test_weight_tied_shares_the_projection():
  decoder = build("gnmt", weight_tied=True)
  out = teacher(decoder, encoder_output([3]), [[4, EOS]])
  assert out["logits"].shape == (1, 2, VOCAB)
  assert decoder.embedding_matrix is None
  assert decoder.cell.cells[-1].units == 6  # the top layer gets tgt_emb_size units
  with pytest.raises(ConfigError, match="weight_tied"):
    teacher(build("bahdanau", weight_tied=True), encoder_output([3]), [[4, EOS]])


def test_older_cell_spelling():
  params = decoder_params("bahdanau", decoder_cell_type="gru", decoder_cell_units=8)
  del params["core_cell"], params["core_cell_params"]
  decoder = RNNDecoderWithAttention(params, vocab_size=VOCAB)
  assert isinstance(decoder.cell.cells[0], keras.layers.GRUCell)
  assert teacher(decoder, encoder_output([3]), [[4, EOS]])["logits"].shape == (1, 2, VOCAB)
  params["decoder_cell_type"] = "glstm"
  with pytest.raises(ConfigError, match="decoder_cell_type"):
    RNNDecoderWithAttention(params, vocab_size=VOCAB)
  lines = RNNDecoderWithAttention.ignored_combinations(
      decoder_params("gnmt", decoder_cell_type="lstm", bahdanau_normalize=True))
  assert any(line.startswith("decoder_cell_type") for line in lines)
  assert any(line.startswith("bahdanau_normalize") for line in lines)


def test_config_errors():
  with pytest.raises(ConfigError, match="attention_type"):
    build("location")
  with pytest.raises(ConfigError, match="attention_layer_size"):
    RNNDecoderWithAttention(decoder_params("luong", attention_layer_size=5), vocab_size=VOCAB)
  with pytest.raises(ConfigError, match="decoder_use_skip_connections"):
    teacher(build("bahdanau", decoder_use_skip_connections=True), encoder_output([3]),
            [[4, EOS]])
  with pytest.raises(ConfigError, match="decoder_dp_input_keep_prob"):
    build(decoder_dp_input_keep_prob=0.0)
  with pytest.raises(ConfigError, match="core_cell"):
    RNNDecoderWithAttention({k: v for k, v in decoder_params().items() if k != "core_cell"},
                            vocab_size=VOCAB)
  with pytest.raises(ConfigError, match="recurrent cell"):
    build(core_cell=keras.layers.LSTM)
  with pytest.raises(ConfigError, match="beam_width"):
    build(beam=True, beam_width=0)
  with pytest.raises(ConfigError, match="tgt_vocab_size"):
    RNNDecoderWithAttention(decoder_params())
  assert RNNDecoderWithAttention.declared_params()["time_major"].ignored


def test_variables_are_built_once_for_the_first_memory_depth():
  decoder = build()
  assert not decoder.weights[1:]  # only the embedding exists before the first call
  teacher(decoder, encoder_output([3, 2]), [[4, 5]] * 2)
  count = len(decoder.weights)
  teacher(decoder, encoder_output([4, 1]), [[4]] * 2)
  assert len(decoder.weights) == count
  wider = encoder_output([3, 2])
  wider["outputs"] = tf.concat([wider["outputs"], wider["outputs"]], axis=-1)
  with pytest.raises(ValueError, match=f"depth {2 * DEPTH}; this decoder was built for {DEPTH}"):
    teacher(decoder, wider, [[4, 5]] * 2)
