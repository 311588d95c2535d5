"""SpeechCommandsDataLayer: keyword spotting on Google's Speech Commands, as fixed-size images.

Each clip becomes a log mel spectrogram cropped or padded to ``audio_length`` frames of
``num_audio_features`` mels: an "image" of time x features that the Image2Label family
classifies (OpenSeq2Seq's keyword-spotting recipe). Batches are::

    model_format "jasper": {"source_tensors": (features [B, T, F] float32, lengths [B] int32),
                            "target_tensors": (labels [B] int32,), "id": [B] int64}
    model_format "resnet": {"source_tensors": (images [B, T, F, 1] float32,), ...}

with ``T = audio_length`` and ``F = num_audio_features`` (every length is ``T``: the padding
is part of the image, as in OpenSeq2Seq).

**Lists.** ``dataset_files`` names list files (relative to ``dataset_location`` unless
absolute); each line is either

* ``label,wav_filename`` -- OpenSeq2Seq's preprocessed lists (``v1-12-train.txt`` ...):
  ``label`` a class id in ``[0, num_labels)`` or a class name of ``labels``; or
* ``<word>/<clip>.wav`` -- the data set's own ``validation_list.txt`` / ``testing_list.txt``:
  the class is the folder name.

Paths are relative to ``dataset_location``. The data set ships no training list: an entry
named ``training_list.txt`` that does not exist stands for every ``<word>/*.wav`` not listed
in ``validation_list.txt`` or ``testing_list.txt`` (the data set's own rule).

**Classes.** ``labels`` names the classes in id order; by default the word folders of
``dataset_location``, sorted, when a list names clips by folder (in interactive_infer, when
there are ``num_labels`` folders); lists of class ids alone leave the classes unnamed. With ``_unknown_`` among them, words outside ``labels`` are that
class (else they are an error); with ``_silence_``, each list gets one clip of background
noise per average class size (clips of ``_background_noise_/*.wav``).

**Augmentation** (``augment_data``, training only): a random speed change of up to 20 %
(OpenSeq2Seq's time stretch), then, with probability 0.8, a random stretch of a
``_background_noise_`` file at a random volume up to 0.1 of full scale (white noise at
-90..-46 dB when the folder has none). Evaluation crops the centre; training crops at random.
"""

from __future__ import annotations

import glob
import os
import threading
from typing import Any, Iterable

import numpy as np
import tensorflow as tf

from open_seq2seq.data import transforms
from open_seq2seq.data.data_layer import DataLayer
from open_seq2seq.data.description import ImageDescription
from open_seq2seq.data.speech2text.audio import change_speed, read_audio
from open_seq2seq.data.speech2text.features import FeatureExtractor
from open_seq2seq.data.speech2text.speech_command_lists import (SILENCE, is_csv_list,
                                                                read_list, word_folders)
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.utils.params import Param

BACKGROUND_NOISE = "_background_noise_"
MODEL_FORMATS = ("jasper", "resnet")

MAX_SPEED_CHANGE = 0.2  # OpenSeq2Seq's time_stretch_ratio
NOISE_PROBABILITY = 0.8
MAX_NOISE_VOLUME = 0.1
WHITE_NOISE_DB = (-90.0, -46.0)  # OpenSeq2Seq's noise_level_min/max


def _str_list(value: Any) -> bool:
  return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


_str_list.type_name = "list of str"


def fix_length(features: np.ndarray, length: int, rng: np.random.Generator | None
               ) -> np.ndarray:
  """Crops (at random with ``rng``, else the centre) or symmetrically zero-pads the frames of
  ``features`` [frames, F] to exactly ``length`` (OpenSeq2Seq put the odd frame on the right)."""
  frames = len(features)
  if frames > length:
    start = int(rng.integers(0, frames - length + 1)) if rng is not None \
        else (frames - length) // 2
    return features[start:start + length]
  left = (length - frames) // 2
  return np.pad(features, ((left, length - frames - left), (0, 0)))


