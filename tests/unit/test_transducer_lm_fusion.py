"""Transducer beam search fused with a word n-gram LM (open_seq2seq/parts/transducer/
lm_fusion.py, TransducerDecoder's use_language_model): on hand-built networks, where alpha,
beta and unk_score_offset each flip a best hypothesis; without LM weight, the in-graph beam
search's result; with a beam holding every hypothesis, the best fused score over every label
sequence; padding; the decoder's keys and errors and the Speech2Text hook."""

import itertools

import keras
import kenlm
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.decoders import TransducerDecoder
from open_seq2seq.decoders.ctc_beam_search import read_arpa_vocabulary
from open_seq2seq.encoders import ConformerEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.losses import RNNTLoss
from open_seq2seq.parts.transducer.lm_fusion import (HostNetworks, TextScorer,
                                                     fused_beam_search, label_pieces)
from open_seq2seq.parts.transducer.search import alignment_length_synchronous_search
from open_seq2seq.parts.transducer.streaming import TransducerStreamDecoder
from open_seq2seq.utils.ctc_prefix_search import PrefixBeamSearch, WordScorer
from open_seq2seq.utils.ngram_lm import write_arpa
from tests.helpers.rnnt_reference import log_softmax
from tests.helpers.speech import build_model, speech_config, write_corpus
from tests.unit.test_transducer_decoder import (DEPTH, SMALL, TINY_CONFORMER,
                                                capped_log_likelihood, decode, encoder_output,
                                                log_likelihoods, make_decoder)

LABELS = [" ", "a", "b"]  # the hand-built networks' alphabet; the blank is class 3
BLANK = len(LABELS)
NAMES = {" ": 0, "a": 1, "b": 2, "blank": BLANK}  # log_probs' names of the classes
BASE, LONGEST, FRAMES = BLANK + 1, 6, 2  # label histories as base-4 numbers of up to 6 digits
LENGTHS = [2, 1, 2]


def history(labels):
  code = 0
  for label in labels:
    code = code * BASE + label + 1
  return code


def log_probs(**probs):
  """log-probabilities of the classes given by name; the rest share what is left."""
  p = np.zeros(BASE)
  for name, value in probs.items():
    p[NAMES[name]] = value
  p[p == 0] = (1.0 - p.sum()) / np.sum(p == 0)
  return np.log(p)


def hand_built_table():
  """[utterance * FRAMES + frame, label history, class]: the joint's log-probabilities.

  Utterance 0: "ba" (0.41) before "ab" (0.33); utterance 1 (one frame): "" (0.6) before
  "ab" (0.22, two labels on the frame); utterance 2: "bb" (0.33) before "ab" (0.25) and
  "ba" (0.19). Any other (frame, history) says blank (0.97).
  """
  table = np.tile(log_probs(blank=0.97), (len(LENGTHS) * FRAMES, BASE ** LONGEST, 1))

  def put(utterance, frame, labels, **probs):
    table[utterance * FRAMES + frame, history([NAMES[c] for c in labels])] = log_probs(**probs)

  put(0, 0, "", a=0.4, b=0.5, blank=0.05)
  put(0, 0, "a", blank=0.94)
  put(0, 0, "b", blank=0.94)
  put(0, 1, "a", b=0.9, blank=0.04)
  put(0, 1, "b", a=0.9, blank=0.04)
  put(1, 0, "", blank=0.6, a=0.3, b=0.05)
  put(1, 0, "a", b=0.8, blank=0.1)
  put(1, 0, "ab", blank=0.9)
  put(2, 0, "", b=0.6, a=0.3)
  put(2, 0, "a", blank=0.94)
  put(2, 0, "b", blank=0.94)
  put(2, 1, "b", b=0.6, a=0.35)
  put(2, 1, "a", b=0.9, blank=0.04)
  return table.astype(np.float32)


TABLE = hand_built_table()


def hand_built_predict(ids, code):  # the prediction "output" is the history's one-hot code
  code = tf.where(tf.equal(ids, BLANK), code, code * BASE + ids + 1)
  return tf.one_hot(code, BASE ** LONGEST), code


def hand_built_joint(frame, predicted):  # frames are one-hot codes of (utterance, frame)
  return tf.einsum("nf,nh,fhv->nv", frame, predicted, tf.constant(TABLE))


def hand_built_frames():
  return tf.one_hot(tf.reshape(tf.range(len(LENGTHS) * FRAMES), [len(LENGTHS), FRAMES]),
                    len(LENGTHS) * FRAMES)


@pytest.fixture(scope="module")
def networks():
  return HostNetworks(hand_built_predict, hand_built_joint,
                      lambda rows: tf.zeros([rows], tf.int32), BLANK)


