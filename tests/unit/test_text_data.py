"""Parallel text data: vocabularies, tf.data transforms, ParallelTextDataLayer."""

import os

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.data import transforms
from open_seq2seq.data.text2text.text2text import ParallelTextDataLayer, SpecialTextTokens
from open_seq2seq.data.text2text.vocab import load_vocab, pad_vocab_to_eight
from open_seq2seq.errors import ConfigError, DataError
from tests.helpers.text import length_dataset

PAD, UNK, S, EOS = 0, 1, 2, 3
VOCAB = ["a", "b", "c", "d", "e"]  # ids 4..8


def write(path, lines):
  path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
  return str(path)


@pytest.fixture
def corpus(tmp_path):
  """12 pairs of lengths 1..12 tokens; the target is the source reversed."""
  rng = np.random.default_rng(0)
  sources = [" ".join(rng.choice(VOCAB, size=n)) for n in range(1, 13)]
  targets = [" ".join(reversed(s.split())) for s in sources]
  vocab = write(tmp_path / "vocab.txt", [f"{t}\t{i}" for i, t in enumerate(VOCAB)])
  return {
      "src_vocab_file": vocab, "tgt_vocab_file": vocab,
      "source_file": write(tmp_path / "src.txt", sources),
      "target_file": write(tmp_path / "tgt.txt", targets),
      "lines": sources, "tmp": tmp_path,
  }


def layer(corpus, mode="eval", batch_size=4, num_workers=1, worker_id=0, **params):
  config = {k: v for k, v in corpus.items() if k not in ("lines", "tmp")}
  config.update(params)
  return ParallelTextDataLayer(config, mode=mode, batch_size=batch_size,
                               num_workers=num_workers, worker_id=worker_id)


def rows(dataset, key="source_tensors"):
  """{id: ids without padding} of every example in a finite dataset."""
  result = {}
  for batch in dataset:
    x, lengths = batch[key]
    for i, example_id in enumerate(batch["id"].numpy()):
      assert example_id not in result, f"id {example_id} seen twice"
      result[int(example_id)] = x[i, :lengths[i]].numpy().tolist()
  return result


def ids_of(line):
  return [VOCAB.index(t) + 4 for t in line.split()] + [EOS]


# ------------------------------------------------------------------- vocabulary
def test_special_tokens():
  assert (SpecialTextTokens.PAD_ID.value, SpecialTextTokens.UNK_ID.value,
          SpecialTextTokens.S_ID.value, SpecialTextTokens.EOS_ID.value) == (0, 1, 2, 3)
  assert SpecialTextTokens.OUT_OF_BUCKET.value == 1234567890
  assert SpecialTextTokens.END_OF_CHOICE.value == -100
  assert [SpecialTextTokens.to_string(i) for i in range(4)] == ["<PAD>", "<UNK>", "<S>", "</S>"]
  with pytest.raises(ValueError):
    SpecialTextTokens.to_string(4)


def test_subword_vocabulary_ids_keep_openseq2seq_values():
  # OpenSeq2Seq's WMT Transformer configs import these: padding 0, end of sentence 1.
  from open_seq2seq.data.text2text import tokenizer
  assert (tokenizer.PAD_ID, tokenizer.EOS_ID) == (0, 1)
  assert tokenizer.RESERVED_TOKENS == [tokenizer.PAD, tokenizer.EOS] == ["<pad>", "<EOS>"]


def test_vocab_with_and_without_counts(tmp_path):
  plain = load_vocab(write(tmp_path / "plain.txt", ["x", "y", "", "z"]))
  counted = load_vocab(write(tmp_path / "counts.txt", ["x\t10", "y 5", "z\t-3.5"]))
  expected = {"<PAD>": 0, "<UNK>": 1, "<S>": 2, "</S>": 3, "x": 4, "y": 5, "z": 6}
  assert plain == expected
  assert counted == expected


def test_pad_vocab_to_eight(tmp_path):
  vocab = load_vocab(write(tmp_path / "v.txt", ["x", "y", "z"]))  # 7 entries
  padded = pad_vocab_to_eight(vocab)
  assert len(padded) == 8 and len(set(padded.values())) == 8
  assert all(padded[t] == i for t, i in vocab.items())
  big = load_vocab(write(tmp_path / "w.txt", [f"t{i}" for i in range(13)]))  # 17 entries
  assert len(pad_vocab_to_eight(big)) == 24
  assert pad_vocab_to_eight(padded) == padded


