"""SentencePiece end to end: scripts/build_sentencepiece.py, SentencePieceVocab, and
ParallelTextDataLayer reading raw text with a model (training, infer, interactive, BLEU)."""

import random

import numpy as np
import pytest
import sentencepiece

from open_seq2seq.config import validate_top_level
from open_seq2seq.data.text2text.sentencepiece_model import (SPECIAL_TOKEN_OPTIONS,
                                                             SentencePieceVocab,
                                                             vocab_file_tokens)
from open_seq2seq.data.text2text.text2text import ParallelTextDataLayer
from open_seq2seq.data.text2text.vocab import load_vocab
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.models.text2text import Text2Text, ids_to_text
from tests.helpers.speech import load_script

PAD, UNK, S, EOS = 0, 1, 2, 3
VOCAB_SIZE = 60
EN = "the cat dog sat ran on a mat far away and saw light".split()
ES = "el gato perro se sentó corrió en la alfombra lejos y vio luz".split()


def _sentences(words, count, seed):
  rng = random.Random(seed)
  return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 9))) for _ in range(count)]


def _write(path, lines):
  path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def build():
  return load_script("build_sentencepiece")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, build):
  """A joint BPE model (vocab 60) trained by the script on 2 x 200 generated lines, its
  vocabulary file, and raw + encoded train/test files of both sides."""
  root = tmp_path_factory.mktemp("spm")
  files = {}
  for split, count, seed in (("train", 200, 0), ("test", 12, 1)):
    files[f"{split}.en"] = _write(root / f"{split}.en", _sentences(EN, count, seed))
    files[f"{split}.es"] = _write(root / f"{split}.es", _sentences(ES, count, seed + 10))
  encode = []
  for name in list(files):
    files[name.replace(".", ".sp.")] = str(root / name.replace(".", ".sp."))
    encode += ["--encode", files[name], files[name.replace(".", ".sp.")]]
  build.main(["--input", files["train.en"], "--input", files["train.es"],
              "--model_prefix", str(root / "spm"), "--vocab_size", str(VOCAB_SIZE), *encode])
  files.update(model=str(root / "spm.model"), vocab=str(root / "spm.vocab"), root=root)
  return files


def _lines(path):
  with open(path, encoding="utf-8") as f:
    return f.read().splitlines()