@pytest.fixture(scope="module")
def ab_lm(tmp_path_factory):
  """Words "ab" (frequent) and "ba" (rare)."""
  path = str(tmp_path_factory.mktemp("lm") / "ab.arpa")
  write_arpa(["ab"] * 9 + ["ba", "ab ba"], path, order=2)
  return path


def scorer_for(lm_path, labels=LABELS, alpha=0.0, beta=0.0, unk_score_offset=0.0):
  return TextScorer(WordScorer(kenlm.Model(lm_path), read_arpa_vocabulary(lm_path), alpha,
                               beta, unk_score_offset), labels)


def search(networks, scorer, width=4, max_symbols=3):
  results = fused_beam_search(hand_built_frames().numpy(), LENGTHS, networks, scorer, width,
                              max_symbols)
  return [scorer.transcript(labels) for labels, _, _ in results], results


# ------------------------------------------------------------------------ texts and scores
def test_labels_read_as_the_ctc_decoder_reads_them():
  for labels in (LABELS + ["'"], ["\u2581on", "e", "\u2581two", "<unk>", "s"]):
    reference = PrefixBeamSearch(labels, WordScorer())
    starts, pieces = label_pieces(labels)
    np.testing.assert_array_equal(starts, reference.starts[:-1])
    assert pieces == reference.pieces[:-1]


def test_a_row_scores_each_extension_as_its_text(ab_lm):
  scorer = scorer_for(ab_lm, alpha=0.7, beta=1.5, unk_score_offset=-4.0)
  scorer.new_batch()
  for labels in [(), (1,), (1, 2), (1, 2, 0), (1, 2, 0, 2), (2, 2), (0, 0, 1)]:
    text = ("", "")
    for label in labels:
      text = scorer.extend(text, label)
    row = scorer.row(text)
    assert row[BLANK] == pytest.approx(scorer.score(text))
    for c in range(BLANK):
      assert row[c] == pytest.approx(scorer.score(scorer.extend(text, c)))
  assert scorer.transcript((0, 1, 2, 0, 0, 2, 1, 0)) == "ab ba"


# ------------------------------------------------------------------------ hand-built networks
def test_without_lm_weight_the_result_is_the_in_graph_beam_searchs(networks, ab_lm):
  texts, results = search(networks, scorer_for(ab_lm))
  assert texts == ["ba", "", "bb"]
  state = tf.zeros([len(LENGTHS) * 4], tf.int32)
  ids, counts, scores = alignment_length_synchronous_search(
      hand_built_frames(), tf.constant(LENGTHS), state, hand_built_predict, hand_built_joint,
      BLANK, 4, 3)
  assert [tuple(row[:n]) for row, n in zip(ids.numpy(), counts.numpy())] == \
      [labels for labels, _, _ in results]
  np.testing.assert_allclose([p for _, p, _ in results], scores.numpy(), rtol=1e-5)
  # both merged the same alignments; a wide beam merges every one (a beam of 4 lost "b" then
  # "a" on frame 0: 0.0094)
  wide, results = search(networks, scorer_for(ab_lm), width=64)
  assert wide == texts
  for b, (labels, log_prob, score) in enumerate(results):
    lattice = TABLE[b * FRAMES:b * FRAMES + LENGTHS[b]]
    rows = lattice[:, [history(labels[:u]) for u in range(len(labels) + 1)]]
    assert log_prob == pytest.approx(capped_log_likelihood(rows, labels, 3), rel=1e-5)
    assert score == pytest.approx(log_prob)


def test_the_lm_weight_flips_the_best_hypothesis(networks, ab_lm):
  texts, results = search(networks, scorer_for(ab_lm, alpha=1.0))
  assert texts[0] == "ab"  # the LM's frequent word beats the transducer's "ba"
  lm = kenlm.Model(ab_lm)
  for text, (_, log_prob, score) in zip(texts, results):
    assert score == pytest.approx(log_prob + np.log(10) * lm.score(text, bos=True, eos=True))


def test_the_word_bonus_and_the_unknown_word_offset_flip_the_best_hypothesis(networks, ab_lm):
  assert search(networks, scorer_for(ab_lm, beta=2.0))[0][1] == "ab"  # a word beats none
  assert search(networks, scorer_for(ab_lm, beta=-2.0))[0][1] == ""
  assert search(networks, scorer_for(ab_lm, unk_score_offset=-10.0))[0][2] == "ab"  # not "bb"
  texts, results = search(networks, scorer_for(ab_lm, beta=2.0, unk_score_offset=-10.0))
  assert texts == ["ba", "ab", "ab"]
  assert results[1][2] == pytest.approx(results[1][1] + 2.0)


