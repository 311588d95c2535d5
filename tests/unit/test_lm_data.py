"""Language-model family data: vocabularies, processed folders, WKTDataLayer, IMDB and SST."""

import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.data.lm import (IMDBDataLayer, SSTDataLayer, WKTDataLayer, build_vocab,
                                  read_vocab, write_vocab)
from open_seq2seq.data.lm.text_classification import encode_text
from open_seq2seq.errors import ConfigError, DataError
from tests.helpers.lm import (imdb_reviews, write_aclimdb, write_sst, write_vocab_txt,
                              write_wikitext)


def one_line(error) -> str:
  message = str(error.value)
  assert "\n" not in message
  return message


# ---------------------------------------------------------------------- vocabulary
def test_vocab_file_format_and_round_trip(tmp_path):
  vocab = build_vocab([["a", "b", "a"], ["b", "a", "c", "<unk>"]], min_count=1)
  assert vocab.idx2word == ("<unk>", "a", "b", "<eos>", "c")  # ties: first appearance
  path = str(tmp_path / "vocab.txt")
  write_vocab(path, vocab)
  assert open(path).read().split("\n") == [
      "0\t<unk>\t0", "1\ta\t3", "2\tb\t2", "3\t<eos>\t2", "4\tc\t1", "5", ""]
  again = read_vocab(path)
  assert again.idx2word == vocab.idx2word and again.counts == vocab.counts


def test_min_count_maps_rare_words_to_unk():
  vocab = build_vocab([["a", "a", "b"], ["a", "c", "c"]], min_count=2)
  assert vocab.idx2word == ("<unk>", "a", "<eos>", "c")
  assert vocab.encode(["b", "c", "zzz"]).tolist() == [0, 3, 0]


def test_read_vocab_without_count_line_adds_missing_specials(tmp_path):
  path = write_vocab_txt(str(tmp_path / "v.txt"), ["<unk>", "the", "cat"], [0, 5, 3],
                         count_line=False)
  vocab = read_vocab(path)
  assert vocab.idx2word == ("<unk>", "the", "cat", "<eos>") and vocab.eos_id == 3


@pytest.mark.parametrize("lines, what", [
    (["0\t<unk>\t0", "1\tthe"], "v.txt:2: expected 'id<TAB>word<TAB>count'"),
    (["0\t<unk>\t0", "2\tthe\t4"], "v.txt:2: id 2 out of order"),
    (["0\t<unk>\t0", "1\t<unk>\t4"], "listed twice"),
    (["0\t<unk>\t0", "1\tthe\t4", "7"], "says 7 words"),
])
def test_malformed_vocab_is_a_one_line_error(tmp_path, lines, what):
  path = tmp_path / "v.txt"
  path.write_text("\n".join(lines) + "\n")
  with pytest.raises(DataError) as error:
    read_vocab(str(path))
  assert what in one_line(error)


# ---------------------------------------------------------------------- WikiText folders
@pytest.fixture
def wiki(tmp_path):
  return {"data_root": write_wikitext(str(tmp_path / "wikitext-2")),
          "processed_data_folder": str(tmp_path / "processed")}


def wkt(wiki, mode="train", batch_size=3, num_workers=1, worker_id=0, seed=1, **params):
  config = {**wiki, "bptt": 5, **params}
  return WKTDataLayer(config, mode, batch_size, num_workers, worker_id, random_seed=seed)


def batches(dataset, count=None):
  out = []
  for batch in dataset:
    out.append(tf.nest.map_structure(lambda t: t.numpy(), batch))
    if count is not None and len(out) == count:
      break
  return out


