"""scripts/import_fashion_mnist.py: IDX files -> CIFAR-10 binary layout CifarDataLayer reads."""

import gzip
import struct

import numpy as np
import pytest

from open_seq2seq.data import CifarDataLayer
from tests.helpers.speech import load_script


def write_idx(path, array):
  header = struct.pack(">I", 0x0800 | array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
  with gzip.open(path, "wb") as f:
    f.write(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def idx_dir(tmp_path):
  rng = np.random.default_rng(0)
  for prefix, n in (("train", 10), ("t10k", 4)):
    write_idx(tmp_path / f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28)))
    write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte.gz", np.arange(n) % 10)
  return tmp_path


def test_import_writes_cifar_records_that_crop_back_to_the_originals(idx_dir, tmp_path):
  importer = load_script("import_fashion_mnist")
  out = tmp_path / "cifar"
  assert importer.convert(str(idx_dir), str(out)) == {"train": 10, "test": 4}
  assert sorted(p.name for p in out.iterdir()) == [
      "batches.meta.txt", "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
      "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"]
  records = np.frombuffer((out / "test_batch.bin").read_bytes(), np.uint8).reshape(4, 3073)
  originals = importer.read_idx(str(idx_dir), "t10k-images-idx3-ubyte")
  planes = records[:, 1:].reshape(4, 3, 32, 32)
  np.testing.assert_array_equal(records[:, 0], np.arange(4))
  for channel in range(3):  # grey copied into R, G and B
    np.testing.assert_array_equal(planes[:, channel, 2:30, 2:30], originals)
  assert planes[:, :, :2].max() == 0 and planes[:, :, 30:].max() == 0  # black padding

  layer = CifarDataLayer({"data_dir": str(out)}, mode="eval", batch_size=4)
  assert layer.description.class_names[0] == "T-shirt/top"
  assert layer.get_size_in_samples() == 4
  train = CifarDataLayer({"data_dir": str(out)}, mode="train")
  assert train.get_size_in_samples() == 10 and len(train.files) == 5


def test_missing_or_broken_idx_files(idx_dir, tmp_path):
  importer = load_script("import_fashion_mnist")
  with pytest.raises(SystemExit, match="get_fashion_mnist.sh"):
    importer.convert(str(tmp_path / "nowhere"), str(tmp_path / "out"))
  with gzip.open(idx_dir / "t10k-labels-idx1-ubyte.gz", "wb") as f:
    f.write(struct.pack(">I", 0x0D01) + b"\0" * 8)
  with pytest.raises(SystemExit, match="not an IDX file of unsigned bytes"):
    importer.convert(str(idx_dir), str(tmp_path / "out"))
