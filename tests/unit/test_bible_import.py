"""scripts/import_bible.py (SWORD mod2imp exports -> aligned en-es verses, deduplicated and
split) and the idempotence of scripts/get_bible_en_es.sh, on small fixtures written here in
the ``.imp`` format (``$$$Book C:V`` lines followed by OSIS markup)."""

import os
import subprocess

import pytest

from tests.helpers.speech import load_script

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

EN_IMP = """\
$$$[ Module Heading ]

$$$[ Testament 1 Heading ]
<milestone type="x-importer" subType="x-osis2mod" n="$Rev: 3769 $"/>
$$$Genesis 0:0
<title level="1" type="main">Preface</title> Book introduction text.
$$$Genesis 1:0
<chapter n="1" osisID="Gen.1" sID="Gen.1"/>
$$$Genesis 1:1
<w lemma="strong:H7225">In</w> <w lemma="strong:H0853">the</w> beginning, <w>God</w><note \
placement="foot"><reference type="annotateRef">1:1 </reference>The Hebrew word “Elohim”.</note>\
<w lemma="strong:H1254">created</w> the heavens &amp; the earth.
$$$Genesis 1:2
<div sID="gen26" type="x-p"/><title type="section">The Second Day</title> The earth was \
formless<note placement="foot">a note</note>, and empty.
$$$Genesis 1:3
God said, “Let there be light,”
and there was light.
$$$Genesis 1:4
God saw the light.
$$$Genesis 1:5
Evening and morning.
$$$Psalms 3:1
<title canonical="true" type="psalm">A Psalm by David.</title> <lg sID="g1"/> <l level="1" \
sID="g2"/>Yahweh, how many!<l eID="g2" level="1"/><l level="2" sID="g3"/>Many rise up.\
<l eID="g3" level="2"/>
$$$Song of Solomon 1:2
<speaker>Beloved</speaker> <lg sID="s1"/> Let him kiss me.
$$$Luke 17:36
<note placement="foot">Omitted by most manuscripts.</note>
$$$Tobit 1:1
Only in the English module.
$$$Genesis 1:4
A second entry with the same key is ignored.
"""

ES_IMP = """\
$$$[ Module Heading ]
$$$Genesis 0:0
<title level="1" type="main">Génesis</title>
$$$Genesis 1:1
<w lemma="strong:H7225">EN el principio</w> <w lemma="strong:H1254">crió</w> Dios los \
cielos y la tierra.
$$$Genesis 1:2
Y la tierra estaba desordenada <transChange type="added">y vacía</transChange>.
$$$Genesis 1:3
Y dijo Dios: Sea la luz: y fué la luz.
$$$Genesis 1:4
Y vió Dios la luz.
$$$Genesis 1:5
Y fué la tarde y la mañana.
$$$Psalms 3:1
Salmo de David. ¡OH Jehová, cuánto! muchos se levantan.
$$$Song of Solomon 1:2
¡Oh si él me besara!
$$$Luke 17:36
Dos estarán en el campo.
"""


@pytest.fixture(scope="module")
def bible():
  return load_script("import_bible")


def _lines(path):
  with open(path, encoding="utf-8") as f:
    return f.read().splitlines()


# ------------------------------------------------------------------- markup to text
@pytest.mark.parametrize("markup, text", [
    ('<w lemma="x">In</w> the beginning, <w>God</w><note placement="foot">A note.</note>'
     '<w>created</w>', "In the beginning, God created"),
    ("was formless<note>n</note>, and empty<note>n</note> .", "was formless, and empty."),
    ("“<note>n</note>Let there be<note>n</note> light", "“Let there be light"),
    ('<title type="section">Heading</title> Text', "Text"),
    ('<title canonical="true" type="psalm">A Psalm.</title> Yahweh', "A Psalm. Yahweh"),
    ("<speaker>Beloved</speaker> Let him", "Let him"),
    ('many!<l eID="g2"/><l sID="g3"/>Many<lb/>rise', "many! Many rise"),
    ('y <transChange type="added">vacía</transChange>.', "y vacía."),
    ("A &amp; B &lt;c&gt;\u00a0 d", "A & B <c> d"),
    ('<title>Heading<note>n</note></title><note placement="foot">only a note</note>', ""),
])
def test_clean_verse(bible, markup, text):
  assert bible.clean_verse(markup) == text


def test_parse_imp_keeps_verses_in_order(bible):
  verses = bible.parse_imp(EN_IMP.splitlines(keepends=True))
  assert list(verses) == ["Genesis 1:1", "Genesis 1:2", "Genesis 1:3", "Genesis 1:4",
                          "Genesis 1:5", "Psalms 3:1", "Song of Solomon 1:2", "Luke 17:36",
                          "Tobit 1:1"]
  assert verses["Genesis 1:1"] == "In the beginning, God created the heavens & the earth."
  assert verses["Genesis 1:2"] == "The earth was formless, and empty."
  assert verses["Genesis 1:3"] == "God said, “Let there be light,” and there was light."
  assert verses["Genesis 1:4"] == "God saw the light."  # the first entry of a repeated key
  assert verses["Psalms 3:1"] == "A Psalm by David. Yahweh, how many! Many rise up."
  assert verses["Song of Solomon 1:2"] == "Let him kiss me."
  assert verses["Luke 17:36"] == ""


