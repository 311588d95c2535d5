"""ImagenetDataLayer: TF-official ImageNet TFRecords -> ResNet-preprocessed image batches.

The TensorFlow official models' ``build_imagenet_data.py`` writes ``train-00000-of-01024`` ...
and ``validation-00000-of-00128`` ... under one folder: TFRecord files of ``tf.train.Example``
with ``image/encoded`` (JPEG bytes), ``image/class/label`` (int64 in 1..1000; 0 was kept for a
background class) and optional ``image/object/bbox/{xmin,ymin,xmax,ymax}`` boxes. Labels are
shifted to 0..999 here, as OpenSeq2Seq did.
"""

from __future__ import annotations

import glob
import os
from typing import Any

import numpy as np
import tensorflow as tf

from open_seq2seq.data.image2label.image_layer import ImageDataLayer
from open_seq2seq.data.image2label.preprocessing import (IMAGENET_MEANS, IMAGENET_STDS,
                                                         count_tfrecords, imagenet_eval_image,
                                                         imagenet_train_image, jpeg_looks_whole,
                                                         jpeg_problem, normalize,
                                                         parse_imagenet_example)
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.utils.params import Param

#: Files read in each mode unless ``file_pattern`` says otherwise.
DEFAULT_PATTERNS = {"train": "train-*", "eval": "validation-*", "infer": "validation-*"}


def _float_list(length: int):
  def predicate(value: Any) -> bool:
    return (isinstance(value, (list, tuple)) and len(value) == length and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value))
  predicate.type_name = f"list of {length} numbers"
  return predicate


