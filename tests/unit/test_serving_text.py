"""In-graph text <-> ids of exported models (open_seq2seq/serving/text.py) equal the Python
tokenization of ParallelTextDataLayer and the detokenization of Text2Text."""

import io
import random

import numpy as np
import pytest
import sentencepiece
import tensorflow as tf

from open_seq2seq.data.text2text.sentencepiece_model import (SPECIAL_TOKEN_OPTIONS,
                                                             SentencePieceVocab)
from open_seq2seq.data.text2text.corpus_ids import split_tokens
from open_seq2seq.data.text2text.tokenization import TextTokenization
from open_seq2seq.data.text2text.vocab import special_vocab
from open_seq2seq.models.text2text import ids_to_text
from open_seq2seq.serving.text import IdsToText, TextToIds

PAD, UNK, S, EOS = 0, 1, 2, 3
WORDS = "the cat dog sat ran on a mat far away and saw light é ñ".split()
DETOKENIZED = ["the cat sat on a mat", "far away and saw light"]


def _vocab(tokens):
  seq2idx = special_vocab()
  for token in tokens:
    seq2idx.setdefault(token, len(seq2idx))
  return seq2idx


def _python_ids(line, seq2idx, delimiter, start_token):
  ids = [seq2idx.get(t, UNK) for t in split_tokens(line, delimiter)]
  return ([S] if start_token else []) + ids + [EOS]


def _graph_ids(tokenizer, lines):
  ids, lengths = tokenizer(tf.constant(lines))
  return [list(row[:n]) for row, n in zip(ids.numpy(), lengths.numpy())], ids.numpy()


@pytest.mark.parametrize("delimiter,start_token", [(" ", False), (" ", True), ("", False),
                                                    (",", False)])
def test_vocab_tokenization_equals_the_data_layers(delimiter, start_token):
  seq2idx = _vocab(WORDS + list("thecatdog"))
  sep = delimiter if delimiter else ""
  lines = [sep.join(["the", "cat", "unknownword", "é"]) if sep else "thecat dogx",
           "  " + sep.join(["a", "mat"]) + "  ", sep.join(["ñ"]) or "ñ"]
  if delimiter == " ":
    lines.append("far\t away   and\nsaw")  # any run of whitespace separates
  if delimiter == ",":
    lines.append("a,,mat,")  # empty tokens are dropped
  tokenizer = TextToIds(TextTokenization(seq2idx, delimiter, start_token=start_token))
  got, padded = _graph_ids(tokenizer, lines)
  assert got == [_python_ids(line, seq2idx, delimiter, start_token) for line in lines]
  longest = max(map(len, got))
  assert padded.shape == (len(lines), longest) and padded.dtype == np.int32
  assert all((row[len(ids):] == PAD).all() for row, ids in zip(padded, got))


@pytest.fixture(scope="module", params=["aligned", "remapped", "restricted"])
def spm(request, tmp_path_factory):
  """A small BPE model trained with this project's special ids, or with SentencePiece's
  defaults (ids remapped by SentencePieceVocab), or restricted to a vocabulary file of the
  pieces two sentences use, in reverse order (a per-side vocabulary: the rest are <UNK>)."""
  rng = random.Random(0)
  text = "\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))
                   for _ in range(300))
  options = SPECIAL_TOKEN_OPTIONS if request.param == "aligned" else {}
  model = io.BytesIO()
  sentencepiece.SentencePieceTrainer.train(
      sentence_iterator=iter(text.splitlines()), model_writer=model, vocab_size=48,
      model_type="bpe", character_coverage=1.0, **options)
  path = tmp_path_factory.mktemp("spm") / "m.model"
  path.write_bytes(model.getvalue())
  vocab = SentencePieceVocab(str(path))
  if request.param == "restricted":
    used = [p for line in DETOKENIZED for p in vocab.pieces([line])[0]]
    vocab.restrict_to(_vocab(sorted(set(used), key=used.index)[::-1]), "side.vocab")
    assert not vocab.aligned and len(vocab) < 48
  return vocab


def test_sentencepiece_tokenization_equals_the_data_layers(spm):
  lines = ["the cat sat on a mat", "far away  and saw light", "ñ é zzz the", "ñ"]
  tokenizer = TextToIds(TextTokenization(
      spm.seq2idx, sentencepiece_model=spm.proto, sentencepiece_ids=spm.model_to_ids))
  got, _ = _graph_ids(tokenizer, lines)
  flat, counts = spm.encode(lines)
  rows = np.split(flat, np.cumsum(counts)[:-1])
  assert got == [list(row) + [EOS] for row in rows]
  assert (UNK in got[3]) == (len(spm) < 48)  # "ñ" is outside the restricted vocabulary


def test_sentencepiece_detokenization_equals_ids_to_text(spm):
  idx2seq = {i: t for t, i in spm.seq2idx.items()}
  lines = DETOKENIZED
  flat, counts = spm.encode(lines)
  rows = [list(r) + [EOS, PAD] for r in np.split(flat, np.cumsum(counts)[:-1])]
  width = max(map(len, rows))
  ids = np.array([r + [PAD] * (width - len(r)) for r in rows], np.int32)
  got = [t.decode() for t in IdsToText(idx2seq)(tf.constant(ids)).numpy()]
  assert got == [ids_to_text(r, idx2seq) for r in ids] == lines


@pytest.mark.parametrize("delimiter", [" ", ""])
def test_detokenization_equals_ids_to_text(delimiter):
  tokens = ["a", "b", "c@@", "d", "ab@@", "c@@", "\u2581x", "y", "é"]
  seq2idx = _vocab(tokens)
  idx2seq = {i: t for t, i in seq2idx.items()}
  a, b, c_, d, ab_, c2_, x, y, e = (seq2idx[t] for t in tokens)
  rows = [[a, b, EOS, a, PAD],  # cut at EOS
          [S, a, PAD, b, EOS],  # <S> and PAD skipped
          [c_, d, ab_, c2_, a],  # @@ pieces merged, one at each end
          [x, y, a, EOS, EOS],  # a SentencePiece piece: joined without delimiter
          [a, 999, e, -1, EOS],  # ids outside the vocabulary print as <UNK>
          [EOS, a, b, c_, d],  # nothing before EOS
          [ab_, EOS, PAD, PAD, PAD]]  # a trailing @@ piece loses its joiner
  ids = np.array(rows, np.int32)
  got = [t.decode() for t in IdsToText(idx2seq, delimiter)(tf.constant(ids)).numpy()]
  assert got == [ids_to_text(r, idx2seq, delimiter) for r in rows]
  assert got[0] == delimiter.join(["a", "b"]) and got[5] == ""


def test_tables_survive_a_saved_model_round_trip(tmp_path):
  seq2idx = _vocab(WORDS)
  idx2seq = {i: t for t, i in seq2idx.items()}
  module = tf.Module()
  module.encode = TextToIds(TextTokenization(seq2idx))
  module.decode = IdsToText(idx2seq)
  module.round_trip = tf.function(
      lambda lines: module.decode(module.encode(lines)[0]),
      input_signature=[tf.TensorSpec([None], tf.string)])
  tf.saved_model.save(module, str(tmp_path / "m"))
  loaded = tf.saved_model.load(str(tmp_path / "m"))
  out = loaded.round_trip(tf.constant(["the cat  sat", "a nonword mat"])).numpy()
  assert [t.decode() for t in out] == ["the cat sat", "a <UNK> mat"]
