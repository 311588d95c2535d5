"""Speech-synthesis text front end: cleaners, CMUdict, the text encoder."""

import logging

import pytest

from open_seq2seq.data.text2speech.text import (
    ARPABET, CLEANERS, CMUDict, TextEncoder, clean_basic, clean_english, load_tts_vocab)
from open_seq2seq.errors import ConfigError, DataError

VOCAB = "open_seq2seq/test_utils/vocab_tts.txt"

CMUDICT_TEXT = """;;; a comment line: HELLO  X Y Z
HELLO  HH AH0 L OW1
HELLO(1)  HH EH0 L OW1
WORLD  W ER1 L D
don't  D OW1 N T
READ  R IY1 D
READ(1)  R EH1 D
"""


@pytest.fixture
def cmudict_path(tmp_path):
  path = tmp_path / "cmudict.txt"
  path.write_text(CMUDICT_TEXT, encoding="latin-1")
  return str(path)


@pytest.mark.parametrize("text, expected", [
    ("Hello,   World!", "hello, world!"),
    ("I have 3 cats and 12 dogs.", "i have three cats and twelve dogs."),
    ("He came 1st, she 22nd and I 103rd.", "he came first, she twenty second and i one "
     "hundred third."),
    ("It costs $3.50.", "it costs three dollars, fifty cents."),
    ("$1 or $0.05", "one dollar or five cents"),
    ("£2 each", "two pounds each"),
    ("1,000 people", "one thousand people"),
    ("1,995 people", "one thousand nine hundred ninety five people"),
    ("pi is 3.14", "pi is three point one four"),
    ("In 1995 and 2005 and 1900 and 1905 and 2010.", "in nineteen ninety five and two "
     "thousand five and nineteen hundred and nineteen oh five and twenty ten."),
    ("999 or 3000", "nine hundred ninety nine or three thousand"),
    ("up 5% today", "up five percent today"),
    ("Dr. Smith met Mrs. Jones and Mr. Brown on St. James St.", "doctor smith met missus "
     "jones and mister brown on saint james saint"),
    ("Capt. Lt. Sgt. Col. Gen. Maj. Rev. Hon. Drs.", "captain lieutenant sergeant colonel "
     "general major reverend honorable doctors"),
    ("Acme Co. Ltd. and Ft. Knox, Smith Jr., Esq.", "acme company limited and fort knox, "
     "smith junior, esquire"),
    ("Café Crème in Zürich, naïve façade", "cafe creme in zurich, naive facade"),
    ("“Don’t” — Straße", "\"don't\" - strasse"),
    ("mp3 ☃ snow", "mp three snow"),
])
def test_clean_english(text, expected):
  assert clean_english(text) == expected


def test_other_cleaners():
  assert clean_basic("  Hello\n  World 42 ") == "hello world 42"
  assert CLEANERS["none"]("  Hi 42 ") == "  Hi 42 "
  assert set(CLEANERS) == {"english", "basic", "none"}


def test_arpabet_symbol_set():
  assert len(ARPABET) == len(set(ARPABET)) == 84
  assert {"AA", "AA0", "AA1", "AA2", "ZH", "HH", "NG"} <= set(ARPABET)
  assert "HH0" not in ARPABET


def test_cmudict_lookup(cmudict_path):
  d = CMUDict(cmudict_path)
  assert d.lookup("hello") == "HH AH0 L OW1"  # first pronunciation, not the alternate
  assert d.lookup("HeLLo") == "HH AH0 L OW1"
  assert d.lookup("read") == "R IY1 D"
  assert d.lookup("Don't") == "D OW1 N T"
  assert d.lookup("missing") is None
  assert len(d) == 4 and "world" in d
  assert d.lookup(";;;") is None  # the comment line is not an entry


def test_cmudict_latin1_and_errors(tmp_path):
  path = tmp_path / "latin1.dict"
  path.write_bytes("CAF\xc9  K AE0 F EY1\n".encode("latin-1"))
  assert CMUDict(str(path)).lookup("café") == "K AE0 F EY1"
  with pytest.raises(DataError, match="nowhere.dict"):
    CMUDict(str(tmp_path / "nowhere.dict"))
  bad = tmp_path / "bad.dict"
  bad.write_text("HELLO  HH AH0 L OW9\n")
  with pytest.raises(DataError, match=r"bad.dict:1: unknown phoneme 'OW9'"):
    CMUDict(str(bad))
  empty = tmp_path / "empty.dict"
  empty.write_text(";;; only a comment\n")
  with pytest.raises(DataError, match="no entries"):
    CMUDict(str(empty))