def noise_clip(noises: list[np.ndarray], length: int, rng: np.random.Generator) -> np.ndarray:
  """``length`` samples from a random place of a random background noise file (tiled when
  the file is shorter), peak-normalised."""
  noise = noises[int(rng.integers(len(noises)))]
  if len(noise) < length:
    noise = np.tile(noise, -(-length // len(noise)))
  start = int(rng.integers(0, len(noise) - length + 1))
  clip = noise[start:start + length]
  return clip / (np.max(np.abs(clip), initial=0.0) + 1e-6)


def mix_noise(signal: np.ndarray, noises: list[np.ndarray], rng: np.random.Generator
              ) -> np.ndarray:
  """``signal`` plus background noise at a random volume (see the module docstring)."""
  if noises:
    if rng.random() >= NOISE_PROBABILITY:
      return signal
    noise = noise_clip(noises, len(signal), rng) * rng.uniform(0.0, MAX_NOISE_VOLUME)
  else:
    noise = rng.standard_normal(len(signal)) * 10 ** (rng.uniform(*WHITE_NOISE_DB) / 20)
  return np.clip(signal + noise, -1.0, 1.0).astype(np.float32)


class SpeechCommandsDataLayer(DataLayer):
  """Speech Commands clips as fixed-size log mel images with one class each.

  Parameter names are OpenSeq2Seq's; ``labels``, ``sample_freq``, ``shuffle_buffer`` are
  additions. The description is an
  :class:`~open_seq2seq.data.description.ImageDescription` (``image_size = audio_length``,
  one channel), so Image2Label reports accuracy on it.
  """

  PARAMS = {
      "dataset_files": Param((_str_list, None), None, "List files (label,wav_filename CSV "
                             "lines or <word>/<clip>.wav lines), relative to dataset_location "
                             "(not needed in interactive_infer)."),
      "dataset_location": Param(str, doc="Root of the data set (<word>/*.wav, "
                                "_background_noise_/)."),
      "num_audio_features": Param(int, doc="Mel bands per frame (the image height)."),
      "audio_length": Param(int, doc="Frames per clip after cropping/padding (image width)."),
      "num_labels": Param(int, doc="Number of classes."),
      "model_format": Param(str, doc="jasper: [B, T, F] and lengths (TDNNEncoder); resnet: "
                            "[B, T, F, 1] images (ResNetEncoder).", choices=MODEL_FORMATS),
      "labels": Param((_str_list, None), None, "Class names in id order (default: the word "
                      "folders of dataset_location, sorted); may hold _unknown_, _silence_."),
      "cache_data": Param(bool, False, "Keep decoded clips in memory after their first read "
                          "(augmentation still changes every epoch)."),
      "augment_data": Param(bool, False, "Training: random speed change and background noise."),
      "repeat_samples": Param(int, 0, "Extra copies of the list (each copy augmented anew)."),
      "sample_freq": Param(int, 16000, "Audio rate in Hz (other rates are resampled)."),
      "shuffle": Param(bool, True, "Shuffle training clips (never in eval/infer)."),
      "shuffle_buffer": Param((int, None), None, "Clips in the shuffle buffer (None: all)."),
      "repeat": Param(bool, True, "Repeat training data forever (eval/infer: one pass)."),
  }

  def __init__(self, params: dict[str, Any], mode: str = "train", batch_size: int = 32,
               num_workers: int = 1, worker_id: int = 0, random_seed: int | None = None):
    super().__init__(params, mode, batch_size, num_workers, worker_id, random_seed)
    p = self.params
    for key in ("num_audio_features", "audio_length", "num_labels"):
      if p[key] < 1:
        raise ConfigError(f"data_layer_params/{key}: must be at least 1, got {p[key]}")
    if p["repeat_samples"] < 0:
      raise ConfigError("data_layer_params/repeat_samples: must be 0 or more")
    self.extractor = FeatureExtractor("logfbank", p["num_audio_features"], p["sample_freq"])
    self.labels: list[str] | None = list(p["labels"]) if p["labels"] else None
    self.paths: list[str | None] = []  # None: a _silence_ clip
    self.targets = np.zeros([0], np.int32)
    self.noises: list[np.ndarray] = []
    self.interactive_inputs: list[str] = []
    self._cache: dict[str, np.ndarray] = {}
    self._lock = threading.Lock()
    if mode != "interactive_infer":
      self._read_lists()
    elif self.labels is None and os.path.isdir(p["dataset_location"]):
      # no lists to tell: name the classes after the word folders when they fit
      folders = word_folders(p["dataset_location"])
      self.labels = folders if len(folders) == p["num_labels"] else None

  # ------------------------------------------------------------------ reading
  def _read_lists(self) -> None:
    p = self.params
    location = p["dataset_location"]
    if not p["dataset_files"]:
      raise ConfigError(f"data_layer_params/dataset_files: needed in {self.mode} mode (e.g. "
                        f"['testing_list.txt'] for infer)")
    if not os.path.isdir(location):
      raise DataError(f"data_layer_params/dataset_location: folder {location} does not exist; "
                      f"make one with scripts/make_speech_commands.py")
    if self.labels is None and any(not is_csv_list(location, name) for name in p["dataset_files"]):
      self.labels = word_folders(location)
    if self.labels is not None and len(self.labels) != p["num_labels"]:
      raise ConfigError(f"data_layer_params/num_labels: {p['num_labels']} classes but labels "
                        f"names {len(self.labels)} ({', '.join(self.labels[:5])}...)")
    items = []
    for name in p["dataset_files"]:
      items += read_list(location, name, self.labels, p["num_labels"])
    if not items:
      raise DataError(f"data_layer_params/dataset_files: {', '.join(p['dataset_files'])} "
                      f"hold no clips")
    noise_files = sorted(glob.glob(os.path.join(location, BACKGROUND_NOISE, "*.wav")))
    silence = self.labels is not None and SILENCE in self.labels
    if silence or (p["augment_data"] and self.mode == "train"):
      self.noises = [read_audio(f, p["sample_freq"]) for f in noise_files]
      self.noises = [n for n in self.noises if len(n)]
    if silence:
      if not self.noises:
        raise DataError(f"data_layer_params/labels: {SILENCE} needs noise clips in "
                        f"{os.path.join(location, BACKGROUND_NOISE)}/*.wav")
      items += [(None, self.labels.index(SILENCE))] * max(1, len(items) // (len(self.labels) - 1))
    items = items * (1 + p["repeat_samples"])
    self.paths = [path for path, _ in items]
    self.targets = np.array([label for _, label in items], np.int32)

  # ------------------------------------------------------------------ one clip
  def _signal(self, index: int, rng: np.random.Generator) -> np.ndarray:
    """The clip's samples (a stretch of background noise for a _silence_ clip)."""
    rate = self.params["sample_freq"]
    path = self.paths[index]
    if path is None:
      return (noise_clip(self.noises, rate, rng) * rng.uniform(0.0, 1.0)).astype(np.float32)
    if not self.params["cache_data"]:
      return read_audio(path, rate)
    with self._lock:
      cached = self._cache.get(path)
    if cached is None:
      signal = read_audio(path, rate)
      cached = np.round(np.clip(signal, -1, 1) * 32767).astype(np.int16)  # half the memory
      with self._lock:
        self._cache[path] = cached
    return cached.astype(np.float32) / 32767

  def featurize(self, signal: np.ndarray, rng: np.random.Generator | None = None,
                augment: bool = False) -> np.ndarray:
    """One clip's image: [audio_length, F] (jasper) or [audio_length, F, 1] (resnet).

    With ``rng`` (training) long clips are cropped at random, else at the centre; ``augment``
    changes the speed and adds noise first.
    """
    if augment:
      signal = change_speed(signal, 1.0 + rng.uniform(-MAX_SPEED_CHANGE, MAX_SPEED_CHANGE))
      signal = mix_noise(signal, self.noises, rng)
    features = np.asarray(self.extractor(signal), np.float32)
    image = fix_length(features, self.params["audio_length"], rng)
    if self.params["model_format"] == "resnet":
      image = image[:, :, None]
    return image.astype(np.float32, copy=False)

  def _load(self, index: np.int64, seed: np.int64):
    index = int(index)
    train = self.mode == "train"
    # eval's silence clips depend on the clip alone, so every eval pass sees the same ones
    rng = np.random.default_rng(int(seed) & 0x7FFFFFFFFFFFFFFF if train else index)
    image = self.featurize(self._signal(index, rng), rng if train else None,
                           augment=train and self.params["augment_data"])
    return image, self.targets[index]

  # ------------------------------------------------------------------ datasets
  @property
  def description(self) -> ImageDescription:
    p = self.params
    return ImageDescription(image_size=p["audio_length"], num_channels=1,
                            num_classes=p["num_labels"],
                            class_names=tuple(self.labels) if self.labels else None)

  @property
  def _seed(self) -> int | None:
    return None if self.random_seed is None else self.random_seed * 1000 + self.worker_id

  def get_size_in_samples(self) -> int:
    return len(range(self.worker_id, len(self.paths), self.num_workers))

  @property
  def throughput_unit(self) -> str:
    return "clips"

  def _image_shape(self) -> list[int]:
    p = self.params
    shape = [p["audio_length"], p["num_audio_features"]]
    return shape + [1] if p["model_format"] == "resnet" else shape

  def _model_inputs(self, batch: dict) -> dict:
    source = batch["source"]
    if self.params["model_format"] == "jasper":
      lengths = tf.fill([tf.shape(source)[0]], tf.constant(self.params["audio_length"]))
      inputs = {"source_tensors": (source, lengths), "id": batch["id"]}
    else:
      inputs = {"source_tensors": (source,), "id": batch["id"]}
    if "target" in batch:
      inputs["target_tensors"] = (batch["target"],)
    return inputs

  def _batching(self) -> transforms.Batching:
    return transforms.Batching(self.batch_size, length_keys=(), pad_keys=())

  def _process(self, rows: tf.data.Dataset) -> tf.data.Dataset:
    shape = self._image_shape()
    with_targets = not self.inference

    def load(row, seed):
      image, label = tf.numpy_function(self._load, [row["id"], seed], [tf.float32, tf.int32],
                                       stateful=False)
      image.set_shape(shape)
      element = {"source": image, "id": row["id"]}
      if with_targets:
        element["target"] = tf.reshape(label, [])
      return element

    # one seed per clip, drawn after repeat: every epoch augments differently
    seeds = tf.data.Dataset.random(seed=self._seed)
    return tf.data.Dataset.zip((rows, seeds)).map(load, num_parallel_calls=tf.data.AUTOTUNE,
                                                  deterministic=self._seed is not None)

  def build_dataset(self) -> tf.data.Dataset:
    p = self.params
    if self.mode == "interactive_infer":
      raise ConfigError("interactive_infer reads audio files given on the command line")
    rows = tf.data.Dataset.from_tensor_slices({"id": np.arange(len(self.paths), dtype=np.int64)})
    common = dict(num_shards=self.num_workers, shard_index=self.worker_id,
                  process_fn=self._process, map_fn=self._model_inputs)
    if self.mode != "train":
      return transforms.inference_pipeline(rows, self._batching(), **common)
    buffer = (p["shuffle_buffer"] or max(1, self.get_size_in_samples())) if p["shuffle"] \
        else None
    return transforms.training_pipeline(rows, self._batching(), shuffle_buffer_size=buffer,
                                        seed=self._seed, repeat=p["repeat"], **common)

  def dataset_from_inputs(self, inputs: Iterable[Any]) -> tf.data.Dataset:
    """Batches of WAV files (paths) or 1-D sample arrays at ``sample_freq``, as in eval."""
    inputs = list(inputs)
    if not inputs:
      raise DataError("interactive input is empty; give the path of a WAV file")
    images = []
    for item in inputs:
      if isinstance(item, str):
        path = os.path.expanduser(item.strip())
        if not os.path.isfile(path):
          raise DataError(f"{path}: audio file not found")
        signal = read_audio(path, self.params["sample_freq"])
      else:
        signal = np.asarray(item, np.float32).reshape(-1)
      images.append(self.featurize(signal))
    self.interactive_inputs = [i.strip() if isinstance(i, str) else f"<array {n}>"
                               for n, i in enumerate(inputs)]
    examples = tf.data.Dataset.from_tensor_slices(
        {"source": np.stack(images), "id": np.arange(len(images), dtype=np.int64)})
    return transforms.inference_pipeline(examples, self._batching(), map_fn=self._model_inputs)

  # ------------------------------------------------------------------ for the model
  def image_name(self, index: int) -> str:
    """The clip's path relative to dataset_location (``_silence_:<id>`` for noise clips)."""
    if self.interactive_inputs:
      return self.interactive_inputs[index]
    path = self.paths[index]
    if path is None:
      return f"{SILENCE}:{index}"
    return os.path.relpath(path, self.params["dataset_location"])

  def label(self, index: int) -> int | None:
    return int(self.targets[index]) if 0 <= index < len(self.targets) else None
