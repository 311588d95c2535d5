"""Word timestamps: token spans of hand-built CTC paths and transducer emissions, words of
character and SentencePiece alphabets, the CTC forced alignment against every frame path,
seconds and the CSV text form; the decoders' frames (greedy CTC in TF against the numpy
spans, transducer greedy and beam search), and Speech2Text's words in infer mode."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.decoders.fc_decoders import ctc_greedy_ids, ctc_greedy_token_frames
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.transducer import greedy_search
from open_seq2seq.utils import word_timestamps as wt
from tests.helpers.speech import build_model, load_script, speech_config, to_numpy, write_corpus
from tests.unit.test_transducer_decoder import encoder_output, make_decoder

# a character alphabet: a b c d, the space, then the blank (last)
CHARS = {0: "a", 1: "b", 2: "c", 3: "d", 4: " "}
BLANK = 5
SPACE = 4
TABLES = wt.token_tables(CHARS, 6, bpe=False)


def close(got, expected):
  np.testing.assert_allclose(np.array(got, float).reshape(-1, 2), expected, atol=1e-9)


def spans_of(tokens_and_frames):
  return [wt.TokenSpan(t, s, e) for t, s, e in tokens_and_frames]


# ------------------------------------------------------------------------ token spans
def test_ctc_path_spans_are_the_runs_of_non_blank_classes():
  _ = BLANK
  path = [_, 0, 0, _, 1, _, _, 1, 2, 2, SPACE, _, 3]
  assert wt.ctc_path_spans(path, BLANK) == spans_of(
      [(0, 1, 3), (1, 4, 5), (1, 7, 8), (2, 8, 10), (SPACE, 10, 11), (3, 12, 13)])
  # a repeat without a blank between is one token; an all-blank or empty path none
  assert wt.ctc_path_spans([1, 1, 1], BLANK) == spans_of([(1, 0, 3)])
  assert wt.ctc_path_spans([BLANK] * 4, BLANK) == []
  assert wt.ctc_path_spans([], BLANK) == []


def test_transducer_spans_last_one_frame_and_several_may_share_it():
  assert wt.transducer_spans([0, 1, 4, 2], [3, 3, 5, 9]) == spans_of(
      [(0, 3, 4), (1, 3, 4), (4, 5, 6), (2, 9, 10)])
  with pytest.raises(ValueError, match="3 tokens but 2"):
    wt.transducer_spans([0, 1, 2], [0, 1])


# ------------------------------------------------------------------------ words
def test_words_split_at_the_space_and_span_their_tokens():
  # "ab  c d": two spaces between words, a leading and a trailing space
  spans = spans_of([(SPACE, 0, 1), (0, 2, 4), (1, 6, 7), (SPACE, 8, 9), (SPACE, 10, 11),
                    (2, 12, 13), (SPACE, 14, 15), (3, 20, 21), (SPACE, 22, 23)])
  words = wt.word_spans(spans, *TABLES)
  assert words == [wt.WordSpan((0, 1), 2, 7), wt.WordSpan((2,), 12, 13),
                   wt.WordSpan((3,), 20, 21)]
  assert wt.word_spans([], *TABLES) == []
  assert wt.word_spans(spans_of([(SPACE, 0, 1)]), *TABLES) == []


def test_transducer_tokens_on_one_frame_make_a_word_of_one_frame():
  spans = wt.transducer_spans([0, 1, SPACE, 2], [4, 4, 4, 7])
  assert wt.word_spans(spans, *TABLES) == [wt.WordSpan((0, 1), 4, 5),
                                           wt.WordSpan((2,), 7, 8)]


def test_sentencepiece_pieces_start_words_with_their_mark():
  pieces = {0: "\u2581he", 1: "llo", 2: "\u2581", 3: "x", 4: "\u2581y"}
  starts_word, separator = wt.token_tables(pieces, 6, bpe=True)
  assert starts_word.tolist() == [True, False, True, False, True, False]
  assert separator.tolist() == [False, False, True, False, False, False]
  spans = spans_of([(0, 0, 1), (1, 2, 3), (2, 4, 5), (3, 6, 7), (4, 8, 9), (1, 10, 11)])
  assert wt.word_spans(spans, starts_word, separator) == [
      wt.WordSpan((0, 1), 0, 3), wt.WordSpan((3,), 6, 7), wt.WordSpan((4, 1), 8, 11)]


def test_word_times_scale_offset_and_stay_inside_the_audio():
  words = [wt.WordSpan((0,), 2, 5), wt.WordSpan((1,), 10, 11), wt.WordSpan((2,), 0, 1)]
  close(wt.word_times(words[:2], 0.04), [(0.08, 0.2), (0.4, 0.44)])
  got = wt.word_times(words, 0.04, start_offset=-0.1, end_offset=0.05, scale=1.5,
                      duration=0.62)
  # 2 * 0.06 - 0.1, 5 * 0.06 + 0.05; 10 * 0.06 - 0.1, 11 * 0.06 + 0.05 -> 0.62 (the end);
  # 0 * 0.06 - 0.1 -> 0
  close(got, [(0.02, 0.35), (0.5, 0.62), (0.0, 0.11)])
  # an end offset below the start offset never puts an end before its start
  close(wt.word_times([wt.WordSpan((0,), 3, 4)], 0.04, end_offset=-0.2), [(0.12, 0.12)])


def test_subsampling_factor_is_the_rounded_ratio_of_the_batch():
  # x4 with lengths rounded up (ceil(L / 4)), x2 with a valid convolution of width 11
  assert wt.subsampling_factor([400, 37, 103], [100, 10, 26]) == 4
  assert wt.subsampling_factor([100, 60], [45, 25]) == 2
  assert wt.subsampling_factor([50], [50]) == 1
  assert wt.subsampling_factor([0], [0]) == 1


def test_words_text_round_trips_and_bad_text_is_refused():
  words = [("one", 0.2, 0.5), ("don't", 0.61, 1.0), ("a:b", 1.0, 1.0)]
  text = wt.format_words(words)
  assert text == "one:0.20-0.50 don't:0.61-1.00 a:b:1.00-1.00"
  assert wt.parse_words(text) == words
  assert wt.parse_words("") == []
  for bad in ("one", "one:0.2", "one:x-0.3", ":0.1-0.2", "one:0.5-0.2"):
    with pytest.raises(ValueError):
      wt.parse_words(bad)


# ------------------------------------------------------------------------ forced alignment
def collapse(path, blank):
  return [t for t, _ in itertools.groupby(path) if t != blank]


@pytest.mark.parametrize("labels", [[0], [1, 2], [1, 1], [2, 0, 2], []])
def test_the_forced_path_is_the_best_frame_path_spelling_the_labels(labels):
  """Against every frame path of 6 frames over 3 labels and the blank."""
  blank, steps = 3, 6
  rng = np.random.default_rng(len(labels))
  for _ in range(3):
    log_probs = np.log(rng.dirichlet(np.ones(4), size=steps))
    best = max((sum(log_probs[t, c] for t, c in enumerate(path)), path)
               for path in itertools.product(range(4), repeat=steps)
               if collapse(path, blank) == labels)
    path = wt.ctc_forced_path(log_probs, labels, blank)
    assert collapse(path, blank) == labels
    assert log_probs[np.arange(steps), path].sum() == pytest.approx(best[0])


def test_the_forced_path_of_the_greedy_labels_is_the_greedy_path():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(40, 6)) * 3
  greedy = np.argmax(logits, axis=-1)
  path = wt.ctc_forced_path(logits, collapse(greedy, 5), 5)
  np.testing.assert_array_equal(path, greedy)


def test_labels_that_need_more_frames_have_no_forced_path():
  log_probs = np.log(np.full((2, 3), 1 / 3))
  assert wt.ctc_forced_path(log_probs, [0, 0], 2) is None  # a blank must separate them
  assert wt.ctc_forced_path(log_probs, [0, 1, 0], 2) is None
  assert wt.ctc_forced_path(np.zeros((0, 3)), [0], 2) is None
  assert list(wt.ctc_forced_path(log_probs, [0, 1], 2)) == [0, 1]


# ------------------------------------------------------------------------ decoders' frames
def test_greedy_ctc_frames_in_tensorflow_are_the_runs_of_the_best_path():
  rng = np.random.default_rng(1)
  logits = rng.normal(size=(3, 30, 6)).astype(np.float32)
  logits[..., 5] += 1.0  # blanks in between, as a trained model's
  logits[0, 3:8] = [0, 0, 0, 0, 0, 9]
  logits[0, 4:7, 2] = 10  # a run of three frames between blanks
  lengths = [30, 17, 0]
  ids, counts = ctc_greedy_ids(tf.constant(logits), tf.constant(lengths))
  starts, ends = ctc_greedy_token_frames(tf.constant(logits), tf.constant(lengths))
  assert starts.shape == ends.shape == ids.shape
  for row, n in enumerate(lengths):
    expected = wt.ctc_path_spans(np.argmax(logits[row, :n], -1), 5)
    got = [wt.TokenSpan(int(i), int(s), int(e)) for i, s, e in
           zip(ids[row].numpy(), starts[row].numpy(), ends[row].numpy())][:counts[row]]
    assert got == expected
  assert (starts.numpy()[2] == -1).all()
  assert (2, 4, 7) in zip(ids[0].numpy(), starts[0].numpy(), ends[0].numpy())


def test_transducer_greedy_frames_follow_a_hand_built_joint():
  """test_transducer_decoder.py's hand-built joint: labels 1, 2 on frame 0, 3 on frame 2 and
  4 on frame 3; the second utterance 2, 2, 2 on frame 0 and 1 on frame 1."""
  classes, frames_count, most = 6, 4, 6
  argmax = {(0, 0, 0): 1, (0, 0, 1): 2, (0, 2, 2): 3, (0, 3, 3): 4,
            (1, 0, 0): 2, (1, 0, 1): 2, (1, 0, 2): 2, (1, 1, 3): 1}
  table = np.zeros((2 * frames_count, most, classes), np.float32)
  table[:, :, classes - 1] = 5.0
  for (b, t, u), label in argmax.items():
    table[b * frames_count + t, u, label] = 10.0
  frames = tf.one_hot(tf.reshape(tf.range(2 * frames_count), [2, frames_count]),
                      2 * frames_count)

  def predict(ids, emitted):
    del ids
    return tf.one_hot(emitted + 1, most), emitted + 1

  def joint(frame, predicted):
    return tf.einsum("nf,nu,fuv->nv", frame, predicted, table)

  ids, lengths, _, emitted_on = greedy_search(
      frames, tf.constant([4, 2]), tf.fill([2], -1), predict, joint, classes - 1, 10,
      return_frames=True)
  assert ids.numpy().tolist() == [[1, 2, 3, 4], [2, 2, 2, 1]]
  assert emitted_on.numpy().tolist() == [[0, 0, 2, 3], [0, 0, 0, 1]]
  assert lengths.numpy().tolist() == [4, 4]


def test_transducer_decoder_frames_greedy_and_beam():
  """Emission frames grow, stay inside each utterance, and a beam of one gives greedy's;
  without token_frames the outputs are what they were."""
  for seed in range(3):
    decoder = make_decoder(seed, blank_bias=1.0)
    plain = decoder({"encoder_output": encoder_output([9, 4, 7, 1], frames=10, seed=seed)})
    decoder.token_frames = True
    results = {}
    for beam in (False, True):
      decoder.params.update({"use_beam_search": beam, "beam_width": 1})
      out = decoder({"encoder_output": encoder_output([9, 4, 7, 1], frames=10, seed=seed)})
      results[beam] = {k: v.numpy() for k, v in out.items()}
    decoder.params["use_beam_search"] = False
    greedy = results[False]
    assert sorted(plain) == ["final_sequence_lengths", "outputs", "scores", "src_lengths"]
    np.testing.assert_array_equal(plain["outputs"].numpy(), greedy["outputs"])
    for key in ("outputs", "token_start_frames", "token_end_frames"):
      np.testing.assert_array_equal(results[True][key], greedy[key])
    for row, (n, length) in enumerate(zip(greedy["final_sequence_lengths"], [9, 4, 7, 1])):
      starts = greedy["token_start_frames"][row]
      assert (np.diff(starts[:n]) >= 0).all() and (starts[:n] < length).all()
      assert (starts[n:] == -1).all()
      np.testing.assert_array_equal(greedy["token_end_frames"][row][:n], starts[:n] + 1)


def test_beam_frames_are_those_of_an_alignment_of_the_result():
  """A wider beam: each label's frame is inside its utterance and the frames never go back."""
  decoder = make_decoder(5, blank_bias=0.5)
  decoder.token_frames = True
  decoder.params.update({"use_beam_search": True, "beam_width": 4})
  out = decoder({"encoder_output": encoder_output([8, 3, 6], seed=5)})
  for row, length in enumerate([8, 3, 6]):
    n = int(out["final_sequence_lengths"][row])
    frames = out["token_start_frames"][row].numpy()[:n]
    assert (np.diff(frames) >= 0).all() and ((frames >= 0) & (frames < length)).all()


