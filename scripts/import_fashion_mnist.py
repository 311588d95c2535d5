#!/usr/bin/env python
"""Converts Fashion-MNIST (IDX files) into the CIFAR-10 binary layout CifarDataLayer reads.

Each 28x28 grey image is padded with black to 32x32 and copied into the three colour planes,
so a record is exactly a CIFAR-10 one (label byte + 3 x 1024 bytes); 60,000 training images go
to ``data_batch_1.bin`` ... ``data_batch_5.bin`` (12,000 each), 10,000 test images to
``test_batch.bin``, class names to ``batches.meta.txt``. A 28-pixel centre crop (the
layer's default ``image_size``) gives back the original image.

    python scripts/import_fashion_mnist.py --idx_dir=/usr/share/datasets/fashion-mnist \
        --output_dir=data/fashion_mnist/cifar

The IDX files come from Debian's ``dataset-fashion-mnist`` (MIT licence); see
scripts/get_fashion_mnist.sh.
"""

from __future__ import annotations

import argparse
import gzip
import os
import struct
import sys

import numpy as np

# the package beside scripts/ (the output checks), also without pip install -e
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CLASS_NAMES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot")
SPLITS = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
          "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
TRAIN_FILES = 5
SIDE, PAD = 32, 2


def read_idx(directory: str, name: str) -> np.ndarray:
  """An IDX file (``name`` or ``name.gz``) as a uint8 array of its declared shape."""
  path = os.path.join(directory, name)
  if not os.path.isfile(path) and os.path.isfile(path + ".gz"):
    path += ".gz"
  if not os.path.isfile(path):
    raise SystemExit(f"error: {path}(.gz) not found; run scripts/get_fashion_mnist.sh")
  opener = gzip.open if path.endswith(".gz") else open
  with opener(path, "rb") as f:
    data = f.read()
  magic, = struct.unpack(">I", data[:4])
  if magic >> 8 != 0x08:  # 0x0008XX: unsigned bytes, XX dimensions
    raise SystemExit(f"error: {path} is not an IDX file of unsigned bytes")
  ndim = magic & 0xFF
  shape = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
  values = np.frombuffer(data, np.uint8, offset=4 + 4 * ndim)
  if values.size != int(np.prod(shape)):
    raise SystemExit(f"error: {path} holds {values.size} bytes for shape {shape}")
  return values.reshape(shape)


def cifar_records(images: np.ndarray, labels: np.ndarray) -> np.ndarray:
  """[N, 3073] uint8 CIFAR-10 records of grey [N, 28, 28] images padded to 32x32."""
  padded = np.zeros([len(images), SIDE, SIDE], np.uint8)
  padded[:, PAD:PAD + images.shape[1], PAD:PAD + images.shape[2]] = images
  planes = np.repeat(padded.reshape(len(images), 1, SIDE * SIDE), 3, axis=1)
  return np.concatenate([labels.reshape(-1, 1), planes.reshape(len(images), -1)], axis=1)


def write_atomic(path: str, data: bytes) -> None:
  tmp = path + ".tmp"
  with open(tmp, "wb") as f:
    f.write(data)
  os.replace(tmp, path)


def convert(idx_dir: str, output_dir: str) -> dict[str, int]:
  """Writes the CIFAR-layout files; returns the number of images per split."""
  os.makedirs(output_dir, exist_ok=True)
  counts = {}
  for split, (image_name, label_name) in SPLITS.items():
    images, labels = read_idx(idx_dir, image_name), read_idx(idx_dir, label_name)
    if len(images) != len(labels) or images.shape[1:] != (28, 28):
      raise SystemExit(f"error: {split}: {images.shape} images for {labels.shape} labels")
    records = cifar_records(images, labels)
    if split == "train":
      for i, part in enumerate(np.array_split(records, TRAIN_FILES)):
        write_atomic(os.path.join(output_dir, f"data_batch_{i + 1}.bin"), part.tobytes())
    else:
      write_atomic(os.path.join(output_dir, "test_batch.bin"), records.tobytes())
    counts[split] = len(records)
  write_atomic(os.path.join(output_dir, "batches.meta.txt"),
               "".join(name + "\n" for name in CLASS_NAMES).encode())
  return counts


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--idx_dir", default="/usr/share/datasets/fashion-mnist",
                      help="folder of the (gzipped) IDX files")
  parser.add_argument("--output_dir", required=True, help="where the CIFAR-layout files go")
  args = parser.parse_args(argv)
  from open_seq2seq.utils.io import exit_if_unwritable  # pylint: disable=import-outside-toplevel
  exit_if_unwritable(args.output_dir, "--output_dir", directory=True)
  counts = convert(args.idx_dir, args.output_dir)
  print(f"wrote {counts['train']} training and {counts['test']} test images to "
        f"{args.output_dir}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