def test_processed_folder_is_built_once_and_reused(wiki, tmp_path):
  layer = wkt(wiki)
  folder = wiki["processed_data_folder"]
  assert sorted(os.listdir(folder)) == ["test.ids", "train.ids", "valid.ids", "vocab.txt"]
  text = open(os.path.join(folder, "train.ids")).read()
  assert text.count("\n") == 1 and np.array_equal(
      np.array(text.strip().split("\t"), int), layer.tokens)
  words = layer.vocab.idx2word
  assert words[0] == "<unk>" and "<eos>" in words and "-" in words and "n't" in words
  assert "@-@" not in words and not any(w.startswith("rare") for w in words)  # min_count 3
  shutil.rmtree(wiki["data_root"])  # the second layer needs the folder only
  eval_layer = wkt({"processed_data_folder": folder}, mode="eval")
  assert eval_layer.vocab.idx2word == words and len(eval_layer.tokens) > 0


@pytest.mark.parametrize("scheme", ["wiki.{}.raw", "{}.txt"])
def test_other_raw_file_names(tmp_path, scheme):
  root = write_wikitext(str(tmp_path / "raw"), scheme=scheme)
  layer = wkt({"data_root": root, "processed_data_folder": str(tmp_path / "p")})
  assert len(layer.tokens) > 100


