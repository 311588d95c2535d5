"""scripts/bench_ctranslate2.py without a model: its BLEU column (sacreBLEU on detokenized
outputs), its table and its one-line errors (the engines themselves run in
tests/e2e/test_ctranslate2_export.py)."""

import pytest

from tests.helpers.speech import load_script

REFERENCES = ["En el principio creó Dios los cielos y la tierra.",
              "Y la tierra estaba desordenada y vacía, y las tinieblas estaban sobre la faz del "
              "abismo."]


@pytest.fixture(scope="module")
def bench():
  return load_script("bench_ctranslate2")


def test_bleu_scores_detokenized_text_with_its_signature(bench):
  score, signature = bench.bleu(REFERENCES, REFERENCES)
  assert score == pytest.approx(100.0)
  assert "nrefs:1" in signature and "tok:13a" in signature
  # the outputs are detokenized text: sacreBLEU splits the punctuation itself, so text
  # tokenized once more (spaces before "," and ".") still matches
  spaced = [line.replace(",", " ,").replace(".", " .") for line in REFERENCES]
  assert bench.bleu(spaced, REFERENCES)[0] == pytest.approx(100.0)
  worse = ["En el principio creó Dios la tierra.", REFERENCES[1]]
  assert 0 < bench.bleu(worse, REFERENCES)[0] < 100
  assert bench.bleu(["nada", "nada"], REFERENCES)[0] == pytest.approx(0.0)


def test_bleu_needs_one_reference_per_output(bench):
  with pytest.raises(SystemExit, match="^error: 1 outputs for 2 references$"):
    bench.bleu(REFERENCES[:1], REFERENCES)


def test_table_has_a_bleu_column_with_references(bench):
  worse = ["En el principio creó Dios la tierra.", REFERENCES[1]]
  rows = [("run.py --mode=infer", 10.0, REFERENCES), ("CTranslate2 int8", 25.25, worse)]
  plain = bench.table(rows)
  assert plain == ["| engine | sentences/s | same output as --mode=infer |", "|---|---:|---:|",
                   "| run.py --mode=infer | 10.0 | 2/2 |", "| CTranslate2 int8 | 25.2 | 1/2 |"]
  scored = bench.table(rows, REFERENCES, "test.es")
  assert scored[0].startswith("BLEU: sacreBLEU nrefs:1|") and scored[0].endswith(" against test.es")
  assert scored[1].endswith("| BLEU |") and scored[2] == "|---|---:|---:|---:|"
  assert scored[3] == "| run.py --mode=infer | 10.0 | 2/2 | 100.00 |"
  worse_bleu = bench.bleu(worse, REFERENCES)[0]
  assert scored[4] == f"| CTranslate2 int8 | 25.2 | 1/2 | {worse_bleu:.2f} |"


def test_engines_are_checked_before_any_work(bench, capsys):
  args = bench.parse_args(["--config_file=c", "--logdir=l", "--source=s",
                           "--ct2", "float32, int8_float32"])
  assert args.ct2 == ["float32", "int8_float32"]
  assert bench.CT2_ENGINES["int8_float32"] == ("int8", "int8_float32")
  with pytest.raises(SystemExit):
    bench.parse_args(["--config_file=c", "--logdir=l", "--source=s", "--ct2=int4"])
  assert "--ct2: int4; choose from float32, int8, int8_float32" in capsys.readouterr().err


def test_reference_files_are_one_line_errors(bench, tmp_path):
  source = tmp_path / "test.en"
  source.write_text("".join(f"verse {i}\n" for i in range(40)), encoding="utf-8")
  common = ["--config_file=c", "--logdir=l", f"--source={source}"]
  missing = tmp_path / "nope.es"
  with pytest.raises(SystemExit, match=f"^error: --reference {missing}: No such file"):
    bench.main(common + [f"--reference={missing}"])
  short = tmp_path / "test.es"
  short.write_text("uno\ndos\n", encoding="utf-8")
  with pytest.raises(SystemExit, match=f"^error: --reference {short}: 2 lines for 40 of "
                                       f"--source$"):
    bench.main(common + [f"--reference={short}"])
