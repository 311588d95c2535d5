"""TransducerDecoder and its parts: shapes, the joint against a direct computation, teacher
forcing against step-by-step prediction, greedy search on a hand-built joint, beam search
against greedy and against every label sequence, padding, half precision, export, and the
Speech2Text wiring with RNNTLoss."""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.decoders import FullyConnectedCTCDecoder, TransducerDecoder
from open_seq2seq.encoders import ConformerEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.losses import CTCLoss, RNNTLoss, rnnt_loss
from open_seq2seq.parts.transducer import greedy_search
from tests.helpers.rnnt_reference import log_softmax
from tests.helpers.speech import build_model, speech_config, write_corpus

CLASSES = 6  # five labels and the blank (the last class)
BLANK = CLASSES - 1
DEPTH = 8
SMALL = {"pred_hidden": 12, "joint_hidden": 10, "pred_dropout": 0.0, "joint_dropout": 0.0,
         "max_symbols_per_step": 3}


def make_decoder(seed=0, classes=CLASSES, blank_bias=None, **params):
  """A small decoder with random weights, built; ``blank_bias`` is added to the blank's
  output bias (a positive one makes the outputs short, as a trained model's)."""
  keras.utils.set_random_seed(seed)
  decoder = TransducerDecoder({**SMALL, **params}, vocab_size=classes, mode="eval")
  decoder({"encoder_output": encoder_output([1])})
  if blank_bias is not None:
    bias = decoder.joint.output_layer.bias
    bias.assign(bias + tf.one_hot(classes - 1, classes) * blank_bias)
  return decoder


def encoder_output(lengths, frames=None, seed=0, garbage=False, scale=1.0):
  """Random encoder outputs [B, T, DEPTH]; zeros after each length, or large values."""
  rng = np.random.default_rng(seed)
  frames = frames or max(lengths)
  x = np.zeros((len(lengths), frames, DEPTH), np.float32)
  for i, n in enumerate(lengths):
    x[i, :n] = scale * rng.normal(size=(n, DEPTH))
  for i, n in enumerate(lengths if garbage else []):  # after: the real frames stay the same
    x[i, n:] = 100.0 * rng.normal(size=(frames - n, DEPTH))
  return {"outputs": tf.constant(x), "src_lengths": tf.constant(lengths, tf.int32)}


def decode(decoder, encoded, beam=False, width=4):
  decoder.params.update({"use_beam_search": beam, "beam_width": width})
  out = decoder({"encoder_output": encoded})
  decoder.params["use_beam_search"] = False
  ids, lengths = out["outputs"].numpy(), out["final_sequence_lengths"].numpy()
  return [list(row[:n]) for row, n in zip(ids, lengths)], out["scores"].numpy()


def log_likelihoods(decoder, encoded, hypotheses):
  """log P(hypothesis | frames) of each row under the model (all alignments: the RNN-T
  loss, the training criterion)."""
  width = max(1, max(len(h) for h in hypotheses))
  ids = np.array([h + [0] * (width - len(h)) for h in hypotheses], np.int32)
  lengths = tf.constant([len(h) for h in hypotheses])
  logits = decoder({"encoder_output": encoded,
                    "target_tensors": (tf.constant(ids), lengths)})["logits"]
  return -rnnt_loss(logits, ids, encoded["src_lengths"], lengths, blank=-1).numpy()


# ------------------------------------------------------------------------ shapes and parts
def test_training_gives_the_lattice_and_decoding_gives_padded_ids():
  decoder = make_decoder()
  encoded = encoder_output([7, 5, 3])
  targets = tf.constant([[1, 2, 3], [0, 4, 0], [2, 0, 0]])
  out = decoder({"encoder_output": encoded, "target_tensors": (targets, tf.constant([3, 2, 1]))},
                training=True)
  assert out["logits"].shape == (3, 7, 4, CLASSES) and out["logits"].dtype == tf.float32
  np.testing.assert_array_equal(out["src_lengths"], [7, 5, 3])
  for beam in (False, True):
    decoder.params["use_beam_search"] = beam
    out = decoder({"encoder_output": encoded})
    ids, lengths = out["outputs"].numpy(), out["final_sequence_lengths"].numpy()
    assert ids.dtype == np.int32 and ids.shape == (3, lengths.max())
    assert set(out) == {"outputs", "final_sequence_lengths", "scores", "src_lengths"}
    for row, n in zip(ids, lengths):
      assert np.all((row[:n] >= 0) & (row[:n] < BLANK)) and np.all(row[n:] == -1)
      assert n <= 7 * SMALL["max_symbols_per_step"]


