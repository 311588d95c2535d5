"""ImagenetDataLayer and CifarDataLayer on fixtures written in the exact upstream formats."""

import os

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.data import CifarDataLayer, ImagenetDataLayer
from open_seq2seq.data.description import ImageDescription
from open_seq2seq.data.image2label.preprocessing import (count_tfrecords, parse_cifar_record,
                                                         standardize)
from open_seq2seq.errors import ConfigError, DataError
from tests.helpers import image


@pytest.fixture(scope="module")
def cifar_dir(tmp_path_factory):
  return image.write_cifar(str(tmp_path_factory.mktemp("cifar")), train_per_file=10,
                           train_files=3, test=7, num_classes=4, seed=3, drawn=False)


@pytest.fixture(scope="module")
def imagenet_dir(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp("imagenet"))
  image.write_imagenet(directory, "train", num_files=3, per_file=4)
  image.write_imagenet(directory, "validation", num_files=2, per_file=5, seed=1)
  return directory


def cifar(directory, mode="train", **params):
  kwargs = {k: params.pop(k) for k in ("batch_size", "num_workers", "worker_id", "random_seed")
            if k in params}
  return CifarDataLayer({"data_dir": directory, "num_classes": 4, **params}, mode=mode,
                        **{"batch_size": 4, **kwargs})


def imagenet(directory, mode="train", **params):
  kwargs = {k: params.pop(k) for k in ("batch_size", "num_workers", "worker_id", "random_seed")
            if k in params}
  return ImagenetDataLayer({"data_dir": directory, "num_classes": 4, "image_size": 24,
                            **params}, mode=mode, **{"batch_size": 4, **kwargs})


def one_pass(layer):
  return [{k: (tuple(t.numpy() for t in v) if isinstance(v, tuple) else v.numpy())
           for k, v in batch.items()} for batch in layer.build_dataset()]


def fixture_records(directory, name):
  with open(os.path.join(directory, name), "rb") as f:
    return np.frombuffer(f.read(), np.uint8).reshape(-1, 3073)


# ----------------------------------------------------------------------------- CIFAR
def test_cifar_record_layout_is_label_then_rgb_planes():
  record = np.zeros(3073, np.uint8)
  record[0] = 7
  record[1:1025] = 10       # red plane
  record[1025:2049] = 20    # green plane
  record[2049:] = np.arange(1024) % 256  # blue plane, row-major
  picture, label = parse_cifar_record(tf.constant(record.tobytes()))
  assert int(label) == 7 and picture.shape == (32, 32, 3)
  assert (picture[..., 0].numpy() == 10).all() and (picture[..., 1].numpy() == 20).all()
  np.testing.assert_array_equal(picture[..., 2].numpy(), (np.arange(1024) % 256).reshape(32, 32))


def test_cifar_eval_reads_every_test_record_once_in_order(cifar_dir):
  layer = cifar(cifar_dir, "eval", image_size=32)
  batches = one_pass(layer)
  records = fixture_records(cifar_dir, "test_batch.bin")
  ids = np.concatenate([b["id"] for b in batches])
  np.testing.assert_array_equal(ids, np.arange(7))
  labels = np.concatenate([b["target_tensors"][0] for b in batches])
  np.testing.assert_array_equal(labels, records[:, 0])
  assert layer.batches_per_epoch() == len(batches) == 2
  # at 32 pixels eval images are the standardized records themselves
  planes = records[0, 1:].reshape(3, 32, 32).transpose(1, 2, 0)
  np.testing.assert_allclose(batches[0]["source_tensors"][0][0],
                             standardize(tf.constant(planes)).numpy(), atol=1e-5)


def test_cifar_train_batches_and_augmentation(cifar_dir):
  layer = cifar(cifar_dir, random_seed=1)
  assert layer.get_size_in_samples() == 30 and layer.throughput_unit == "images"
  batch = next(iter(layer.build_dataset()))
  images, = batch["source_tensors"]
  assert images.shape == (4, 28, 28, 3) and images.dtype == tf.float32
  assert batch["target_tensors"][0].dtype == tf.int32 and batch["id"].dtype == tf.int64
  assert int(layer.count_units(batch)) == 4
  # standardized per image
  np.testing.assert_allclose(tf.reduce_mean(images, axis=[1, 2, 3]), 0.0, atol=1e-4)
  # seeded: the same batches again
  again = next(iter(cifar(cifar_dir, random_seed=1).build_dataset()))
  np.testing.assert_array_equal(images, again["source_tensors"][0])


def test_cifar_each_epoch_augments_anew(cifar_dir):
  layer = cifar(cifar_dir, random_seed=1, shuffle=False, batch_size=10)
  dataset = iter(layer.build_dataset())
  first = [next(dataset) for _ in range(3)]
  second = [next(dataset) for _ in range(3)]
  for a, b in zip(first, second):
    np.testing.assert_array_equal(a["id"], b["id"])
    np.testing.assert_array_equal(a["target_tensors"][0], b["target_tensors"][0])
  assert not all(np.array_equal(a["source_tensors"][0], b["source_tensors"][0])
                 for a, b in zip(first, second))


