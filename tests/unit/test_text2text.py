"""Text2Text family hooks (decoding, BLEU, inference lines) and text metrics."""

import os

import numpy as np
import pytest
import sacrebleu

from open_seq2seq.config import validate_top_level
from open_seq2seq.data.text2text.text2text import ParallelTextDataLayer
from open_seq2seq.models.text2text import Text2Text, detokenize, ids_to_text, ids_to_tokens
from open_seq2seq.output_sink import OutputSink
from open_seq2seq.utils.metrics import (char_error_rate, corpus_bleu, edit_distance,
                                        word_error_rate)

PAD, UNK, S, EOS = 0, 1, 2, 3
IDX2SEQ = {0: "<PAD>", 1: "<UNK>", 2: "<S>", 3: "</S>", 4: "the", 5: "house", 6: "is",
           7: "small"}


class _Stub:
  """Stands in for the encoder and decoder: the hooks only need the data layer."""

  def __init__(self, params, **wiring):  # mode, dtype, vocab_size from the model
    self.params = params


@pytest.fixture
def model(tmp_path):
  def write(name, lines):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)

  vocab = write("vocab.txt", ["the", "house", "is", "small"])
  config = {
      "data_layer": ParallelTextDataLayer, "encoder": _Stub, "decoder": _Stub,
      "batch_size_per_gpu": 2,
      "data_layer_params": {
          "src_vocab_file": vocab, "tgt_vocab_file": vocab,
          "source_file": write("src.txt", ["the house", "the house is small"]),
          # "big" is not in the vocabulary: the reference must keep it anyway
          "target_file": write("tgt.txt", ["the house", "the house is big"]),
      },
  }
  return Text2Text(validate_top_level(Text2Text, config), mode="eval")


def eval_batch():
  return {"source_tensors": (np.array([[4, 5, EOS, PAD, PAD], [4, 5, 6, 7, EOS]]),
                             np.array([3, 5])),
          "target_tensors": (np.array([[4, 5, EOS, PAD, PAD], [4, 5, 6, UNK, EOS]]),
                             np.array([3, 5])),
          "id": np.array([0, 1], dtype=np.int64)}


# ------------------------------------------------------------------- decoding
def test_ids_to_text_stops_at_eos_and_drops_padding():
  assert ids_to_tokens([4, 5, PAD, 6, EOS, 7, 7], IDX2SEQ) == ["the", "house", "is"]
  assert ids_to_tokens([S, 4, EOS], IDX2SEQ) == ["the"]
  assert ids_to_text(np.array([4, UNK, 99, EOS, PAD]), IDX2SEQ) == "the <UNK> <UNK>"
  assert ids_to_text([EOS, 4], IDX2SEQ) == ""
  assert ids_to_text([4, 5], IDX2SEQ, delimiter="_") == "the_house"


def test_detokenize_subwords():
  assert detokenize(["\u2581Das", "\u2581Ha", "us", "."]) == "Das Haus."
  assert detokenize(["the", "hou@@", "se", "is", "sm@@", "al@@", "l"]) == "the house is small"
  assert detokenize(["a", "b"]) == "a b"


def test_best_metric_and_published_vocab_size(model):
  assert Text2Text.best_metric == ("BLEU", True)
  assert model.description.tgt_vocab_size == 8


def test_format_samples(model):
  outputs = {"outputs": np.array([[4, 5, EOS, 4], [4, 6, EOS, PAD]])}
  lines = model.format_samples(eval_batch(), outputs)
  assert lines == ["Source[0]:     the house", "Target[0]:     the house",
                   "Prediction[0]: the house"]
  # training outputs may carry only logits: argmax them
  logits = np.eye(8)[[[4, 6, EOS], [5, 5, EOS]]]
  assert model.format_samples(eval_batch(), {"logits": logits}, max_samples=2)[-1] == (
      "Prediction[1]: house house")


def test_evaluate_and_bleu(model):
  perfect = {"outputs": np.array([[4, 5, EOS, PAD, PAD], [4, 5, 6, 7, EOS]])}
  results = model.evaluate(eval_batch(), perfect)
  # the reference is the raw target line, so the out-of-vocabulary "big" survives
  assert results == [(0, ("the house", "the house")),
                     (1, ("the house is big", "the house is small"))]
  metrics = model.finalize_evaluation(results)
  expected = sacrebleu.corpus_bleu(["the house", "the house is small"],
                                   [["the house", "the house is big"]]).score
  assert metrics == {"BLEU": pytest.approx(expected)}
  assert 0 < metrics["BLEU"] < 100
  same = [(0, ("the house", "the house")), (1, ("the house is big", "the house is big"))]
  assert model.finalize_evaluation(same)["BLEU"] == pytest.approx(100.0)


def test_infer_and_finalize_inference(model, tmp_path):
  batch = {k: v for k, v in eval_batch().items() if k != "target_tensors"}
  batch["id"] = np.array([1, 0], dtype=np.int64)
  results = model.infer(batch, {"outputs": np.array([[7, EOS, 4], [4, 5, EOS]])})
  assert results == [(1, "small"), (0, "the house")]
  [lines] = model.finalize_inference(results)
  path = os.path.join(str(tmp_path), "out.txt")
  OutputSink(path).write([lines])
  with open(path, encoding="utf-8") as f:
    assert f.read() == "the house\nsmall\n"  # input order, whatever order results came in


# ------------------------------------------------------------------- metrics
def test_corpus_bleu_matches_sacrebleu():
  hyps = ["The cat sat on the mat.", "A dog barked loudly at night!", "hello world"]
  refs = ["The cat is on the mat.", "A dog barked at night!", "hello there world"]
  assert corpus_bleu(hyps, refs) == pytest.approx(
      sacrebleu.corpus_bleu(hyps, [refs], tokenize="13a").score)
  assert corpus_bleu(hyps, refs, tokenize="char") == pytest.approx(
      sacrebleu.corpus_bleu(hyps, [refs], tokenize="char").score)
  assert corpus_bleu(refs, refs) == pytest.approx(100.0)
  assert corpus_bleu(["THE CAT"], ["the cat"], lowercase=True) == pytest.approx(
      sacrebleu.corpus_bleu(["THE CAT"], [["the cat"]], lowercase=True).score)
  with pytest.raises(ValueError):
    corpus_bleu(["a"], ["a", "b"])


def test_edit_distance():
  assert edit_distance("kitten", "sitting") == 3
  assert edit_distance("", "abc") == 3
  assert edit_distance(["a", "b"], ["a", "b"]) == 0
  assert edit_distance("flaw", "lawn") == 2


def test_word_and_char_error_rates():
  refs = ["the cat sat on the mat", "hello world", "a b c"]
  hyps = ["the cat sat on mat", "hello big world", "x b c d"]
  # edits: 1 deletion; 1 insertion; 1 substitution + 1 insertion = 4 over 6 + 2 + 3 words
  assert word_error_rate(refs, hyps) == pytest.approx(4 / 11)
  assert word_error_rate(refs, refs) == 0.0
  # chars: "the " deleted (4); "big " inserted (4); "a"->"x" + " d" inserted (3); 22+11+5
  assert char_error_rate(refs, hyps) == pytest.approx(11 / 38)
  assert char_error_rate(["a  b "], ["a b"]) == 0.0  # whitespace runs count as one space
  assert word_error_rate(["abc"], ["abd"]) == 1.0
  assert char_error_rate(["abc"], ["abd"]) == pytest.approx(1 / 3)
  with pytest.raises(ValueError):
    word_error_rate(["a"], [])
