"""Speech2TextDataLayer: LibriSpeech-style CSV + audio files -> padded feature batches.

Each CSV has the header ``wav_filename,wav_filesize,transcript`` (``wav_filesize`` may be
absent; ``transcript`` may be absent for inference). Audio is decoded with libsndfile (WAV,
FLAC ...) in a numpy step of ``tf.data`` (parallel map), features are TF ops in the same
graph (:meth:`FeatureExtractor.features_graph`), and batches are::

    {"source_tensors": (features [B, T, F] float32, lengths [B] int32),
     "target_tensors": (ids [B, L] int32, lengths [B] int32),   # not in infer mode
     "id": [B] int64}                                             # row index over all CSVs

``T`` is rounded up to a multiple of ``pad_to``; ``lengths`` are real frame counts.
Targets are character ids (CTC blank = the last class, ``tgt_vocab_size - 1``). Batches come
from :func:`open_seq2seq.data.transforms.training_pipeline` (``inference_pipeline`` in eval
and infer); decoding and featurizing run in its ``process`` step, after shuffling.
"""

from __future__ import annotations

import csv
import os
from typing import Any, Iterable

import numpy as np
import tensorflow as tf

from open_seq2seq.data import transforms
from open_seq2seq.data.data_layer import DataLayer
from open_seq2seq.data.description import SpeechDescription
from open_seq2seq.data.speech2text import buckets
from open_seq2seq.data.speech2text.audio import check_audio_header, peak_normalize, read_audio
from open_seq2seq.data.speech2text.augmentation import (AUGMENTATION, augment_signal,
                                                        has_signal_augmentation, has_spec_augment,
                                                        spec_augment)
from open_seq2seq.data.speech2text.feature_cache import FeatureCache
from open_seq2seq.data.speech2text.features import (BACKENDS, INPUT_TYPES, WINDOWS,
                                                    FeatureExtractor)
from open_seq2seq.data.speech2text.targets import TargetEncoder
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.utils.params import Param

#: Parameters that determine the features (the feature-cache key).
_FEATURE_KEYS = ("input_type", "num_audio_features", "sample_freq", "window_size",
                 "window_stride", "window", "num_fft", "norm_per_feature", "resample", "backend")


