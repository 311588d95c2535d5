"""Data for language-model transfer in the low-label regime: a classifier's training subset
(``train_examples``, ``subset_seed``) and a language-model corpus made of the classification
dataset's own texts (open_seq2seq/data/lm/unlabelled.py)."""

import os

import numpy as np
import pytest

from open_seq2seq.data.lm import SSTDataLayer, WKTDataLayer
from open_seq2seq.data.lm.text_classification import encode_text
from open_seq2seq.data.lm.unlabelled import write_unlabelled_corpus
from open_seq2seq.errors import ConfigError, DataError
from tests.helpers.lm import write_sst, write_vocab_txt

WORDS = ["<unk>", "<eos>", "good", "bad"] + [f"w{i}" for i in range(40)]
TRAIN = [(f"w{i} {'good' if i % 3 else 'bad'}", int(i % 3 != 0)) for i in range(40)]


@pytest.fixture
def sst_root(tmp_path):
  write_sst(str(tmp_path / "sst"), {"train": TRAIN, "val": [("w1 good", 1), ("w2 bad", 0)],
                                    "test": [("w3 Good", 1), ("W4, bad!", 0), ("w5", 1)]})
  return str(tmp_path / "sst")


def layer(tmp_path, mode="train", **params):
  vocab = write_vocab_txt(str(tmp_path / "vocab.txt"), WORDS)
  config = {"data_root": str(tmp_path / "sst"), "lm_vocab_file": vocab, "max_length": 8,
            "processed_data_folder": str(tmp_path / "processed"), **params}
  return SSTDataLayer(config, mode, batch_size=4, random_seed=0)


def texts_and_labels(data_layer):
  return [(data_layer.text_of(i), data_layer.label(i)) for i in range(len(data_layer.rows))]


def test_train_examples_keeps_a_seeded_nested_subset_with_its_labels(tmp_path, sst_root):
  everything = dict(texts_and_labels(layer(tmp_path)))
  assert len(everything) == 40
  small = texts_and_labels(layer(tmp_path, train_examples=5))
  large = texts_and_labels(layer(tmp_path, train_examples=20))
  other = texts_and_labels(layer(tmp_path, train_examples=5, subset_seed=1))
  assert len(small) == 5 and len(large) == 20 and len(other) == 5
  # every kept text carries its own label, and the texts stay in file order
  for text, label in small + large + other:
    assert everything[text] == label
  order = list(everything)
  assert [order.index(t) for t, _ in large] == sorted(order.index(t) for t, _ in large)
  # a smaller count's texts are among a larger one's; another seed draws other texts
  assert set(small) <= set(large)
  assert set(small) != set(other)
  # the same seed draws the same texts in every run
  assert texts_and_labels(layer(tmp_path, train_examples=5)) == small
  # batches hold the subset only
  data_layer = layer(tmp_path, train_examples=5, repeat=False)
  seen = np.concatenate([b["id"] for b in data_layer.build_dataset().as_numpy_iterator()])
  assert sorted(seen.tolist()) == list(range(5))


def test_train_examples_leaves_eval_and_infer_whole(tmp_path, sst_root):
  assert len(layer(tmp_path, "eval", train_examples=1).rows) == 2
  assert len(layer(tmp_path, "infer", train_examples=1).rows) == 3


@pytest.mark.parametrize("count", [0, 41])
def test_train_examples_out_of_range_is_a_one_line_error(tmp_path, sst_root, count):
  with pytest.raises(ConfigError) as error:
    layer(tmp_path, train_examples=count)
  message = str(error.value)
  assert "\n" not in message
  assert f"train_examples: {count} texts asked for, the training split has 40" in message


def test_unlabelled_corpus_holds_each_splits_texts_tokenized_and_lower_cased(tmp_path,
                                                                             sst_root):
  out = str(tmp_path / "lm")
  counts = write_unlabelled_corpus(sst_root, out)
  assert counts == {"wiki.train.tokens": 40, "wiki.valid.tokens": 2, "wiki.test.tokens": 3}
  with open(os.path.join(out, "wiki.test.tokens"), encoding="utf-8") as f:
    assert f.read().splitlines() == ["w3 good", "w4 , bad !", "w5"]
  with open(os.path.join(out, "wiki.train.tokens"), encoding="utf-8") as f:
    train = f.read().splitlines()
  assert train == [text for text, _ in TRAIN]  # no label, no test text
  # the words the language model reads are the ones a classifier of these texts looks up
  lm = WKTDataLayer({"data_root": out, "processed_data_folder": str(tmp_path / "lm-p"),
                     "bptt": 4, "min_count": 1}, "train", batch_size=2)
  unknown = [w for text, _ in TRAIN for w in encode_text(text, lm.vocab)[1]]
  assert unknown == []


def test_unlabelled_corpus_appends_extra_training_text_and_keeps_case_on_request(tmp_path,
                                                                                 sst_root):
  extra = tmp_path / "novels.tokens"
  extra.write_text("It was a Dark night .\n\n  She ran .\n", encoding="utf-8")
  out = str(tmp_path / "lm")
  counts = write_unlabelled_corpus(sst_root, out, extra_train=str(extra), lower=False)
  assert counts["wiki.train.tokens"] == 42
  with open(os.path.join(out, "wiki.train.tokens"), encoding="utf-8") as f:
    assert f.read().splitlines()[-2:] == ["It was a Dark night .", "She ran ."]
  with open(os.path.join(out, "wiki.test.tokens"), encoding="utf-8") as f:
    assert f.read().splitlines()[:2] == ["w3 Good", "W4 , bad !"]


def test_unlabelled_corpus_errors_are_one_line(tmp_path, sst_root):
  with pytest.raises(DataError) as error:
    write_unlabelled_corpus(str(tmp_path / "nowhere"), str(tmp_path / "lm"))
  assert "train.csv cannot be read" in str(error.value) and "\n" not in str(error.value)
  with pytest.raises(DataError) as error:
    write_unlabelled_corpus(sst_root, str(tmp_path / "lm"), extra_train=str(tmp_path / "x"))
  assert "extra training text not found" in str(error.value)
  write_sst(str(tmp_path / "blank"), {"train": [("!!", 1)], "val": [("", 0)],
                                      "test": [("a", 1)]})
  with pytest.raises(DataError) as error:
    write_unlabelled_corpus(str(tmp_path / "blank"), str(tmp_path / "lm2"))
  assert "val.csv: no text with a word" in str(error.value)