def test_relative_default_folder_in_working_directory(wiki, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  wkt({"data_root": wiki["data_root"]})
  assert os.path.isfile(tmp_path / "wkt-processed_data" / "vocab.txt")


def test_vocab_file_replaces_the_built_vocabulary(wiki, tmp_path):
  vocab = write_vocab_txt(str(tmp_path / "v.txt"), ["<unk>", "<eos>", "the", "cat"])
  layer = wkt({**wiki, "vocab_file": vocab})
  assert layer.vocab.idx2word == ("<unk>", "<eos>", "the", "cat")
  assert set(np.unique(layer.tokens)) <= {0, 1, 2, 3}
  infer = wkt({"processed_data_folder": str(tmp_path / "none"), "vocab_file": vocab},
              mode="infer", seed_tokens="cat")
  assert infer.prompts.values.tolist() == [3]


def test_missing_folder_and_empty_split_are_one_line_errors(wiki, tmp_path):
  with pytest.raises(DataError) as error:
    wkt({"processed_data_folder": str(tmp_path / "nowhere")}, mode="eval")
  assert "nowhere" in one_line(error) and "data_root" in one_line(error)
  wkt(wiki)
  open(os.path.join(wiki["processed_data_folder"], "valid.ids"), "w").close()
  with pytest.raises(DataError) as error:
    wkt({"processed_data_folder": wiki["processed_data_folder"]}, mode="eval")
  assert "valid.ids: empty split" in one_line(error)


@pytest.mark.parametrize("text", ["", " \n \n"])
def test_an_empty_raw_training_split_is_one_line(wiki, tmp_path, text):
  train = os.path.join(wiki["data_root"], "wiki.train.tokens")
  with open(train, "w", encoding="utf-8") as f:
    f.write(text)
  with pytest.raises(DataError) as error:
    wkt({**wiki, "processed_data_folder": str(tmp_path / "new")})
  assert one_line(error).startswith(f"{train}: the training split holds no words")
  assert not os.path.exists(tmp_path / "new" / "vocab.txt")


# ---------------------------------------------------------------------- training layouts
def test_stream_layout_rows_continue_and_targets_are_next_tokens(wiki):
  layer = wkt(wiki, shuffle=False, repeat=False)
  assert layer.description.stream_batches
  got = batches(layer.build_dataset())
  assert len(got) == layer.batches_per_epoch() > 2
  tokens = layer.tokens
  for k, batch in enumerate(got):
    x, lengths = batch["source_tensors"]
    y, _ = batch["target_tensors"]
    assert x.shape == (3, 5) and x.dtype == np.int32 and lengths.tolist() == [5, 5, 5]
    for b, start in enumerate(batch["id"]):
      assert x[b].tolist() == tokens[start:start + 5].tolist()
      assert y[b].tolist() == tokens[start + 1:start + 6].tolist()
      if k:
        assert start == got[k - 1]["id"][b] + 5  # row b continues row b of the last batch
  assert layer.count_units(got[0]).numpy() == 15


def test_chunk_layout_is_shuffled_and_covers_every_chunk_once_per_pass(wiki):
  layer = wkt(wiki, shuffle=True, repeat=False)
  assert not layer.description.stream_batches
  ids = np.concatenate([b["id"] for b in batches(layer.build_dataset())])
  num_chunks = (len(layer.tokens) - 1) // 5
  assert sorted(ids.tolist()) == [i * 5 for i in range(num_chunks)]
  assert ids.tolist() != sorted(ids.tolist())
  endless = batches(wkt(wiki, shuffle=True).build_dataset(), 2 * layer.batches_per_epoch())
  passes = np.concatenate([b["id"] for b in endless])[:2 * num_chunks].reshape(2, -1)
  assert sorted(passes[0]) == sorted(passes[1]) and passes[0].tolist() != passes[1].tolist()


def test_finite_shuffle_buffer_keeps_chunks_whole(wiki):
  layer = wkt(wiki, shuffle=True, shuffle_buffer_size=4, repeat=False)
  got = batches(layer.build_dataset())
  for batch in got:
    for b, start in enumerate(batch["id"]):
      assert batch["target_tensors"][0][b].tolist() == layer.tokens[start + 1:start + 6].tolist()
  assert len(np.concatenate([b["id"] for b in got])) == layer.get_size_in_samples()


@pytest.mark.parametrize("shuffle", [False, True])
def test_rand_start_offsets_vary_per_pass_and_follow_the_seed(wiki, shuffle):
  def offsets(seed):
    layer = wkt(wiki, shuffle=shuffle, rand_start=True, seed=seed)
    per_pass = layer.batches_per_epoch()
    got = batches(layer.build_dataset(), 6 * per_pass)
    if shuffle:  # the chunks of a pass all start at the pass's offset
      return [int(got[i * per_pass]["id"][0] % 5) for i in range(6)]
    return [int(got[i * per_pass]["id"][0]) for i in range(6)]
  first = offsets(3)
  assert len(set(first)) > 1 and all(0 <= o < 5 for o in first)
  assert offsets(3) == first
  assert offsets(4) != first


@pytest.mark.parametrize("mode, shuffle, rand_start, batch_size, workers", [
    ("train", False, False, 3, 1), ("train", False, True, 4, 2), ("train", True, False, 5, 3),
    ("train", True, True, 2, 2), ("eval", False, False, 4, 1), ("eval", False, False, 7, 3),
])
def test_batches_per_epoch_is_exact(wiki, mode, shuffle, rand_start, batch_size, workers):
  for worker in range(workers):
    layer = wkt(wiki, mode, batch_size, workers, worker, shuffle=shuffle,
                rand_start=rand_start, repeat=False)
    got = batches(layer.build_dataset())
    assert len(got) == layer.batches_per_epoch() > 0
    assert sum(len(b["id"]) for b in got) == layer.get_size_in_samples()


def test_shards_are_disjoint_and_cover_the_split(wiki):
  whole = wkt(wiki, "eval", batch_size=4)
  everything = sorted(np.concatenate([b["id"] for b in batches(whole.build_dataset())]))
  shards = [whole.shard(3, i) for i in range(3)]
  assert shards[1].tokens is whole.tokens  # nothing re-read
  ids = [np.concatenate([b["id"] for b in batches(s.build_dataset())]).tolist() for s in shards]
  assert sorted(sum(ids, [])) == everything
  stream = wkt(wiki, shuffle=False, repeat=False)
  covered = []
  for i in range(2):
    for batch in batches(stream.shard(2, i).build_dataset()):
      covered += [p for start in batch["id"] for p in range(start, start + 5)]
  assert len(covered) == len(set(covered))  # no token is a source twice
  assert len(covered) > 0.6 * len(stream.tokens)


@pytest.mark.parametrize("params", [
    {"shuffle": False, "rand_start": True}, {"shuffle": True, "rand_start": True},
    {"shuffle": True, "shuffle_buffer_size": 8},
])
def test_training_iterator_checkpoint_resumes_exactly(wiki, tmp_path, params):
  layer = wkt(wiki, **params)
  iterator = iter(layer.build_dataset())
  for _ in range(layer.batches_per_epoch() + 2):  # into the second pass
    next(iterator)
  path = tf.train.Checkpoint(data=iterator).save(str(tmp_path / "ckpt"))
  expected = [next(iterator)["id"].numpy().tolist() for _ in range(3)]
  restored = iter(layer.build_dataset())
  tf.train.Checkpoint(data=restored).restore(path)
  assert [next(restored)["id"].numpy().tolist() for _ in range(3)] == expected


def test_wkt_rejects_too_short_split_and_bad_config(wiki):
  with pytest.raises(DataError) as error:
    wkt(wiki, bptt=5000)
  assert "train.ids" in one_line(error) and "lower bptt" in one_line(error)
  with pytest.raises(ConfigError):
    wkt(wiki, pad_lengths_to_eight=True)
  with pytest.raises(DataError) as error:
    wkt(wiki, batch_size=400, shuffle=False).build_dataset()
  assert "no batch" in one_line(error)


# ---------------------------------------------------------------------- prompts
def test_infer_prompts_from_seed_tokens_and_seed_file(wiki, tmp_path):
  wkt(wiki)
  folder = {"processed_data_folder": wiki["processed_data_folder"]}
  layer = wkt(folder, mode="infer", batch_size=2, seed_tokens="the cat Zebra")
  got = batches(layer.build_dataset())
  ids = np.concatenate([b["id"] for b in got]).tolist()
  assert ids == [0, 1, 2] and "target_tensors" not in got[0]
  assert got[1]["source_tensors"][0].tolist() == [[0]]  # unknown -> <unk>
  assert layer.text_of(1) == "cat" and layer.batches_per_epoch() == 2
  seed_file = tmp_path / "prompts.txt"
  seed_file.write_text("the cat sat on\n\nthe dog,\n")
  layer = wkt(folder, mode="infer", batch_size=4, seed_file=str(seed_file),
              pad_lengths_to_eight=True)
  (batch,) = batches(layer.build_dataset())
  x, lengths = batch["source_tensors"]
  eos = layer.description.end_token
  assert lengths.tolist() == [4, 3] and x.shape == (2, 8)
  assert x[1, 3:].tolist() == [eos] * 5 and layer.ids_to_text(x[1, :3]) == "the dog <unk>"
  assert layer.text_of(1) == "the dog,"
  (typed,) = batches(layer.dataset_from_inputs(["the cat", "a dog ran"]))
  assert typed["source_tensors"][1].tolist() == [2, 3] and layer.text_of(1) == "a dog ran"


def test_description_and_padded_vocabulary(wiki):
  layer = wkt(wiki, pad_vocab_to_eight=True, delimiter="_")
  d = layer.description
  assert d.vocab_size % 8 == 0 and d.vocab_size == len(d.idx2word)
  assert d.idx2word[-1].startswith("<unused") and d.idx2word[d.unk_token] == "<unk>"
  assert d.idx2word[d.end_token] == "<eos>" and d.num_classes is None
  assert layer.ids_to_text([d.unk_token, d.end_token]) == "<unk>_<eos>"
  assert layer.throughput_unit == "tokens"


# ---------------------------------------------------------------------- classification
# "film" is left out: every review has one unseen word
LM_WORDS = (["<unk>", "<eos>", "the", "dog", "ran", ".", "it", "was", "a", ",", "rated", "(",
             ")", "happy", "sad", "great", "movie", "train", "test", "10"]
            + [str(d) for d in range(10)])


@pytest.fixture
def lm_vocab(tmp_path):
  return write_vocab_txt(str(tmp_path / "lm_vocab.txt"), LM_WORDS, list(range(len(LM_WORDS))))


def imdb(tmp_path, lm_vocab, mode="train", batch_size=4, reviews=None, **params):
  root = str(tmp_path / "aclImdb")
  if not os.path.isdir(root):
    write_aclimdb(root, reviews or imdb_reviews())
  config = {"data_root": root, "lm_vocab_file": lm_vocab, "max_length": 64,
            "processed_data_folder": str(tmp_path / params.pop("folder", "imdb-processed")),
            **params}
  return IMDBDataLayer(config, mode, batch_size, random_seed=0)


def labels_by_text(layer):
  return {layer.text_of(i): layer.label(i) for i in range(len(layer.rows))}


def test_imdb_binary_labels_valid_split_and_files(tmp_path, lm_vocab):
  train = imdb(tmp_path, lm_vocab, valid_size=5)
  folder = tmp_path / "imdb-processed"
  assert sorted(os.listdir(folder)) == sorted(
      f"{s}.{e}" for s in ("train", "valid", "test") for e in ("ids", "rat"))
  valid = imdb(tmp_path, lm_vocab, mode="eval", valid_size=5)
  infer = imdb(tmp_path, lm_vocab, mode="infer")
  assert (len(train.rows), len(valid.rows), len(infer.rows)) == (7, 5, 12)
  for layer in (train, valid, infer):
    for text, label in labels_by_text(layer).items():
      assert label == (1 if "happy" in text else 0)
  assert not set(labels_by_text(train)) & set(labels_by_text(valid))
  assert train.description.class_names == ("negative", "positive")
  assert train.description.num_classes == 2
  (first,) = batches(infer.build_dataset(), 1)
  assert first["target_tensors"][0].dtype == np.int32 and "source_tensors" in first
  capped = imdb(tmp_path, lm_vocab, valid_size=1000, folder="capped")
  assert len(capped.rows) == 1


def test_imdb_ten_classes_are_ratings(tmp_path, lm_vocab):
  layer = imdb(tmp_path, lm_vocab, mode="infer", binary=False)
  for text, label in labels_by_text(layer).items():
    assert f"rated {label + 1} " in text
  # the test split in file order: pos/ then neg/, each by review id
  assert layer.labels.tolist() == [6, 7, 8, 9, 6, 7, 0, 1, 2, 3, 0, 1]
  assert layer.description.num_classes == 10 and layer.description.class_name(6) == "7"
  with pytest.raises(DataError) as error:  # the 10-class folder read as binary
    imdb(tmp_path, lm_vocab, mode="infer", binary=True)
  assert "test.rat:" in one_line(error) and "binary" in one_line(error)
  with pytest.raises(ConfigError):
    imdb(tmp_path, lm_vocab, mode="infer", binary=False, num_classes=2)
  imdb(tmp_path, lm_vocab, mode="infer", folder="binary-folder")
  with pytest.raises(DataError) as error:  # a binary folder read with 10 classes
    imdb(tmp_path, lm_vocab, mode="infer", binary=False, folder="binary-folder")
  assert "only labels 0 and 1" in one_line(error)


def test_max_length_keeps_the_end_and_batches_pad_with_eos(tmp_path, lm_vocab):
  layer = imdb(tmp_path, lm_vocab, mode="infer", max_length=3, batch_size=12)
  (batch,) = batches(layer.build_dataset())
  x, lengths = batch["source_tensors"]
  assert lengths.max() == 3
  for row, example_id in zip(x, batch["id"]):
    assert row.tolist() == layer.rows.row(example_id)[-3:].tolist()
  assert layer.text_of(0).startswith("the happy dog ran .")  # the whole review


def test_imdb_small_and_exact_batch_count(tmp_path, lm_vocab):
  layer = imdb(tmp_path, lm_vocab, mode="infer", small=True, batch_size=2)
  assert len(layer.rows) == 8
  for shard in (layer.shard(3, i) for i in range(3)):
    assert len(batches(shard.build_dataset())) == shard.batches_per_epoch()


def test_classification_iterator_checkpoint_resumes_exactly(tmp_path, lm_vocab):
  layer = imdb(tmp_path, lm_vocab, batch_size=3, valid_size=2)
  iterator = iter(layer.build_dataset())
  for _ in range(4):
    next(iterator)
  path = tf.train.Checkpoint(data=iterator).save(str(tmp_path / "ckpt"))
  expected = [next(iterator)["id"].numpy().tolist() for _ in range(3)]
  restored = iter(layer.build_dataset())
  tf.train.Checkpoint(data=restored).restore(path)
  assert [next(restored)["id"].numpy().tolist() for _ in range(3)] == expected


def test_oov_tokens_are_retried_lower_cased_and_stats_written(tmp_path, lm_vocab):
  vocab = read_vocab(lm_vocab)
  ids, unseen = encode_text("Great MOVIE<br />Zebra", vocab)
  assert vocab.decode(ids) == ["great", "movie", "<unk>"] and unseen == ["Zebra"]
  imdb(tmp_path, lm_vocab, get_stats=True)
  folder = tmp_path / "imdb-processed"
  stats = (folder / "statistics.txt").read_text()
  assert "Median" in stats and "<=64" in stats and "unseen out of" in stats
  assert (folder / "train_unseen.txt").read_text() == "film\t1\n"  # The -> the, It -> it


def test_imdb_errors_name_the_file(tmp_path, lm_vocab):
  reviews = imdb_reviews(2)
  reviews[("train", "neg")].append((9, 11, "bad rating"))
  with pytest.raises(DataError) as error:
    imdb(tmp_path, lm_vocab, reviews=reviews)
  assert "9_11.txt" in one_line(error) and "rating 11" in one_line(error)
  with pytest.raises(DataError) as error:
    IMDBDataLayer({"lm_vocab_file": lm_vocab, "max_length": 8,
                   "processed_data_folder": str(tmp_path / "none")})
  assert "none" in one_line(error) and "data_root" in one_line(error)


def sst(tmp_path, lm_vocab, mode="train", **params):
  config = {"data_root": str(tmp_path / "sst"), "lm_vocab_file": lm_vocab, "max_length": 16,
            "processed_data_folder": str(tmp_path / "sst-processed"), **params}
  return SSTDataLayer(config, mode, batch_size=2)


def test_sst_csv_with_quoted_commas(tmp_path, lm_vocab):
  write_sst(str(tmp_path / "sst"), {
      "train": [("A great, great movie", 1), ('the "sad" film', 0), ("it ran", 1)],
      "val": [("sad, sad", 0)], "test": [("happy film", 1), ("the dog", 0)]})
  layer = sst(tmp_path, lm_vocab)
  assert labels_by_text(layer) == {"a great , great movie": 1,
                                   "the <unk> sad <unk> <unk>": 0, "it ran": 1}
  assert labels_by_text(sst(tmp_path, lm_vocab, mode="eval")) == {"sad , sad": 0}
  typed = sst(tmp_path, lm_vocab, mode="interactive_infer")
  (batch,) = batches(typed.dataset_from_inputs(["Great film", "the movie , the dog"]))
  assert "target_tensors" not in batch and batch["source_tensors"][1].tolist() == [2, 5]
  assert typed.label(0) is None and typed.text_of(1) == "the movie , the dog"
  with pytest.raises(ConfigError):
    sst(tmp_path, lm_vocab, binary=False)


def test_sst_bad_label_is_a_one_line_error(tmp_path, lm_vocab):
  write_sst(str(tmp_path / "sst"), {"train": [("fine", 1), ("odd", 2)], "val": [("a", 0)],
                                    "test": [("b", 1)]})
  with pytest.raises(DataError) as error:
    sst(tmp_path, lm_vocab)
  assert "train.csv:3: label '2' is not 0 or 1" in one_line(error)