# ------------------------------------------------------------------------ the model
@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  return write_corpus(str(tmp_path_factory.mktemp("words")), ["one two", "three", "four five"],
                      durations=[0.9, 0.4, 0.7])


def test_infer_gives_each_word_times_inside_its_audio(corpus):
  """An untrained CTC model in infer mode: the words are the transcript's and their times
  grow and stay inside the audio; greedy frames and the beam's forced alignment agree on
  the greedy transcript."""
  model = build_model(speech_config([corpus], word_timestamps=True, word_start_offset=-0.02),
                      "infer")
  batch = next(iter(model.data_layer.build_dataset()))
  outputs = to_numpy(model.predict(batch))
  batch = to_numpy(batch)
  assert "token_start_frames" in outputs
  results = model.infer(batch, outputs)
  assert sum(len(words) for _, (_, _, words) in results) >= 3
  for _, (text, _, words) in results:
    assert [w for w, _, _ in words] == text.split()
    times = [t for _, start, end in words for t in (start, end)]
    assert times == sorted(times) and all(t >= 0 for t in times)
  lines = model.interactive_lines(batch, outputs)
  assert lines == [f"{text}\t{wt.format_words(words)}" for _, (text, _, words) in results]
  texts = model.decode_outputs(outputs)
  greedy = model.word_timestamps(batch, outputs, texts)
  # a beam search's ids (no frames from the decoder) and an LM's text are aligned to the logits
  aligned = {k: v for k, v in outputs.items() if not k.startswith("token_")}
  assert model.word_timestamps(batch, aligned, texts) == greedy
  model.decoder.params["use_language_model"] = True
  model.decoder.decode_with_lm = lambda logits, lengths: texts
  assert model.infer(batch, aligned) == results
  model.decoder.params["use_language_model"] = False