def test_vocab_with_special_tokens_in_file(tmp_path):
  good = write(tmp_path / "good.txt", ["<PAD>", "<UNK>", "<S>", "</S>", "x 3"])
  assert load_vocab(good, special_tokens_in_file=True)["x"] == 4
  wrong_order = write(tmp_path / "bad.txt", ["<PAD>", "</S>", "<S>", "<UNK>", "x"])
  with pytest.raises(DataError, match="special_tokens_already_in_vocab"):
    load_vocab(wrong_order, special_tokens_in_file=True)
  with pytest.raises(DataError, match=r"bad.txt:1: special token <PAD>"):
    load_vocab(wrong_order)


def test_vocab_errors(tmp_path):
  with pytest.raises(DataError, match="does not exist"):
    load_vocab(str(tmp_path / "missing.txt"))
  with pytest.raises(DataError, match=r"dup.txt:3: token 'x' already appears on line 1"):
    load_vocab(write(tmp_path / "dup.txt", ["x", "y", "x"]))
  with pytest.raises(DataError, match="no tokens"):
    load_vocab(write(tmp_path / "empty.txt", [""]))


def test_layer_describes_vocabulary_without_writing_params(corpus):
  dl = layer(corpus, pad_vocab_to_eight=True)
  d = dl.description
  assert d.src_vocab_size == 16 and d.tgt_vocab_size == 16 and d.delimiter == " "
  assert d.source_idx2seq[4] == "a" and d.target_idx2seq[EOS] == "</S>"
  assert d.source_seq2idx["e"] == 8 and d.target_seq2idx["<UNK>"] == UNK
  assert layer(corpus).description.src_vocab_size == 9
  assert set(dl.params) <= set(ParallelTextDataLayer.declared_params())


# ------------------------------------------------------------------- transforms
def ids_in(dataset):
  found = []
  for batch in dataset:
    found.extend(batch["id"].numpy().ravel().tolist())
  return found


def test_filter_by_max_length():
  lengths = [3, 9, 5, 10, 2]
  kept = transforms.filter_by_max_length(length_dataset(lengths), 6)
  # target is one longer: lengths 3, 5, 2 give targets 4, 6, 3
  assert [int(e["id"]) for e in kept] == [0, 2, 4]
  source_only = transforms.filter_by_max_length(length_dataset(lengths, False), 9)
  assert [int(e["id"]) for e in source_only] == [0, 1, 2, 4]
  assert transforms.filter_by_max_length(length_dataset(lengths), None).cardinality() != 0
  assert len(list(transforms.filter_by_max_length(length_dataset(lengths), None))) == 5


def test_shard_is_disjoint_and_complete():
  shards = [[int(e["id"]) for e in transforms.shard(length_dataset([2] * 11), 2, k)]
            for k in range(2)]
  assert shards == [[0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9]]
  with pytest.raises(ValueError):
    transforms.shard(length_dataset([2]), 2, 2)


def test_bucket_boundaries():
  assert transforms.bucket_boundaries(20, 8) == [9, 17]
  assert transforms.bucket_boundaries(16, 8) == [9]
  assert transforms.bucket_boundaries(3, 8) == []


