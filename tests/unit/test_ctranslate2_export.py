"""CTranslate2 export of the Transformer (open_seq2seq/serving/ctranslate2_export.py): the
converted model's beam search (beam 4) gives our beam search's tokens and scores, pre- and
post-norm, shared or separate embeddings and softmax, word or SentencePiece vocabularies;
quantized exports stay near; what cannot convert is one ConfigError line."""

import io
import json
import os
import sys

import keras
import numpy as np
import pytest
import sentencepiece
import tensorflow as tf

from open_seq2seq.config import load_config
from open_seq2seq.data.text2text.sentencepiece_model import (SPECIAL_TOKEN_OPTIONS,
                                                             SentencePieceVocab,
                                                             vocab_file_tokens)
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.models.text2text import ids_to_tokens
from open_seq2seq.serving import ctranslate2_export as ct2_export
from tests.helpers import toy

ctranslate2 = pytest.importorskip("ctranslate2")

pytestmark = pytest.mark.slow  # each model trains a few seconds

TINY = [flag for flag in toy.TINY_MODEL if "steps" not in flag]
# alpha 0: CTranslate2's length penalty is not GNMT's. No label smoothing: it keeps ~1 % of
# the probability on <PAD> and <S> of this 14-token vocabulary at every step, which
# CTranslate2 (which renormalises over the tokens it may choose) and our searches (which
# keep the model's log-probabilities) rank differently.
TRAINING = ["--decoder_params/beam_size=4", "--decoder_params/alpha=0.0",
            "--decoder_params/extra_decode_length=1", "--loss_params/label_smoothing=0.0",
            "--batch_size_per_gpu=32"]
STEPS = 800


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  return toy.make_toy_data(str(tmp_path_factory.mktemp("toy")), train=400, dev=4, test=40,
                           seed=5, extra=("--max_length", "10"))


def source_lines(data):
  with open(os.path.join(data, "test", "source.txt"), encoding="utf-8") as f:
    return f.read().splitlines()


_TRAINED = {}  # (data, overrides, seed, data overrides, steps) -> model: the tests only read it


def trained(data, *overrides, seed=0, data_overrides=None, steps=STEPS):
  """A tiny Transformer trained ``steps`` Adam steps on the toy reversal task (a few
  seconds): sure enough of its choices that beam search is not decided by the last bits.
  Tests asking for the same training share its model (the quantization cases)."""
  key = (data, overrides, seed, None if data_overrides is None else tuple(data_overrides), steps)
  if key not in _TRAINED:
    _TRAINED[key] = _train(data, overrides, seed, data_overrides, steps)
  return _TRAINED[key]


def _train(data, overrides, seed, data_overrides, steps):
  keras.utils.set_random_seed(seed)
  flags = toy.data_overrides(data) if data_overrides is None else data_overrides
  base, configs = load_config(toy.TOY_CONFIG, "train", [
      *flags, *toy.split_overrides(data, "train"), *TINY, *TRAINING, *overrides])
  model = base(configs["train"], "train")
  batches = iter(model.data_layer.build_dataset())
  model.create_variables(next(batches))
  optimizer = keras.optimizers.Adam(3e-3)

  @tf.function(reduce_retracing=True)
  def step(batch):
    with tf.GradientTape() as tape:
      loss, weight, _ = model.compute_loss(batch, training=True)
      loss /= weight
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                  model.trainable_variables))
  for _ in range(steps):
    step({key: next_batch for key, next_batch in next(batches).items() if key != "id"})
  return model


def ours(model, lines):
  """Our beam search: (tokens before </S>, score, ended by </S>) per line."""
  results = []
  for batch in model.data_layer.dataset_from_inputs(lines):
    outputs = model.predict(batch)
    for row, score in zip(outputs["outputs"].numpy(), outputs["scores"].numpy()):
      results.append((ids_to_tokens(row, model.description.target_idx2seq), float(score),
                      bool((row == model.decoder.params["END_SYMBOL"]).any())))
  return results