def test_joint_equals_a_direct_computation_and_teacher_forcing_equals_steps():
  decoder = make_decoder(joint_activation="tanh")
  encoded = encoder_output([4, 3])
  targets = np.array([[3, 1, 4], [2, 2, 0]], np.int32)
  logits = decoder({"encoder_output": encoded,
                    "target_tensors": (tf.constant(targets), tf.constant([3, 2]))})["logits"]
  predicted = decoder.prediction.sequence(tf.constant(targets), training=False).numpy()
  joint = decoder.joint
  w = {name: [v.numpy() for v in layer.weights] for name, layer in (
      ("enc", joint.encoder_projection), ("pred", joint.prediction_projection),
      ("out", joint.output_layer))}
  f = encoded["outputs"].numpy() @ w["enc"][0] + w["enc"][1]  # [B, T, H]
  g = predicted @ w["pred"][0] + w["pred"][1]  # [B, U+1, H]
  direct = np.tanh(f[:, :, None] + g[:, None]) @ w["out"][0] + w["out"][1]
  np.testing.assert_allclose(logits.numpy(), direct, rtol=1e-5, atol=1e-5)
  # the decoding steps: the start context (the blank, embedded as zeros), then each label
  state = decoder.prediction.initial_state(2)
  for u in range(targets.shape[1] + 1):
    ids = np.full(2, BLANK, np.int32) if u == 0 else targets[:, u - 1]
    output, state = decoder.prediction.step(tf.constant(ids), state)
    np.testing.assert_allclose(output.numpy(), predicted[:, u], rtol=1e-5, atol=1e-6)
  assert not np.any(decoder.prediction.embed(tf.constant([BLANK])).numpy())


def test_greedy_search_follows_a_hand_built_joint():
  """Frames and prediction states are one-hot codes of (utterance, frame) and of the labels
  emitted so far; the joint reads a table whose argmax at each (t, u) is given."""
  frames_count, most = 4, 6
  #  utterance 0: 1, 2 on frame 0 (two on one frame), nothing on frame 1, 3 on frame 2, 4 on
  #  frame 3 at u=3; (1, 1) is read only when the limit of labels per frame stops frame 0
  #  utterance 1 (2 frames): 2, 2, 2 on frame 0, 1 on frame 1; its padding frames say 3
  argmax = {(0, 0, 0): 1, (0, 0, 1): 2, (0, 1, 1): 4, (0, 2, 2): 3, (0, 3, 3): 4,
            (0, 2, 1): 3, (0, 3, 2): 4,
            (1, 0, 0): 2, (1, 0, 1): 2, (1, 0, 2): 2, (1, 1, 3): 1, (1, 1, 1): 3,
            (1, 2, 0): 3, (1, 2, 3): 3, (1, 3, 3): 3, (1, 3, 4): 3}
  table = np.zeros((2 * frames_count, most, CLASSES), np.float32)
  table[:, :, BLANK] = 5.0
  for (b, t, u), label in argmax.items():
    table[b * frames_count + t, u, label] = 10.0
  frames = tf.one_hot(tf.reshape(tf.range(2 * frames_count), [2, frames_count]),
                      2 * frames_count)

  def predict(ids, emitted):  # the start context counts -1 -> 0
    del ids
    emitted += 1
    return tf.one_hot(emitted, most), emitted

  def joint(frame, predicted):
    return tf.einsum("nf,nu,fuv->nv", frame, predicted, table)

  def run(max_symbols):
    ids, lengths, _ = greedy_search(frames, tf.constant([4, 2]), tf.fill([2], -1), predict,
                                    joint, BLANK, max_symbols)
    return [list(row[:n]) for row, n in zip(ids.numpy(), lengths.numpy())]

  assert run(10) == run(3) == [[1, 2, 3, 4], [2, 2, 2, 1]]
  # one label per frame: (0, 0) -> 1; (1, 1) -> 4; (2, 2) -> 3; (3, 3) -> 4; the second
  # utterance: (0, 0) -> 2, (1, 1) -> 3
  assert run(1) == [[1, 4, 3, 4], [2, 3]]
  # two per frame: 1, 2 on frame 0; (1, 2) blank; (2, 2) -> 3 and (2, 3) blank; (3, 3) -> 4;
  # the second utterance: 2, 2 on frame 0, then (1, 2) blank
  assert run(2) == [[1, 2, 3, 4], [2, 2]]


