"""Attention ASR: ListenAttendSpellEncoder/Decoder, JointCTCAttentionDecoder,
MultiTaskCTCEntropyLoss and the autoregressive targets of the speech data layer."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.data.speech2text.targets import TargetEncoder
from open_seq2seq.decoders.fc_decoders import FullyConnectedCTCDecoder
from open_seq2seq.decoders.jca_decoder import JointCTCAttentionDecoder
from open_seq2seq.decoders.las_decoder import ListenAttendSpellDecoder
from open_seq2seq.encoders.las_encoder import ListenAttendSpellEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.losses.jca_loss import MultiTaskCTCEntropyLoss, strip_end_symbol
from tests.helpers import speech

ENCODER = {
    "convnet_layers": [{"type": "conv1d", "repeat": 1, "kernel_size": [5], "stride": [2],
                        "num_channels": 12}],
    "recurrent_layers": [
        {"type": "lstm", "num_layers": 1, "hidden_dim": 8, "pool": True, "pool_size": [2],
         "stride": [2]},
        {"type": "gru", "num_layers": 2, "hidden_dim": 6},
    ],
}
VOCAB = 10  # 8 symbols, <S> = 8, </S> = 9
GO, END = 8, 9


def las_params(kind="chorowski", **extra):
  return {"tgt_emb_size": 8, "hidden_dim": 12, "num_layers": 2,
          "attention_params": {"attention_dim": 10, "attention_type": kind,
                               "use_coverage": extra.pop("use_coverage", False)}, **extra}


def make_decoder(kind="chorowski", mode="train", dtype="float32", **extra):
  return ListenAttendSpellDecoder(las_params(kind, **extra), vocab_size=VOCAB, go_symbol=GO,
                                  end_symbol=END, mode=mode, dtype=dtype)


def memory(batch=3, steps=7, depth=6, seed=0):
  rng = np.random.default_rng(seed)
  outputs = rng.standard_normal((batch, steps, depth)).astype(np.float32)
  lengths = np.array([steps, steps - 3, 2][:batch], np.int32)
  return {"outputs": tf.constant(outputs), "src_lengths": tf.constant(lengths)}


def targets(batch=3):
  ids = np.array([[1, 2, 3, END], [4, END, 0, 0], [5, 6, END, 0]][:batch], np.int32)
  return tf.constant(ids), tf.constant([4, 2, 3][:batch], tf.int32)


# ------------------------------------------------------------------------------ encoder
def test_encoder_reduces_time_pyramidally_and_zeroes_padding():
  encoder = ListenAttendSpellEncoder(ENCODER, mode="eval")
  x = np.random.default_rng(0).standard_normal((2, 40, 5)).astype(np.float32)
  out = encoder({"source_tensors": (tf.constant(x), tf.constant([40, 23]))}, training=False)
  # conv stride 2 (SAME): ceil(L / 2) = 20, 12; pool 2 / stride 2: (L - 2) // 2 + 1 = 10, 6
  np.testing.assert_array_equal(out["src_lengths"].numpy(), [10, 6])
  assert out["outputs"].shape == (2, 10, 12)  # last block: 2 directions x 6 units
  assert np.all(out["outputs"].numpy()[1, 6:] == 0)
  assert np.any(out["outputs"].numpy()[1, :6] != 0)


def test_encoder_output_does_not_depend_on_padding():
  encoder = ListenAttendSpellEncoder(ENCODER, mode="eval")
  rng = np.random.default_rng(1)
  short = rng.standard_normal((1, 23, 5)).astype(np.float32)
  padded = np.concatenate([short, 5 * rng.standard_normal((1, 17, 5)).astype(np.float32)], 1)
  alone = encoder({"source_tensors": (tf.constant(short), tf.constant([23]))}, training=False)
  batch = np.concatenate([padded, rng.standard_normal((1, 40, 5)).astype(np.float32)])
  together = encoder({"source_tensors": (tf.constant(batch), tf.constant([23, 40]))},
                     training=False)
  n = int(alone["src_lengths"][0])
  np.testing.assert_allclose(together["outputs"].numpy()[0, :n], alone["outputs"].numpy()[0],
                             atol=1e-5)


def test_encoder_config_errors():
  with pytest.raises(ConfigError, match="convnet_layers, recurrent_layers or both"):
    ListenAttendSpellEncoder({})
  bad = {"recurrent_layers": [{"hidden_dim": 4, "pool": True, "pool_size": [2]}]}
  with pytest.raises(ConfigError, match="recurrent_layers/0/stride"):
    ListenAttendSpellEncoder(bad)


# ------------------------------------------------------------------------------ decoder
@pytest.mark.parametrize("kind,coverage", [("chorowski", False), ("chorowski", True),
                                           ("bahadanu", False), ("zhaopeng", False)])
def test_teacher_forcing_shapes_and_masked_memory(kind, coverage):
  decoder = make_decoder(kind, use_coverage=coverage)
  ids, lengths = targets()
  enc = memory()
  out = decoder({"encoder_output": enc, "target_tensors": (ids, lengths)}, training=False)
  assert out["logits"].shape == (3, 4, VOCAB) and out["logits"].dtype == tf.float32
  assert out["alignments"].shape == (3, 4, 7)
  alignments = out["alignments"].numpy()
  np.testing.assert_allclose(alignments.sum(-1), 1.0, rtol=1e-5)
  assert np.all(alignments[1, :, 4:] == 0) and np.all(alignments[2, :, 2:] == 0)
  # what lies past a memory's length changes nothing
  garbage = enc["outputs"].numpy().copy()
  garbage[1, 4:] = 100.0
  again = decoder({"encoder_output": {"outputs": tf.constant(garbage),
                                      "src_lengths": enc["src_lengths"]},
                   "target_tensors": (ids, lengths)}, training=False)
  np.testing.assert_allclose(again["logits"].numpy(), out["logits"].numpy(), atol=1e-5)


def test_location_attention_reads_where_it_went():
  """chorowski's score depends on the previous alignments; bahadanu's does not."""
  for kind, differs in (("chorowski", True), ("bahadanu", False)):
    decoder = make_decoder(kind)
    enc = memory(batch=1)
    decoder({"encoder_output": enc, "target_tensors": targets(1)}, training=False)
    mem, _ = decoder._memory(enc)
    state = decoder.cell.initial_state(1, mem)
    query = tf.random.stateless_normal([1, 12], seed=[1, 2])
    if kind == "chorowski":
      first = decoder.cell.mechanism.location_alignments(query, mem, state["alignments"],
                                                         state["coverage"])
      moved = tf.one_hot([3], 7)
      second = decoder.cell.mechanism.location_alignments(query, mem, moved, moved)
    else:
      first = second = decoder.cell.mechanism.alignments(query, mem)
    assert (np.abs(first.numpy() - second.numpy()).max() > 1e-6) == differs


def test_beam_of_one_is_greedy_and_wider_beams_score_no_worse():
  """The beam search keeps finished transcripts apart from the alive beam (GNMT's), so a beam
  of one equals greedy decoding exactly when no early </S> beats greedy's transcript: with
  </S> made impossible, both follow the argmax path to the length limit."""
  decoder = make_decoder(mode="infer")
  enc = memory()
  decoder({"encoder_output": enc, "target_tensors": targets()}, training=False)
  mem, lengths = decoder._memory(enc)
  table = tf.cast(decoder.embedding_matrix, tf.float32)
  greedy = decoder.search(mem, lengths, table, 1)
  beam1 = decoder.search(mem, lengths, table, 1, use_beam_search=True)
  beam4 = decoder.search(mem, lengths, table, 4)
  for wider in (beam1, beam4):  # greedy's transcript is among the beams' candidates
    assert np.all(wider["scores"].numpy() >= greedy["scores"].numpy() - 1e-5)
  # at most as many characters as the encoder has frames
  assert np.all(greedy["final_sequence_lengths"].numpy() <= lengths.numpy())

  bias = decoder.output_projection.bias
  bias.assign(tf.tensor_scatter_nd_update(bias, [[END]], [-1e4]))
  greedy = decoder.search(mem, lengths, table, 1)
  beam1 = decoder.search(mem, lengths, table, 1, use_beam_search=True)
  np.testing.assert_array_equal(greedy["final_sequence_lengths"].numpy(), lengths.numpy())
  np.testing.assert_array_equal(beam1["final_sequence_lengths"].numpy(), lengths.numpy())
  for row, n in enumerate(lengths.numpy()):
    np.testing.assert_array_equal(beam1["outputs"].numpy()[row, :n],
                                  greedy["outputs"].numpy()[row, :n])
  np.testing.assert_allclose(beam1["scores"].numpy(), greedy["scores"].numpy(), rtol=1e-4)


def test_infer_mode_uses_the_beam_and_eval_stays_greedy():
  enc = memory()
  outs = {}
  for mode in ("eval", "infer"):
    decoder = make_decoder(mode=mode, beam_width=3)
    decoder({"encoder_output": enc, "target_tensors": targets()}, training=False)
    if mode == "infer":
      decoder.set_weights(weights)
    weights = decoder.get_weights()
    outs[mode] = decoder({"encoder_output": enc}, training=False)
  assert np.all(outs["infer"]["scores"].numpy() >= outs["eval"]["scores"].numpy() - 1e-5)


def test_mixed_precision_keeps_logits_alignments_and_variables_float32():
  encoder = ListenAttendSpellEncoder(ENCODER, dtype="mixed_bfloat16")
  decoder = make_decoder(dtype="mixed_bfloat16", dropout_keep_prob=0.8, pos_embedding=True)
  x = np.random.default_rng(0).standard_normal((3, 30, 5)).astype(np.float32)
  enc = encoder({"source_tensors": (tf.constant(x), tf.constant([30, 20, 12]))}, training=True)
  assert enc["outputs"].dtype == tf.bfloat16
  out = decoder({"encoder_output": enc, "target_tensors": targets()}, training=True)
  assert out["logits"].dtype == tf.float32 and out["alignments"].dtype == tf.float32
  assert np.all(np.isfinite(out["logits"].numpy()))
  assert all(v.dtype == "float32" for v in encoder.weights + decoder.weights
             if "seed" not in v.path)
  predicted = decoder({"encoder_output": enc}, training=False)
  assert predicted["outputs"].dtype == tf.int32


def test_decoder_needs_start_and_end_symbols():
  with pytest.raises(ConfigError, match="autoregressive"):
    ListenAttendSpellDecoder(las_params(), vocab_size=VOCAB)
  with pytest.raises(ConfigError, match="num_heads"):
    ListenAttendSpellDecoder(dict(las_params(), attention_params={"attention_dim": 4,
                                                                  "num_heads": 2}),
                             vocab_size=VOCAB, go_symbol=GO, end_symbol=END)


# ------------------------------------------------------------------------------ joint decoder
def test_joint_decoder_gives_attention_transcripts_and_a_smaller_ctc_vocabulary():
  idx2char = {i: c for i, c in enumerate("abcdefgh")}
  idx2char.update({GO: "<S>", END: "</S>"})
  decoder = JointCTCAttentionDecoder(
      {"attn_decoder_params": las_params(), "beam_search_params": {"beam_width": 2}},
      vocab_size=VOCAB, idx2char=idx2char, go_symbol=GO, end_symbol=END, mode="infer")
  assert decoder.attn_decoder.params["beam_width"] == 2
  assert decoder.ctc_decoder.vocab_size == VOCAB - 1
  assert sorted(decoder.ctc_decoder.idx2char) == list(range(8))
  enc = memory()
  out = decoder({"encoder_output": enc, "target_tensors": targets()}, training=False)
  assert out["seq_outputs"]["logits"].shape[-1] == VOCAB
  assert out["ctc_outputs"]["logits"].shape == (3, 7, VOCAB - 1)
  predicted = decoder({"encoder_output": enc}, training=False)
  np.testing.assert_array_equal(predicted["outputs"].numpy(),
                                predicted["seq_outputs"]["outputs"].numpy())


def test_joint_decoder_names_the_full_path_of_a_sub_decoder_error():
  with pytest.raises(ConfigError, match="decoder_params/attn_decoder_params/hiden_dim"):
    JointCTCAttentionDecoder({"attn_decoder_params": dict(las_params(), hiden_dim=3)},
                             vocab_size=VOCAB, go_symbol=GO, end_symbol=END)


class _CTCWithoutInitializer(FullyConnectedCTCDecoder):
  """A CTC sub-decoder whose constructor names no initializer and no alphabet."""

  def __init__(self, params, *, vocab_size=None, mode="train", name="ctc", dtype="float32"):
    super().__init__(params, vocab_size=vocab_size, mode=mode, name=name, dtype=dtype)


def test_joint_decoder_offers_sizes_but_refuses_to_drop_an_initializer():
  params = {"attn_decoder_params": las_params(), "ctc_decoder": _CTCWithoutInitializer}
  decoder = JointCTCAttentionDecoder(params, vocab_size=VOCAB, idx2char={0: "a"},
                                     go_symbol=GO, end_symbol=END)
  assert decoder.ctc_decoder.vocab_size == VOCAB - 1  # idx2char offered, not taken
  # The model-level initializer must reach both sub-decoders: never dropped silently.
  with pytest.raises(TypeError, match=r"_CTCWithoutInitializer.*'initializer'"):
    JointCTCAttentionDecoder(params, vocab_size=VOCAB, go_symbol=GO, end_symbol=END,
                             initializer=keras.initializers.Zeros())


# ------------------------------------------------------------------------------ loss
def test_loss_mixes_the_two_means_as_openseq2seq():
  rng = np.random.default_rng(0)
  ids, lengths = targets()
  seq_logits = tf.constant(rng.standard_normal((3, 4, VOCAB)).astype(np.float32))
  ctc_logits = tf.constant(rng.standard_normal((3, 7, VOCAB - 1)).astype(np.float32))
  frames = tf.constant([7, 5, 4])
  loss = MultiTaskCTCEntropyLoss({"lambda_value": 0.3,
                                  "seq_loss_params": {"average_across_timestep": True}},
                                 end_symbol=END)
  loss_sum, weight = loss.compute_loss({
      "decoder_output": {"seq_outputs": {"logits": seq_logits},
                         "ctc_outputs": {"logits": ctc_logits, "src_lengths": frames}},
      "target_tensors": (ids, lengths)})
  # by hand: cross entropy per real target character (</S> included) ...
  log_probs = tf.nn.log_softmax(seq_logits).numpy()
  tokens = [(b, t) for b in range(3) for t in range(int(lengths[b]))]
  xent = -np.mean([log_probs[b, t, int(ids[b, t])] for b, t in tokens])
  # ... and CTC per utterance over the characters without </S> (blank: the last class)
  labels = [[1, 2, 3], [4], [5, 6]]
  ctc = np.mean([float(tf.nn.ctc_loss(tf.constant([l]), ctc_logits[b:b + 1],
                                      tf.constant([len(l)]), frames[b:b + 1],
                                      logits_time_major=False, blank_index=VOCAB - 2)[0])
                 for b, l in enumerate(labels)])
  assert float(weight) == 3.0
  np.testing.assert_allclose(float(loss_sum) / float(weight), 0.7 * xent + 0.3 * ctc,
                             rtol=1e-5)


def test_strip_end_symbol_and_lambda_range():
  ids, lengths = targets()
  np.testing.assert_array_equal(strip_end_symbol(ids, lengths, END).numpy(), [3, 1, 2])
  np.testing.assert_array_equal(strip_end_symbol(ids, lengths, None).numpy(), [4, 2, 3])
  with pytest.raises(ConfigError, match="lambda_value"):
    MultiTaskCTCEntropyLoss({"lambda_value": 1.5})


# ------------------------------------------------------------------------------ targets, model
def test_autoregressive_targets_end_with_the_end_symbol():
  plain = TargetEncoder(speech.VOCAB)
  targets_ = TargetEncoder(speech.VOCAB, autoregressive=True)
  n = plain.num_symbols
  assert (plain.vocab_size, targets_.vocab_size) == (n + 1, n + 2)
  assert (targets_.start_id, targets_.end_id) == (n, n + 1)
  assert targets_.char2idx["<S>"] == n and targets_.idx2char[n + 1] == "</S>"
  ids = targets_.encode("one two")
  assert ids[-1] == n + 1 and ids[:-1] == plain.encode("one two")
  assert targets_.decode(ids + [3, 4]) == "one two"  # stops at </S>
  assert plain.decode(ids) == "one two"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  return speech.write_corpus(str(tmp_path_factory.mktemp("las")),
                             ["one two", "three", "four five", "six"],
                             durations=[0.7, 0.45, 0.6, 0.4])


def jca_config(corpus, **top):
  encoder = {"convnet_layers": ENCODER["convnet_layers"],
             "recurrent_layers": ENCODER["recurrent_layers"][:1]}
  return speech.speech_config(
      [corpus], encoder=ListenAttendSpellEncoder, encoder_params=encoder,
      data_params={"autoregressive": True}, decoder=JointCTCAttentionDecoder,
      decoder_params={"attn_decoder_params": las_params()}, loss=MultiTaskCTCEntropyLoss,
      loss_params={"lambda_value": 0.25, "seq_loss_params": {"average_across_timestep": True}},
      **top)


def test_speech2text_wires_symbols_and_transcribes(corpus):
  model = speech.build_model(jca_config(corpus), "train")
  targets_ = model.data_layer.targets
  assert model.decoder.attn_decoder.go_symbol == targets_.start_id
  assert model.decoder.attn_decoder.end_symbol == targets_.end_id
  assert model.loss.end_symbol == targets_.end_id
  batch = next(iter(model.data_layer.build_dataset()))
  loss_sum, weight, outputs = model.compute_loss(batch, training=True)
  assert np.isfinite(float(loss_sum)) and float(weight) == 4.0
  lines = model.format_samples(speech.to_numpy(batch), speech.to_numpy(outputs))
  assert lines[0].startswith("Sample WER")
  infer = speech.build_model(jca_config(corpus), "infer")
  batch = next(iter(infer.data_layer.build_dataset()))
  predictions = speech.to_numpy(infer.predict(batch))
  results = infer.infer(speech.to_numpy(batch), predictions)
  assert [r[0] for r in results] == [0, 1, 2, 3]
  assert all(isinstance(text, str) and "<" not in text for _, (text, _) in results)


def test_attention_decoder_without_autoregressive_targets_is_a_config_error(corpus):
  config = jca_config(corpus)
  config["data_layer_params"]["autoregressive"] = False
  with pytest.raises(ConfigError, match="autoregressive"):
    speech.build_model(config, "train")


def test_beam_stop_and_finish_reach_the_search(monkeypatch):
  """beam_stop / beam_finish (the translation decoders' rules) are the LAS beam search's own,
  also through the joint decoder's beam_search_params; a rule not offered is refused."""
  from open_seq2seq.parts import beam_search
  seen = []
  search = beam_search.beam_search

  def spy(*args, **kwargs):
    seen.append((kwargs["stop"], kwargs["finish"]))
    return search(*args, **kwargs)

  monkeypatch.setattr(beam_search, "beam_search", spy)
  enc = memory()
  decoder = make_decoder(mode="infer", beam_width=3, beam_stop="current", beam_finish="top_k")
  decoder({"encoder_output": enc}, training=False)
  plain = make_decoder(mode="infer", beam_width=3)
  plain({"encoder_output": enc}, training=False)
  assert seen == [("current", "top_k"), ("bound", "any")]
  idx2char = {i: c for i, c in enumerate("abcdefgh")}
  idx2char.update({GO: "<S>", END: "</S>"})
  joint = JointCTCAttentionDecoder(
      {"attn_decoder_params": las_params(),
       "beam_search_params": {"beam_width": 2, "beam_finish": "top_k"}},
      vocab_size=VOCAB, idx2char=idx2char, go_symbol=GO, end_symbol=END, mode="infer")
  assert joint.attn_decoder.params["beam_finish"] == "top_k"
  with pytest.raises(ConfigError, match="beam_finish"):
    make_decoder(mode="infer", beam_finish="best")