def renormalised(model, lines, results):
  """Our scores as CTranslate2 counts them: each step's log-probability over the tokens it
  may choose there (not <PAD>, <S>, nor </S> before min_decode_length)."""
  p = model.decoder.params
  end, minimum = p["END_SYMBOL"], p["min_decode_length"]
  seq2idx = model.description.target_seq2idx
  scores = []
  for line, (tokens, _, ended) in zip(lines, results):
    ids = [seq2idx[t] for t in tokens] + ([end] if ended else [])
    batch = next(iter(model.data_layer.dataset_from_inputs([line])))
    batch["target_tensors"] = (tf.constant([ids]), tf.constant([len(ids)]))
    log_probs = tf.nn.log_softmax(model.forward(batch, training=False)["logits"][0]).numpy()
    probs = np.exp(log_probs)
    score = 0.0
    for i, token in enumerate(ids):
      banned = probs[i, p["PAD_SYMBOL"]] + probs[i, p["GO_SYMBOL"]]
      banned += probs[i, end] if i < minimum else 0.0
      score += log_probs[i, token] - np.log1p(-banned)
    scores.append(score)
  return scores


def exported(model, directory, quantization="float32", compute_type="default"):
  ct2_export.save(model, str(directory), quantization)
  return ct2_export.TextTranslator(str(directory), compute_type=compute_type)


def check_same_search(model, lines, translator):
  """CTranslate2's beam search (beam 4) returns our tokens, and our scores renormalised as
  it scores them (and plain scores within 0.05)."""
  want = ours(model, lines)
  got = translator.translate_tokens(translator.tokenize(lines), beam_size=4)
  assert [tokens for tokens, _ in got] == [tokens for tokens, _, _ in want]
  np.testing.assert_allclose([s for _, s in got], renormalised(model, lines, want), atol=1e-3)
  np.testing.assert_allclose([s for _, s in got], [s for _, s, _ in want], atol=0.05)
  return want


