"""scripts/create_toy_data.py: the toy reversal task."""

import importlib.util
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "scripts", "create_toy_data.py")
GREEK = [chr(c) for c in range(0x03B1, 0x03BB)]  # α..κ


@pytest.fixture(scope="module")
def toy():
  spec = importlib.util.spec_from_file_location("create_toy_data", SCRIPT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def read(path):
  with open(path, encoding="utf-8") as f:
    return f.read().split("\n")[:-1]


def test_sizes_layout_and_reversal(toy, tmp_path):
  toy.create_data(str(tmp_path), train_size=40, dev_size=7, test_size=9, seed=3)
  for split, size in (("train", 40), ("dev", 7), ("test", 9)):
    sources = read(tmp_path / split / "source.txt")
    targets = read(tmp_path / split / "target.txt")
    assert len(sources) == len(targets) == size
    for source, target in zip(sources, targets):
      tokens = source.split(" ")
      assert 5 <= len(tokens) <= 50
      assert set(tokens) <= set(GREEK)
      assert target.split(" ") == tokens[::-1]
  vocab = read(tmp_path / "vocab" / "source.txt")
  assert vocab == read(tmp_path / "vocab" / "target.txt")
  assert [line.split("\t")[0] for line in vocab] == GREEK
  total = sum(len(line.split()) for split in ("train", "dev", "test")
              for line in read(tmp_path / split / "source.txt"))
  assert sum(int(line.split("\t")[1]) for line in vocab) == total
  assert not [n for n in os.listdir(tmp_path / "train") if ".tmp" in n]


def test_deterministic_for_a_seed(toy, tmp_path):
  for name, seed in (("a", 5), ("b", 5), ("c", 6)):
    toy.create_data(str(tmp_path / name), train_size=20, dev_size=2, test_size=2, seed=seed)
  a = read(tmp_path / "a" / "train" / "source.txt")
  assert a == read(tmp_path / "b" / "train" / "source.txt")
  assert a != read(tmp_path / "c" / "train" / "source.txt")


def test_default_sizes(toy, tmp_path):
  sizes = toy.create_data(str(tmp_path))
  assert sizes == {"train": 10000, "dev": 1000, "test": 2000}
  assert len(read(tmp_path / "test" / "target.txt")) == 2000


def test_command_line_and_data_layer_reads_it(tmp_path):
  out = tmp_path / "toy"
  result = subprocess.run([sys.executable, SCRIPT, "--data_dir", str(out), "--seed", "1",
                           "--train_size", "12", "--dev_size", "3", "--test_size", "4"],
                          capture_output=True, text=True, check=True)
  assert "12 train" in result.stdout
  from open_seq2seq.data.text2text.text2text import ParallelTextDataLayer
  params = {"src_vocab_file": str(out / "vocab" / "source.txt"),
            "tgt_vocab_file": str(out / "vocab" / "target.txt"),
            "source_file": str(out / "dev" / "source.txt"),
            "target_file": str(out / "dev" / "target.txt")}
  dl = ParallelTextDataLayer(params, mode="eval", batch_size=8)
  assert dl.description.src_vocab_size == 14 and dl.get_size_in_samples() == 3
  bad = subprocess.run([sys.executable, SCRIPT, "--data_dir", str(out), "--dev_size", "0"],
                       capture_output=True, text=True)
  assert bad.returncode != 0 and "dev_size" in bad.stderr


def test_max_length_bounds_the_sequences(toy, tmp_path):
  toy.create_data(str(tmp_path), train_size=200, dev_size=2, test_size=2, seed=0, max_length=8)
  lengths = [len(line.split(" ")) for line in read(tmp_path / "train" / "source.txt")]
  assert min(lengths) >= 5 and max(lengths) == 8
  bad = subprocess.run([sys.executable, SCRIPT, "--data_dir", str(tmp_path / "x"),
                        "--max_length", "4"], capture_output=True, text=True)
  assert bad.returncode != 0 and "--max_length must be in [5, 50]" in bad.stderr