def test_word_timestamps_need_a_decoder_that_times_tokens(corpus):
  from open_seq2seq.decoders.fake_decoder import FakeDecoder  # pylint: disable=import-outside-toplevel
  config = speech_config([corpus], word_timestamps=True, decoder=FakeDecoder,
                         decoder_params={}, loss=None)
  with pytest.raises(ConfigError, match="word_timestamps: needs a CTC or transducer"):
    build_model(config, "infer")
  # not in training: the switch is for infer modes
  assert not build_model(speech_config([corpus], word_timestamps=True), "train").timestamps


def test_matched_words_are_the_equal_words_of_an_edit_distance_alignment():
  assert wt.match_words("one two three".split(), "one three".split()) == [(0, 0), (2, 1)]
  assert wt.match_words("one two".split(), "one six two".split()) == [(0, 0), (1, 2)]
  assert wt.match_words("one two".split(), "six seven".split()) == []
  assert wt.match_words([], ["one"]) == [] and wt.match_words(["one"], []) == []
  # a repeated word is matched once, in order
  assert wt.match_words("two two".split(), "two".split()) in ([(0, 0)], [(1, 0)])


# ------------------------------------------------------------------------ calibration script
def write_words_csv(path, rows):
  with open(path, "w", encoding="utf-8", newline="") as f:
    f.write("wav_filename,transcript,words\n")
    for name, words in rows.items():
      f.write(f"{name},{' '.join(w for w, _, _ in words)},{wt.format_words(words)}\n")
  return str(path)


