"""load_model across a changed vocabulary (training/vocab_remap.py): the mapping by token,
the declarations of vocabulary-indexed variables of every text family, where the source
run's vocabularies come from, and the report."""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import validate_top_level
from open_seq2seq.data.data_layer import DataLayer
from open_seq2seq.data.description import LMDescription, TextDescription
from open_seq2seq.decoders import (ConvS2SDecoder, FakeDecoder, RNNDecoderWithAttention,
                                   TransformerDecoder)
from open_seq2seq.encoders import (ConvS2SEncoder, GNMTLikeEncoderWithEmbedding, LMEncoder,
                                   TransformerEncoder)
from open_seq2seq.errors import ConfigError
from open_seq2seq.losses import BasicSequenceLoss, PaddedCrossEntropyLossWithSmoothing
from open_seq2seq.models import LSTMLM, Text2Text
from open_seq2seq.parts.rnns.weight_drop import WeightDropLayerNormBasicLSTMCell
from open_seq2seq.training.checkpoints import model_checkpoint_object
from open_seq2seq.training.restoring import load_pretrained, variable_keys
from open_seq2seq.training.vocab_remap import (VOCAB_RECORD, indexed_variables, load_model,
                                               read_record, record_vocabularies, remap_rows,
                                               vocabulary_mapping)
from open_seq2seq.utils.params import Param
from tests.helpers import lm

SPECIALS = ["<PAD>", "<UNK>", "<S>", "</S>"]
WORDS = ["a", "b", "c", "d", "e", "f", "g", "h", "i"]


# ------------------------------------------------------------------ the mapping on tables
def test_kept_rows_take_the_old_rows_new_rows_get_fresh_values():
  old_tokens = ["<PAD>", "x", "y", "z", "w"]
  new_tokens = ["<PAD>", "w", "new1", "x", "new2", "y"]  # z removed, order changed
  old = np.arange(5 * 3, dtype=np.float32).reshape(5, 3)
  fresh = -1.0 - np.arange(6 * 3, dtype=np.float32).reshape(6, 3)
  before = fresh.copy()
  mapping = vocabulary_mapping(old_tokens, new_tokens)
  assert (mapping.kept, mapping.new, mapping.removed) == (4, 2, 1)
  out = remap_rows(old, fresh, mapping, axis=0)
  for token in ("<PAD>", "w", "x", "y"):
    np.testing.assert_array_equal(out[new_tokens.index(token)], old[old_tokens.index(token)])
  for token in ("new1", "new2"):
    row = out[new_tokens.index(token)]
    assert set(row) <= set(fresh.reshape(-1))  # drawn from the fresh table's values ...
    for fresh_row in fresh:  # ... yet no fresh row as it was: not the initial row of the id
      assert not np.array_equal(row, fresh_row)
  np.testing.assert_array_equal(remap_rows(old, fresh, mapping, axis=0), out)  # reproducible
  np.testing.assert_array_equal(fresh, before)  # the fresh table is not written into
  assert mapping.summary("target") == \
      "target vocabulary remapped: 4 kept, 2 new (initialised), 1 removed"


def test_columns_of_a_kernel_and_a_cast_to_the_new_dtype():
  old = np.arange(2 * 4, dtype=np.float16).reshape(2, 4)  # [hidden, vocab]
  fresh = np.zeros((2, 3), np.float32)
  mapping = vocabulary_mapping(["p", "q", "r", "s"], ["s", "t", "q"])
  out = remap_rows(old, fresh, mapping, axis=1)
  assert out.dtype == np.float32
  np.testing.assert_array_equal(out[:, 0], old[:, 3])
  np.testing.assert_array_equal(out[:, 1], [0, 0])
  np.testing.assert_array_equal(out[:, 2], old[:, 1])
  with pytest.raises(ValueError, match="differ beyond axis 1"):
    remap_rows(old, np.zeros((5, 3), np.float32), mapping, axis=1)


