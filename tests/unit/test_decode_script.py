"""scripts/decode.py: alpha/beta/beam grid over infer's logits against reference transcripts;
logits come from an .npz that cannot run code (a pickle only with --allow_pickle)."""

import csv
import pickle

import numpy as np
import pytest

from open_seq2seq.data.speech2text.targets import TargetEncoder
from open_seq2seq.outputs import NpzArrays
from open_seq2seq.utils.ngram_lm import write_arpa
from tests.helpers.speech import VOCAB, load_script

decode = load_script("decode")


def spell(words, targets, ambiguous=None):
  """Logits spelling ``words`` (a blank frame after each symbol); ``ambiguous`` maps a
  character to an acoustically more likely impostor (0.6 vs 0.4)."""
  rows = []
  for char in " ".join(words):
    row = np.full(targets.vocab_size, 1e-4)
    if ambiguous and char in ambiguous:
      row[targets.char2idx[ambiguous[char]]], row[targets.char2idx[char]] = 0.6, 0.4
    else:
      row[targets.char2idx[char]] = 0.9
    blank = np.full(targets.vocab_size, 1e-4)
    blank[-1] = 1.0
    rows += [row, blank]
  rows = np.array(rows)
  return np.log(rows / rows.sum(-1, keepdims=True)).astype(np.float32)


@pytest.fixture()
def dataset(tmp_path):
  targets = TargetEncoder(VOCAB)
  transcripts = {"a.wav": "six one", "dir/b.wav": "Two Six", "c.wav": "nine"}
  logits = {"a.wav": spell(["six", "one"], targets, {"i": "e"}),  # greedy: "sex one"
            "dir/b.wav": spell(["two", "six"], targets, {"i": "e"}),
            "c.wav": spell(["nine"], targets),
            "unused.wav": spell(["one"], targets)}
  NpzArrays(logits, str(tmp_path / "logits.npz")).write(str(tmp_path / "logits.npz"))
  with open(tmp_path / "logits.pickle", "wb") as f:  # OpenSeq2Seq's format
    pickle.dump(logits, f)
  with open(tmp_path / "labels.csv", "w", encoding="utf-8", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["wav_filename", "wav_filesize", "transcript"])
    for name, text in transcripts.items():
      writer.writerow([name, 100, text])
  lm = str(tmp_path / "lm.arpa")
  write_arpa(["six one two", "two six", "one six six", "nine six one", "six", "nine"], lm,
             order=3)
  return tmp_path, lm


def test_parse_values():
  assert decode.parse_values("0.5,1,2") == [0.5, 1.0, 2.0]
  assert decode.parse_values("0:1:0.25") == [0.0, 0.25, 0.5, 0.75, 1.0]
  assert decode.parse_values("0:0.3:0.1") == [0.0, 0.1, 0.2, 0.3]  # stop included
  assert decode.parse_values("64,128", int) == [64, 128]
  assert decode.parse_values("8:32:8", int) == [8, 16, 24, 32]
  for bad in ("a,b", "1:2", "1:2:0", ""):
    with pytest.raises(SystemExit, match="error:"):
      decode.parse_values(bad)


def test_grid_table_best_pair_and_beams(dataset, capsys):
  tmp_path, lm = dataset
  dump = tmp_path / "beams.csv"
  assert decode.main(["--logits", str(tmp_path / "logits.npz"),
                      "--labels", str(tmp_path / "labels.csv"), "--lm", lm,
                      "--alpha", "0,1.5", "--beta", "0:1:1", "--beam_width", "4,16",
                      "--unk_score_offset", "0", "--num_workers", "2",
                      "--dump_all_beams_to", str(dump), "--top_n", "3"]) == 0
  out = capsys.readouterr().out.splitlines()
  assert out[0] == "3 utterances; greedy (no LM): WER 0.4000, CER 0.1111"
  rows = [line.split() for line in out[2:10]]
  assert len(rows) == 8 and {(r[0], r[1], r[2]) for r in rows} == {
      (b, a, c) for b in ("4", "16") for a in ("0.000", "1.500") for c in ("0.000", "1.000")}
  wer = {(int(r[0]), float(r[1]), float(r[2])): float(r[3]) for r in rows}
  assert wer[(16, 0.0, 0.0)] == pytest.approx(0.4)  # acoustics alone: "sex" twice
  assert wer[(16, 1.5, 0.0)] == 0.0  # the LM corrects both
  assert out[10] == "best: alpha=1.5 beta=0 beam_width=4: WER 0.0000, CER 0.0000"
  with open(dump, encoding="utf-8", newline="") as f:
    beams = list(csv.DictReader(f))
  first = [b for b in beams if b["wav_filename"] == "a.wav"]
  # the "i"/"e" frame is the uncertain one: its two readings lead (nothing is pruned inside
  # the beam, so less likely readings follow, up to --top_n)
  assert [b["rank"] for b in first] == [str(i) for i in range(1, len(first) + 1)]
  assert 2 <= len(first) <= 3 and [b["transcript"] for b in first][:2] == ["six one", "sex one"]
  scores = [float(b["score"]) for b in first]
  assert scores == sorted(scores, reverse=True)
  assert {b["wav_filename"] for b in beams} == {"a.wav", "dir/b.wav", "c.wav"}