def test_calibration_recovers_known_offsets_and_scale(tmp_path, capsys):
  """Predicted times made from the references by a known scale and offsets (and a wrong
  word) give those back, with no error left."""
  calibrate = load_script("calibrate_timestamps")
  rng = np.random.default_rng(0)
  references, predictions = {}, {}
  for i in range(12):
    starts = np.cumsum(rng.uniform(0.3, 0.8, 3))
    words = [(w, round(s, 2), round(s + 0.3, 2)) for w, s in zip(("one", "two", "three"), starts)]
    references[f"{i}.wav"] = words
    predictions[f"{i}.wav"] = [(w if k or i else "six", (s - 0.05) / 1.1, (e + 0.08) / 1.1)
                               for k, (w, s, e) in enumerate(words)]
  matches = calibrate.collect(references, predictions)
  assert len(matches.start) == 35 and matches.reference_words == 36
  fitted = calibrate.fit(matches, fit_scale=True)
  assert (fitted.start_offset, fitted.end_offset, fitted.scale) == pytest.approx(
      (0.05, -0.08, 1.1), abs=2e-3)
  assert max(calibrate.errors(matches, fitted)) < 2e-3
  offsets_only = calibrate.fit(matches)
  assert offsets_only.scale == 1.0 and max(calibrate.errors(matches, offsets_only)) > 0.02

  boundaries = write_words_csv(tmp_path / "boundaries.csv", references)
  inferred = write_words_csv(tmp_path / "infer.csv", {
      k: [(w, round(s, 2), round(e, 2)) for w, s, e in v] for k, v in predictions.items()})
  assert calibrate.main(["--boundaries", boundaries, "--predictions", inferred,
                         "--fit_scale"]) == 0
  out = capsys.readouterr().out
  assert "35 words matched of 36 reference words (12 utterances)" in out
  assert "| start | +0.050 |" in out and "scale: 1.100" in out
  assert "--word_start_offset=0.050 --word_end_offset=-0.080 --word_timestamp_scale=1.100" in out