class Speech2TextDataLayer(DataLayer):
  """Audio + transcript CSVs for CTC speech recognition (OpenSeq2Seq's parameter names).

  The target alphabet reaches the model through :attr:`description`. In train mode it
  shuffles (seeded by ``random_seed`` and the worker), repeats, augments and drops
  utterances outside ``[min_duration, max_duration]``; eval and infer read every row once, in
  file order, without augmentation or dither; interactive_infer reads no CSV and transcribes
  the files it is given (:meth:`dataset_from_inputs`). Throughput is counted in seconds of
  audio (feature frames times ``window_stride``). ``batching: "duration"``: batches of up to
  ``batch_duration`` s of padded audio, by duration buckets (:mod:`.buckets`).
  """

  PARAMS = {
      "num_audio_features": Param(int, doc="Features per frame."),
      "input_type": Param(str, doc="Feature type.", choices=INPUT_TYPES),
      "vocab_file": Param(str, doc="Character vocabulary (one symbol per line) or a "
                          "SentencePiece model (with bpe=True or a .model file)."),
      "dataset_files": Param((list, None), None,
                             "CSV files (wav_filename,wav_filesize,transcript), read in order."),
      "bpe": Param(bool, False, "vocab_file is a SentencePiece model."),
      "autoregressive": Param(bool, False, "Targets for an attention decoder: <S> and </S> "
                              "join the vocabulary and every target ends with </S>."),
      "sample_freq": Param(int, 16000, "Audio rate in Hz the features are computed at."),
      "resample": Param(bool, True, "Resample files at another rate (else a DataError)."),
      "window_size": Param(float, 20e-3, "Analysis window in seconds."),
      "window_stride": Param(float, 10e-3, "Hop between frames in seconds."),
      "window": Param(str, "hanning", "Window function.", choices=WINDOWS),
      "num_fft": Param((int, None), None,
                       "FFT size (default: window length for spectrogram, else next power of 2)."),
      "dither": Param(float, 0.0, "Gaussian noise added to the normalised signal (train only)."),
      "norm_per_feature": Param(bool, False,
                                "Normalise each feature over time (else one global mean/std)."),
      "pad_to": Param(int, 8, "Round the batch's time dimension up to a multiple of this."),
      "max_duration": Param((float, None), None, "Train: drop utterances longer (seconds)."),
      "min_duration": Param((float, None), None, "Train: drop utterances shorter (seconds)."),
      "augmentation": Param((AUGMENTATION, None), None, "Train-time augmentation."),
      "shuffle": Param(bool, True, "Shuffle training utterances (never in eval/infer)."),
      "repeat": Param(bool, True, "Repeat training data forever (eval/infer: one pass)."),
      "cache_features": Param(bool, False,
                              "Cache un-augmented features on disk (dither is then not applied)."),
      "cache_format": Param((str, None), None, "Ignored: the cache holds one .npy file per "
                            "utterance (OpenSeq2Seq offered hdf5 or npy).",
                            choices=(None, "hdf5", "npy")),
      "cache_dir": Param((str, None), None,
                         "Feature cache folder (default: feature_cache/ next to the first CSV)."),
      "cache_regenerate": Param(bool, False, "Recompute and overwrite cached features."),
      "backend": Param(str, "librosa", "librosa: TF ops equal to librosa's features (in the "
                       "tf.data graph); psf: python_speech_features in numpy (if installed).",
                       choices=BACKENDS),
      "precompute_mel_basis": Param(bool, True,
                                    "Ignored: the mel basis is always computed once."),
      **buckets.BATCHING_PARAMS,
  }

  def __init__(self, params: dict[str, Any], mode: str = "train", batch_size: int = 32,
               num_workers: int = 1, worker_id: int = 0, random_seed: int | None = None):
    super().__init__(params, mode, batch_size, num_workers, worker_id, random_seed)
    p = self.params
    self.targets = TargetEncoder(p["vocab_file"], p["bpe"], p["autoregressive"])
    # validated (defaults filled, alias resolved) with the params, by the base class
    self.augmentation = dict(p["augmentation"] or {}) if mode == "train" else {}
    self.extractor = FeatureExtractor.from_params(p)
    buckets.check_batching_params(p)  # pad_to and the batching keys
    self.wav_filenames: list[str] = []  # as written in the CSVs (echoed by inference)
    self.paths: list[str] = []           # resolved paths
    self.transcripts: list[str] = []
    self._target_ids: list[list[int]] = []
    # interactive inference transcribes typed paths: the infer CSVs need not exist
    if p["dataset_files"] is not None and mode != "interactive_infer":
      self._read_csvs(p["dataset_files"])
    self._header_lengths = buckets.HeaderLengths(self.paths, p["sample_freq"], p["resample"],
                                                 self.extractor)
    if self.paths and buckets.bucketed(p) and worker_id == 0:
      buckets.print_over_budget_notice(p, self._kept()[1], self.extractor, mode)
    self.cache = None
    if p["cache_features"]:
      directory = p["cache_dir"] or os.path.join(
          os.path.dirname(os.path.abspath(p["dataset_files"][0])) if p["dataset_files"]
          else ".", "feature_cache")
      self.cache = FeatureCache(directory, {k: p[k] for k in _FEATURE_KEYS},
                                p["cache_regenerate"])
    self.interactive_inputs: list[str] = []

  @property
  def _seed(self) -> int | None:
    """Seed of this worker's shuffle and augmentation (None: unseeded)."""
    return None if self.random_seed is None else self.random_seed * 1000 + self.worker_id

  @property
  def description(self) -> SpeechDescription:
    """Features per frame and the target alphabet, for the model's components."""
    return SpeechDescription(
        num_audio_features=self.params["num_audio_features"],
        tgt_vocab_size=self.targets.vocab_size,
        idx2char=self.targets.idx2char, char2idx=self.targets.char2idx,
        start_id=self.targets.start_id, end_id=self.targets.end_id)

  # ------------------------------------------------------------------ reading CSVs
  def _read_csvs(self, csv_files: list) -> None:
    p = self.params
    need_transcript = not self.inference
    for csv_path in csv_files:
      if not isinstance(csv_path, str) or not os.path.isfile(csv_path):
        raise DataError(f"data_layer_params/dataset_files: {csv_path} does not exist")
      base = os.path.dirname(os.path.abspath(csv_path))
      with open(csv_path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames or []
        if "wav_filename" not in columns or (need_transcript and "transcript" not in columns):
          raise DataError(f"{csv_path}: header must be wav_filename,wav_filesize,transcript; "
                          f"found {','.join(columns) or 'nothing'}")
        for row in reader:
          where = f"{csv_path}:{reader.line_num}"
          name = (row.get("wav_filename") or "").strip()
          if not name:
            raise DataError(f"{where}: empty wav_filename")
          self.wav_filenames.append(name)
          self.paths.append(_resolve(name, base, where))
          if (len(self.paths) - 1) % self.num_workers == self.worker_id:  # this shard's rows:
            # each file's header is read once per job, not once per worker
            check_audio_header(self.paths[-1], p["sample_freq"], p["resample"], where)
          transcript = row.get("transcript") or ""
          self.transcripts.append(self.targets.normalize(transcript))
          if need_transcript:
            self._target_ids.append(self.targets.encode(transcript, where))
    if not self.paths:
      raise DataError(f"data_layer_params/dataset_files: {', '.join(map(str, csv_files))} "
                      f"hold no utterances")

  # ------------------------------------------------------------------ one utterance
  def featurize(self, path: str, rng: np.random.Generator | None = None,
                augment: bool = False) -> tuple[np.ndarray, float]:
    """Features of one file and its duration in seconds (augmented if ``augment``)."""
    p = self.params
    signal_aug = augment and has_signal_augmentation(self.augmentation)
    features = None
    if self.cache is not None and not signal_aug:
      features = self.cache.load(path)
    if features is None:
      signal = peak_normalize(read_audio(path, p["sample_freq"], p["resample"]))
      if signal_aug:
        signal = augment_signal(signal, self.augmentation, rng)
      if augment and p["dither"] > 0 and self.cache is None:
        signal = signal + p["dither"] * rng.standard_normal(len(signal), dtype=np.float32)
      features = self.extractor(signal)
      if self.cache is not None and not signal_aug:
        self.cache.save(path, features)
    if augment and has_spec_augment(self.augmentation):
      features = spec_augment(features, self.augmentation,
                              rng.integers(0, 2 ** 31, size=2)).numpy()
    duration = (len(features) - 1) * self.extractor.hop_length / p["sample_freq"]
    return features.astype(np.float32, copy=False), float(duration)

  def _load(self, index: np.int64, seed: np.int64):
    """numpy step: the (augmented) waveform, or features read from the cache or computed by
    the numpy-only "psf" backend (then the waveform is empty and ``ready`` is True)."""
    p = self.params
    index = int(index)
    path = self.paths[index]
    signal_aug = self.mode == "train" and has_signal_augmentation(self.augmentation)
    features = None
    if self.cache is not None and not signal_aug:
      features = self.cache.load(path)
    signal = np.zeros([0], np.float32)
    if features is None:
      signal = read_audio(path, p["sample_freq"], p["resample"])
      if signal_aug:
        rng = np.random.default_rng(int(seed) & 0x7FFFFFFFFFFFFFFF)
        signal = augment_signal(peak_normalize(signal), self.augmentation, rng)
      if not self.extractor.in_graph:
        features = self.extractor(signal)
        if self.cache is not None and not signal_aug:
          self.cache.save(path, features)
    ready = features is not None
    if features is None:
      features = np.zeros([0, p["num_audio_features"]], np.float32)
    targets = (np.asarray(self._target_ids[index], np.int32) if self._target_ids
               else np.zeros([0], np.int32))
    return (signal, features.astype(np.float32, copy=False), np.bool_(ready), targets,
            np.int32(len(targets)))

  def _save(self, index: np.int64, features: np.ndarray) -> np.bool_:
    self.cache.save(self.paths[int(index)], features)
    return np.bool_(True)

  # ------------------------------------------------------------------ datasets
  def get_size_in_samples(self) -> int:
    """Rows of this worker's shard (train's duration filter is only known after decoding)."""
    return len(range(self.worker_id, len(self.paths), self.num_workers))

  @property
  def throughput_unit(self) -> str:
    return "s of audio"

  @property
  def unit_scale(self) -> float:
    """Seconds of audio per feature frame."""
    return float(self.params["window_stride"])

  def count_units(self, batch: dict) -> tf.Tensor:
    """Real (non-padding) feature frames of a batch."""
    return tf.reduce_sum(tf.cast(batch["source_tensors"][1], tf.int64))

  def _kept(self) -> tuple[np.ndarray, np.ndarray]:
    """Rows and header frame counts this shard reads (train: within min/max_duration)."""
    train = self.mode == "train"
    return self._header_lengths.shard(self.num_workers, self.worker_id, train and self.params)

  def _batching(self, bucketed: bool = True) -> transforms.Batching:
    p = self.params
    if not (bucketed and buckets.bucketed(p)):
      return transforms.Batching(self.batch_size, pad_multiple=p["pad_to"], pad_keys=("source",))
    return buckets.make_batching(p, self.batch_size, self._kept()[1], self.extractor,
                                 buckets.max_speed(self.augmentation))

  def batches_per_epoch(self) -> int:
    """Batches of one pass over this shard (bucketed: from the headers' frame counts)."""
    if not buckets.bucketed(self.params):
      return super().batches_per_epoch()
    return self._batching().count_batches(self._kept()[1])

  def build_dataset(self) -> tf.data.Dataset:
    p = self.params
    if p["dataset_files"] is None:
      raise ConfigError(f"data_layer_params/dataset_files: needed in {self.mode} mode")
    rows = tf.data.Dataset.from_tensor_slices({"id": np.arange(len(self.paths), dtype=np.int64)})
    common = dict(num_shards=self.num_workers, shard_index=self.worker_id,
                  process_fn=self._process)
    if self.mode != "train":
      return transforms.inference_pipeline(rows, self._batching(), **common)
    if buckets.bucketed(p):  # whole epochs: no batch straddles two, batches_per_epoch is exact
      batching = self._batching()
      return transforms.whole_epochs(
          self._kept()[0], lambda epoch: batching.batch(self._process(epoch)), seed=self._seed,
          shuffle=p["shuffle"], repeat=p["repeat"]).map(transforms.model_inputs).prefetch(
              tf.data.AUTOTUNE)
    buffer = max(1, self.get_size_in_samples()) if p["shuffle"] else None
    return transforms.training_pipeline(rows, self._batching(), shuffle_buffer_size=buffer,
                                        seed=self._seed, repeat=p["repeat"], **common)

  def _process(self, rows: tf.data.Dataset) -> tf.data.Dataset:
    """Row ids -> decoded, featurized (and in train augmented, duration-filtered) examples."""
    num_features = self.params["num_audio_features"]
    with_targets = not self.inference

    train = self.mode == "train"
    dither = self.params["dither"] if train and self.cache is None else 0.0
    save = self.cache is not None and not (train and has_signal_augmentation(self.augmentation))
    masks = train and has_spec_augment(self.augmentation)
    seconds_per_frame = self.extractor.hop_length / self.params["sample_freq"]

    def features_of(row, signal, dither_seed):
      x = self.extractor.features_graph(signal, dither, dither_seed)
      if save:  # computed here, not read from the cache: store it
        saved = tf.numpy_function(self._save, [row["id"], x], tf.bool, stateful=True)
        with tf.control_dependencies([saved]):
          x = tf.identity(x)
      return x

    def load(row, seed):
      signal, x, ready, y, y_len = tf.numpy_function(
          self._load, [row["id"], seed],
          [tf.float32, tf.float32, tf.bool, tf.int32, tf.int32], stateful=False)
      signal.set_shape([None])
      x.set_shape([None, num_features])
      # per-example stateless seeds: dither and masks are functions of (seed, id)
      dither_seed, mask_seed = tf.unstack(tf.random.experimental.stateless_split(
          tf.stack([seed, row["id"]]), 2))
      if self.extractor.in_graph:
        x = tf.cond(tf.reshape(ready, []), lambda: x,
                    lambda: features_of(row, signal, dither_seed))
        x.set_shape([None, num_features])
      if masks:
        x = spec_augment(x, self.augmentation, mask_seed)
      x_len = tf.shape(x, out_type=tf.int32)[0]
      duration = tf.cast(x_len - 1, tf.float32) * seconds_per_frame
      element = {"source": x, "source_length": x_len, "id": row["id"], "duration": duration}
      if with_targets:
        y.set_shape([None])
        element.update(target=y, target_length=tf.reshape(y_len, []))
      return element

    # a seed per example, after repeat (whole epochs: of epoch and id): epochs augment anew
    seeded = (rows.map(lambda row: (row, row["seed"])) if "seed" in rows.element_spec
              else tf.data.Dataset.zip((rows, tf.data.Dataset.random(seed=self._seed))))
    dataset = seeded.map(load, num_parallel_calls=tf.data.AUTOTUNE)
    if self.mode == "train":
      dataset = dataset.filter(self._duration_filter())
    return dataset

  def _duration_filter(self):
    low, high = self.params["min_duration"], self.params["max_duration"]

    def keep(element):
      duration = element["duration"]
      ok = tf.constant(True)
      if high is not None and high > 0:
        ok = tf.logical_and(ok, duration <= high)
      if low is not None and low > 0:
        ok = tf.logical_and(ok, duration >= low)
      return ok

    return keep

  def dataset_from_inputs(self, inputs: Iterable[Any]) -> tf.data.Dataset:
    """Batches of audio files (paths) or 1-D sample arrays at ``sample_freq``, no targets.

    Inputs are featurized here, eagerly, so a missing file is a one-line DataError.
    """
    inputs = list(inputs)
    if not inputs:
      raise DataError("interactive input is empty; give the path of an audio file")
    features = []
    for item in inputs:
      if isinstance(item, str):
        path = os.path.expanduser(item.strip())
        if not os.path.isfile(path):
          raise DataError(f"{path}: audio file not found")
        features.append(self.featurize(path)[0])
      else:
        signal = peak_normalize(np.asarray(item, np.float32).reshape(-1))
        features.append(self.extractor(signal))
    self.interactive_inputs = [i if isinstance(i, str) else f"<array {n}>"
                               for n, i in enumerate(inputs)]
    lengths = np.array([len(f) for f in features], np.int32)
    examples = transforms.slices({
        "source": tf.RaggedTensor.from_row_lengths(np.concatenate(features),
                                                   lengths.astype(np.int64)),
        "source_length": lengths, "id": np.arange(len(features), dtype=np.int64)})
    return transforms.inference_pipeline(examples, self._batching(bucketed=False))

  # ------------------------------------------------------------------ for the model
  def wav_filename(self, index: int) -> str:
    """The CSV's name of row ``index`` (or the interactive input)."""
    if self.interactive_inputs:
      return self.interactive_inputs[index]
    return self.wav_filenames[index]


def _resolve(name: str, csv_dir: str, where: str) -> str:
  """A relative path is taken from the working directory (as OpenSeq2Seq did), else from
  the CSV's folder."""
  if os.path.isabs(name):
    if not os.path.isfile(name):
      raise DataError(f"{where}: audio file {name} not found")
    return name
  if os.path.isfile(name):
    return name
  beside = os.path.join(csv_dir, name)
  if os.path.isfile(beside):
    return beside
  raise DataError(f"{where}: audio file {name} not found in the working directory nor in "
                  f"{csv_dir}")