def test_bucket_batch_keeps_every_example_once():
  lengths = [int(n) for n in np.random.default_rng(1).integers(1, 30, size=57)]
  batched = transforms.bucket_batch(length_dataset(lengths), 5,
                                    boundaries=transforms.bucket_boundaries(31, 8))
  seen = []
  for batch in batched:
    batch_lengths = batch["target_length"].numpy()
    assert len(batch_lengths) <= 5
    # one bucket per batch: all longest lengths in the same width-8 band
    assert len({(n - 1) // 8 for n in batch_lengths}) == 1
    seen.extend(batch["id"].numpy().tolist())
  assert sorted(seen) == list(range(57))


def test_bucket_batch_by_tokens_respects_budget():
  lengths = [int(n) for n in np.random.default_rng(2).integers(1, 40, size=80)]
  budget = 64
  batched = transforms.bucket_batch(length_dataset(lengths), budget, by_tokens=True,
                                    boundaries=transforms.bucket_boundaries(41, 8),
                                    pad_multiple=8, max_length=41)
  batched = transforms.pad_to_multiple(batched, 8)
  seen, sizes = [], set()
  for batch in batched:
    b = batch["id"].shape[0]
    time = max(batch["source"].shape[1], batch["target"].shape[1])
    assert b * time <= budget, (b, time)
    assert time % 8 == 0
    sizes.add(b)
    seen.extend(batch["id"].numpy().tolist())
  assert sorted(seen) == list(range(80))
  assert max(sizes) > 1  # short sentences share a batch
  with pytest.raises(ValueError, match="max_length"):
    transforms.bucket_batch(length_dataset([1]), 8, by_tokens=True)


def test_pad_to_multiple():
  batch = next(iter(transforms.pad_to_multiple(length_dataset([3, 9]).padded_batch(2), 8)))
  assert batch["source"].shape == (2, 16) and batch["target"].shape == (2, 16)
  np.testing.assert_array_equal(batch["source"][0, :3], [4, 5, 6])
  assert int(tf.reduce_sum(batch["source"][0, 3:])) == 0
  np.testing.assert_array_equal(batch["source_length"], [3, 9])


# ------------------------------------------------------------------- data layer
def test_id_contract(corpus, tmp_path):
  vocab = write(tmp_path / "v2.txt", ["a", "b"])
  src = write(tmp_path / "s2.txt", ["a b zz", "b"])
  tgt = write(tmp_path / "t2.txt", ["b a", "qq b"])
  params = dict(src_vocab_file=vocab, tgt_vocab_file=vocab, source_file=src, target_file=tgt)
  dl = ParallelTextDataLayer(params, mode="eval", batch_size=2)
  batch = next(iter(dl.build_dataset()))
  assert set(batch) == {"source_tensors", "target_tensors", "id"}
  x, x_len = batch["source_tensors"]
  y, y_len = batch["target_tensors"]
  assert x.dtype == tf.int32 and x_len.dtype == tf.int32 and batch["id"].dtype == tf.int64
  np.testing.assert_array_equal(x, [[4, 5, UNK, EOS], [5, EOS, PAD, PAD]])
  np.testing.assert_array_equal(x_len, [4, 2])
  np.testing.assert_array_equal(y, [[5, 4, EOS], [UNK, 5, EOS]])  # no GO: the decoder adds it
  np.testing.assert_array_equal(y_len, [3, 3])
  with_start = ParallelTextDataLayer(dict(params, use_start_token=True), mode="eval",
                                     batch_size=2)
  batch = next(iter(with_start.build_dataset()))
  np.testing.assert_array_equal(batch["source_tensors"][0][1], [S, 5, EOS, PAD, PAD])
  np.testing.assert_array_equal(batch["target_tensors"][0][1], [UNK, 5, EOS])


def test_eval_pass_yields_each_example_once(corpus):
  dl = layer(corpus, mode="eval", batch_size=3, bucket_width=4, repeat=True, shuffle=True)
  found = rows(dl.build_dataset())
  assert found == {i: ids_of(line) for i, line in enumerate(corpus["lines"])}
  assert dl.get_size_in_samples() == 12
  targets = rows(dl.build_dataset(), "target_tensors")
  assert targets == {i: ids_of(" ".join(reversed(line.split())))
                     for i, line in enumerate(corpus["lines"])}
  # repeat=True and shuffle=True are ignored in eval: a second pass is identical
  assert rows(dl.build_dataset()) == found


def test_max_length_filters_in_train_and_eval_not_infer(corpus):
  for mode in ("train", "eval"):
    dl = layer(corpus, mode=mode, max_length=6, repeat=False)
    assert sorted(rows(dl.build_dataset())) == [0, 1, 2, 3, 4]  # 5 tokens + EOS
    assert dl.get_size_in_samples() == 5
  dl = layer(corpus, mode="infer", max_length=6)
  found = rows(dl.build_dataset())
  assert sorted(found) == list(range(12)) and dl.get_size_in_samples() == 12
  assert "target_tensors" not in next(iter(dl.build_dataset()))


@pytest.mark.parametrize("mode", ["train", "eval", "infer"])
def test_sharding_across_two_workers(corpus, mode):
  shards = []
  for worker in range(2):
    dl = layer(corpus, mode=mode, batch_size=2, num_workers=2, worker_id=worker, repeat=False,
               bucket_width=4)
    found = rows(dl.build_dataset())
    assert dl.get_size_in_samples() == len(found) == 6
    assert all(i % 2 == worker for i in found)
    shards.append(set(found))
  assert not shards[0] & shards[1]
  assert shards[0] | shards[1] == set(range(12))


def test_train_shuffles_with_global_seed_and_repeats(corpus):
  def first_epoch_order():
    tf.random.set_seed(7)
    dl = layer(corpus, mode="train", batch_size=12, repeat=False)
    return [int(i) for i in next(iter(dl.build_dataset()))["id"]]

  order = first_epoch_order()
  assert sorted(order) == list(range(12)) and order != list(range(12))
  assert first_epoch_order() == order
  repeated = layer(corpus, mode="train", batch_size=5, repeat=True).build_dataset()
  ids = [i for batch in repeated.take(6) for i in batch["id"].numpy()]
  assert len(ids) == 30 and set(ids) == set(range(12))  # more than one epoch


def test_token_batching_and_padding_to_eight(corpus):
  dl = layer(corpus, mode="eval", batch_size=32, batching="tokens", pad_lengths_to_eight=True)
  seen = []
  for batch in dl.build_dataset():
    x, _ = batch["source_tensors"]
    y, _ = batch["target_tensors"]
    assert x.shape[1] % 8 == 0 and y.shape[1] % 8 == 0
    assert x.shape[0] * max(x.shape[1], y.shape[1]) <= 32
    seen.extend(batch["id"].numpy().tolist())
  assert sorted(seen) == list(range(12))


def test_dataset_from_inputs(corpus, capsys):
  dl = layer(corpus, mode="infer", batch_size=2)
  found = rows(dl.dataset_from_inputs(["a b", "e zz c", "d"]))
  assert found == {0: [4, 5, EOS], 1: [8, UNK, 6, EOS], 2: [7, EOS]}
  # a typed token the model never saw is named (e.g. digits into the Greek toy vocabulary)
  assert capsys.readouterr().err.startswith(
      "warning: 1 of 6 input tokens are not in the source vocabulary ('zz'): they read as "
      "<UNK>; the vocabulary is ")
  rows(dl.dataset_from_inputs(["a b"]))
  assert capsys.readouterr().err == ""


def test_infer_needs_no_target_file(corpus):
  config = {k: v for k, v in corpus.items() if k not in ("lines", "tmp", "target_file")}
  dl = ParallelTextDataLayer(config, mode="infer", batch_size=4)
  assert dl.get_size_in_samples() == 12
  with pytest.raises(ConfigError, match="target_file: required in train"):
    ParallelTextDataLayer(config, mode="train", batch_size=4)


# ------------------------------------------------------------------- errors
def test_missing_file_is_a_data_error(corpus):
  with pytest.raises(DataError, match=r"source_file .*nope.txt does not exist"):
    layer(corpus, source_file=str(corpus["tmp"] / "nope.txt"))
  with pytest.raises(DataError, match=r"vocabulary file .*nope.txt does not exist"):
    layer(corpus, tgt_vocab_file=str(corpus["tmp"] / "nope.txt"))


def test_empty_line_names_file_and_line(corpus):
  lines = corpus["lines"][:]
  lines[4] = "  "
  bad = write(corpus["tmp"] / "bad.txt", lines)
  with pytest.raises(DataError, match=r"bad.txt:5: empty line; remove it here and line 5 of"):
    layer(corpus, source_file=bad)
  with pytest.raises(DataError, match=r"bad.txt:5: empty line"):
    layer(corpus, target_file=bad)


def test_line_count_mismatch(corpus):
  short = write(corpus["tmp"] / "short.txt", corpus["lines"][:10])
  with pytest.raises(DataError, match=r"has 12 lines but target_file .*short.txt has 10"):
    layer(corpus, target_file=short)


def test_not_utf8_names_line(corpus):
  path = corpus["tmp"] / "latin1.txt"
  path.write_bytes(("a b\n" * 3).encode() + "c \xe9\n".encode("latin-1"))
  with pytest.raises(DataError, match=r"latin1.txt:4: not valid UTF-8"):
    layer(corpus, source_file=str(path), target_file=str(path))


def test_bad_params_are_config_errors(corpus):
  with pytest.raises(ConfigError, match="batching"):
    layer(corpus, batching="sentences")
  with pytest.raises(ConfigError, match="bucket_width"):
    layer(corpus, bucket_width=0)


def test_max_length_that_drops_everything_is_an_error(corpus):
  long_lines = write(corpus["tmp"] / "long.txt", corpus["lines"][5:])  # 6+ tokens
  with pytest.raises(DataError, match="raise data_layer_params/max_length"):
    layer(corpus, mode="train", max_length=6, source_file=long_lines, target_file=long_lines)


@pytest.mark.parametrize("pad_lengths_to_eight,bucket_width,widest", [
    (False, None, 1),  # default: one bucket per exact length, no padding inside a batch
    (True, None, 7),   # one bucket per padded length: [1, 8] holds lengths 2..8
    (False, 4, 4),     # an explicit width still wins: [5, 8] and [9, 12] hold 4 lengths
])
def test_token_batches_bucket_by_length_by_default(corpus, pad_lengths_to_eight, bucket_width,
                                                   widest):
  dl = layer(corpus, mode="eval", batch_size=64, batching="tokens",
             pad_lengths_to_eight=pad_lengths_to_eight, bucket_width=bucket_width)
  spreads = []
  for batch in dl.build_dataset():
    _, lengths = batch["source_tensors"]
    lengths = lengths.numpy()
    spreads.append(int(lengths.max() - lengths.min()) + 1)
  # sources of 2..13 ids (1..12 tokens + EOS, one per length); a bucket fits in one batch
  assert max(spreads) == widest


# ------------------------------------------------------------------- shards and batching facts
def test_shard_reuses_what_was_read(corpus):
  dl = layer(corpus, mode="eval", batch_size=3)
  for key in ("source_file", "target_file", "src_vocab_file"):
    os.unlink(corpus[key])
  shard = dl.shard(2, 1)  # the files are gone: nothing may be read again
  assert shard is not dl and dl.shard(1, 0) is dl and shard.shard(2, 1) is shard
  assert shard.description.source_seq2idx is dl.description.source_seq2idx
  assert sorted(rows(shard.build_dataset())) == list(range(1, 12, 2))
  assert shard.get_size_in_samples() == 6 and dl.get_size_in_samples() == 12
  assert sorted(rows(dl.build_dataset())) == list(range(12))


@pytest.mark.parametrize("batching", ["examples", "tokens"])
def test_an_empty_shard_is_legal(corpus, batching):
  one = write(corpus["tmp"] / "one.txt", ["a b"])
  dl = layer(corpus, mode="eval", source_file=one, target_file=one, max_length=5,
             batching=batching)
  empty = dl.shard(2, 1)
  assert list(empty.build_dataset()) == []
  assert empty.get_size_in_samples() == 0 and empty.batches_per_epoch() == 0
  built = layer(corpus, mode="train", source_file=one, target_file=one, num_workers=2,
                worker_id=1, repeat=False, batching=batching)
  assert list(built.build_dataset()) == []
  # a shard whose every pair is too long is empty too, while another shard has pairs
  two = write(corpus["tmp"] / "two.txt", ["a", "a b c d e f"])
  long_shard = layer(corpus, mode="eval", source_file=two, target_file=two, max_length=4,
                     batching=batching).shard(2, 1)
  assert list(long_shard.build_dataset()) == [] and long_shard.batches_per_epoch() == 0


@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory):
  """300 pairs of 1..40 tokens, target and source lengths independent."""
  tmp = tmp_path_factory.mktemp("big")
  rng = np.random.default_rng(4)
  sides = [[" ".join(rng.choice(VOCAB, size=n)) for n in rng.integers(1, 41, size=300)]
           for _ in range(2)]
  vocab = write(tmp / "vocab.txt", VOCAB)
  return {"src_vocab_file": vocab, "tgt_vocab_file": vocab,
          "source_file": write(tmp / "src.txt", sides[0]),
          "target_file": write(tmp / "tgt.txt", sides[1])}


@pytest.mark.parametrize("params,batch_size", [
    ({}, 16),
    ({"bucket_width": 6}, 16),
    ({"pad_lengths_to_eight": True, "max_length": 30}, 10),
    ({"batching": "tokens"}, 256),
    ({"batching": "tokens", "bucket_width": 10}, 256),
    ({"batching": "tokens", "pad_lengths_to_eight": True}, 256),
    ({"batching": "tokens", "pad_lengths_to_eight": True, "bucket_width": 16,
      "max_length": 35}, 300),
])
@pytest.mark.parametrize("mode,shards", [("eval", (1, 0)), ("train", (3, 1)), ("infer", (2, 0))])
def test_batches_per_epoch_counts_the_pipeline_batches(big_corpus, params, batch_size, mode,
                                                       shards):
  dl = ParallelTextDataLayer(dict(big_corpus, repeat=False, **params), mode=mode,
                             batch_size=batch_size).shard(*shards)
  counted = sum(1 for _ in dl.build_dataset())
  assert dl.batches_per_epoch() == counted
  if params.get("batching") == "tokens":
    assert counted > dl.get_size_in_samples() // batch_size + 5  # not examples // tokens


def test_count_units_counts_real_tokens(corpus):
  dl = layer(corpus, mode="eval", batch_size=5, pad_lengths_to_eight=True)
  assert dl.throughput_unit == "tokens" and dl.unit_scale == 1.0
  count = tf.function(dl.count_units)
  for batch in dl.build_dataset():
    real = sum(int(tf.math.count_nonzero(batch[k][0])) for k in ("source_tensors",
                                                                 "target_tensors"))
    assert count(batch).dtype == tf.int64 and int(count(batch)) == real
  batch = next(iter(layer(corpus, mode="infer").build_dataset()))
  assert int(dl.count_units(batch)) == int(tf.math.count_nonzero(batch["source_tensors"][0]))


def test_interactive_infer_reads_what_the_user_types_and_no_file(corpus):
  config = {k: v for k, v in corpus.items() if k not in ("lines", "tmp")}
  config.update(source_file="/nonexistent/source.txt", target_file="/nonexistent/target.txt")
  given = dict(config)
  dl = ParallelTextDataLayer(config, mode="interactive_infer", batch_size=4, random_seed=1)
  assert config == given
  batch = next(iter(dl.dataset_from_inputs(["a b"])))
  assert "target_tensors" not in batch
  assert rows(dl.dataset_from_inputs(["a b"])) == {0: [4, 5, EOS]}
  with pytest.raises(ConfigError, match="interactive_infer translates what the user types"):
    dl.build_dataset()
  assert set(dl.params) <= set(ParallelTextDataLayer.declared_params())


def test_a_training_pair_far_longer_than_the_rest_is_a_warning_at_load(tmp_path, capsys):
  rng = np.random.default_rng(1)
  sources = [" ".join(rng.choice(VOCAB, size=int(n))) for n in rng.integers(3, 12, 40)]
  sources[17] = " ".join(rng.choice(VOCAB, size=300))
  vocab = write(tmp_path / "vocab.txt", [f"{t}\t{i}" for i, t in enumerate(VOCAB)])
  files = {"src_vocab_file": vocab, "tgt_vocab_file": vocab,
           "source_file": write(tmp_path / "src.txt", sources),
           "target_file": write(tmp_path / "tgt.txt", sources)}
  ParallelTextDataLayer(dict(files, max_length=None), mode="train", batch_size=4)
  err = capsys.readouterr().err.splitlines()
  assert len(err) == 1 and err[0].startswith(
      f"warning: {files['source_file']}: the pair on line 18 is 301 ids long, ") and \
      "set data_layer_params/max_length" in err[0], err
  for mode, params, worker in (("eval", {"max_length": None}, 0),  # eval reads every pair
                               ("train", {"max_length": 50}, 0),   # already bounded
                               ("train", {"max_length": None}, 1)):  # the chief says it
    ParallelTextDataLayer(dict(files, **params), mode=mode, batch_size=4, num_workers=2,
                          worker_id=worker)
    assert capsys.readouterr().err == ""