def test_calibration_errors_are_one_line(tmp_path, capsys):
  calibrate = load_script("calibrate_timestamps")
  boundaries = write_words_csv(tmp_path / "b.csv", {"a.wav": [("one", 0.1, 0.4)]})
  (tmp_path / "plain.csv").write_text("wav_filename,predicted_transcript\na.wav,one\n")
  bad = write_words_csv(tmp_path / "bad.csv", {"b.wav": [("one", 0.1, 0.4)]})
  for argv, message in (
      (["--predictions", str(tmp_path / "plain.csv")], "needs wav_filename and words"),
      (["--predictions", str(tmp_path / "nothing.csv")], "does not exist"),
      (["--predictions", bad], "no prediction for a.wav")):
    with pytest.raises(SystemExit, match=message):
      calibrate.main(["--boundaries", boundaries, *argv])
  with pytest.raises(SystemExit):
    calibrate.main(["--boundaries", boundaries])  # neither predictions nor a run
  assert "give --predictions, or --config_file and --logdir" in capsys.readouterr().err


# ------------------------------------------------------------------------ export graph
def bpe_targets(tmp_path):
  sentencepiece = pytest.importorskip("sentencepiece")
  pytest.importorskip("tensorflow_text")
  from open_seq2seq.data.speech2text.targets import TargetEncoder  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(0)
  digits = "zero one two three four five six seven eight nine".split()
  text = [" ".join(rng.choice(digits, size=rng.integers(1, 5))) for _ in range(200)]
  sentencepiece.SentencePieceTrainer.train(
      sentence_iterator=iter(text), model_prefix=str(tmp_path / "digits"), vocab_size=30,
      model_type="bpe", character_coverage=1.0)
  return TargetEncoder(str(tmp_path / "digits.model"), bpe=True)