VARIANTS = {
    "pre-norm, shared embedding and softmax": ["--decoder_params/shared_embed=True"],
    "post-norm, separate tied embeddings, no extra length": [
        "--encoder_params/norm_placement=post", "--decoder_params/norm_placement=post",
        "--decoder_params/extra_decode_length=0"],
    "pre-norm, separate softmax, padded to eight, unscaled": [
        "--decoder_params/tie_weights=False", "--data_layer_params/pad_vocab_to_eight=True",
        "--encoder_params/pad_embeddings_2_eight=True",
        "--decoder_params/pad_embeddings_2_eight=True",
        "--encoder_params/scale_embeddings=False", "--decoder_params/scale_embeddings=False"],
    "post-norm, shared embedding, separate softmax, <S> first, epsilon": [
        "--encoder_params/norm_placement=post", "--decoder_params/norm_placement=post",
        "--decoder_params/shared_embed=True", "--decoder_params/tie_weights=False",
        "--data_layer_params/use_start_token=True",
        "--encoder_params/norm_params={'epsilon': 0.01}",
        "--decoder_params/norm_params={'epsilon': 0.01}"],
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_float32_gives_our_beam_search(data, tmp_path, name):
  model = trained(data, *VARIANTS[name])
  lines = source_lines(data)
  want = check_same_search(model, lines, exported(model, tmp_path / "ct2"))
  assert len({len(tokens) for tokens, _, _ in want}) > 3  # sentences of several lengths


def test_min_decode_length(data, tmp_path):
  """No hypothesis ends before min_decode_length tokens (</S> included) in either engine,
  unless its length limit comes first: then it stops there, without </S>. While </S> is
  forbidden CTranslate2 renormalises over the other tokens and we do not, so the searches
  may choose differently there: its scores are our model's renormalised ones of its own
  hypotheses."""
  model = trained(data, "--decoder_params/min_decode_length=9")
  lines = source_lines(data)
  translator = exported(model, tmp_path / "ct2")
  assert translator.metadata["decoding"]["min_decode_length"] == 9
  got = translator.translate_tokens(translator.tokenize(lines), beam_size=4)
  limits = [len(line.split()) + 1 + 1 for line in lines]  # ids (</S>) + extra_decode_length
  results = [(tokens, score, len(tokens) < limit) for (tokens, score), limit in zip(got, limits)]
  for want in (ours(model, lines), results):
    for (tokens, _, ended), limit in zip(want, limits):
      assert len(tokens) + ended >= min(9, limit)
      assert ended == (limit > 9)  # the model stops as soon as it may
  np.testing.assert_allclose([s for _, s in got], renormalised(model, lines, results),
                             atol=1e-3)


def test_export_directory_and_metadata(data, tmp_path):
  model = trained(data, "--decoder_params/shared_embed=True", steps=0)
  meta = ct2_export.save(model, str(tmp_path / "ct2"), metadata={"step": 7})
  files = sorted(os.listdir(tmp_path / "ct2"))
  assert files == ["config.json", "model.bin", "open_seq2seq.json", "shared_vocabulary.json"]
  assert not [p for p in os.listdir(tmp_path) if ".partial-" in p]
  assert json.loads((tmp_path / "ct2" / "open_seq2seq.json").read_text()) == meta
  assert meta["step"] == 7 and meta["quantization"] == "float32"
  assert meta["decoding"] == {"beam_size": 4, "extra_decode_length": 1, "min_decode_length": 0,
                              "suppressed_tokens": ["<PAD>", "<S>"]}
  config = json.loads((tmp_path / "ct2" / "config.json").read_text())
  assert (config["bos_token"], config["eos_token"], config["unk_token"]) == ("<S>", "</S>",
                                                                            "<UNK>")
  assert config["decoder_start_token"] == "<S>" and config["add_source_eos"]
  assert not config["add_source_bos"]
  assert config["layer_norm_epsilon"] == pytest.approx(1e-6)
  vocab = json.loads((tmp_path / "ct2" / "shared_vocabulary.json").read_text())
  assert vocab[:4] == ["<PAD>", "<UNK>", "<S>", "</S>"] and len(vocab) == 14
  with pytest.raises(ConfigError, match="already exists"):  # never replaces a directory
    ct2_export.save(model, str(tmp_path / "ct2"))


def test_separate_vocabularies_and_go_symbol(data, tmp_path):
  """Per-side vocabulary files (the target's in another order), and a GO symbol other than
  <S>: the decoder starts from that token."""
  target_vocab = tmp_path / "target.txt"
  with open(os.path.join(data, "vocab", "target.txt"), encoding="utf-8") as f:
    target_vocab.write_text("".join(reversed(f.readlines())), encoding="utf-8")
  flags = [f"--data_layer_params/src_vocab_file={data}/vocab/source.txt",
           f"--data_layer_params/tgt_vocab_file={target_vocab}",
           "--data_layer_params/src_sentencepiece_model=None",
           "--data_layer_params/tgt_sentencepiece_model=None"]
  model = trained(data, "--decoder_params/GO_SYMBOL=1", data_overrides=flags, seed=3)
  assert model.description.source_seq2idx != model.description.target_seq2idx
  translator = exported(model, tmp_path / "ct2")
  assert sorted(os.listdir(tmp_path / "ct2"))[-2:] == ["source_vocabulary.json",
                                                      "target_vocabulary.json"]
  config = json.loads((tmp_path / "ct2" / "config.json").read_text())
  assert config["decoder_start_token"] == "<UNK>"
  assert json.loads((tmp_path / "ct2" / "open_seq2seq.json").read_text())["decoding"][
      "suppressed_tokens"] == ["<PAD>", "<UNK>"]
  check_same_search(model, source_lines(data), translator)


def test_sentencepiece_text_in_text_out(data, tmp_path):
  """Raw text through a SentencePiece model: TextTranslator encodes as the data layer does
  and detokenizes as --mode=infer writes."""
  buffer = io.BytesIO()
  with open(os.path.join(data, "train", "source.txt"), encoding="utf-8") as f:
    text = f.read().splitlines()
  sentencepiece.SentencePieceTrainer.train(
      sentence_iterator=iter(text), model_writer=buffer, vocab_size=24, model_type="bpe",
      character_coverage=1.0, **SPECIAL_TOKEN_OPTIONS)
  spm = tmp_path / "spm.model"
  spm.write_bytes(buffer.getvalue())
  vocab = tmp_path / "spm.vocab"
  vocab.write_text("".join(t + "\n" for t in vocab_file_tokens(SentencePieceVocab(str(spm)))),
                   encoding="utf-8")
  flags = [f"--data_layer_params/{side}_{key}={path}" for side in ("src", "tgt")
           for key, path in (("sentencepiece_model", spm), ("vocab_file", vocab))]
  model = trained(data, "--decoder_params/shared_embed=True", data_overrides=flags, seed=1)
  lines = source_lines(data)
  translator = exported(model, tmp_path / "ct2")
  assert os.path.isfile(tmp_path / "ct2" / "source.model")
  batch = next(iter(model.data_layer.dataset_from_inputs(lines[:1])))
  pieces = translator.tokenize(lines[:1])[0]
  assert "\u2581" in pieces[0]
  assert [model.description.source_seq2idx[p] for p in pieces] + [3] == \
      batch["source_tensors"][0].numpy()[0].tolist()
  want = []
  for batch in model.data_layer.dataset_from_inputs(lines):
    want += [model.target_text(row) for row in model.predict(batch)["outputs"].numpy()]
  assert translator.translate(lines, beam_size=4) == want
  assert len(set(want)) > 10  # the model says different things


@pytest.mark.parametrize("quantization,compute_type", [("int8", "default"),
                                                       ("float32", "int8"),
                                                       ("float16", "default")])
def test_quantized_models_stay_near(data, tmp_path, quantization, compute_type):
  model = trained(data, seed=2)
  lines = source_lines(data)
  want = ours(model, lines)
  translator = exported(model, tmp_path / "ct2", quantization, compute_type)
  assert json.loads((tmp_path / "ct2" / "open_seq2seq.json").read_text())[
      "quantization"] == quantization
  got = translator.translate_tokens(translator.tokenize(lines), beam_size=4)
  same = [g[0] == w[0] for g, w in zip(got, want)]
  assert sum(same) >= 0.75 * len(lines), (sum(same), len(lines))
  gaps = [abs(g[1] - w[1]) for g, w, s in zip(got, want, same) if s]
  assert np.median(gaps) < 0.1 * np.median([abs(w[1]) for w in want])
  if quantization != "float32":
    float_dir = tmp_path / "f32"
    ct2_export.save(model, str(float_dir))
    assert os.path.getsize(tmp_path / "ct2" / "model.bin") < os.path.getsize(
        float_dir / "model.bin")


def test_unconvertible_models_are_one_line(data, tmp_path):
  cases = {
      "layernorm_L1": ["--encoder_params/norm_params={'type': 'layernorm_L1'}",
                       "--decoder_params/norm_params={'type': 'layernorm_L1'}"],
      "epsilon": ["--encoder_params/norm_params={'epsilon': 0.001}"],
      "END_SYMBOL": ["--decoder_params/END_SYMBOL=4"],
      "max_relative_positions": ["--decoder_params/max_relative_positions=4"],
  }
  for word, flags in cases.items():
    model = trained(data, *flags, steps=0)
    with pytest.raises(ConfigError, match=word) as error:
      ct2_export.save(model, str(tmp_path / "ct2"))
    assert "\n" not in str(error.value)
  assert not os.path.exists(tmp_path / "ct2")
  with pytest.raises(ConfigError, match="Text2Text Transformer models only"):
    ct2_export.check_convertible(object())
  with pytest.raises(ConfigError, match="int4"):
    ct2_export.save(trained(data, steps=0), str(tmp_path / "ct2"), "int4")


def test_translator_refuses_what_it_cannot_read(data, tmp_path):
  with pytest.raises(DataError, match="not a CTranslate2 export of open_seq2seq"):
    ct2_export.TextTranslator(str(tmp_path))
  translator = exported(trained(data, steps=0), tmp_path / "ct2")
  with pytest.raises(DataError, match="position table holds 1024"):
    translator.translate_tokens([["α"] * 1024])


def test_a_missing_ctranslate2_is_one_line(data, tmp_path, monkeypatch):
  model = trained(data, steps=0)
  monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import ctranslate2 fails
  with pytest.raises(ConfigError, match="ctranslate2 package is missing.*pip install"):
    ct2_export.save(model, str(tmp_path / "ct2"))
  assert not os.path.exists(tmp_path / "ct2")