# ------------------------------------------------------------------------ beam search
@pytest.mark.parametrize("max_symbols", [1, 3])
def test_a_beam_of_one_is_the_greedy_search(max_symbols):
  for seed in range(4):
    decoder = make_decoder(seed, max_symbols_per_step=max_symbols, blank_bias=1.0)
    encoded = encoder_output([9, 4, 7, 1], frames=10, seed=seed)
    greedy, greedy_scores = decode(decoder, encoded)
    beam, beam_scores = decode(decoder, encoded, beam=True, width=1)
    assert beam == greedy
    np.testing.assert_allclose(beam_scores, greedy_scores, rtol=1e-5)


def capped_log_likelihood(log_probs, labels, max_symbols):
  """log P(labels) over the alignments with at most ``max_symbols`` labels per frame, by a
  plain dynamic programme over (frame, labels, labels on this frame); ``log_probs`` [T, U+1,
  V] of one utterance."""
  frames, rows = log_probs.shape[:2]
  alpha = np.full((frames, rows, max_symbols + 1), -np.inf)
  alpha[0, 0, 0] = 0.0
  total = -np.inf
  for t in range(frames):
    for u in range(rows):
      for c in range(max_symbols + 1):
        here = alpha[t, u, c]
        if here == -np.inf:
          continue
        blank = here + log_probs[t, u, -1]
        if t + 1 < frames:
          alpha[t + 1, u, 0] = np.logaddexp(alpha[t + 1, u, 0], blank)
        elif u == rows - 1:
          total = np.logaddexp(total, blank)
        if u < rows - 1 and c < max_symbols:
          alpha[t, u + 1, c + 1] = np.logaddexp(alpha[t, u + 1, c + 1],
                                                here + log_probs[t, u, labels[u]])
  return total


def test_a_beam_holding_every_hypothesis_finds_the_most_likely_label_sequence():
  """Two labels and the blank, 3 frames, 2 labels per frame at most: every label sequence of
  up to 6 labels is scored exactly; a beam of 128 prunes nothing (at most 64 hypotheses and
  their extensions by a blank on the last frame in a step), so it returns the best one with
  its exact probability (its merged alignments)."""
  classes, max_symbols = 3, 2
  decoder = make_decoder(3, classes=classes, max_symbols_per_step=max_symbols)
  lengths = [3, 2]
  encoded = encoder_output(lengths, seed=3, scale=2.0)
  beam, scores = decode(decoder, encoded, beam=True, width=128)
  for b, frames in enumerate(lengths):
    best, best_score = None, -np.inf
    for size in range(frames * max_symbols + 1):
      for labels in itertools.product(range(classes - 1), repeat=size):
        one = {k: v[b:b + 1] for k, v in encoded.items()}
        padded = np.array([list(labels) or [0]], np.int32)
        logits = decoder({"encoder_output": one, "target_tensors": (
            tf.constant(padded), tf.constant([size]))})["logits"].numpy()[0, :frames]
        score = capped_log_likelihood(log_softmax(logits[:, :size + 1]), labels, max_symbols)
        if score > best_score:
          best, best_score = list(labels), score
    assert beam[b] == best
    np.testing.assert_allclose(scores[b], best_score, rtol=1e-5)