@pytest.mark.parametrize("alphabet", ["characters", "sentencepiece"])
def test_the_export_graph_gives_the_words_infer_gives(alphabet, tmp_path):
  """SpeechToTextServing's in-graph words and times against the numpy functions infer uses,
  on random ids with spaces (or word-starting pieces) anywhere, and an empty row."""
  from open_seq2seq.data.speech2text.targets import TargetEncoder  # pylint: disable=import-outside-toplevel
  from open_seq2seq.serving.speech import SpeechToTextServing, TimestampSettings  # pylint: disable=import-outside-toplevel
  from tests.helpers.speech import VOCAB  # pylint: disable=import-outside-toplevel
  targets = TargetEncoder(VOCAB) if alphabet == "characters" else bpe_targets(tmp_path)
  classes = targets.num_symbols + 1
  tables = wt.token_tables(targets.idx2char, classes, targets.bpe)
  settings = TimestampSettings(0.01, -0.03, 0.05, 1.1, *tables)
  adapter = SpeechToTextServing(None, 40, 8, targets, 16000, settings)
  rng = np.random.default_rng(3)
  lengths, feature_lengths = [9, 0, 14, 5], [150, 40, 230, 81]
  ids = np.full((4, 14), -1, np.int32)
  starts, ends = np.full_like(ids, -1), np.full_like(ids, -1)
  for row, n in enumerate(lengths):
    begins = np.flatnonzero(tables[0][:targets.num_symbols])  # the space, or ▁ pieces
    ids[row, :n] = np.where(rng.random(n) < 0.35, rng.choice(begins, n),
                            rng.integers(0, targets.num_symbols, n))
    starts[row, :n] = np.sort(rng.integers(0, feature_lengths[row] // 4, n))
    ends[row, :n] = starts[row, :n] + rng.integers(1, 4, n)
  src_lengths = [(n + 3) // 4 for n in feature_lengths]
  out = adapter.to_outputs({}, {"source_tensors": (None, tf.constant(feature_lengths))}, {
      "outputs": tf.constant(ids), "final_sequence_lengths": tf.constant(lengths),
      "token_start_frames": tf.constant(starts), "token_end_frames": tf.constant(ends),
      "src_lengths": tf.constant(src_lengths)})
  frame_seconds = 0.01 * wt.subsampling_factor(feature_lengths, src_lengths)
  assert frame_seconds == pytest.approx(0.04)
  total = 0
  for row, n in enumerate(lengths):
    spans = [wt.TokenSpan(*v) for v in zip(ids[row, :n], starts[row, :n], ends[row, :n])]
    words = wt.word_spans(spans, *tables)
    times = wt.word_times(words, frame_seconds, -0.03, 0.05, 1.1,
                          duration=feature_lengths[row] * 0.01)
    count = int(out["num_words"][row])
    assert count == len(words)
    assert [w.decode() for w in out["words"][row].numpy()[:count]] == \
        [targets.decode(w.tokens).strip() for w in words]
    np.testing.assert_allclose(out["word_start"][row].numpy()[:count],
                               [s for s, _ in times], atol=1e-5)
    np.testing.assert_allclose(out["word_end"][row].numpy()[:count],
                               [e for _, e in times], atol=1e-5)
    total += count
  assert total >= 6 and int(out["num_words"][1]) == 0