def test_align_keeps_common_non_empty_short_verses(bible):
  en = bible.parse_imp(EN_IMP.splitlines())
  es = bible.parse_imp(ES_IMP.splitlines())
  pairs = bible.align(en, es)
  keys = [key for key, _, _ in pairs]
  # Luke 17:36 is empty in English, Tobit is not in the Spanish module
  assert keys == ["Genesis 1:1", "Genesis 1:2", "Genesis 1:3", "Genesis 1:4", "Genesis 1:5",
                  "Psalms 3:1", "Song of Solomon 1:2"]
  assert pairs[0] == ("Genesis 1:1", "In the beginning, God created the heavens & the earth.",
                      "EN el principio crió Dios los cielos y la tierra.")
  short = bible.align(en, es, max_words=5)
  assert [key for key, _, _ in short] == ["Genesis 1:4", "Song of Solomon 1:2"]


def test_deduplicate_drops_repeated_pairs_only(bible):
  pairs = [("A 1:1", "He spoke", "Habló"), ("A 1:2", "He spoke", "Y habló"),
           ("A 1:3", "He spoke", "Habló"), ("A 1:4", "Other", "Otro"),
           ("A 1:5", "Other", "Otro")]
  assert bible.deduplicate(pairs) == [pairs[0], pairs[1], pairs[3]]


def test_split_is_deterministic_disjoint_and_keeps_order(bible):
  pairs = [(f"B 1:{i}", f"en {i}", f"es {i}") for i in range(1, 101)]
  first = bible.split(pairs, test_size=10, dev_size=15, seed=7)
  assert first == bible.split(list(pairs), test_size=10, dev_size=15, seed=7)
  assert [len(first[name]) for name in ("train", "dev", "test")] == [75, 15, 10]
  keys = [set(k for k, _, _ in first[name]) for name in ("train", "dev", "test")]
  assert set.union(*keys) == {k for k, _, _ in pairs} and sum(map(len, keys)) == 100
  for chosen in first.values():  # each split in the original order
    assert chosen == sorted(chosen, key=pairs.index)
  assert bible.split(pairs, 10, 15, seed=8)["test"] != first["test"]
  with pytest.raises(SystemExit, match="cannot give"):
    bible.split(pairs[:20], test_size=10, dev_size=10, seed=7)


def test_main_writes_aligned_splits(bible, tmp_path):
  (tmp_path / "en.imp").write_text(EN_IMP, encoding="utf-8")
  (tmp_path / "es.imp").write_text(ES_IMP, encoding="utf-8")
  out = tmp_path / "out"
  args = ["--en_imp", str(tmp_path / "en.imp"), "--es_imp", str(tmp_path / "es.imp"),
          "--out", str(out), "--test_size", "2", "--dev_size", "1"]
  assert bible.main(args) == 0
  en = bible.parse_imp(EN_IMP.splitlines())
  es = bible.parse_imp(ES_IMP.splitlines())
  seen = set()
  for name, size in (("train", 4), ("dev", 1), ("test", 2)):
    keys = _lines(out / f"{name}.keys")
    assert len(keys) == size and not seen & set(keys)
    seen |= set(keys)
    assert _lines(out / f"{name}.en") == [en[k] for k in keys]
    assert _lines(out / f"{name}.es") == [es[k] for k in keys]
  before = {name: _lines(out / name) for name in os.listdir(out)}
  bible.main(args)  # the same inputs give the same files
  assert {name: _lines(out / name) for name in os.listdir(out)} == before
  assert not [name for name in os.listdir(out) if name.endswith(".tmp")]


def test_get_script_skips_a_complete_corpus(tmp_path):
  names = ["spm.model", "spm.vocab", "spm.en.vocab", "spm.es.vocab"] + [
      f"{split}.{ext}" for split in ("train", "dev", "test")
      for ext in ("en", "es", "keys", "sp.en", "sp.es")]
  for name in names:
    (tmp_path / name).write_text("kept\n", encoding="utf-8")
  stubs = tmp_path.parent / "stubs"  # every tool that does work fails if it is called
  stubs.mkdir(exist_ok=True)
  for tool in ("apt-get", "dpkg", "sudo", "mod2imp", "python", "python3"):
    (stubs / tool).write_text("#!/bin/sh\necho called >&2\nexit 99\n")
    (stubs / tool).chmod(0o755)
  script = os.path.join(ROOT, "scripts", "get_bible_en_es.sh")
  env = dict(os.environ, PATH=f"{stubs}:{os.environ['PATH']}")
  env.pop("PYTHON", None)
  done = subprocess.run(["bash", script, str(tmp_path)], capture_output=True, text=True,
                        env=env, check=False)
  assert done.returncode == 0 and "already complete" in done.stdout, done.stderr
  assert all(_lines(tmp_path / name) == ["kept"] for name in names)
  assert not (tmp_path / ".gitignore").exists()
