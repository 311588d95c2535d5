"""Image decoding and augmentation ops shared by the image data layers (all in-graph).

ImageNet follows the "ResNet preprocessing" of the TensorFlow official models that
OpenSeq2Seq used: in training a random crop covering 5-100 % of the image with an aspect
ratio in [3/4, 4/3] (guided by the record's bounding boxes when it has any), decoded with the
fused decode-and-crop op, flipped at random and resized to ``image_size``; in eval the
shorter side is resized to ``resize_min`` and the centre ``image_size`` square is cut out.
CIFAR pads, crops at random and flips in training, crops the centre in eval, then
standardizes each image. Random ops are stateless, driven by a per-example seed ([2] int64),
so a seeded run sees the same augmentations every time.
"""

from __future__ import annotations

import os
import struct
from typing import Sequence

import numpy as np
import tensorflow as tf

from open_seq2seq.errors import DataError

#: TF-official ImageNet RGB means, and the scale OpenSeq2Seq divided by.
IMAGENET_MEANS = (123.68, 116.78, 103.94)
IMAGENET_STDS = (127.5, 127.5, 127.5)

#: CIFAR-10 binary records: one label byte, then 32x32 pixels per channel (R, G, B planes).
CIFAR_SIDE = 32
CIFAR_CHANNELS = 3
CIFAR_RECORD_BYTES = 1 + CIFAR_SIDE * CIFAR_SIDE * CIFAR_CHANNELS


def split_seed(seed: tf.Tensor, num: int) -> list[tf.Tensor]:
  """``num`` independent [2] seeds from one [2] seed."""
  return list(tf.unstack(tf.random.experimental.stateless_split(seed, num)))


def normalize(image: tf.Tensor, means: Sequence[float], stds: Sequence[float]) -> tf.Tensor:
  """(image - mean) / std per channel, float32."""
  image = tf.cast(image, tf.float32)
  return (image - tf.constant(means, tf.float32)) / tf.constant(stds, tf.float32)


# ----------------------------------------------------------------------------- ImageNet
def imagenet_train_image(jpeg: tf.Tensor, bbox: tf.Tensor, image_size: int, seed: tf.Tensor,
                         channels: int = 3) -> tf.Tensor:
  """Random-resized crop and random flip of one JPEG; [size, size, C] float32 in 0..255.

  Args:
    jpeg: scalar string, the encoded image.
    bbox: [1, N, 4] float boxes (ymin, xmin, ymax, xmax) in [0, 1]; N may be 0 (whole image).
    image_size: side of the output.
    seed: [2] int64 per-example seed.
  """
  crop_seed, flip_seed = split_seed(seed, 2)
  begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
      tf.image.extract_jpeg_shape(jpeg), bounding_boxes=bbox, seed=crop_seed,
      min_object_covered=0.1, aspect_ratio_range=[0.75, 1.33], area_range=[0.05, 1.0],
      max_attempts=100, use_image_if_no_bounding_boxes=True)
  offset_y, offset_x, _ = tf.unstack(begin)
  height, width, _ = tf.unstack(size)
  crop = tf.image.decode_and_crop_jpeg(jpeg, tf.stack([offset_y, offset_x, height, width]),
                                       channels=channels)
  crop = tf.image.stateless_random_flip_left_right(crop, flip_seed)
  image = tf.image.resize(crop, [image_size, image_size], method="bilinear")
  image.set_shape([image_size, image_size, channels])
  return image


def resize_shorter_side(image: tf.Tensor, resize_min: int) -> tf.Tensor:
  """Aspect-preserving resize so that the shorter side is ``resize_min`` (float32)."""
  shape = tf.shape(image)
  height, width = tf.cast(shape[0], tf.float32), tf.cast(shape[1], tf.float32)
  scale = tf.cast(resize_min, tf.float32) / tf.minimum(height, width)
  new_size = tf.cast(tf.round(tf.stack([height * scale, width * scale])), tf.int32)
  return tf.image.resize(image, tf.maximum(new_size, resize_min), method="bilinear")


def central_crop(image: tf.Tensor, size: int) -> tf.Tensor:
  """The centre ``size`` x ``size`` square of an image at least that large."""
  shape = tf.shape(image)
  top = (shape[0] - size) // 2
  left = (shape[1] - size) // 2
  return tf.slice(image, [top, left, 0], [size, size, -1])


def imagenet_eval_image(image: tf.Tensor, image_size: int, resize_min: int) -> tf.Tensor:
  """Shorter side to ``resize_min``, then the central crop; [size, size, C] float32."""
  channels = image.shape[-1]
  image = central_crop(resize_shorter_side(image, resize_min), image_size)
  image.set_shape([image_size, image_size, channels])
  return image