def test_a_wider_beam_finds_transcripts_at_least_as_likely_as_greedy():
  """Scored by the training criterion (the RNN-T loss: every alignment), over random small
  models with short outputs. Beam search is not exact (a hypothesis greedy keeps can be pruned
  from the beam), so an utterance may lose; the beam wins on average and on nearly all.
  (A beam holding every hypothesis is exact: the test above.)"""
  gains, own = [], []
  for seed in range(8):
    decoder = make_decoder(seed, max_symbols_per_step=3, blank_bias=1.5)
    encoded = encoder_output([12, 7, 10, 3], seed=seed)
    greedy, greedy_scores = decode(decoder, encoded)
    beam, beam_scores = decode(decoder, encoded, beam=True, width=8)
    own += list(beam_scores - greedy_scores)  # the search's own criterion: merged paths
    gains += list(log_likelihoods(decoder, encoded, beam) -
                  log_likelihoods(decoder, encoded, greedy))
  gains, own = np.array(gains), np.array(own)
  # measured: 31 of 32 utterances at least as likely (one loses 0.03 nats), 1.6 nats more on
  # average; by the search's own score also 31 of 32
  assert gains.mean() > 0.5 and np.mean(gains >= -1e-4) >= 0.9, gains
  assert np.mean(own >= -1e-4) >= 0.9, own


# ------------------------------------------------------------------------ padding, precision
def test_padding_never_changes_an_utterance():
  decoder = make_decoder(1, blank_bias=1.0)
  lengths, labels = [9, 4, 6], [[1, 3, 0, 2], [4, 4, 0, 0], [2, 0, 0, 0]]
  label_lengths = [4, 2, 1]
  padded = encoder_output(lengths, frames=12, garbage=True)
  garbage_labels = np.array([row[:n] + [3] * (4 - n) for row, n in zip(labels, label_lengths)])
  batch_logits = decoder({"encoder_output": padded, "target_tensors": (
      tf.constant(garbage_labels), tf.constant(label_lengths))})["logits"].numpy()
  clean = encoder_output(lengths, frames=12)
  outputs = {beam: decode(decoder, padded, beam=beam) for beam in (False, True)}
  for i, (n, u) in enumerate(zip(lengths, label_lengths)):
    alone = {"outputs": clean["outputs"][i:i + 1, :n], "src_lengths": tf.constant([n])}
    logits = decoder({"encoder_output": alone, "target_tensors": (
        tf.constant([labels[i][:u]]), tf.constant([u]))})["logits"].numpy()
    np.testing.assert_allclose(batch_logits[i, :n, :u + 1], logits[0], rtol=1e-5, atol=1e-5)
    for beam in (False, True):
      ids, scores = decode(decoder, alone, beam=beam)
      assert outputs[beam][0][i] == ids[0]
      np.testing.assert_allclose(outputs[beam][1][i], scores[0], rtol=1e-4)


@pytest.mark.parametrize("joint_dtype,logits_dtype", [(None, tf.bfloat16),
                                                      ("float32", tf.float32)])
def test_mixed_precision_trains_and_decodes(joint_dtype, logits_dtype):
  keras.utils.set_random_seed(0)
  decoder = TransducerDecoder({**SMALL, "joint_dtype": joint_dtype}, vocab_size=CLASSES,
                              dtype="mixed_bfloat16")
  encoded = encoder_output([6, 4])
  targets = (tf.constant([[1, 2], [3, 0]]), tf.constant([2, 1]))
  with tf.GradientTape() as tape:
    out = decoder({"encoder_output": encoded, "target_tensors": targets}, training=True)
    loss, _ = RNNTLoss().compute_loss({"decoder_output": out, "target_tensors": targets})
  grads = tape.gradient(loss, decoder.trainable_variables)
  assert out["logits"].dtype == logits_dtype
  assert decoder.prediction.lstms[0].compute_dtype == "bfloat16"
  assert all(v.dtype == "float32" for v in decoder.trainable_variables)
  assert np.isfinite(loss.numpy())
  assert all(np.isfinite(tf.convert_to_tensor(g).numpy()).all() for g in grads)
  for beam in (False, True):
    ids, scores = decode(decoder, encoded, beam=beam)
    assert np.all(np.isfinite(scores)) and all(len(h) <= 18 for h in ids)