def test_padding_fillers_and_rows_beyond_the_vocabulary_carry_nothing():
  # old: 6 tokens padded to 8 with fillers, table padded further to 16 rows; new: 5 tokens
  old_tokens = ["<PAD>", "a", "b", "c", "d", "e", "<unused0>", "<unused1>"]
  new_tokens = ["<PAD>", "e", "a", "<unused0>", "f"]
  mapping = vocabulary_mapping(old_tokens, new_tokens)
  assert (mapping.kept, mapping.new, mapping.removed) == (3, 1, 3)  # fillers count nowhere
  old = np.arange(16, dtype=np.float32)[:, None] * np.ones((1, 2), np.float32)
  fresh = np.full((8, 2), 100.0, np.float32)  # the new table padded to 8 rows too
  out = remap_rows(old, fresh, mapping, axis=0)
  np.testing.assert_array_equal(out[:, 0], [0, 5, 1, 100, 100, 100, 100, 100])


# ------------------------------------------------------------------ tiny models of each family
class TokensLayer(DataLayer):
  """Describes source and target vocabularies given as token lists (no corpus)."""

  PARAMS = {"src_tokens": Param(list), "tgt_tokens": Param(list)}

  @property
  def description(self) -> TextDescription:
    src, tgt = self.params["src_tokens"], self.params["tgt_tokens"]
    return TextDescription(len(src), len(tgt), {t: i for i, t in enumerate(src)},
                           {t: i for i, t in enumerate(tgt)}, dict(enumerate(src)),
                           dict(enumerate(tgt)))


class WordsLayer(DataLayer):
  """Describes a language model's (or a classifier's) vocabulary given as a word list."""

  PARAMS = {"words": Param(list), "num_classes": Param((int, None), None)}

  @property
  def description(self) -> LMDescription:
    words = self.params["words"]
    return LMDescription(len(words), tuple(words), end_token=1, unk_token=0,
                         num_classes=self.params["num_classes"])


T_SIZES = dict(hidden_size=16, num_heads=2, filter_size=32)
RNN_CELL = {"core_cell": keras.layers.LSTMCell, "core_cell_params": {"num_units": 8}}
FAMILIES = {
    "transformer": (TransformerEncoder, {"encoder_layers": 1, **T_SIZES},
                    TransformerDecoder, {"num_hidden_layers": 1, **T_SIZES}),
    "transformer_untied": (TransformerEncoder, {"encoder_layers": 1, **T_SIZES},
                           TransformerDecoder, {"num_hidden_layers": 1, **T_SIZES,
                                                "tie_weights": False,
                                                "pad_embeddings_2_eight": True}),
    "gnmt": (GNMTLikeEncoderWithEmbedding, {**RNN_CELL, "encoder_layers": 2,
                                            "src_emb_size": 6},
             RNNDecoderWithAttention, {**RNN_CELL, "decoder_layers": 2, "tgt_emb_size": 6,
                                       "attention_type": "gnmt_v2",
                                       "attention_layer_size": 8}),
    "convs2s": (ConvS2SEncoder, {"src_emb_size": 8, "conv_nchannels_kwidth": [(8, 3)],
                                 "att_layer_num": 1},
                ConvS2SDecoder, {"tgt_emb_size": 8, "conv_nchannels_kwidth": [(8, 3)]}),
}


def text_model(family, src_tokens, tgt_tokens, seed=1, **decoder_extra):
  encoder, encoder_params, decoder, decoder_params = FAMILIES[family]
  config = {"data_layer": TokensLayer,
            "data_layer_params": {"src_tokens": list(src_tokens), "tgt_tokens": list(tgt_tokens)},
            "encoder": encoder, "encoder_params": dict(encoder_params),
            "decoder": decoder, "decoder_params": {**decoder_params, **decoder_extra},
            "loss": PaddedCrossEntropyLossWithSmoothing, "batch_size_per_gpu": 2,
            "random_seed": seed, "dtype": "float32"}
  keras.utils.set_random_seed(seed)
  model = Text2Text(validate_top_level(Text2Text, config), "train")
  ids = tf.constant([[4, 5, 6, 3], [5, 4, 3, 0]], tf.int32)
  lengths = tf.constant([4, 3], tf.int32)
  model.create_variables({"source_tensors": (ids, lengths), "target_tensors": (ids, lengths)})
  return model