def test_one_label_per_frame_cannot_emit_two_on_one_frame(networks, ab_lm):
  texts, _ = search(networks, scorer_for(ab_lm, beta=2.0), max_symbols=1)
  # "ab" needs two labels on utterance 1's only frame; "a" and "b" (-1.5, -1.0 with their
  # bonus) are less likely than no word (-0.5)
  assert texts[1] == ""
  texts, _ = search(networks, scorer_for(ab_lm, beta=2.0), max_symbols=2)
  assert texts[1] == "ab"


# ------------------------------------------------------------------------ random networks
@pytest.fixture(scope="module")
def a_lm(tmp_path_factory):
  """Words of "a"s: "a", "aa", "aaa"."""
  path = str(tmp_path_factory.mktemp("lm") / "a.arpa")
  write_arpa(["a aa", "aa", "aaa a", "a", "aa aa a"], path, order=2)
  return path


def lm_decoder(lm_path, seed=0, classes=3, alphabet=(" ", "a"), blank_bias=None, **params):
  """A small decoder with random weights (as make_decoder's), decoding with the LM."""
  keras.utils.set_random_seed(seed)
  decoder = TransducerDecoder({**SMALL, "use_language_model": True, "lm_path": lm_path,
                               **params}, vocab_size=classes,
                              idx2char=dict(enumerate(alphabet)), mode="eval")
  decoder({"encoder_output": encoder_output([1])})
  if blank_bias is not None:
    bias = decoder.joint.output_layer.bias
    bias.assign(bias + tf.one_hot(classes - 1, classes) * blank_bias)
  return decoder


def scorer_text(scorer, labels):
  text = ("", "")
  for label in labels:
    text = scorer.extend(text, label)
  return text


def projected(decoder, encoded):
  return decoder.joint.project_encoder(encoded["outputs"]).numpy()


def test_a_beam_holding_every_hypothesis_finds_the_best_fused_score(a_lm):
  """The blank and two labels (" ", "a"), 3 frames, two labels per frame: every label sequence
  of up to 6 labels is scored by its capped RNN-T likelihood plus its word score; a beam of
  128 prunes nothing, so the search returns the best one with its exact score."""
  max_symbols = 2
  for alpha, beta, unk in [(0.0, 0.0, 0.0), (1.5, 0.5, -2.0), (0.8, -1.0, -0.5)]:
    decoder = lm_decoder(a_lm, 3, max_symbols_per_step=max_symbols, beam_width=128,
                         alpha=alpha, beta=beta, unk_score_offset=unk)
    lengths = [3, 2]
    encoded = encoder_output(lengths, seed=3, scale=2.0)
    results = decoder.lm_search(projected(decoder, encoded), lengths)
    scorer = scorer_for(a_lm, [" ", "a"], alpha, beta, unk)
    scorer.new_batch()
    for b, frames in enumerate(lengths):
      best, best_score = None, -np.inf
      for size in range(frames * max_symbols + 1):
        for labels in itertools.product(range(2), repeat=size):
          one = {k: v[b:b + 1] for k, v in encoded.items()}
          logits = decoder({"encoder_output": one, "target_tensors": (
              tf.constant([list(labels) or [0]]), tf.constant([size]))})["logits"].numpy()
          score = capped_log_likelihood(log_softmax(logits[0, :frames, :size + 1]), labels,
                                        max_symbols)
          score += scorer.final(scorer_text(scorer, labels))
          if score > best_score:
            best, best_score = labels, score
      assert results[b][0] == best, (alpha, beta, unk, b)
      assert results[b][2] == pytest.approx(best_score, rel=1e-5, abs=1e-5)
    if alpha == beta == unk == 0.0:  # the in-graph beam search, as wide, finds the same
      in_graph, scores = decode(decoder, encoded, beam=True, width=128)
      assert in_graph == [list(labels) for labels, _, _ in results]
      np.testing.assert_allclose(scores, [p for _, p, _ in results], rtol=1e-5)