def test_rows_without_logits_and_wrong_vocabulary_are_errors(dataset, tmp_path_factory):
  tmp_path, lm = dataset
  labels = tmp_path / "more.csv"
  labels.write_text("wav_filename,wav_filesize,transcript\na.wav,1,six one\nz.wav,1,x\n",
                    encoding="utf-8")
  with pytest.raises(SystemExit, match=r"1 of 2 rows .* have no logits .*first: z.wav"):
    decode.main(["--logits", str(tmp_path / "logits.npz"), "--labels", str(labels),
                 "--lm", lm])
  vocab = tmp_path_factory.mktemp("vocab") / "vocab.txt"
  vocab.write_text(" \na\nb\n", encoding="utf-8")
  with pytest.raises(SystemExit, match="4 classes .*pass the model's vocab"):
    decode.main(["--logits", str(tmp_path / "logits.npz"),
                 "--labels", str(tmp_path / "labels.csv"), "--lm", lm, "--vocab", str(vocab)])
  with pytest.raises(SystemExit, match="does not exist"):
    decode.main(["--logits", str(tmp_path / "logits.npz"),
                 "--labels", str(tmp_path / "labels.csv"), "--lm", str(tmp_path / "no.arpa")])


class _RunsCode:  # what a crafted pickle does: call anything while it is loaded
  def __init__(self, marker):
    self.marker = marker

  def __reduce__(self):
    return (open, (self.marker, "w"))


def test_a_pickle_is_read_only_with_allow_pickle(dataset, tmp_path_factory, capsys):
  tmp_path, lm = dataset
  crafted = tmp_path_factory.mktemp("crafted")
  marker = crafted / "code-ran"
  with open(crafted / "logits.pickle", "wb") as f:
    pickle.dump({"a.wav": _RunsCode(str(marker))}, f)
  common = ["--labels", str(tmp_path / "labels.csv"), "--lm", lm, "--beam_width", "4",
            "--num_workers", "1"]
  assert decode.run(["--logits", str(crafted / "logits.pickle"), *common]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "is a pickle" in err and "--allow_pickle" in err, err
  assert not marker.exists()  # refused before anything was unpickled
  # with the flag, OpenSeq2Seq's pickle of {wav_filename: logits} is decoded as the .npz is
  assert decode.run(["--logits", str(tmp_path / "logits.pickle"), "--allow_pickle",
                     *common]) == 0
  from_pickle = capsys.readouterr().out
  assert decode.run(["--logits", str(tmp_path / "logits.npz"), *common]) == 0
  assert capsys.readouterr().out.splitlines()[0] == from_pickle.splitlines()[0]


@pytest.mark.parametrize("content,message", [
    (b"wav_filename,logits\n", "is not an .npz of logits; run.py --mode=infer writes it"),
    ("truncated", "not a readable .npz"),
    ("other arrays", "an .npz without lengths, names, values"),
])
def test_logits_that_are_not_infers_npz_are_one_line(dataset, content, message, capsys):
  tmp_path, lm = dataset
  path = tmp_path / "other.npz"
  if content == "truncated":
    path.write_bytes((tmp_path / "logits.npz").read_bytes()[:200])
  elif content == "other arrays":
    np.savez(path, weights=np.zeros(3))
  else:
    path.write_bytes(content)
  assert decode.run(["--logits", str(path), "--labels", str(tmp_path / "labels.csv"),
                     "--lm", lm]) == 2
  err = capsys.readouterr().err
  assert err.startswith(f"error: --logits {path}") and message in err, err
  assert err.count("\n") == 1