def lm_model(words, num_classes=None, weight_tied=True, seed=1):
  config = {"data_layer": WordsLayer,
            "data_layer_params": {"words": list(words), "num_classes": num_classes},
            "encoder": LMEncoder,
            "encoder_params": {"emb_size": 6, "encoder_layers": 1, "weight_tied": weight_tied,
                               "core_cell": WeightDropLayerNormBasicLSTMCell,
                               "core_cell_params": {"num_units": 10}},
            "decoder": FakeDecoder, "loss": BasicSequenceLoss, "batch_size_per_gpu": 2,
            "random_seed": seed, "dtype": "float32"}
  keras.utils.set_random_seed(seed)
  model = LSTMLM(validate_top_level(LSTMLM, config), "train")
  model.create_variables({"source_tensors": (tf.constant([[2, 3, 4], [4, 3, 2]], tf.int32),
                                             tf.constant([3, 3], tf.int32))})
  return model


def _vocab(n, prefix="w"):
  return SPECIALS + [f"{prefix}{i}" for i in range(n)]


# Odd sizes no hidden width equals: a dimension of one of them is a vocabulary's.
SRC, TGT = _vocab(9, "s"), _vocab(15, "t")  # 13 and 19 ids


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_variable_with_a_vocabulary_dimension_is_declared(family):
  model = text_model(family, SRC, TGT)
  declared = {id(v.variable): v for v in indexed_variables(model)}
  sizes = {"source": len(SRC), "target": len(TGT)}
  for item in declared.values():  # each declaration has its vocabulary along its axis ...
    assert item.variable.shape[item.axis] in (sizes[item.vocabulary],
                                              -(-sizes[item.vocabulary] // 8) * 8), item.where
  for var in model.variables:  # ... and no other variable has a vocabulary's size
    if id(var) not in declared:
      assert not {len(SRC), len(TGT)} & set(var.shape), var.path
  names = {v.where for v in declared.values()}
  assert any(n.startswith("encoder.") for n in names) and \
      any(n.startswith("decoder.") for n in names)


@pytest.mark.parametrize("num_classes, weight_tied", [(None, True), (None, False), (3, True)])
def test_language_model_and_classifier_declare_their_word_tables(num_classes, weight_tied):
  words = ["<unk>", "<eos>"] + [f"x{i}" for i in range(15)]  # 17 words
  model = lm_model(words, num_classes, weight_tied)
  declared = {id(v.variable) for v in indexed_variables(model)}
  for var in model.variables:
    assert (len(words) in var.shape) == (id(var) in declared), var.path
  assert all(v.vocabulary == "word" for v in indexed_variables(model))


@pytest.mark.parametrize("family", ["transformer", "convs2s"])
def test_a_shared_embedding_is_declared_once(family):
  model = text_model(family, SRC, SRC, shared_embed=True)
  items = indexed_variables(model)
  assert items[0].where == "encoder.embedding_softmax_layer.embeddings"
  assert not [i for i in items if "embedding" in i.where and i.where.startswith("decoder")]


# ------------------------------------------------------------------ load_model in process
def _root(model):
  return tf.train.Checkpoint(model=model_checkpoint_object(model.named_layers))


def _save(model, directory, record=True):
  os.makedirs(directory, exist_ok=True)
  path = _root(model).write(os.path.join(directory, "ckpt-1"))
  if record:
    record_vocabularies(directory, model)
  return path


def _params(source, files=None):
  return {"load_model": source, "load_model_vocab_files": files}


def _table(model, where):
  (item,) = [v for v in indexed_variables(model) if v.where == where]
  return item.variable.numpy()


NEW_SRC = SPECIALS + ["s8", "n1", "s0", "s3", "n2", "s5", "s1"]  # reordered, 4 removed, 2 new
NEW_TGT = SPECIALS + ["t14", "t0", "m1", "t7", "t2", "m2", "m3"] + [f"t{i}" for i in (9, 10, 11)]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_load_model_maps_every_declared_table_by_token(family, tmp_path):
  old = text_model(family, SRC, TGT, seed=1)
  _save(old, str(tmp_path / "run"))
  new = text_model(family, NEW_SRC, NEW_TGT, seed=2)
  fresh = {v.where: v.variable.numpy() for v in indexed_variables(new)}
  lines = []
  load_model(_root(new), new, _params(str(tmp_path / "run")), lines.append)
  assert "load_model: source vocabulary remapped: 9 kept, 2 new (initialised), 4 removed" \
      in lines
  assert "load_model: target vocabulary remapped: 11 kept, 3 new (initialised), 8 removed" \
      in lines
  assert lines[0].startswith("load_model: initialised ") and "skipped 0" in lines[0]
  vocab = {"source": (SRC, NEW_SRC), "target": (TGT, NEW_TGT)}
  for item in indexed_variables(new):
    before, after = vocab[item.vocabulary]
    got = np.moveaxis(item.variable.numpy(), item.axis, 0)
    was = np.moveaxis(_table(old, item.where), item.axis, 0)
    init = np.moveaxis(fresh[item.where], item.axis, 0)
    for i, token in enumerate(after):
      if token in before:
        np.testing.assert_array_equal(got[i], was[before.index(token)],
                                      err_msg=f"{item.where} {token}")
        continue
      # a new token: values of the fresh table, but not the fresh row of its id
      assert np.isin(got[i], init).all(), f"{item.where} {token}"
      if got.ndim > 1 and np.unique(init).size > 1:
        assert not np.array_equal(got[i], init[i]), f"{item.where} {token}"
    assert got.shape[0] == init.shape[0]
    for j in range(len(after), got.shape[0]):  # rows beyond the vocabulary stay fresh
      np.testing.assert_array_equal(got[j], init[j])
  # every other variable is loaded as it was
  ours, theirs = variable_keys(_root(new)), variable_keys(_root(old))
  indexed = {id(v.variable) for v in indexed_variables(new)}
  for key, var in ours.items():
    if id(var) not in indexed and "seed_state" not in key:
      np.testing.assert_array_equal(var.numpy(), theirs[key].numpy(), err_msg=key)


def test_the_same_vocabulary_takes_the_plain_path(tmp_path):
  old = text_model("transformer", SRC, TGT, seed=1)
  _save(old, str(tmp_path / "run"))
  new = text_model("transformer", SRC, TGT, seed=2)
  plain = text_model("transformer", SRC, TGT, seed=2)
  lines = []
  load_model(_root(new), new, _params(str(tmp_path / "run")), lines.append)
  loaded, skipped = load_pretrained(_root(plain), str(tmp_path / "run"))
  assert lines == [f"load_model: initialised {len(loaded)} variables from "
                   f"{tmp_path / 'run'}, skipped {len(skipped)}"]
  for (key, a), b in zip(sorted(variable_keys(_root(new)).items()),
                         [v for _, v in sorted(variable_keys(_root(plain)).items())]):
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=key)


def test_a_reordered_vocabulary_of_the_same_size_is_not_loaded_by_index(tmp_path):
  old = text_model("transformer", SRC, TGT, seed=1)
  _save(old, str(tmp_path / "run"))
  reordered = SPECIALS + list(reversed(SRC[4:]))
  new = text_model("transformer", reordered, TGT, seed=2)
  lines = []
  load_model(_root(new), new, _params(str(tmp_path / "run")), lines.append)
  assert "load_model: source vocabulary remapped: 13 kept, 0 new (initialised), 0 removed" \
      in lines
  got = _table(new, "encoder.embedding_softmax_layer.embeddings")
  was = _table(old, "encoder.embedding_softmax_layer.embeddings")
  np.testing.assert_array_equal(got[4:], was[4:][::-1])
  np.testing.assert_array_equal(got[:4], was[:4])


def test_the_language_model_vocabulary_is_remapped(tmp_path):
  words = ["<unk>", "<eos>"] + [f"x{i}" for i in range(15)]
  new_words = ["<unk>", "<eos>", "x3", "y1", "x0"]
  old = lm_model(words, weight_tied=False, seed=1)
  _save(old, str(tmp_path / "lm"))
  new = lm_model(new_words, weight_tied=False, seed=2)
  lines = []
  load_model(_root(new), new, _params(str(tmp_path / "lm")), lines.append)
  assert "load_model: word vocabulary remapped: 4 kept, 1 new (initialised), 13 removed" \
      in lines
  np.testing.assert_array_equal(new.encoder.embedding.numpy()[2],
                                old.encoder.embedding.numpy()[words.index("x3")])
  np.testing.assert_array_equal(new.encoder.output_layer.kernel.numpy()[:, 4],
                                old.encoder.output_layer.kernel.numpy()[:, words.index("x0")])


def test_optimizer_slots_are_not_carried_over(tmp_path):
  old = text_model("transformer", SRC, TGT, seed=1)
  slot = tf.Variable(np.full([3], 7.0, np.float32))
  tf.train.Checkpoint(model=model_checkpoint_object(old.named_layers),
                      optimizer=tf.train.Checkpoint(m=slot)).write(str(tmp_path / "ckpt-1"))
  new = text_model("transformer", NEW_SRC, TGT, seed=2)
  mine = tf.Variable(np.zeros([3], np.float32))
  root = tf.train.Checkpoint(model=model_checkpoint_object(new.named_layers),
                             optimizer=tf.train.Checkpoint(m=mine))
  load_model(root, new, _params(str(tmp_path / "ckpt-1"),
                                {"source": _write_vocab(tmp_path / "src.txt", SRC[4:])}))
  np.testing.assert_array_equal(mine.numpy(), [0, 0, 0])


# ------------------------------------------------------------ where the old vocabularies come from
def _write_vocab(path, tokens):
  path.write_text("".join(f"{t}\t{i}\n" for i, t in enumerate(tokens)), encoding="utf-8")
  return str(path)


def test_the_record_is_the_token_of_every_id(tmp_path):
  model = text_model("transformer", SRC, TGT)
  record_vocabularies(str(tmp_path), model)
  assert read_record(str(tmp_path)) == {"source": SRC, "target": TGT}
  assert json.loads((tmp_path / VOCAB_RECORD).read_text()) == {"source": SRC, "target": TGT}
  assert not [p for p in os.listdir(tmp_path) if p != VOCAB_RECORD]  # no temporary left


def test_explicit_files_for_a_checkpoint_without_its_run(tmp_path):
  old = text_model("transformer", SRC, TGT, seed=1)
  path = _save(old, str(tmp_path / "bare"), record=False)
  new = text_model("transformer", NEW_SRC, TGT, seed=2)
  lines = []
  # one file without the special tokens (they come first, as the data layer puts them),
  # one with them
  files = {"source": _write_vocab(tmp_path / "src.txt", SRC[4:]),
           "target": _write_vocab(tmp_path / "tgt.txt", TGT)}
  load_model(_root(new), new, _params(path, files), lines.append)
  assert "load_model: source vocabulary remapped: 9 kept, 2 new (initialised), 4 removed" \
      in lines
  assert not any("target vocabulary" in line for line in lines)  # the same: plain path
  np.testing.assert_array_equal(
      _table(new, "encoder.embedding_softmax_layer.embeddings")[NEW_SRC.index("s3")],
      _table(old, "encoder.embedding_softmax_layer.embeddings")[SRC.index("s3")])


def test_without_any_record_rows_load_by_index_with_a_notice(tmp_path):
  old = text_model("transformer", SRC, TGT, seed=1)
  path = _save(old, str(tmp_path / "bare"), record=False)
  new = text_model("transformer", SRC, TGT, seed=2)
  lines = []
  load_model(_root(new), new, _params(path), lines.append)
  assert any("records no vocabularies (vocabularies.json): vocabulary rows load by index"
             in line for line in lines)


def _config_yaml(directory, src_file, tgt_file):
  import yaml
  with open(os.path.join(directory, "config.yaml"), "w", encoding="utf-8") as f:
    yaml.safe_dump({"train": {"data_layer_params": {"src_vocab_file": src_file,
                                                    "tgt_vocab_file": tgt_file}}}, f)


def test_an_old_run_falls_back_to_the_files_its_config_names(tmp_path):
  old = text_model("transformer", SRC, TGT, seed=1)
  run = str(tmp_path / "old_run")
  _save(old, run, record=False)
  _config_yaml(run, _write_vocab(tmp_path / "src.txt", SRC[4:]),
               _write_vocab(tmp_path / "tgt.txt", TGT[4:]))
  new = text_model("transformer", NEW_SRC, TGT, seed=2)
  lines = []
  load_model(_root(new), new, _params(run), lines.append)
  assert any(line.startswith(f"warning: load_model: {run} has no vocabularies.json")
             for line in lines)
  assert "load_model: source vocabulary remapped: 9 kept, 2 new (initialised), 4 removed" \
      in lines
  os.remove(tmp_path / "tgt.txt")
  with pytest.raises(ConfigError, match=r"^load_model: .*old_run records no vocabularies "
                     r"\(vocabularies.json\) and its target vocabulary file .*tgt.txt "
                     r"\(config.yaml\) is missing; give the file it was trained with in "
                     r"load_model_vocab_files/target$"):
    load_model(_root(new), new, _params(run))


def test_the_record_wins_over_an_edited_vocabulary_file(tmp_path):
  old = text_model("transformer", SRC, TGT, seed=1)
  run = str(tmp_path / "run")
  _save(old, run)
  # the files the config names were edited after the run: the record still says SRC
  _config_yaml(run, _write_vocab(tmp_path / "src.txt", list(reversed(SRC[4:]))),
               _write_vocab(tmp_path / "tgt.txt", TGT[4:]))
  new = text_model("transformer", SRC, TGT, seed=2)
  lines = []
  load_model(_root(new), new, _params(run), lines.append)
  assert len(lines) == 1 and "skipped 0" in lines[0]
  np.testing.assert_array_equal(_table(new, "encoder.embedding_softmax_layer.embeddings"),
                                _table(old, "encoder.embedding_softmax_layer.embeddings"))


def test_user_errors_are_one_line(tmp_path):
  old = text_model("transformer", SRC, TGT, seed=1)
  run = str(tmp_path / "run")
  _save(old, run)
  new = text_model("transformer", NEW_SRC, TGT, seed=2)
  with pytest.raises(ConfigError, match="^load_model_vocab_files: given without load_model"):
    load_model(_root(new), new, {"load_model": None, "load_model_vocab_files": {"x": "y"}})
  with pytest.raises(ConfigError, match=r"^load_model_vocab_files/words: not a vocabulary of "
                     r"Text2Text \(its vocabularies: source, target\)$"):
    load_model(_root(new), new, _params(run, {"words": "v.txt"}))
  short = _write_vocab(tmp_path / "short.txt", SRC[4:5])  # not what it was trained with
  with pytest.raises(ConfigError, match=r"^load_model: encoder.embedding_softmax_layer."
                     r"embeddings has 13 rows in .*, but its source vocabulary has 5 tokens"):
    load_model(_root(new), new, _params(run, {"source": short}))


def test_language_model_vocabulary_files(tmp_path):
  path = lm.write_vocab_txt(str(tmp_path / "vocab.txt"), ["<unk>", "the", "<eos>", "cat"])
  assert LSTMLM.read_vocabulary_file(path) == ["<unk>", "the", "<eos>", "cat"]
  assert LSTMLM.vocabulary_files({"data_layer_params": {"processed_data_folder": "p"}}) == \
      {"word": os.path.join("p", "vocab.txt")}
  assert Text2Text.vocabulary_files({"data_layer_params": {"src_vocab_file": "s.txt",
                                                           "tgt_vocab_file": None}}) == \
      {"source": "s.txt"}
