"""Tiny image datasets written at test time in the exact on-disk formats of ImageNet
(TF-official TFRecords) and CIFAR-10 (binary records), and the Image2Label helpers."""

from __future__ import annotations

import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG_DIR = os.path.join(ROOT, "example_configs", "image2label")
FASHION_DIR = os.path.join(ROOT, "data", "fashion_mnist")
#: What the learning test and the Fashion-MNIST config read (scripts/get_fashion_mnist.sh).
FASHION_CIFAR_DIR = os.path.join(FASHION_DIR, "cifar")

SHAPES = ("stripes_h", "stripes_v", "disc", "checker", "diagonal", "ring")


def draw(label: int, size: int, rng: np.random.Generator) -> np.ndarray:
  """A uint8 RGB picture of class ``label`` (a shape drawn at a random phase and colour)."""
  y, x = np.mgrid[0:size, 0:size].astype(np.float32) / size
  cy, cx = rng.uniform(0.35, 0.65, 2)
  phase = rng.uniform(0, 1)
  kind = SHAPES[label % len(SHAPES)]
  if kind == "stripes_h":
    mask = np.sin((y + phase) * 2 * np.pi * 4) > 0
  elif kind == "stripes_v":
    mask = np.sin((x + phase) * 2 * np.pi * 4) > 0
  elif kind == "disc":
    mask = (y - cy) ** 2 + (x - cx) ** 2 < 0.08
  elif kind == "checker":
    mask = (np.floor((y + phase) * 4) + np.floor((x + phase) * 4)) % 2 == 0
  elif kind == "diagonal":
    mask = np.sin((x + y + phase) * 2 * np.pi * 3) > 0
  else:
    r = (y - cy) ** 2 + (x - cx) ** 2
    mask = (r > 0.04) & (r < 0.12)
  colour = rng.integers(128, 256, 3)
  image = np.where(mask[:, :, None], colour, 255 - colour).astype(np.float32)
  image += rng.normal(0, 8, image.shape)
  return np.clip(image, 0, 255).astype(np.uint8)


# ----------------------------------------------------------------------------- CIFAR-10 binary
def cifar_records(labels: np.ndarray, rng: np.random.Generator, drawn: bool = True) -> bytes:
  """CIFAR-10 binary records: label byte + R, G, B planes of a 32x32 image each."""
  out = bytearray()
  for label in labels:
    image = draw(int(label), 32, rng) if drawn else rng.integers(0, 256, (32, 32, 3), np.uint8)
    out.append(int(label))
    out += np.ascontiguousarray(image.transpose(2, 0, 1)).tobytes()
  return bytes(out)


def write_cifar(directory: str, train_per_file: int = 8, train_files: int = 2, test: int = 6,
                num_classes: int = 4, seed: int = 0, drawn: bool = True,
                class_names: bool = True) -> str:
  """data_batch_1.bin ... data_batch_N.bin, test_batch.bin and batches.meta.txt."""
  os.makedirs(directory, exist_ok=True)
  rng = np.random.default_rng(seed)
  for i in range(1, train_files + 1):
    labels = rng.integers(0, num_classes, train_per_file)
    with open(os.path.join(directory, f"data_batch_{i}.bin"), "wb") as f:
      f.write(cifar_records(labels, rng, drawn))
  with open(os.path.join(directory, "test_batch.bin"), "wb") as f:
    f.write(cifar_records(np.arange(test) % num_classes, rng, drawn))
  if class_names:
    with open(os.path.join(directory, "batches.meta.txt"), "w", encoding="utf-8") as f:
      f.write("".join(f"{SHAPES[c % len(SHAPES)]}\n" for c in range(num_classes)) + "\n")
  return directory


# ----------------------------------------------------------------------------- ImageNet TFRecords
def imagenet_example(jpeg: bytes, label: int, bbox: tuple | None = None,
                     filename: str = "") -> bytes:
  """A serialized tf.train.Example with the TF-official ImageNet features."""
  import tensorflow as tf

  def floats(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))

  def ints(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

  def strings(values):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))

  ymin, xmin, ymax, xmax = bbox if bbox is not None else ((), (), (), ())
  feature = {
      "image/encoded": strings([jpeg]), "image/format": strings([b"JPEG"]),
      "image/class/label": ints([label]), "image/class/synset": strings([b"n0000000%d" % label]),
      "image/filename": strings([filename.encode()]),
      "image/object/bbox/ymin": floats(list(np.atleast_1d(ymin))),
      "image/object/bbox/xmin": floats(list(np.atleast_1d(xmin))),
      "image/object/bbox/ymax": floats(list(np.atleast_1d(ymax))),
      "image/object/bbox/xmax": floats(list(np.atleast_1d(xmax))),
  }
  return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def encode_jpeg(image: np.ndarray) -> bytes:
  import tensorflow as tf
  return tf.io.encode_jpeg(image, quality=95).numpy()


def write_imagenet(directory: str, split: str = "train", num_files: int = 2, per_file: int = 4,
                   num_classes: int = 4, seed: int = 0, sizes=((40, 48), (36, 36), (48, 30))
                   ) -> list[str]:
  """``<split>-0000i-of-0000N`` TFRecords of drawn JPEGs (labels 1..num_classes); every
  other record has a bounding box. Returns the files."""
  import tensorflow as tf
  os.makedirs(directory, exist_ok=True)
  rng = np.random.default_rng(seed)
  paths, n = [], 0
  for i in range(num_files):
    path = os.path.join(directory, f"{split}-{i:05d}-of-{num_files:05d}")
    with tf.io.TFRecordWriter(path) as writer:
      for _ in range(per_file):
        height, width = sizes[n % len(sizes)]
        label = 1 + n % num_classes
        picture = draw(label - 1, max(height, width), rng)[:height, :width]
        bbox = (0.1, 0.1, 0.9, 0.8) if n % 2 else None
        writer.write(imagenet_example(encode_jpeg(picture), label, bbox, f"img_{n:04d}.JPEG"))
        n += 1
    paths.append(path)
  return paths


def write_image_file(path: str, label: int = 0, size: int = 32, seed: int = 0) -> str:
  """A JPEG (or PNG, by extension) drawing of class ``label``."""
  import tensorflow as tf
  picture = draw(label, size, np.random.default_rng(seed))
  data = tf.io.encode_png(picture) if path.endswith(".png") else tf.io.encode_jpeg(picture)
  tf.io.write_file(path, data)
  return path


# ----------------------------------------------------------------------------- example configs
def example_config_overrides(directory: str) -> tuple[list[str], int]:
  """Image2Label family: tiny data in both formats for a shipped config, as run.py overrides.

  One folder holds ImageNet TFRecords (train-*, validation-*) and CIFAR-10 binary files
  (data_batch_*.bin, test_batch.bin), so the same overrides serve every image config. Images
  are 64 pixels (ResNet-50's last stage still sees 2x2 maps, so its batch norms have more
  than one value per channel) and batches hold two, so a ResNet-50 step stays cheap. The
  network keeps the config's own layers and size.

  Returns:
    The overrides, and the number of images every eval/infer reads.
  """
  write_imagenet(directory, "train", num_files=2, per_file=4)
  write_imagenet(directory, "validation", num_files=1, per_file=6, seed=1)
  write_cifar(directory, train_per_file=8, train_files=2, test=6)
  return ([f"--data_layer_params/data_dir={directory}", "--data_layer_params/image_size=64",
           "--batch_size_per_gpu=2"], 6)
