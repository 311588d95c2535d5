"""scripts/build_lm.py and the Kneser-Ney ARPA writer: KenLM reads the models, they are
normalized, they beat a unigram model on held-out text, and text is normalized like the
speech data layer's transcripts."""

import collections
import math
import os
import random
import stat

import kenlm
import pytest

from open_seq2seq.decoders.ctc_beam_search import read_arpa_vocabulary
from open_seq2seq.utils.ngram_lm import write_arpa
from open_seq2seq.errors import ConfigError, DataError
from tests.helpers.speech import VOCAB, load_script

build_lm = load_script("build_lm")

SUBJECTS = ["the cat", "a dog", "my friend", "the old man", "her sister"]
VERBS = ["sees", "likes", "finds", "eats", "wants"]
OBJECTS = ["the fish", "a bone", "the ball", "some bread", "a letter"]


def sentences(count, seed):
  rng = random.Random(seed)
  return [f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}"
          for _ in range(count)]


def state_after(model, words):
  state = kenlm.State()
  model.BeginSentenceWrite(state)
  for word in words:
    following = kenlm.State()
    model.BaseScore(state, word, following)
    state = following
  return state


@pytest.mark.parametrize("order", [2, 3, 4])
def test_kenlm_reads_it_and_every_context_sums_to_one(tmp_path, capfd, order):
  path = str(tmp_path / "lm.arpa")
  counts = write_arpa(sentences(300, 0), path, order=order)
  capfd.readouterr()
  config = kenlm.Config()
  config.show_progress = False
  model = kenlm.Model(path, config)
  complaints = [line for line in capfd.readouterr().err.splitlines()
                if line.strip() and "faster if you build a binary" not in line]
  assert complaints == []  # KenLM warns about a malformed ARPA file on loading
  assert model.order == order and len(counts) == order
  vocabulary = read_arpa_vocabulary(path)
  assert "cat" in vocabulary and "<s>" not in vocabulary
  for context in ([], ["the"], ["the", "cat"], ["cat", "sees"], ["zebra"], ["the", "zebra"],
                  ["a", "fish"], ["old", "man", "eats"]):
    state = state_after(model, context)
    total = sum(10 ** model.BaseScore(state, w, kenlm.State())
                for w in vocabulary + ["</s>", "<unk>"])
    assert total == pytest.approx(1.0, abs=1e-4), context


def test_held_out_perplexity_beats_a_unigram_model(tmp_path):
  train, held_out = sentences(400, 1), sentences(50, 2)
  path = str(tmp_path / "lm.arpa")
  write_arpa(train, path, order=3)
  model = kenlm.Model(path)
  tokens = sum(len(s.split()) + 1 for s in held_out)  # + </s>
  ngram_ppl = 10 ** (-sum(model.score(s) for s in held_out) / tokens)
  unigrams = collections.Counter(w for s in train for w in s.split() + ["</s>"])
  total = sum(unigrams.values())
  unigram_ppl = math.exp(-sum(math.log((unigrams[w] + 1) / (total + len(unigrams)))
                              for s in held_out for w in s.split() + ["</s>"]) / tokens)
  # the grammar allows ~3 choices per word after the first, a unigram model ~15
  assert ngram_ppl < 0.4 * unigram_ppl, (ngram_ppl, unigram_ppl)


def test_write_arpa_rejects_order_one_and_empty_text(tmp_path):
  with pytest.raises(ConfigError, match="order 2 or more"):
    write_arpa(["a b"], str(tmp_path / "lm.arpa"), order=1)
  with pytest.raises(DataError, match="no words"):
    write_arpa(["", "  "], str(tmp_path / "lm.arpa"), order=3)
  assert not os.path.exists(tmp_path / "lm.arpa")


def test_normalization_follows_the_speech_alphabet():
  from open_seq2seq.data.speech2text.targets import load_char_vocab
  normalize = build_lm.Normalizer(load_char_vocab(VOCAB))
  assert normalize("Hello, World!\tIt's 3 O'Clock -- now.\n") == "hello world it's o'clock now"
  assert normalize("Ünïcode  naïve café") == "ncode nave caf"
  upper = build_lm.Normalizer(["A", "B", " "])  # an alphabet with capitals keeps the case
  assert upper("AbBa b") == "AB"


def test_cli_builds_from_text_and_transcripts(tmp_path, capsys):
  text = tmp_path / "corpus.txt"
  text.write_text("The cat sees the fish.\n\nA dog eats a bone!\n", encoding="utf-8")
  table = tmp_path / "train.csv"
  table.write_text("wav_filename,wav_filesize,transcript\na.wav,10,SIX ONE\nb.wav,10,\n",
                   encoding="utf-8")
  out = tmp_path / "lm" / "3-gram.arpa"
  assert build_lm.main(["--text", str(text), "--csv", str(table), "--order", "3",
                        "--output", str(out)]) == 0
  assert "3 sentences, 12 words" in capsys.readouterr().out
  model = kenlm.Model(str(out))
  assert model.order == 3
  assert set(read_arpa_vocabulary(str(out))) == {"the", "cat", "sees", "fish", "a", "dog",
                                                  "eats", "bone", "six", "one"}
  with pytest.raises(SystemExit, match="no transcript column"):
    bad = tmp_path / "bad.csv"
    bad.write_text("wav_filename,text\na.wav,x\n", encoding="utf-8")
    build_lm.main(["--csv", str(bad), "--output", str(tmp_path / "x.arpa")])
  with pytest.raises(SystemExit, match="does not exist"):
    build_lm.main(["--text", str(tmp_path / "none.txt"), "--output", str(tmp_path / "x.arpa")])


def test_binary_needs_build_binary(tmp_path, monkeypatch):
  text = tmp_path / "corpus.txt"
  text.write_text("six one two\ntwo six\n", encoding="utf-8")
  out = tmp_path / "lm.binary"
  monkeypatch.setenv("PATH", str(tmp_path / "empty"))
  with pytest.raises(SystemExit, match="needs KenLM's build_binary"):
    build_lm.main(["--text", str(text), "--output", str(out), "--binary"])
  fake = tmp_path / "build_binary"  # stands in for KenLM's: copies its input
  fake.write_text('#!/bin/sh\n/bin/grep -q "2-grams" "$1" && /bin/cp "$1" "$2"\n',
                  encoding="utf-8")
  fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
  assert build_lm.main(["--text", str(text), "--output", str(out), "--binary",
                        "--build_binary", str(fake)]) == 0
  assert "\\2-grams:" in out.read_text(encoding="utf-8")
  assert not [p for p in os.listdir(tmp_path) if p.startswith("tmp")]