def parse_imagenet_example(record: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """TF-official ImageNet ``tf.train.Example`` -> (JPEG bytes, label as stored, bbox [1, N, 4])."""
  boxes = ["image/object/bbox/ymin", "image/object/bbox/xmin", "image/object/bbox/ymax",
           "image/object/bbox/xmax"]
  features = {"image/encoded": tf.io.FixedLenFeature([], tf.string, default_value=""),
              "image/class/label": tf.io.FixedLenFeature([1], tf.int64, default_value=[-1])}
  features.update({key: tf.io.VarLenFeature(tf.float32) for key in boxes})
  parsed = tf.io.parse_single_example(record, features)
  bbox = tf.stack([parsed[key].values for key in boxes], axis=1)  # [N, 4]
  return parsed["image/encoded"], parsed["image/class/label"][0], bbox[tf.newaxis]


def jpeg_looks_whole(jpeg: tf.Tensor) -> tf.Tensor:
  """Whether a scalar string starts like a JPEG and ends its last scan with the end-of-image
  marker: the checks that catch a file that is not a JPEG and a truncated one, cheaply and
  in-graph, before a decoder fails with no word of which record it was.

  Inside a scan, 0xFF is always followed by 0x00 or a restart marker, so the bytes after
  the last start-of-scan marker (FFDA) hold an FFD9 only when the image ends there.
  """
  scans = tf.strings.split(jpeg, sep=b"\xff\xda")
  ends = tf.strings.split(scans[-1], sep=b"\xff\xd9")
  return tf.logical_and(
      tf.logical_and(tf.equal(tf.strings.substr(jpeg, 0, 3), b"\xff\xd8\xff"),
                     tf.size(scans) > 1),
      tf.size(ends) > 1)


def jpeg_problem(data: bytes) -> str:
  """Why :func:`jpeg_looks_whole` refused ``data`` (for the error message)."""
  if not data:
    return "the record has no image/encoded bytes"
  if not data.startswith(b"\xff\xd8\xff"):
    return f"not a JPEG (it starts with {data[:4].hex(' ')})"
  return "a truncated or corrupt JPEG (no end-of-image marker after its last scan)"


def count_tfrecords(path: str) -> int:
  """Records in a TFRecord file, read from the length headers alone (no data is read).

  Each record is ``uint64 length | uint32 crc | data | uint32 crc``: seeking from header to
  header counts a 140 MB ImageNet shard in milliseconds.
  """
  size = os.path.getsize(path)
  count, position = 0, 0
  with open(path, "rb", buffering=0) as f:
    while position < size:
      f.seek(position)
      header = f.read(8)
      if len(header) < 8:
        break
      position += 8 + 4 + struct.unpack("<Q", header)[0] + 4
      count += 1
  if position != size:
    raise DataError(f"{path}: not a TFRecord file or truncated (record {count} runs past "
                    f"its end); re-create it")
  return count


# ----------------------------------------------------------------------------- CIFAR
def parse_cifar_record(record: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """A CIFAR-10 binary record -> (uint8 image [32, 32, 3], int32 label)."""
  values = tf.io.decode_raw(record, tf.uint8)
  label = tf.cast(values[0], tf.int32)
  planes = tf.reshape(values[1:CIFAR_RECORD_BYTES], [CIFAR_CHANNELS, CIFAR_SIDE, CIFAR_SIDE])
  return tf.transpose(planes, [1, 2, 0]), label


def cifar_train_image(image: tf.Tensor, image_size: int, seed: tf.Tensor, padding: int = 4,
                      flip: bool = True) -> tf.Tensor:
  """Centre on ``image_size + 2 * padding`` (padding with zeros), crop ``image_size`` at
  random (shifts of up to ``padding`` pixels), flip left-right at random."""
  crop_seed, flip_seed = split_seed(seed, 2)
  side = image_size + 2 * padding
  image = tf.image.resize_with_crop_or_pad(image, side, side)
  if padding:
    image = tf.image.stateless_random_crop(image, [image_size, image_size, image.shape[-1]],
                                           crop_seed)
  return tf.image.stateless_random_flip_left_right(image, flip_seed) if flip else image


def cifar_eval_image(image: tf.Tensor, image_size: int) -> tf.Tensor:
  """The centre ``image_size`` square (zero-padded if the image is smaller)."""
  return tf.image.resize_with_crop_or_pad(image, image_size, image_size)


def standardize(image: tf.Tensor) -> tf.Tensor:
  """Zero mean and unit variance per image (float32), as OpenSeq2Seq's CIFAR layer did."""
  return tf.image.per_image_standardization(tf.cast(image, tf.float32))


# ----------------------------------------------------------------------------- files
def read_image_file(path: str, channels: int = 3) -> np.ndarray:
  """An image file (JPEG, PNG, BMP, GIF) as uint8 [height, width, channels]."""
  path = os.path.expanduser(path.strip())
  if not os.path.isfile(path):
    raise DataError(f"{path}: image file not found")
  try:
    image = tf.io.decode_image(tf.io.read_file(path), channels=channels,
                               expand_animations=False)
  except (tf.errors.InvalidArgumentError, tf.errors.UnknownError):
    raise DataError(f"{path}: not a JPEG, PNG, BMP or GIF image") from None
  return image.numpy()