def test_cifar_crop_padding_zero_is_the_centre_crop(cifar_dir):
  layer = cifar(cifar_dir, random_seed=0, shuffle=False, crop_padding=0, random_flip=False,
                image_size=28)
  batch = next(iter(layer.build_dataset()))
  records = fixture_records(cifar_dir, "data_batch_1.bin")
  planes = records[:4, 1:].reshape(4, 3, 32, 32).transpose(0, 2, 3, 1)[:, 2:30, 2:30]
  np.testing.assert_array_equal(batch["id"], np.arange(4))
  for i in range(4):
    np.testing.assert_allclose(batch["source_tensors"][0][i],
                               standardize(tf.constant(planes[i])).numpy(), atol=1e-5)


def test_cifar_shards_are_disjoint_and_complete(cifar_dir):
  seen = []
  for worker in range(3):
    layer = cifar(cifar_dir, "eval", num_workers=3, worker_id=worker, batch_size=2)
    ids = [i for b in one_pass(layer) for i in b["id"]]
    assert len(ids) == layer.get_size_in_samples()
    seen += ids
  assert sorted(seen) == list(range(7))
  shard = cifar(cifar_dir, "eval").shard(2, 1)
  assert [i for b in one_pass(shard) for i in b["id"]] == [1, 3, 5]


def test_cifar_names_records_and_classes(cifar_dir):
  layer = cifar(cifar_dir, "infer")
  batch = next(iter(layer.build_dataset()))
  assert "target_tensors" not in batch
  assert layer.image_name(5) == "test_batch.bin:5" and layer.label(5) == 5 % 4
  train = cifar(cifar_dir)
  assert train.record_name(10) == "data_batch_2.bin:0"
  assert train.files == [os.path.join(cifar_dir, f"data_batch_{i}.bin") for i in (1, 2, 3)]
  assert layer.description == ImageDescription(28, 3, 4, tuple(image.SHAPES[:4]))
  assert cifar(cifar_dir, num_classes=5).description.class_names is None  # 4 names in meta


def test_cifar_errors_are_one_line(tmp_path, cifar_dir):
  with pytest.raises(DataError, match="is not a directory"):
    cifar(str(tmp_path / "missing"))
  with pytest.raises(DataError, match="no data_batch"):
    cifar(str(tmp_path))
  with pytest.raises(DataError, match="test_batch.bin: not found"):
    cifar(str(tmp_path), "eval")
  (tmp_path / "data_batch_1.bin").write_bytes(b"\0" * 3000)
  with pytest.raises(DataError, match="not a whole number of 3073-byte"):
    cifar(str(tmp_path))
  (tmp_path / "data_batch_1.bin").write_bytes(bytes([9]) + b"\0" * 3072)
  with pytest.raises(DataError, match="record 0 has label 9, not below"):
    cifar(str(tmp_path))
  with pytest.raises(ConfigError, match="image_size: must be at least 1"):
    cifar(cifar_dir, image_size=0)


# ----------------------------------------------------------------------------- ImageNet
def test_count_tfrecords_reads_only_headers(imagenet_dir, tmp_path):
  path = os.path.join(imagenet_dir, "train-00000-of-00003")
  assert count_tfrecords(path) == 4 == sum(1 for _ in tf.data.TFRecordDataset(path))
  with open(path, "rb") as f:
    data = f.read()
  truncated = tmp_path / "validation-00000-of-00001"
  truncated.write_bytes(data[:-10])
  with pytest.raises(DataError, match="truncated"):
    count_tfrecords(str(truncated))


def test_imagenet_eval_is_resized_cropped_normalized_and_labels_shifted(imagenet_dir):
  layer = imagenet(imagenet_dir, "eval")
  assert layer.resize_min == round(24 * 256 / 224)
  batches = one_pass(layer)
  ids = np.concatenate([b["id"] for b in batches])
  np.testing.assert_array_equal(ids, np.arange(10))
  labels = np.concatenate([b["target_tensors"][0] for b in batches])
  np.testing.assert_array_equal(labels, np.arange(10) % 4)  # stored 1..4
  images = np.concatenate([b["source_tensors"][0] for b in batches])
  assert images.shape == (10, 24, 24, 3)
  assert -1.1 < images.min() and images.max() < 1.2  # (x - mean) / 127.5
  assert layer.batches_per_epoch() == len(batches) == 3
  assert layer.record_name(7) == "validation-00001-of-00002:2"


def test_imagenet_normalization_uses_channel_means_and_stds(tmp_path):
  grey = np.full((30, 40, 3), 100, np.uint8)
  with tf.io.TFRecordWriter(str(tmp_path / "validation-00000-of-00001")) as writer:
    writer.write(image.imagenet_example(image.encode_jpeg(grey), 1))
  layer = imagenet(str(tmp_path), "eval", channel_means=[100, 90, 80], channel_stds=[1, 2, 4])
  pixels = one_pass(layer)[0]["source_tensors"][0][0]
  np.testing.assert_allclose(pixels.mean(axis=(0, 1)), [0, 5, 5], atol=1.0)