# ------------------------------------------------------------------- the model and its ids
def test_trained_model_has_the_project_special_ids(corpus):
  sp = sentencepiece.SentencePieceProcessor(model_file=corpus["model"])
  assert sp.get_piece_size() == VOCAB_SIZE
  assert (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (PAD, UNK, S, EOS)
  assert [sp.id_to_piece(i) for i in range(4)] == ["<PAD>", "<UNK>", "<S>", "</S>"]
  vocab = SentencePieceVocab(corpus["model"])
  assert vocab.aligned and len(vocab) == VOCAB_SIZE
  assert vocab.seq2idx == {sp.id_to_piece(i): i for i in range(VOCAB_SIZE)}


def test_vocab_file_gives_the_model_ids(corpus):
  tokens = _lines(corpus["vocab"])
  assert len(tokens) == VOCAB_SIZE - 4 and tokens == vocab_file_tokens(
      SentencePieceVocab(corpus["model"]))
  assert load_vocab(corpus["vocab"]) == SentencePieceVocab(corpus["model"]).seq2idx


def test_encode_decode_round_trip(corpus):
  vocab = SentencePieceVocab(corpus["model"])
  lines = _lines(corpus["test.es"]) + ["la luz  y el gato"]
  ids, counts = vocab.encode(lines)
  assert ids.dtype == np.int32 and counts.sum() == len(ids) and (ids >= 4).all()
  rows = np.split(ids, np.cumsum(counts)[:-1])
  idx2seq = {i: t for t, i in vocab.seq2idx.items()}
  for line, row, pieces in zip(lines, rows, vocab.pieces(lines)):
    assert [idx2seq[i] for i in row] == pieces
    assert vocab.decode(row) == " ".join(line.split())
    # what Text2Text prints: pieces joined with the delimiter "" of SentencePiece sides
    assert ids_to_text(list(row) + [EOS, PAD], idx2seq, "") == " ".join(line.split())
  # unknown characters become UNK, and decoding skips PAD/<S>/EOS
  ids, _ = vocab.encode(["el gato ж"])
  assert UNK in ids.tolist()
  assert vocab.decode([S, *vocab.encode(["el gato"])[0], EOS, PAD]) == "el gato"


def test_encoded_files_hold_space_separated_pieces(corpus):
  vocab = SentencePieceVocab(corpus["model"])
  raw = _lines(corpus["train.en"])
  assert _lines(corpus["train.sp.en"]) == [" ".join(p) for p in vocab.pieces(raw)]


def test_training_is_deterministic(corpus, build, tmp_path):
  sentences = _lines(corpus["train.en"]) + _lines(corpus["train.es"])
  for cap in (0, 150):  # all sentences, and a seeded sample of 150
    first = build.train(sentences, VOCAB_SIZE, "bpe", input_sentence_size=cap, seed=3)
    again = build.train(sentences, VOCAB_SIZE, "bpe", input_sentence_size=cap, seed=3)
    assert first == again
  unigram = build.train(sentences, 50, "unigram", seed=3)
  path = tmp_path / "uni.model"
  path.write_bytes(unigram)
  assert SentencePieceVocab(str(path)).aligned and len(SentencePieceVocab(str(path))) == 50
  with open(corpus["model"], "rb") as f:
    assert build.train(sentences, VOCAB_SIZE, "bpe", seed=0) == f.read()


def test_script_errors_are_one_line(corpus, build, tmp_path):
  with pytest.raises(SystemExit, match="either --model_prefix"):
    build.main(["--input", corpus["train.en"]])
  with pytest.raises(SystemExit, match="--model_prefix needs"):
    build.main(["--model_prefix", str(tmp_path / "m")])
  with pytest.raises(SystemExit, match="Vocabulary size too high"):
    build.main(["--input", corpus["test.en"], "--model_prefix", str(tmp_path / "m"),
                "--vocab_size", "5000"])
  with pytest.raises(SystemExit, match="does not exist"):
    build.main(["--input", str(tmp_path / "nope"), "--model_prefix", str(tmp_path / "m")])
  # an existing model: write its vocabulary file and encode, no training
  build.main(["--model", corpus["model"], "--vocab_file", str(tmp_path / "v.txt"),
              "--encode", corpus["test.en"], str(tmp_path / "test.sp.en")])
  assert _lines(tmp_path / "v.txt") == _lines(corpus["vocab"])
  assert _lines(tmp_path / "test.sp.en") == _lines(corpus["test.sp.en"])


def test_model_with_sentencepiece_default_ids_is_remapped(corpus, tmp_path):
  """<unk> 0, <s> 1, </s> 2 and no padding: specials move to 1/2/3, pieces start at 4."""
  sentencepiece.SentencePieceTrainer.train(
      input=corpus["train.en"], model_prefix=str(tmp_path / "default"), vocab_size=40,
      model_type="bpe", character_coverage=1.0, minloglevel=2)
  path = str(tmp_path / "default.model")
  sp = sentencepiece.SentencePieceProcessor(model_file=path)
  vocab = SentencePieceVocab(path)
  assert not vocab.aligned and len(vocab) == 41  # 3 specials of the model + PAD
  assert [t for t, i in sorted(vocab.seq2idx.items(), key=lambda x: x[1])][:5] == [
      "<PAD>", "<UNK>", "<S>", "</S>", sp.id_to_piece(3)]
  line = "the cat saw light ж"
  ids, _ = vocab.encode([line])
  idx2seq = {i: t for t, i in vocab.seq2idx.items()}
  model_ids = sp.encode(line)
  assert [idx2seq[i] for i in ids] == [
      "<UNK>" if i == sp.unk_id() else sp.id_to_piece(i) for i in model_ids]
  assert vocab.decode(ids) == sp.decode(model_ids)


def test_bad_model_files(tmp_path):
  with pytest.raises(DataError, match="src_sentencepiece_model .* does not exist"):
    SentencePieceVocab(str(tmp_path / "missing.model"), "src_sentencepiece_model")
  garbage = tmp_path / "garbage.model"
  garbage.write_bytes(b"\x00not a model at all")
  with pytest.raises(DataError, match="is not a SentencePiece model"):
    SentencePieceVocab(str(garbage))


# ------------------------------------------------------------------- the data layer
def _rows(dataset, key):
  result = {}
  for batch in dataset:
    ids, lengths = batch[key]
    for i, example_id in enumerate(batch["id"].numpy()):
      result[int(example_id)] = ids[i, :lengths[i]].numpy().tolist()
  return result


def _raw_layer(corpus, split="train", mode="eval", **params):
  config = {"src_sentencepiece_model": corpus["model"], "tgt_sentencepiece_model": corpus["model"],
            "source_file": corpus[f"{split}.en"], "target_file": corpus[f"{split}.es"]}
  config.update(params)
  return ParallelTextDataLayer(config, mode=mode, batch_size=16)


def test_raw_text_with_model_gives_the_ids_of_encoded_text_with_vocab_file(corpus):
  raw = _raw_layer(corpus, use_start_token=True)
  encoded = ParallelTextDataLayer(
      {"src_vocab_file": corpus["vocab"], "tgt_vocab_file": corpus["vocab"],
       "source_file": corpus["train.sp.en"], "target_file": corpus["train.sp.es"],
       "use_start_token": True}, mode="eval", batch_size=16)
  assert raw.src_seq2idx == encoded.src_seq2idx and raw.tgt_seq2idx == encoded.tgt_seq2idx
  for key in ("source_tensors", "target_tensors"):
    expected = _rows(encoded.build_dataset(), key)
    assert _rows(raw.build_dataset(), key) == expected and len(expected) == 200
  assert all(row[0] == S and row[-1] == EOS
             for row in _rows(raw.build_dataset(), "source_tensors").values())
  assert raw.batches_per_epoch() == encoded.batches_per_epoch()
  assert raw.description.delimiter == "" and encoded.description.delimiter == " "
  # a model and a matching vocabulary file together: the same layer
  both = _raw_layer(corpus, use_start_token=True, src_vocab_file=corpus["vocab"])
  assert _rows(both.build_dataset(), "source_tensors") == _rows(raw.build_dataset(),
                                                                "source_tensors")


def test_side_vocabularies_keep_one_language_of_a_joint_model(corpus, build, tmp_path):
  """--side_vocab writes the pieces one side uses; the layer then gives that side only those
  ids, in the file's order, and the other side's pieces read as <UNK>."""
  en_vocab, es_vocab = str(tmp_path / "spm.en.vocab"), str(tmp_path / "spm.es.vocab")
  build.main(["--model", corpus["model"], "--side_vocab", corpus["train.en"], en_vocab,
              "--side_vocab", corpus["train.es"], es_vocab])
  joint = SentencePieceVocab(corpus["model"])
  en_pieces = [p for line in joint.pieces(_lines(corpus["train.en"])) for p in line]
  entries = [line.split("\t") for line in _lines(en_vocab)]
  assert sorted(t for t, _ in entries) == sorted(set(en_pieces))
  counts = [int(c) for _, c in entries]
  assert counts == sorted(counts, reverse=True) and sum(counts) == len(en_pieces)

  layer = _raw_layer(corpus, src_vocab_file=en_vocab, tgt_vocab_file=es_vocab)
  assert len(layer.src_seq2idx) == len(entries) + 4 < VOCAB_SIZE
  assert [layer.src_idx2seq[i] for i in range(4, 8)] == [t for t, _ in entries[:4]]
  # every English piece keeps its identity: the rows are the joint model's pieces, renamed
  joint_rows = _rows(_raw_layer(corpus).build_dataset(), "source_tensors")
  joint_names = {i: t for t, i in joint.seq2idx.items()}
  for key, row in _rows(layer.build_dataset(), "source_tensors").items():
    assert [layer.src_idx2seq[i] for i in row] == [joint_names[i] for i in joint_rows[key]]
  # a Spanish line read with the English vocabulary: its Spanish-only pieces are <UNK>
  spanish = _lines(corpus["test.es"])
  ids, _ = layer._src_spm.encode(spanish[:1])  # pylint: disable=protected-access
  en_only = set(en_pieces)
  expected = [layer.src_seq2idx[p] if p in en_only else UNK for p in joint.pieces(spanish[:1])[0]]
  assert ids.tolist() == expected and UNK in expected


def test_training_reads_raw_text_and_pads_the_vocabulary(corpus):
  layer = _raw_layer(corpus, mode="train", repeat=False, pad_vocab_to_eight=True,
                     batching="tokens", max_length=12)
  assert layer.description.src_vocab_size == 64  # 60 pieces padded to a multiple of 8
  batch = next(iter(layer.build_dataset()))
  assert batch["source_tensors"][0].dtype.name == "int32"
  assert int(batch["target_tensors"][1].numpy().max()) <= 12


def test_unknown_characters_are_unk_in_both_paths(corpus, tmp_path):
  src = _write(tmp_path / "src.en", ["the cat ж", "ж"])
  pieces = SentencePieceVocab(corpus["model"]).pieces(_lines(src))
  src_sp = _write(tmp_path / "src.sp.en", [" ".join(p) for p in pieces])
  raw = ParallelTextDataLayer({"src_sentencepiece_model": corpus["model"],
                               "tgt_sentencepiece_model": corpus["model"], "source_file": src},
                              mode="infer", batch_size=4)
  encoded = ParallelTextDataLayer({"src_vocab_file": corpus["vocab"],
                                   "tgt_vocab_file": corpus["vocab"], "source_file": src_sp},
                                  mode="infer", batch_size=4)
  rows = _rows(raw.build_dataset(), "source_tensors")
  assert rows == _rows(encoded.build_dataset(), "source_tensors") and UNK in rows[1]


def test_configuration_errors(corpus, tmp_path):
  with pytest.raises(ConfigError, match="src_vocab_file: required .*src_sentencepiece_model"):
    ParallelTextDataLayer({"tgt_sentencepiece_model": corpus["model"],
                           "source_file": corpus["test.en"]}, mode="infer")
  stranger = _write(tmp_path / "other.vocab", _lines(corpus["vocab"])[:3] + ["gato\t5"])
  with pytest.raises(DataError, match="other.vocab: 'gato' is not a piece of SentencePiece "
                     "model .*spm.model"):
    _raw_layer(corpus, tgt_vocab_file=stranger)
  with pytest.raises(DataError, match="tgt_sentencepiece_model .* does not exist"):
    _raw_layer(corpus, tgt_sentencepiece_model=str(tmp_path / "missing.model"))
  blank = _write(tmp_path / "blank.en", ["the cat", "   ", "a mat"])
  with pytest.raises(DataError, match=r"blank.en:2: empty line"):
    _raw_layer(corpus, source_file=blank, target_file=_write(tmp_path / "t.es", ["a"] * 3))


def test_interactive_input_is_raw_text_encoded_by_the_model(corpus):
  layer = _raw_layer(corpus, mode="interactive_infer", target_file=None)
  ids, _ = SentencePieceVocab(corpus["model"]).encode(["the cat sat on a mat"])
  assert _rows(layer.dataset_from_inputs(["the cat sat on a mat"]), "source_tensors") == {
      0: ids.tolist() + [EOS]}


# ------------------------------------------------------------------- raw text in, raw text out
class _Stub:
  def __init__(self, params, **wiring):
    self.params = params


def _model(corpus, mode, **data):
  params = {"src_sentencepiece_model": corpus["model"], "tgt_sentencepiece_model": corpus["model"],
            "source_file": corpus["test.en"], "target_file": corpus["test.es"]}
  params.update(data)
  config = {"data_layer": ParallelTextDataLayer, "encoder": _Stub, "decoder": _Stub,
            "batch_size_per_gpu": 5, "data_layer_params": params}
  return Text2Text(validate_top_level(Text2Text, config), mode=mode)


def test_raw_text_inference_detokenizes_and_bleu_uses_the_raw_references(corpus):
  model = _model(corpus, "infer")
  vocab = SentencePieceVocab(corpus["model"])
  references = _lines(corpus["test.es"])
  results = []
  for batch in model.data_layer.build_dataset():
    ids = batch["id"].numpy()
    # a "decoder" that outputs the reference's pieces, then EOS and padding
    rows = [vocab.encode([references[i]])[0].tolist() + [EOS] for i in ids]
    width = max(map(len, rows)) + 2
    outputs = {"outputs": np.array([r + [PAD] * (width - len(r)) for r in rows])}
    results += model.infer({k: v.numpy() if hasattr(v, "numpy") else v
                            for k, v in batch.items() if k == "id"}, outputs)
  assert sorted(results) == list(enumerate(references))
  assert model.score_inference(results) == {"BLEU": pytest.approx(100.0)}
  # one wrong word: BLEU below 100, computed against the raw lines
  worse = [(i, text.replace(text.split()[0], "gato", 1) if text.split()[0] != "gato"
            else "perro " + text) for i, text in results]
  assert model.score_inference(worse)["BLEU"] < 100.0


def test_eval_references_are_the_raw_target_lines(corpus, tmp_path):
  # a reference word made of characters the model has never seen stays in the reference
  target = _write(tmp_path / "t.es", ["el gato жук", "la luz"])
  source = _write(tmp_path / "s.en", ["the cat", "light"])
  model = _model(corpus, "eval", source_file=source, target_file=target)
  batch = {k: v.numpy() if not isinstance(v, tuple) else tuple(t.numpy() for t in v)
           for k, v in next(iter(model.data_layer.build_dataset())).items()}
  order = batch["id"].tolist()
  assert [model.reference(batch, i) for i in range(2)] == [
      ["el gato жук", "la luz"][j] for j in order]
  # a hypothesis whose first piece has no "▁" is still joined without spaces
  vocab = SentencePieceVocab(corpus["model"])
  pieces = [p for p in vocab.seq2idx if not p.startswith("\u2581") and not p.startswith("<")]
  ids = [vocab.seq2idx[pieces[0]], vocab.seq2idx[pieces[1]], EOS]
  assert model.target_text(ids) == pieces[0] + pieces[1]


def test_special_token_options_match_the_vocab_contract():
  assert SPECIAL_TOKEN_OPTIONS["pad_id"] == PAD and SPECIAL_TOKEN_OPTIONS["eos_id"] == EOS
  assert SPECIAL_TOKEN_OPTIONS["unk_piece"] == "<UNK>" and SPECIAL_TOKEN_OPTIONS["bos_id"] == S


def test_benchmark_writes_missing_side_vocabularies_into_a_peer_folder(corpus, tmp_path):
  """The peers' corpus folder has no spm.{en,es}.vocab: the translation benchmark writes
  them, as --side_vocab does, and leaves existing ones alone."""
  for name in ("spm.model", "train.en", "train.es"):
    (tmp_path / name).write_bytes((corpus["root"] / name).read_bytes())
  (tmp_path / "spm.es.vocab").write_text("kept\n", encoding="utf-8")
  load_script("benchmark_translation").ensure_side_vocabularies(str(tmp_path))
  joint = SentencePieceVocab(corpus["model"])
  en_pieces = {p for line in joint.pieces(_lines(corpus["train.en"])) for p in line}
  assert {line.split("\t")[0] for line in _lines(tmp_path / "spm.en.vocab")} == en_pieces
  assert _lines(tmp_path / "spm.es.vocab") == ["kept"]


def test_speech_csv_transcripts_train_a_model_the_speech_targets_read(build, tmp_path):
  """--input_csv learns from the transcript column (not the paths or sizes), and the model
  is a speech layer's vocab_file: targets encode to its ids and decode back."""
  from open_seq2seq.data.speech2text.targets import TargetEncoder
  rows = _sentences(EN, 120, 3)
  csv_path = tmp_path / "train.csv"
  csv_path.write_text("wav_filename,wav_filesize,transcript\n" + "".join(
      f"clips/{i:04d}.wav,{1000 + i},{text}\n" for i, text in enumerate(rows)), encoding="utf-8")
  build.main(["--input_csv", str(csv_path), "--model_prefix", str(tmp_path / "speech"),
              "--vocab_size", "30", "--model_type", "unigram"])
  assert build.read_transcripts([str(csv_path)]) == rows
  targets = TargetEncoder(str(tmp_path / "speech.model"))
  assert targets.num_symbols == 30 and targets.blank_id == 30
  assert not any("clips" in piece or ".wav" in piece for piece in targets.idx2char.values())
  ids = targets.encode(rows[0])
  assert ids and all(0 < i < 30 for i in ids) and targets.decode(ids) == rows[0]

  (tmp_path / "no_column.csv").write_text("wav_filename,text\na.wav,hello\n")
  with pytest.raises(SystemExit, match="has no 'transcript' column"):
    build.main(["--input_csv", str(tmp_path / "no_column.csv"), "--model_prefix",
                str(tmp_path / "m")])
  with pytest.raises(SystemExit, match="--input_csv .* does not exist"):
    build.main(["--input_csv", str(tmp_path / "nope.csv"), "--model_prefix",
                str(tmp_path / "m")])
  with pytest.raises(SystemExit, match="drop them when --model"):
    build.main(["--model", str(tmp_path / "speech.model"), "--input_csv", str(csv_path)])