def test_without_lm_weight_a_narrow_beam_finds_transcripts_as_likely_as_the_in_graph_one(a_lm):
  """Random small models with short outputs, beam 4: the two searches differ (time against
  alignment-length synchronous) on these flat outputs, and the fused search's transcripts are
  more likely on average by the training criterion (the RNN-T loss: every alignment).
  Measured: at least as likely on 27 of 32 utterances (the same on 12), 0.77 nats more on
  average, 0.62 less at worst. (On the trained model of
  tests/learning/test_transducer_lm_fusion.py they agree.)"""
  gains = []
  for seed in range(8):
    decoder = lm_decoder(a_lm, seed, classes=6, alphabet=(" ", "a", "b", "c", "d"),
                         blank_bias=1.5, max_symbols_per_step=3, alpha=0.0, beta=0.0,
                         unk_score_offset=0.0)
    lengths = [12, 7, 10, 3]
    encoded = encoder_output(lengths, seed=seed)
    fused = [list(labels) for labels, _, _ in decoder.lm_search(projected(decoder, encoded),
                                                                lengths)]
    in_graph, _ = decode(decoder, encoded, beam=True, width=4)
    gains += list(log_likelihoods(decoder, encoded, fused) -
                  log_likelihoods(decoder, encoded, in_graph))
  gains = np.array(gains)
  assert gains.mean() > 0.3 and np.mean(gains >= -1e-4) >= 0.75, gains


def test_padding_never_changes_an_utterance(a_lm):
  decoder = lm_decoder(a_lm, 1, classes=6, alphabet=(" ", "a", "b", "c", "d"), alpha=0.5,
                       beta=1.0)
  lengths = [9, 4, 6]
  padded = projected(decoder, encoder_output(lengths, frames=12, garbage=True))
  clean = projected(decoder, encoder_output(lengths, frames=12))
  batch = decoder.lm_search(padded, lengths)
  for i, n in enumerate(lengths):
    alone = decoder.lm_search(clean[i:i + 1, :n], [n])[0]
    assert alone[0] == batch[i][0]
    assert alone[1:] == pytest.approx(batch[i][1:], rel=1e-5)
  assert decoder.lm_search(clean[:1, :0], [0]) == [((), 0.0, pytest.approx(
      0.5 * np.log(10) * kenlm.Model(decoder.params["lm_path"]).score("", eos=True)))]


# ------------------------------------------------------------------------ the decoder
def test_config_errors_are_one_line(a_lm, tmp_path):
  lm = {"use_language_model": True, "lm_path": a_lm}
  alphabet = {0: " ", 1: "a"}
  cases = [({"use_language_model": True}, {}, "lm_path: use_language_model needs"),
           ({**lm, "lm_path": str(tmp_path / "none.arpa")}, {}, "does not exist"),
           ({**lm, "use_beam_search": True}, {}, "use_beam_search: use_language_model"),
           (lm, {"token_frames": True}, "word timestamps"),
           (lm, {"idx2char": None}, "needs the alphabet of the 2 labels"),
           (lm, {"idx2char": {0: " "}}, "got 1 symbols")]
  for params, kwargs, message in cases:
    with pytest.raises(ConfigError, match=message) as error:
      TransducerDecoder(params, vocab_size=3, **{"idx2char": alphabet, **kwargs})
    assert "\n" not in str(error.value)
  decoder = make_decoder(0, classes=3)
  with pytest.raises(ConfigError, match="LM decoding needs it True"):
    decoder.lm_search(np.zeros((1, 2, SMALL["joint_hidden"]), np.float32), [2])
  with pytest.raises(ConfigError, match="use_language_model: streaming"):
    TransducerStreamDecoder(lm_decoder(a_lm), DEPTH)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  return write_corpus(str(tmp_path_factory.mktemp("rnnt_lm_corpus")),
                      ["one", "two three", "four", "five six"], durations=[0.5, 0.9, 0.3, 0.7])


def test_speech2text_decodes_a_transducer_with_the_lm(corpus, tmp_path):
  lm_path = str(tmp_path / "words.arpa")
  write_arpa(["one", "two three", "four", "five six"], lm_path, order=2)
  params = {**SMALL, "use_language_model": True, "lm_path": lm_path, "beam_width": 3}
  config = speech_config([corpus], encoder=ConformerEncoder, encoder_params=TINY_CONFORMER,
                         decoder=TransducerDecoder, decoder_params=params, loss=RNNTLoss)
  model = build_model(config, "eval")
  batch = next(iter(model.data_layer.build_dataset()))
  outputs = tf.nest.map_structure(lambda t: t.numpy(), model.predict(batch))
  frames = outputs["frames"]
  assert frames.shape[0] == 4 and frames.shape[1] >= outputs["src_lengths"].max()
  assert frames.shape[2] == SMALL["joint_hidden"]
  texts = model.decode_outputs(outputs)
  results = model.decoder.lm_search(outputs["frames"], outputs["src_lengths"])
  targets = model.data_layer.targets
  assert texts == [" ".join(targets.decode(labels).split()) for labels, _, _ in results]
  assert model.decode_outputs(outputs, limit=2) == texts[:2]
  # the graph still decodes greedily: what an export serves
  assert outputs["outputs"].shape[0] == 4 and outputs["final_sequence_lengths"].shape == (4,)
