"""ImageDataLayer: what the ImageNet and CIFAR layers share (batches, units, interactive input).

Batches are::

    {"source_tensors": (images [B, H, W, C] float32,),      # normalized, H = W = image_size
     "target_tensors": (labels [B] int32,),                 # class ids; not in infer mode
     "id": [B] int64}                                       # record index over all files

Throughput is counted in images. A subclass reads its files in ``__init__`` (nothing in
interactive_infer), yields ``{"record", "id"}`` elements from :meth:`records` and turns one
into ``{"source", "target", "id"}`` in :meth:`process`; the pipelines of
:mod:`open_seq2seq.data.transforms` shard, shuffle, repeat and batch them.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import tensorflow as tf

from open_seq2seq.data import transforms
from open_seq2seq.data.data_layer import DataLayer
from open_seq2seq.data.description import ImageDescription
from open_seq2seq.data.image2label.preprocessing import read_image_file
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.utils.params import Param


def model_inputs(batch: dict) -> dict:
  """A batch of flat features -> ``source_tensors``/``target_tensors``/``id``."""
  inputs = {"source_tensors": (batch["source"],), "id": batch["id"]}
  if "target" in batch:
    inputs["target_tensors"] = (batch["target"],)
  return inputs


class ImageDataLayer(DataLayer):
  """Base of the image classification data layers (not used directly in configs).

  Subclasses set :attr:`NUM_CHANNELS`, fill :attr:`class_names` if their files name the
  classes, and implement :meth:`records`, :meth:`process`, :meth:`preprocess_eval`,
  :meth:`get_size_in_samples` and :meth:`record_name`.
  """

  NUM_CHANNELS = 3

  PARAMS = {
      "data_dir": Param(str, doc="Folder of the dataset files."),
      "image_size": Param(int, 224, "Side of the square images fed to the model."),
      "num_classes": Param(int, 1000, "Number of classes."),
      "shuffle": Param(bool, True, "Shuffle training images (never in eval/infer)."),
      "shuffle_buffer": Param(int, 1024, "Records in the shuffle buffer."),
      "repeat": Param(bool, True, "Repeat training data forever (eval/infer: one pass)."),
      "num_parallel_calls": Param((int, None), None,
                                  "Images decoded/augmented in parallel (None: autotune)."),
  }

  def __init__(self, params: dict[str, Any], mode: str = "train", batch_size: int = 32,
               num_workers: int = 1, worker_id: int = 0, random_seed: int | None = None):
    super().__init__(params, mode, batch_size, num_workers, worker_id, random_seed)
    p = self.params
    for key in ("image_size", "num_classes", "shuffle_buffer"):
      if p[key] < 1:
        raise ConfigError(f"data_layer_params/{key}: must be at least 1, got {p[key]}")
    self.class_names: tuple[str, ...] | None = None
    self.interactive_inputs: list[str] = []

  @property
  def description(self) -> ImageDescription:
    """Image size, channels, classes (and their names when the files give them)."""
    p = self.params
    return ImageDescription(image_size=p["image_size"], num_channels=self.NUM_CHANNELS,
                            num_classes=p["num_classes"], class_names=self.class_names)

  @property
  def _seed(self) -> int | None:
    """Seed of this worker's shuffle and augmentation (None: unseeded)."""
    return None if self.random_seed is None else self.random_seed * 1000 + self.worker_id

  @property
  def _parallel(self) -> int:
    return self.params["num_parallel_calls"] or tf.data.AUTOTUNE

  @property
  def throughput_unit(self) -> str:
    return "images"

  # ------------------------------------------------------------------ subclass hooks
  def records(self) -> tuple[tf.data.Dataset, int]:
    """This worker's ``{"record": string, "id": int64}`` elements in file order, and the
    number of shards the pipeline must still split them into by id (1: already sharded)."""
    raise NotImplementedError

  def process(self, element: dict, seed: tf.Tensor | None) -> dict:
    """One record -> ``{"source": image, "target": label, "id": id}`` (augmented with the
    [2] ``seed`` in training; ``seed`` is None in eval/infer)."""
    raise NotImplementedError

  def preprocess_eval(self, image: tf.Tensor) -> tf.Tensor:
    """A decoded uint8 image [H, W, C] -> the model's input as in eval (for user images)."""
    raise NotImplementedError

  def record_name(self, index: int) -> str:
    """What inference calls the image of record ``index`` (e.g. ``test_batch.bin:17``)."""
    raise NotImplementedError

  def image_name(self, index: int) -> str:
    """The name of record ``index``, or of interactive input ``index``."""
    if self.interactive_inputs:
      return self.interactive_inputs[index]
    return self.record_name(index)

  def label(self, index: int) -> int | None:
    """The true class of record ``index`` when known without reading the images."""
    return None

  # ------------------------------------------------------------------ datasets
  def _batching(self) -> transforms.Batching:
    return transforms.Batching(self.batch_size, length_keys=(), pad_keys=())

  def build_dataset(self) -> tf.data.Dataset:
    if self.mode == "interactive_infer":
      raise ConfigError("interactive_infer reads images given on the command line, not files")
    records, id_shards = self.records()
    common = dict(num_shards=id_shards, shard_index=self.worker_id % id_shards,
                  map_fn=model_inputs)
    if self.mode != "train":
      def process(dataset):
        return dataset.map(lambda element: self.process(element, None),
                           num_parallel_calls=self._parallel, deterministic=True)
      return transforms.inference_pipeline(records, self._batching(), process_fn=process,
                                           **common)

    def augment(dataset):
      # one [2] seed per example, drawn after repeat: every epoch augments differently
      seeds = tf.data.Dataset.random(seed=self._seed).batch(2)
      return tf.data.Dataset.zip((dataset, seeds)).map(
          self.process, num_parallel_calls=self._parallel, deterministic=self._seed is not None)

    p = self.params
    return transforms.training_pipeline(
        records, self._batching(), shuffle_buffer_size=p["shuffle_buffer"] if p["shuffle"]
        else None, seed=self._seed, repeat=p["repeat"], process_fn=augment, **common)

  def dataset_from_inputs(self, inputs: Iterable[Any]) -> tf.data.Dataset:
    """Batches of image files (paths) or uint8 arrays [H, W, C], preprocessed as in eval.

    Images are read here, eagerly, so a missing or broken file is a one-line DataError.
    """
    inputs = list(inputs)
    if not inputs:
      raise DataError("interactive input is empty; give the path of an image file")
    images = []
    for item in inputs:
      if isinstance(item, str):
        image = read_image_file(item, self.NUM_CHANNELS)
      else:
        image = np.asarray(item, np.uint8)
        if image.ndim == 2:
          image = image[:, :, None]
        if image.ndim != 3:
          raise DataError(f"interactive input: expected an image [H, W, C], got shape "
                          f"{image.shape}")
        if image.shape[-1] == 1 and self.NUM_CHANNELS > 1:
          image = np.repeat(image, self.NUM_CHANNELS, axis=-1)
      images.append(self.preprocess_eval(tf.constant(image)).numpy())
    self.interactive_inputs = [i.strip() if isinstance(i, str) else f"<array {n}>"
                               for n, i in enumerate(inputs)]
    examples = tf.data.Dataset.from_tensor_slices(
        {"source": np.stack(images).astype(np.float32),
         "id": np.arange(len(images), dtype=np.int64)})
    return transforms.inference_pipeline(examples, self._batching(), map_fn=model_inputs)
