"""VocoderDataLayer: log mel frames in, the waveform they were computed from out (HiFi-GAN).

The frames are the Tacotron data layer's: the same
:class:`~open_seq2seq.data.text2speech.features.SpectrogramFeatures` computed inside the
``tf.data`` graph from the same audio keys, so a vocoder trained here turns the mel frames
a Tacotron model (trained with the same keys and ``output_type: "mel"``) predicts into
audio.

An utterance of ``n`` samples has ``F = ceil(n / hop)`` frames (centred STFT frames
``0 .. F - 1``, computed over the whole utterance) and its audio is zero-padded to
``F * hop`` samples, so frame ``i`` becomes samples ``i * hop .. (i + 1) * hop - 1``.
Training takes a random segment of ``segment_size // hop`` whole frames (the whole
utterance when it is shorter) and the samples under them; eval and infer take whole
utterances. Training reads whole epochs (:func:`~open_seq2seq.data.transforms.whole_epochs`):
each segment's start is drawn from the per-example seed of the epoch, so a run is repeatable
from ``random_seed`` and a checkpointed input iterator resumes exactly.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

import numpy as np
import tensorflow as tf

from open_seq2seq.data import transforms
from open_seq2seq.data.data_layer import DataLayer
from open_seq2seq.data.description import VocoderDescription
from open_seq2seq.data.speech2text.audio import read_audio
from open_seq2seq.data.text2speech.features import SpectrogramFeatures
from open_seq2seq.data.text2speech.text2speech import AUDIO_PARAMS, DATASETS
from open_seq2seq.data.text2speech.wav_corpus import mel_features, read_wav_csvs
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.utils.params import Param


class VocoderDataLayer(DataLayer):
  """LJSpeech-layout audio for a GAN vocoder (see the module docstring).

  Each CSV line is ``name|raw transcript|normalized transcript`` (``|``-separated, no
  header; only the name is read), audio at ``<dataset_location>/wavs/<name>.wav`` or
  ``<dataset_location>/<name>.wav``.

  Batches in train and eval::

      source_tensors = (mel [B, F, M] float32, frames [B] int32)
      target_tensors = (audio [B, F * hop] float32, samples [B] int32 = frames * hop)

  padded with zeros past each utterance's length. In infer only the source (the mel frames
  of each CSV line's WAV); in ``interactive_infer`` each input line is a ``.wav`` file or a
  ``.npy`` array of mel frames ``[F, M]`` in this layer's feature layout (e.g. a Tacotron
  model's prediction).
  """

  PARAMS = {
      "dataset_files": Param((list, None), None, "CSV files (name|raw|normalized)."),
      "dataset_location": Param((str, None), None, "Folder holding wavs/ or the wavs "
                                "themselves (default: each CSV's folder)."),
      "dataset": Param((str, None), None, "'LJ' (22050 Hz, n_fft 1024) or 'MAILABS' (16 kHz, "
                       "800): sets sampling_rate and n_fft unless given.",
                       choices=(*DATASETS, None)),
      "num_audio_features": Param(int, doc="Mel channels of the input frames."),
      "segment_size": Param(int, 8192, "Training: samples per random segment, rounded down "
                            "to whole frames (shorter utterances are taken whole)."),
      **AUDIO_PARAMS,
      "data_min": Param(float, 1e-5, "Floor of the mel energies before the log."),
      "feature_normalize": Param(bool, False, "Normalize the frames with the mean and std "
                                 "below (as a Tacotron data layer with the same keys)."),
      "feature_normalize_mean": Param(float, 0.0, "Mean subtracted when feature_normalize."),
      "feature_normalize_std": Param(float, 1.0, "Std divided by when feature_normalize."),
      "shuffle": Param(bool, True, "Shuffle training utterances (never in eval/infer)."),
      "repeat": Param(bool, True, "Repeat training data forever (eval/infer: one pass)."),
  }

  def __init__(self, params: dict[str, Any], mode: str = "train", batch_size: int = 16,
               num_workers: int = 1, worker_id: int = 0, random_seed: int | None = None):
    super().__init__(params, mode, batch_size, num_workers, worker_id, random_seed)
    self.features = self._make_features()
    if self.params["segment_size"] < self.features.hop_length:
      raise ConfigError(f"data_layer_params/segment_size: {self.params['segment_size']} "
                        f"samples is less than one frame (hop_length "
                        f"{self.features.hop_length}); use at least that")
    self.names: list[str] = []
    self.paths: list[str] = []
    if mode != "interactive_infer":
      if not self.params["dataset_files"]:
        raise ConfigError(f"data_layer_params/dataset_files: needed in {mode} mode")
      self._read_csvs(self.params["dataset_files"])

  # ------------------------------------------------------------------ configuration
  def _make_features(self) -> SpectrogramFeatures:
    p = self.params
    normalize = p["feature_normalize"]
    return mel_features(p, p["feature_normalize_mean"] if normalize else 0.0,
                        p["feature_normalize_std"] if normalize else 1.0)

  @property
  def segment_frames(self) -> int:
    """Frames per training segment."""
    return self.params["segment_size"] // self.features.hop_length

  @property
  def description(self) -> VocoderDescription:
    return VocoderDescription(features=self.features)

  @property
  def _seed(self) -> int | None:
    return None if self.random_seed is None else self.random_seed * 1000 + self.worker_id

  # ------------------------------------------------------------------ reading CSVs
  def _read_csvs(self, csv_files: list) -> None:
    names, paths = read_wav_csvs(csv_files, self.params["dataset_location"],
                                 self.features.sample_rate, self.params["resample"],
                                 self.worker_id, self.num_workers)
    self.names.extend(names)
    self.paths.extend(paths)

  def _shard_ids(self) -> np.ndarray:
    return np.arange(self.worker_id, len(self.names), self.num_workers, dtype=np.int64)

  def get_size_in_samples(self) -> int:
    return len(self._shard_ids())

  # ------------------------------------------------------------------ throughput
  @property
  def throughput_unit(self) -> str:
    return "s of audio"

  @property
  def unit_scale(self) -> float:
    return 1.0 / self.features.sample_rate

  def count_units(self, batch: dict) -> tf.Tensor:
    """Audio samples of the batch (at inference: the samples its frames become)."""
    if "target_tensors" in batch:
      return tf.cast(tf.reduce_sum(batch["target_tensors"][1]), tf.int64)
    frames = tf.reduce_sum(tf.cast(batch["source_tensors"][1], tf.int64))
    return frames * self.features.hop_length

  # ------------------------------------------------------------------ datasets
  def _batching(self) -> transforms.Batching:
    return transforms.Batching(self.batch_size, length_keys=("mel_length",), pad_keys=())

  def build_dataset(self) -> tf.data.Dataset:
    batching = self._batching()
    if self.mode != "train":
      rows = transforms.slices({"id": np.arange(len(self.names), dtype=np.int64)})
      return transforms.inference_pipeline(
          rows, batching, num_shards=self.num_workers, shard_index=self.worker_id,
          process_fn=lambda rows: rows.map(self._utterance, num_parallel_calls=tf.data.AUTOTUNE),
          map_fn=self._model_inputs)

    def epoch(elements: tf.data.Dataset) -> tf.data.Dataset:
      return batching.batch(elements.map(self._segment, num_parallel_calls=tf.data.AUTOTUNE))

    return transforms.whole_epochs(
        self._shard_ids(), epoch, seed=self._seed, shuffle=self.params["shuffle"],
        repeat=self.params["repeat"]).map(self._model_inputs).prefetch(tf.data.AUTOTUNE)

  def _read(self, index: np.int64) -> np.ndarray:
    return read_audio(self.paths[int(index)], self.features.sample_rate,
                      self.params["resample"]).astype(np.float32)

  def frames_and_audio(self, signal: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(mel [F, M], audio [F * hop]) of a whole utterance ``signal`` [n] (in-graph):
    ``F = ceil(n / hop)``, the audio zero-padded to whole frames."""
    hop = self.features.hop_length
    length = tf.shape(signal)[0]
    frames = (length + hop - 1) // hop
    mel = tf.ensure_shape(self.features.compute(signal)[:frames], [None, self.features.num_mel])
    audio = tf.pad(signal, [[0, frames * hop - length]])
    return mel, audio

  def _load(self, index: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    signal = tf.numpy_function(self._read, [index], tf.float32, stateful=False)
    signal.set_shape([None])
    return self.frames_and_audio(signal)

  def _element(self, mel: tf.Tensor, audio: tf.Tensor, index: tf.Tensor) -> dict:
    return {"mel": mel, "mel_length": tf.shape(mel)[0], "audio": audio,
            "audio_length": tf.shape(audio)[0], "id": index}

  def _utterance(self, row: dict) -> dict:
    mel, audio = self._load(row["id"])
    return self._element(mel, audio, row["id"])

  def _segment(self, element: dict) -> dict:
    """A random segment of whole frames of one utterance, drawn from the element's seed."""
    mel, audio = self._load(element["id"])
    hop, frames = self.features.hop_length, tf.shape(mel)[0]
    wanted = tf.minimum(self.segment_frames, frames)
    seed = tf.stack([element["seed"], element["id"]])
    start = tf.random.stateless_uniform([], seed, 0, frames - wanted + 1, tf.int32)
    return self._element(mel[start:start + wanted], audio[start * hop:(start + wanted) * hop],
                         element["id"])

  def _model_inputs(self, batch: dict) -> dict:
    inputs = {"source_tensors": (batch["mel"], batch["mel_length"]), "id": batch["id"]}
    if "audio" in batch and not self.inference:
      inputs["target_tensors"] = (batch["audio"], batch["audio_length"])
    return inputs

  # ------------------------------------------------------------------ interactive
  def dataset_from_inputs(self, inputs: Iterable[str]) -> tf.data.Dataset:
    """Batches of the mel frames of ``.wav`` files or ``.npy`` frame arrays
    (``interactive_infer``)."""
    paths = [str(s).strip() for s in inputs]
    if not paths or not all(paths):
      raise DataError("interactive input is empty; type the path of a .wav or .npy file")
    mels = [self._interactive_mel(path) for path in paths]
    self.names = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    lengths = np.array([len(m) for m in mels], np.int64)
    rows = transforms.slices({"mel": tf.RaggedTensor.from_row_lengths(
        np.concatenate(mels), lengths), "id": np.arange(len(mels), dtype=np.int64)})
    rows = rows.map(lambda row: {"mel": tf.ensure_shape(row["mel"], [None, mels[0].shape[1]]),
                                 "mel_length": tf.shape(row["mel"])[0], "id": row["id"]})
    return transforms.inference_pipeline(rows, self._batching(), map_fn=self._model_inputs)

  def _interactive_mel(self, path: str) -> np.ndarray:
    num_mel = self.features.num_mel
    if not os.path.isfile(path):
      raise DataError(f"{path}: no such file; give a .wav file or a .npy array of mel frames")
    if path.endswith(".npy"):
      mel = np.load(path).astype(np.float32)
      if mel.ndim != 2 or mel.shape[1] != num_mel or not len(mel):
        raise DataError(f"{path}: expected mel frames [frames, {num_mel}], got shape "
                        f"{mel.shape}")
      return mel
    signal = read_audio(path, self.features.sample_rate, self.params["resample"])
    if not len(signal):
      raise DataError(f"{path}: holds no audio samples")
    return self.frames_and_audio(tf.constant(signal, tf.float32))[0].numpy()
