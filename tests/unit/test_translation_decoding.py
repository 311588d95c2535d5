"""n-best, sampling and banned PAD/GO in the three translation decoders (Transformer, RNN,
ConvS2S), the n-best lines of Text2Text's inference and the n-best export outputs."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.data.text2text.tokenization import TextTokenization
from open_seq2seq.decoders import ConvS2SDecoder, TransformerDecoder
from open_seq2seq.decoders.rnn_decoders import (BeamSearchRNNDecoderWithAttention,
                                                RNNDecoderWithAttention)
from open_seq2seq.errors import ConfigError
from open_seq2seq.output_sink import OutputSink
from open_seq2seq.parts.beam_search import COVERAGE_FLOOR, length_penalty
from open_seq2seq.serving.text import TextToTextServing
from tests.helpers.text import EOS, GO, PAD, batch_of, random_tokens
from tests.unit import test_convs2s, test_rnn_decoders, test_transformer
from tests.unit.test_text2text import IDX2SEQ, eval_batch
from tests.unit.test_text2text import model as text2text_model  # noqa: F401 (a fixture)

SRC_VOCAB, TGT_VOCAB = 13, 11
NAMES = ["transformer", "convs2s", "rnn"]
SOURCES = random_tokens(np.random.default_rng(3), [4, 2, 5], SRC_VOCAB)


class _RNN:
  """An RNN decoder with an encoder output that is a fixed function of each source (an
  embedding table), so that an example gives the same memory in any batch."""

  def __init__(self, params):
    beam = params.pop("beam", False)
    self.decoder = test_rnn_decoders.build("luong", beam=beam, extra_decode_length=2, **params)
    self.table = np.random.default_rng(0).normal(
        size=(SRC_VOCAB, test_rnn_decoders.DEPTH)).astype(np.float32)

  def encoder(self, inputs, training=False):
    ids, lengths = inputs["source_tensors"]
    return {"outputs": tf.gather(self.table, ids), "src_lengths": lengths, "state": None}


def build(name, **params):
  """(model with .encoder/.decoder, beam key) of a tiny decoder of family ``name``."""
  if name == "rnn":
    return _RNN(params), "beam_width"
  family = {"transformer": test_transformer, "convs2s": test_convs2s}[name]
  return family.build(decoder_params={"extra_decode_length": 3, **params}), "beam_size"


def beam_params(name, width, **extra):
  if name == "rnn":
    return dict(beam=True, beam_width=width, length_penalty=0.6, coverage_penalty=0.2, **extra)
  return dict(beam_size=width, alpha=0.6, **extra)


def decode(model, sources):
  src = batch_of(sources, SRC_VOCAB)
  enc = model.encoder({"source_tensors": src}, training=False)
  return model.decoder({"encoder_output": enc, "source_tensors": src})


def teacher_score(model, source, seq, alpha=0.0, beta=0.0):
  """log P(seq | source) / lp(|seq|) + beta * coverage, from the teacher-forced pass."""
  src = batch_of([source], SRC_VOCAB)
  enc = model.encoder({"source_tensors": src}, training=False)
  out = model.decoder({"encoder_output": enc, "target_tensors": (
      tf.constant([seq], tf.int32), tf.constant([len(seq)]))})
  log_probs = tf.nn.log_softmax(out["logits"][0]).numpy()
  score = log_probs[np.arange(len(seq)), seq].sum() / float(length_penalty(len(seq), alpha))
  if beta:
    coverage = out["alignments"][0].numpy().sum(0)
    score += beta * np.log(np.clip(coverage, COVERAGE_FLOOR, 1.0)).sum()
  return score


def hypotheses(out, b):
  ids, lengths = out["nbest_outputs"].numpy()[b], out["nbest_lengths"].numpy()[b]
  return [ids[k, :lengths[k]].tolist() for k in range(len(lengths))]


# ----------------------------------------------------------------------------- n-best
@pytest.mark.parametrize("name", NAMES)
def test_n_best_hypotheses_are_distinct_sorted_and_scored_by_the_model(name):
  model, _ = build(name, **beam_params(name, 4, n_best=3))
  out = decode(model, SOURCES)
  assert out["nbest_outputs"].shape[:2] == (3, 3) and out["nbest_scores"].shape == (3, 3)
  np.testing.assert_array_equal(out["outputs"], out["nbest_outputs"][:, 0])
  np.testing.assert_array_equal(out["scores"], out["nbest_scores"][:, 0])
  alpha, beta = 0.6, (0.2 if name == "rnn" else 0.0)
  for b, source in enumerate(SOURCES):
    found, scores = hypotheses(out, b), out["nbest_scores"].numpy()[b]
    assert len({tuple(h) for h in found}) == 3 and (np.diff(scores) <= 0).all()
    for seq, score in zip(found, scores):
      np.testing.assert_allclose(score, teacher_score(model, source, seq, alpha, beta),
                                 rtol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_samples_are_scored_by_the_model_and_follow_the_source_and_seed(name):
  model, _ = build(name, sampling=True, n_best=3, sampling_topk=6, sampling_temperature=1.5)
  model.decoder.random_seed = 7
  out = decode(model, SOURCES)
  for b, source in enumerate(SOURCES):
    scores = out["nbest_scores"].numpy()[b]
    assert (np.diff(scores) <= 0).all()
    for seq, score in zip(hypotheses(out, b), scores):
      assert not set(seq) & {PAD, GO}
      np.testing.assert_allclose(score, teacher_score(model, source, seq), rtol=1e-4)
  # an example's samples: the same in another batch, other with another seed
  alone = decode(model, SOURCES[2:])
  assert hypotheses(alone, 0) == hypotheses(out, 2)
  model.decoder.random_seed = 8
  reseeded = decode(model, SOURCES)
  assert any(hypotheses(reseeded, b) != hypotheses(out, b) for b in range(3))


@pytest.mark.parametrize("name", NAMES)
def test_sampling_with_top_k_one_is_greedy(name):
  model, _ = build(name, sampling=True, sampling_topk=1)
  sampled = decode(model, SOURCES)
  model.decoder.params.update({"sampling": False, "sampling_topk": None})
  greedy = decode(model, SOURCES)
  assert "nbest_outputs" not in sampled
  for key in ("outputs", "final_sequence_lengths"):
    np.testing.assert_array_equal(sampled[key], greedy[key])
  np.testing.assert_allclose(sampled["scores"], greedy["scores"], rtol=1e-6)


# ----------------------------------------------------------------------------- PAD and GO
_DECODER_CLASSES = {"transformer": TransformerDecoder, "convs2s": ConvS2SDecoder,
                    "rnn": RNNDecoderWithAttention}


@pytest.mark.parametrize("how", ["greedy", "beam", "sampling"])
@pytest.mark.parametrize("name", NAMES)
def test_pad_and_go_are_never_emitted_however_likely(name, how, monkeypatch):
  cls = _DECODER_CLASSES[name]
  real = cls._logits
  bonus = np.zeros(TGT_VOCAB, np.float32)
  bonus[[PAD, GO]] = 40.0  # the model all but always says PAD or GO

  def favouring(self, *args, **kwargs):
    return real(self, *args, **kwargs) + bonus
  monkeypatch.setattr(cls, "_logits", favouring)
  params = {"greedy": {}, "beam": beam_params(name, 3, n_best=3),
            "sampling": dict(sampling=True, n_best=3)}[how]
  model, _ = build(name, **params)
  out = decode(model, SOURCES)
  rows = [hypotheses(out, b) for b in range(3)] if "nbest_outputs" in out else [[
      out["outputs"].numpy()[b, :out["final_sequence_lengths"].numpy()[b]].tolist()]
      for b in range(3)]
  for found in rows:
    for seq in found:
      assert seq and not set(seq) & {PAD, GO}


# ----------------------------------------------------------------------------- config errors
@pytest.mark.parametrize("params, match", [
    ({"n_best": 0}, "n_best: must be >= 1"),
    ({"n_best": 2}, "n_best: 2 hypotheses need"),
    ({"sampling_topk": 5}, "sampling_topk: takes effect only with sampling: True"),
    ({"sampling_temperature": 0.5}, "sampling_temperature: takes effect only with sampling"),
    ({"sampling": True, "sampling_temperature": 0.0}, "must be > 0"),
    ({"sampling": True, "sampling_topk": -1}, "sampling_topk: must be >= 0"),
    ({"sampling": True, "sampling_topp": 1.5}, r"sampling_topp: must be in \(0, 1\]"),
    ({"sampling": True, "beam": 2}, "sampling: draws each sample on its own"),
])
@pytest.mark.parametrize("name", NAMES)
def test_decoding_config_errors(name, params, match):
  params = dict(params)
  width = params.pop("beam", None)
  if width is not None:
    params.update({"beam": True, "beam_width": width} if name == "rnn" else {"beam_size": width})
  with pytest.raises(ConfigError, match=match):
    build(name, **params)


def test_the_greedy_rnn_decoder_names_the_beam_decoder_for_n_best():
  with pytest.raises(ConfigError, match="BeamSearchRNNDecoderWithAttention with beam_width"):
    test_rnn_decoders.build("luong", n_best=2)
  assert BeamSearchRNNDecoderWithAttention(
      test_rnn_decoders.decoder_params("luong", beam_width=2, n_best=2),
      vocab_size=TGT_VOCAB).params["n_best"] == 2


# ----------------------------------------------------------------------------- outputs
NBEST = {"nbest_outputs": np.array([[[4, 5, EOS, PAD], [4, EOS, PAD, PAD]],
                                    [[4, 5, 6, 7], [6, 7, EOS, PAD]]]),
         "nbest_scores": np.array([[-0.5, -1.25], [-2.0, -3.5]], np.float32),
         "outputs": np.array([[4, 5, EOS, PAD], [4, 5, 6, 7]])}


def test_inference_writes_n_lines_per_input_with_scores(text2text_model, tmp_path):  # noqa: F811
  model = text2text_model
  results = model.infer(eval_batch(), NBEST)
  assert results[0] == (0, [(-0.5, "the house"), (-1.25, "the")])
  path = tmp_path / "nbest.txt"
  OutputSink(str(path)).write(model.finalize_inference(results[::-1]))
  assert path.read_text().splitlines() == [
      "0\t-0.500000\tthe house", "0\t-1.250000\tthe",
      "1\t-2.000000\tthe house is small", "1\t-3.500000\tis small"]
  assert model.interactive_lines(eval_batch(), NBEST)[1] == (
      "-2.000000\tthe house is small\n-3.500000\tis small")
  # BLEU of the best hypotheses: the first is its reference, the second is not
  bleu = model.score_inference(results)["BLEU"]
  best = model.score_inference([(0, "the house"), (1, "the house is small")])["BLEU"]
  assert bleu == best


def test_export_outputs_of_n_best():
  seq2idx = {token: i for i, token in IDX2SEQ.items()}
  serving = TextToTextServing(TextTokenization(seq2idx), IDX2SEQ, " ", n_best=2)
  assert list(serving.outputs) == ["text", "scores", "ids"]
  out = serving.to_outputs({}, {}, {k: tf.constant(v) for k, v in NBEST.items()})
  assert out["text"].numpy().tolist() == [[b"the house", b"the"],
                                          [b"the house is small", b"is small"]]
  assert out["ids"].shape == (2, 2, 4) and out["scores"].shape == (2, 2)
  single = TextToTextServing(TextTokenization(seq2idx), IDX2SEQ, " ")
  assert list(single.outputs) == ["text", "ids"]
  assert single.to_outputs({}, {}, {"outputs": tf.constant(NBEST["outputs"])})[
      "text"].shape == (2,)


def test_text2text_offers_the_run_seed_to_the_decoder_only(text2text_model):  # noqa: F811
  model = text2text_model
  assert model.component_kwargs("decoder", model.description)["random_seed"] is None
  assert "random_seed" not in model.component_kwargs("loss", model.description)