class ImagenetDataLayer(ImageDataLayer):
  """ImageNet in the TF-official TFRecord format (OpenSeq2Seq's parameter names).

  Training shuffles the files and the records, takes a random crop (5-100 % of the area,
  aspect ratio 3/4-4/3, inside the record's boxes if any), flips it at random and resizes it to
  ``image_size``; eval and infer resize the shorter side to ``resize_min`` and crop the
  centre. Pixels are then normalized per channel by ``channel_means`` and ``channel_stds``.

  Each worker reads whole files (``files[worker_id::num_workers]``) when there are at least as
  many files as workers, else every file keeping its share of the records. Record counts
  come from the TFRecord length headers, read once when the layer is built. Infer names each
  image ``<file>:<record>``. A record that is not a whole JPEG (not one, or truncated) or
  whose label is outside 1..num_classes stops the pass with a one-line DataError naming
  ``<file>:<record>``.
  """

  PARAMS = {
      "image_size": Param(int, 224, "Side of the square crops fed to the model."),
      "num_classes": Param(int, 1000, "Number of classes (stored labels run 1..num_classes)."),
      "shuffle_buffer": Param(int, 1024, "Records in the shuffle buffer."),
      "file_pattern": Param((str, None), None,
                            "Glob under data_dir (default: train-* in train, validation-* "
                            "in eval and infer)."),
      "resize_min": Param((int, None), None, "Eval: shorter side before the central crop "
                          "(default: image_size * 256 / 224, 256 for 224)."),
      "channel_means": Param(_float_list(3), list(IMAGENET_MEANS),
                             "Per-channel (RGB) means subtracted from the 0..255 pixels."),
      "channel_stds": Param(_float_list(3), list(IMAGENET_STDS),
                            "Per-channel divisors after the mean (OpenSeq2Seq: 127.5)."),
  }

  def __init__(self, params: dict[str, Any], mode: str = "train", batch_size: int = 32,
               num_workers: int = 1, worker_id: int = 0, random_seed: int | None = None):
    super().__init__(params, mode, batch_size, num_workers, worker_id, random_seed)
    p = self.params
    size = p["image_size"]
    self.resize_min = p["resize_min"] or max(size, round(size * 256 / 224))
    if self.resize_min < size:
      raise ConfigError(f"data_layer_params/resize_min: {self.resize_min} is smaller than "
                        f"image_size {size}")
    if any(s <= 0 for s in p["channel_stds"]):
      raise ConfigError(f"data_layer_params/channel_stds: must be positive, got "
                        f"{p['channel_stds']}")
    self.files: list[str] = []
    self.counts = np.zeros([0], np.int64)
    if mode != "interactive_infer":
      self._find_files()

  def _find_files(self) -> None:
    data_dir = self.params["data_dir"]
    if not os.path.isdir(data_dir):
      raise DataError(f"data_layer_params/data_dir: {data_dir} is not a directory")
    pattern = self.params["file_pattern"] or DEFAULT_PATTERNS["train" if self.mode == "train"
                                                              else "eval"]
    self.files = sorted(glob.glob(os.path.join(data_dir, pattern)))
    if not self.files:
      raise DataError(f"{data_dir}: no files match {pattern} (TF-official ImageNet TFRecords)")
    self.counts = np.array([count_tfrecords(f) for f in self.files], np.int64)
    if not self.counts.sum():
      raise DataError(f"{data_dir}/{pattern}: the files hold no records")
    self.offsets = np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)

  # ------------------------------------------------------------------ sharding
  @property
  def _by_file(self) -> bool:
    """Shard by whole files (each worker reads only its own) when there are enough."""
    return len(self.files) >= self.num_workers

  def _my_files(self) -> list[int]:
    if self._by_file:
      return list(range(self.worker_id, len(self.files), self.num_workers))
    return list(range(len(self.files)))

  def get_size_in_samples(self) -> int:
    if self._by_file:
      return int(self.counts[self._my_files()].sum())
    return len(range(self.worker_id, int(self.counts.sum()), self.num_workers))

  # ------------------------------------------------------------------ datasets
  def records(self) -> tuple[tf.data.Dataset, int]:
    mine = self._my_files()
    files = tf.data.Dataset.from_tensor_slices(
        (np.array([self.files[i] for i in mine]), self.offsets[mine]))

    def read(path, offset):
      records = tf.data.TFRecordDataset(path).enumerate(start=offset)
      return records.map(lambda i, record: {"record": record, "id": i})

    if self.mode == "train" and self.params["shuffle"]:
      files = files.shuffle(len(mine), seed=self._seed, reshuffle_each_iteration=True)
      records = files.interleave(read, cycle_length=min(len(mine), 8), block_length=1,
                                 num_parallel_calls=tf.data.AUTOTUNE,
                                 deterministic=self._seed is not None)
    else:
      records = files.flat_map(read)
    return records, 1 if self._by_file else self.num_workers

  # ------------------------------------------------------------------ record checks
  # A bad record found inside the pipeline raises a DataError naming its file and record
  # from Python (tf.numpy_function, called only on the failing branch): cli.py recovers it
  # from TensorFlow's error as one line (errors.embedded_error).
  def _where(self, index: int) -> str:
    file_index = int(np.searchsorted(self.offsets, index, side="right")) - 1
    return f"{self.files[file_index]}:{index - self.offsets[file_index]}"

  def _bad_jpeg(self, index: np.ndarray, jpeg: bytes) -> bool:
    raise DataError(f"{self._where(int(index))}: image/encoded is {jpeg_problem(jpeg)}; "
                    f"re-create the record or leave it out of the TFRecords")

  def _bad_label(self, index: np.ndarray, label: np.ndarray) -> bool:
    num = self.params["num_classes"]
    found = ("no image/class/label" if int(label) == -1
             else f"image/class/label {int(label)}, outside 1..{num}")
    raise DataError(f"{self._where(int(index))}: {found} (TF-official labels run 1.."
                    f"num_classes; 0 is the unused background class); set "
                    f"data_layer_params/num_classes or fix the record")

  def _checked(self, value: tf.Tensor, ok: tf.Tensor, fail, *args: tf.Tensor) -> tf.Tensor:
    """``value``, once ``ok`` holds; else ``fail(*args)`` raises its DataError."""
    # stateless (it only raises): a stateful op would make training iterators, which are
    # checkpointed for an exact resume, refuse to be saved
    check = tf.cond(ok, lambda: tf.constant(True),
                    lambda: tf.numpy_function(fail, list(args), tf.bool, stateful=False))
    with tf.control_dependencies([check]):
      return tf.identity(value)

  def process(self, element: dict, seed: tf.Tensor | None = None) -> dict:
    p = self.params
    jpeg, label, bbox = parse_imagenet_example(element["record"])
    jpeg = self._checked(jpeg, jpeg_looks_whole(jpeg), self._bad_jpeg, element["id"], jpeg)
    if seed is None:
      image = tf.image.decode_jpeg(jpeg, channels=self.NUM_CHANNELS)
      image = imagenet_eval_image(image, p["image_size"], self.resize_min)
    else:
      image = imagenet_train_image(jpeg, bbox, p["image_size"], seed, self.NUM_CHANNELS)
    out = {"source": normalize(image, p["channel_means"], p["channel_stds"]),
           "id": element["id"]}
    if not self.inference:
      ok = tf.logical_and(label >= 1, label <= p["num_classes"])  # int64, before the cast
      label = self._checked(label, ok, self._bad_label, element["id"], label)
      out["target"] = tf.cast(label, tf.int32) - 1
    return out

  def preprocess_eval(self, image: tf.Tensor) -> tf.Tensor:
    p = self.params
    image = imagenet_eval_image(image, p["image_size"], self.resize_min)
    return normalize(image, p["channel_means"], p["channel_stds"])

  def record_name(self, index: int) -> str:
    file_index = int(np.searchsorted(self.offsets, index, side="right")) - 1
    return f"{os.path.basename(self.files[file_index])}:{index - self.offsets[file_index]}"
