"""CifarDataLayer: CIFAR-10 binary files -> augmented, standardized image batches.

The CIFAR-10 binary distribution (``cifar-10-batches-bin``) holds fixed-length records of
3073 bytes: one label byte, then the 32x32 red, green and blue planes (1024 bytes each, rows
top to bottom). Training reads ``data_batch_*.bin`` (``data_batch_1.bin`` ...
``data_batch_5.bin``), eval and infer read ``test_batch.bin``; ``batches.meta.txt`` (one class
name per line), when present, names the classes. ``scripts/import_fashion_mnist.py`` writes
Fashion-MNIST in this layout.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any

import numpy as np
import tensorflow as tf

from open_seq2seq.data.image2label.image_layer import ImageDataLayer
from open_seq2seq.data.image2label.preprocessing import (CIFAR_RECORD_BYTES, CIFAR_SIDE,
                                                         cifar_eval_image, cifar_train_image,
                                                         parse_cifar_record, standardize)
from open_seq2seq.errors import DataError
from open_seq2seq.utils.params import Param

TRAIN_PATTERN = "data_batch_*.bin"
EVAL_FILE = "test_batch.bin"
META_FILE = "batches.meta.txt"


def _natural_key(path: str) -> tuple:
  """data_batch_2.bin sorts before data_batch_10.bin."""
  return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", os.path.basename(path)))


def read_class_names(data_dir: str, num_classes: int) -> tuple[str, ...] | None:
  """The names in ``batches.meta.txt`` if it names exactly ``num_classes`` classes."""
  path = os.path.join(data_dir, META_FILE)
  if not os.path.isfile(path):
    return None
  with open(path, encoding="utf-8") as f:
    names = tuple(line.strip() for line in f if line.strip())
  return names if len(names) == num_classes else None


class CifarDataLayer(ImageDataLayer):
  """CIFAR-10 binary format, with OpenSeq2Seq's augmentation (parameter names kept).

  Training pads each 32x32 image to ``image_size + 2 * crop_padding``, crops ``image_size``
  at a random place and flips it at random (``random_flip``); eval and infer crop the centre
  ``image_size`` square. Every image is then standardized (zero mean, unit variance).
  OpenSeq2Seq trained on 28-pixel crops (the default); ``image_size: 32`` keeps the whole
  image. Infer names each image
  ``<file>:<record>``; its labels are known, so inference is scored too.
  """

  PARAMS = {
      "image_size": Param(int, 28, "Side of the crops fed to the model (32: whole images)."),
      "num_classes": Param(int, 10, "Number of classes (labels must be below it)."),
      "shuffle_buffer": Param(int, 1500, "Records in the shuffle buffer."),
      "crop_padding": Param(int, 4, "Training: random crops shift by up to this many pixels "
                            "(OpenSeq2Seq: 4; 0: centre crop)."),
      "random_flip": Param(bool, True, "Training: flip images left-right at random."),
  }

  def __init__(self, params: dict[str, Any], mode: str = "train", batch_size: int = 32,
               num_workers: int = 1, worker_id: int = 0, random_seed: int | None = None):
    super().__init__(params, mode, batch_size, num_workers, worker_id, random_seed)
    data_dir = self.params["data_dir"]
    self.class_names = read_class_names(data_dir, self.params["num_classes"])
    self.files: list[str] = []
    self.offsets = np.zeros([1], np.int64)   # first record id of each file, then the total
    self.labels = np.zeros([0], np.uint8)
    if mode != "interactive_infer":
      self._read_files(data_dir)

  def _read_files(self, data_dir: str) -> None:
    if not os.path.isdir(data_dir):
      raise DataError(f"data_layer_params/data_dir: {data_dir} is not a directory")
    if self.mode == "train":
      files = sorted(glob.glob(os.path.join(data_dir, TRAIN_PATTERN)), key=_natural_key)
      if not files:
        raise DataError(f"{data_dir}: no {TRAIN_PATTERN} (CIFAR-10 binary training files)")
    else:
      files = [os.path.join(data_dir, EVAL_FILE)]
      if not os.path.isfile(files[0]):
        raise DataError(f"{files[0]}: not found (the CIFAR-10 binary test file)")
    labels = []
    for path in files:
      size = os.path.getsize(path)
      if size == 0 or size % CIFAR_RECORD_BYTES:
        raise DataError(f"{path}: {size} bytes is not a whole number of {CIFAR_RECORD_BYTES}-"
                        f"byte CIFAR-10 records")
      records = np.memmap(path, np.uint8, mode="r").reshape(-1, CIFAR_RECORD_BYTES)
      file_labels = np.array(records[:, 0])
      bad = np.flatnonzero(file_labels >= self.params["num_classes"])
      if len(bad):
        raise DataError(f"{path}: record {bad[0]} has label {file_labels[bad[0]]}, not below "
                        f"data_layer_params/num_classes={self.params['num_classes']}")
      labels.append(file_labels)
    self.files = files
    self.labels = np.concatenate(labels)
    self.offsets = np.cumsum([0] + [len(x) for x in labels]).astype(np.int64)

  # ------------------------------------------------------------------ datasets
  def get_size_in_samples(self) -> int:
    return len(range(self.worker_id, len(self.labels), self.num_workers))

  def records(self) -> tuple[tf.data.Dataset, int]:
    # a few MB of records: every worker reads them all and keeps its ids (shard by id)
    dataset = tf.data.FixedLengthRecordDataset(self.files, CIFAR_RECORD_BYTES).enumerate()
    return dataset.map(lambda i, record: {"record": record, "id": i}), self.num_workers

  def process(self, element: dict, seed: tf.Tensor | None = None) -> dict:
    image, label = parse_cifar_record(element["record"])
    size = self.params["image_size"]
    if seed is None:
      image = cifar_eval_image(image, size)
    else:
      image = cifar_train_image(image, size, seed, self.params["crop_padding"],
                                self.params["random_flip"])
    out = {"source": standardize(image), "id": element["id"]}
    if not self.inference:
      out["target"] = label
    return out

  def preprocess_eval(self, image: tf.Tensor) -> tf.Tensor:
    """A user's image, resized to 32x32 when it is not, then as a test record."""
    # a graph op, not a Python test of the static shape: an exported model sees images of
    # unknown size
    side = tf.shape(image)[:2]
    image = tf.cond(tf.reduce_all(tf.equal(side, [CIFAR_SIDE, CIFAR_SIDE])),
                    lambda: tf.cast(image, tf.float32),
                    lambda: tf.image.resize(image, [CIFAR_SIDE, CIFAR_SIDE], method="area"))
    image = tf.ensure_shape(image, [CIFAR_SIDE, CIFAR_SIDE, None])
    return standardize(cifar_eval_image(image, self.params["image_size"]))

  def record_name(self, index: int) -> str:
    file_index = int(np.searchsorted(self.offsets, index, side="right")) - 1
    return f"{os.path.basename(self.files[file_index])}:{index - self.offsets[file_index]}"

  def label(self, index: int) -> int | None:
    return int(self.labels[index]) if 0 <= index < len(self.labels) else None