def test_vocab_ids_follow_openseq2seq():
  enc = TextEncoder(VOCAB)
  chars = load_tts_vocab(VOCAB)
  assert enc.symbols[:3] == ("<p>", "<s>", "</s>")
  assert (enc.pad_id, enc.bos_id, enc.eos_id) == (0, 1, 2)
  assert enc.symbols[3:] == tuple(chars)
  assert enc.vocab_size == 3 + len(chars) == 94
  assert enc.symbols[3] == " " and enc.encode("a") == [enc.symbols.index("a")]
  for needed in "abcdefghijklmnopqrstuvwxyz !'\"(),-.:;?":
    assert needed in chars


def test_phonemes_follow_characters(cmudict_path):
  enc = TextEncoder(VOCAB, cmudict_path=cmudict_path)
  assert enc.vocab_size == 94 + 84
  assert enc.symbols[94:] == tuple("@" + p for p in ARPABET)
  assert TextEncoder(VOCAB, arpabet=True).symbols == enc.symbols


def test_inline_arpabet_round_trip():
  enc = TextEncoder(VOCAB, arpabet=True)
  ids = enc.encode("Say {HH AH0 L OW1}, {w er1 l d}!")
  first = enc.symbols.index("@HH")
  assert ids[4:8] == [first, enc.symbols.index("@AH0"), enc.symbols.index("@L"),
                      enc.symbols.index("@OW1")]
  assert enc.decode(ids) == "say {HH AH0 L OW1}, {W ER1 L D}!"
  assert enc.encode(enc.decode(ids)) == ids
  assert enc.decode([enc.bos_id] + ids + [enc.eos_id, 0, 0, 10_000]) == enc.decode(ids)


def test_cmudict_words_become_phonemes(cmudict_path):
  enc = TextEncoder(VOCAB, cmudict_path=cmudict_path)
  ids = enc.encode("Hello, big world! Don't read 2.")
  assert enc.decode(ids) == ("{HH AH0 L OW1}, big {W ER1 L D}! {D OW1 N T} {R IY1 D} "
                             "two.")
  assert enc.encode(enc.decode(ids)) == ids
  chars_only = TextEncoder(VOCAB, cmudict_path=cmudict_path, arpabet_prob=0.0)
  assert chars_only.decode(chars_only.encode("Hello world")) == "hello world"
  mixed = TextEncoder(VOCAB, cmudict_path=cmudict_path, arpabet_prob=0.5, seed=0)
  spellings = {mixed.decode(mixed.encode("hello")) for _ in range(40)}
  assert spellings == {"hello", "{HH AH0 L OW1}"}


def test_unknown_symbol_warns_once_and_is_dropped(caplog):
  enc = TextEncoder(VOCAB, cleaner="none")
  with caplog.at_level(logging.WARNING):
    ids = enc.encode("a#b#", where="train.csv:3")
    enc.encode("#")
  assert enc.decode(ids) == "ab"
  warnings = [r.getMessage() for r in caplog.records if "'#'" in r.getMessage()]
  assert len(warnings) == 1 and "train.csv:3" in warnings[0]


def test_encode_errors():
  enc = TextEncoder(VOCAB, arpabet=True)
  with pytest.raises(DataError, match=r"metadata.csv:7: unknown ARPAbet phoneme 'XX9'"):
    enc.encode("a {HH XX9}", where="metadata.csv:7")
  with pytest.raises(DataError, match="unbalanced brace"):
    enc.encode("a {HH AH0")
  with pytest.raises(DataError, match="needs phoneme symbols"):
    TextEncoder(VOCAB).encode("{HH AH0}")


def test_constructor_errors(tmp_path):
  with pytest.raises(DataError, match="missing.txt"):
    TextEncoder(str(tmp_path / "missing.txt"))
  dup = tmp_path / "dup.txt"
  dup.write_text("a\nb\na\n")
  with pytest.raises(DataError, match="'a' appears twice"):
    TextEncoder(str(dup))
  with pytest.raises(ConfigError, match="cleaner 'french'"):
    TextEncoder(VOCAB, cleaner="french")
  with pytest.raises(ConfigError, match="arpabet_prob"):
    TextEncoder(VOCAB, arpabet_prob=1.5)
  with pytest.raises(DataError, match="nowhere.dict"):
    TextEncoder(VOCAB, cmudict_path=str(tmp_path / "nowhere.dict"))