def test_greedy_and_beam_search_export_in_a_saved_model(tmp_path):
  decoder = make_decoder(2, blank_bias=1.0)
  encoded = encoder_output([8, 3, 5], seed=2)
  module = tf.Module()
  module.decoder = decoder
  signature = [tf.TensorSpec([None, None, DEPTH], tf.float32), tf.TensorSpec([None], tf.int32)]
  expected = {}
  for beam in (False, True):
    decoder.params["use_beam_search"] = beam
    expected[beam] = decoder({"encoder_output": encoded})

    def serve(features, lengths, beam=beam):  # saving traces again: the search is fixed here
      decoder.params["use_beam_search"] = beam
      out = decoder({"encoder_output": {"outputs": features, "src_lengths": lengths}})
      return {k: out[k] for k in ("outputs", "final_sequence_lengths", "scores")}

    setattr(module, "beam" if beam else "greedy",
            tf.function(serve, input_signature=signature, autograph=False))
  tf.saved_model.save(module, str(tmp_path / "export"))
  loaded = tf.saved_model.load(str(tmp_path / "export"))
  for beam in (False, True):
    got = getattr(loaded, "beam" if beam else "greedy")(encoded["outputs"],
                                                         encoded["src_lengths"])
    for key in ("outputs", "final_sequence_lengths"):
      np.testing.assert_array_equal(got[key].numpy(), expected[beam][key].numpy())
    np.testing.assert_allclose(got["scores"].numpy(), expected[beam]["scores"].numpy(),
                               rtol=1e-5)


# ------------------------------------------------------------------------ config and model
def test_config_errors_are_one_line():
  with pytest.raises(ConfigError, match="autoregressive: False"):
    TransducerDecoder({}, vocab_size=CLASSES, end_symbol=3)
  with pytest.raises(ConfigError, match="beam_width: must be at least 1"):
    TransducerDecoder({"beam_width": 0}, vocab_size=CLASSES)
  with pytest.raises(ConfigError, match="joint_dropout"):
    TransducerDecoder({"joint_dropout": 1.0}, vocab_size=CLASSES)
  with pytest.raises(ConfigError, match="joint_activation"):
    TransducerDecoder({"joint_activation": "gelu"}, vocab_size=CLASSES)


TINY_CONFORMER = {"d_model": 32, "num_layers": 1, "num_heads": 4, "conv_kernel_size": 7,
                  "subsampling_channels": 8}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  return write_corpus(str(tmp_path_factory.mktemp("rnnt_corpus")),
                      ["one", "two three", "four", "five six"], durations=[0.5, 0.9, 0.3, 0.7])


def transducer_config(corpus, **top):
  top = {"decoder": TransducerDecoder, "decoder_params": dict(SMALL), "loss": RNNTLoss, **top}
  return speech_config([corpus], encoder=ConformerEncoder, encoder_params=TINY_CONFORMER,
                       **top)


def test_speech2text_trains_with_rnnt_loss_and_transcribes_decoded_ids(corpus):
  model = build_model(transducer_config(corpus), "train")
  batch = next(iter(model.data_layer.build_dataset()))
  with tf.GradientTape() as tape:
    loss, weight, out = model.compute_loss(batch, training=True)
  grads = tape.gradient(loss, model.trainable_variables)
  assert weight.numpy() == 4 and np.isfinite(loss.numpy())
  assert all(g is not None and np.isfinite(tf.convert_to_tensor(g).numpy()).all()
             for g in grads)
  ids, lengths = batch["target_tensors"]
  assert out["logits"].shape[2] == ids.shape[1] + 1
  assert out["logits"].shape[3] == model.description.tgt_vocab_size
  predictions = tf.nest.map_structure(lambda t: t.numpy(), model.predict(batch))
  texts = model.decode_outputs(predictions)
  assert len(texts) == 4 and all(isinstance(t, str) for t in texts)
  # the same ids through the CTC path's formatting: outputs and final_sequence_lengths
  first = predictions["outputs"][0][:predictions["final_sequence_lengths"][0]]
  assert texts[0] == model.data_layer.targets.decode(first)


def test_speech2text_refuses_a_transducer_without_the_rnnt_loss_and_the_reverse(corpus):
  with pytest.raises(ConfigError, match="need RNNTLoss"):
    build_model(transducer_config(corpus, loss=CTCLoss))
  config = transducer_config(corpus, decoder=FullyConnectedCTCDecoder, decoder_params={})
  with pytest.raises(ConfigError, match="decoder: TransducerDecoder"):
    build_model(config)
  with pytest.raises(ConfigError, match="loss_params/blank"):
    build_model(transducer_config(corpus, loss_params={"blank": 0}))