def test_imagenet_train_crops_flips_and_repeats(imagenet_dir):
  layer = imagenet(imagenet_dir, random_seed=2, batch_size=5)
  dataset = iter(layer.build_dataset())
  batches = [next(dataset) for _ in range(4)]  # 20 images: more than the 12 records
  for batch in batches:
    assert batch["source_tensors"][0].shape == (5, 24, 24, 3)
    assert batch["target_tensors"][0].dtype == tf.int32
  ids = np.concatenate([b["id"].numpy() for b in batches])
  assert set(ids[:12]) == set(range(12))  # a whole epoch before any repeat
  again = next(iter(imagenet(imagenet_dir, random_seed=2, batch_size=5).build_dataset()))
  np.testing.assert_array_equal(batches[0]["source_tensors"][0], again["source_tensors"][0])


def test_imagenet_shards_by_file_or_by_record(imagenet_dir):
  sizes = [imagenet(imagenet_dir, "eval", num_workers=2, worker_id=w).get_size_in_samples()
           for w in range(2)]
  assert sizes == [5, 5]  # one validation file each
  seen = []
  for worker in range(3):  # more workers than the 2 files: each keeps every third record
    layer = imagenet(imagenet_dir, "eval", num_workers=3, worker_id=worker)
    ids = [i for b in one_pass(layer) for i in b["id"]]
    assert len(ids) == layer.get_size_in_samples()
    seen += ids
  assert sorted(seen) == list(range(10))
  train = [imagenet(imagenet_dir, num_workers=2, worker_id=w) for w in range(2)]
  assert [t.get_size_in_samples() for t in train] == [8, 4]  # files 0, 2 and file 1


def test_imagenet_errors(tmp_path, imagenet_dir):
  with pytest.raises(DataError, match="no files match train-"):
    imagenet(str(tmp_path))
  with pytest.raises(ConfigError, match="resize_min"):
    imagenet(imagenet_dir, resize_min=10)
  with pytest.raises(ConfigError, match="channel_stds"):
    imagenet(imagenet_dir, channel_stds=[1, 0, 1])
  assert len(imagenet(imagenet_dir, file_pattern="validation-0000[0]-*").files) == 1


@pytest.mark.parametrize("mode,jpeg,label,message", [
    ("eval", "truncated", 1, "image/encoded is a truncated or corrupt JPEG"),
    ("train", "truncated", 1, "image/encoded is a truncated or corrupt JPEG"),
    ("train", "text", 1, "image/encoded is not a JPEG (it starts with 6e 6f 74 20)"),
    ("eval", "whole", 5, "image/class/label 5, outside 1..4"),
    ("train", "whole", 0, "image/class/label 0, outside 1..4"),
])
def test_a_bad_record_is_one_line_naming_its_file_and_record(tmp_path, mode, jpeg, label,
                                                              message):
  from open_seq2seq.errors import embedded_error  # pylint: disable=import-outside-toplevel
  whole = image.encode_jpeg(np.full((30, 40, 3), 90, np.uint8))
  data = {"whole": whole, "truncated": whole[:len(whole) // 2], "text": b"not a JPEG"}[jpeg]
  path = tmp_path / ("train-00000-of-00001" if mode == "train" else "validation-00000-of-00001")
  with tf.io.TFRecordWriter(str(path)) as writer:
    writer.write(image.imagenet_example(whole, 1))
    writer.write(image.imagenet_example(data, label))
  layer = imagenet(str(tmp_path), mode, batch_size=2, random_seed=1)
  with pytest.raises(Exception) as raised:  # TensorFlow's error, carrying ours
    for _ in layer.build_dataset().take(2):
      pass
  error = embedded_error(raised.value)
  assert isinstance(error, DataError), raised.value
  assert str(error).startswith(f"{path}:1: {message}") and "\n" not in str(error)


# ----------------------------------------------------------------------------- interactive
@pytest.mark.parametrize("make", [cifar, imagenet])
def test_interactive_inputs_read_no_dataset_files(make, tmp_path, cifar_dir):
  layer = make(str(tmp_path / "nothing-here"), "interactive_infer")
  png = image.write_image_file(str(tmp_path / "shape.png"), 2, size=50)
  jpeg = image.write_image_file(str(tmp_path / "shape.jpg"), 1, size=32)
  grey = np.full((20, 20), 128, np.uint8)
  batch = next(iter(layer.dataset_from_inputs([png, jpeg, grey])))
  size = layer.params["image_size"]
  assert batch["source_tensors"][0].shape == (3, size, size, 3)
  assert "target_tensors" not in batch
  assert layer.image_name(0) == png and layer.image_name(2) == "<array 2>"
  with pytest.raises(DataError, match="image file not found"):
    layer.dataset_from_inputs([str(tmp_path / "missing.png")])
  (tmp_path / "text.png").write_text("not an image")
  with pytest.raises(DataError, match="not a JPEG, PNG"):
    layer.dataset_from_inputs([str(tmp_path / "text.png")])
  with pytest.raises(ConfigError, match="interactive_infer"):
    layer.build_dataset()
