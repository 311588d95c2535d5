"""WavenetDataLayer: mel frames in, mu-law quantized audio samples out (a WaveNet vocoder).

Training and eval read windows of ``window_size`` samples (whole frames) and their mel
frames; the mel frames are computed inside the ``tf.data`` graph over the whole utterance
(:class:`~open_seq2seq.data.text2speech.features.SpectrogramFeatures`, centred STFT frames)
and then sliced, so a window's conditioning is exactly the utterance's. Frame ``i`` conditions
samples ``i * hop .. (i + 1) * hop - 1`` (the encoder repeats each frame ``hop`` times, as
OpenSeq2Seq's data layer did with ``np.repeat``).

Samples become ids in ``[0, quantization_channels)`` by mu-law companding (:func:`mu_law_encode`);
the encoder's input at position ``t`` is the id of sample ``t - 1`` (the true previous sample,
or silence at the start of an utterance) and the target is the id of sample ``t``.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

import numpy as np
import tensorflow as tf

from open_seq2seq.data import transforms
from open_seq2seq.data.data_layer import DataLayer
from open_seq2seq.data.description import WavenetDescription
from open_seq2seq.data.speech2text.audio import read_audio
from open_seq2seq.data.text2speech.features import SpectrogramFeatures
from open_seq2seq.data.text2speech.text2speech import AUDIO_PARAMS, DATASETS
from open_seq2seq.data.text2speech.wav_corpus import mel_features, read_wav_csvs
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.utils.params import Param


# ----------------------------------------------------------------------------- mu-law
def mu_law_encode(audio: tf.Tensor, channels: int) -> tf.Tensor:
  """int32 ids in ``[0, channels)`` of float samples (clipped to [-1, 1]), in-graph.

  ``id = floor((sign(x) * log(1 + mu |x|) / log(1 + mu) + 1) / 2 * mu + 0.5)`` with
  ``mu = channels - 1``: silence (0.0) is id ``channels // 2``.
  """
  mu = float(channels - 1)
  audio = tf.clip_by_value(tf.cast(audio, tf.float32), -1.0, 1.0)
  companded = tf.sign(audio) * tf.math.log1p(mu * tf.abs(audio)) / np.log1p(mu)
  return tf.cast(tf.floor((companded + 1.0) / 2.0 * mu + 0.5), tf.int32)


def mu_law_decode(ids: np.ndarray, channels: int) -> np.ndarray:
  """float32 samples in [-1, 1] of mu-law ids (the inverse of :func:`mu_law_encode` up to
  the bin width)."""
  mu = float(channels - 1)
  companded = 2.0 * np.asarray(ids, np.float64) / mu - 1.0
  audio = np.sign(companded) * np.expm1(np.abs(companded) * np.log1p(mu)) / mu
  return audio.astype(np.float32)


# ----------------------------------------------------------------------------- data layer
class WavenetDataLayer(DataLayer):
  """LJSpeech-layout audio for WaveNet (OpenSeq2Seq's parameter names, plus the STFT's).

  Each CSV line is ``name|raw transcript|normalized transcript`` (``|``-separated, no header;
  only the name is read), audio at ``<dataset_location>/wavs/<name>.wav`` or, as
  OpenSeq2Seq's configs name the wavs folder itself, ``<dataset_location>/<name>.wav``.

  Batches in train and eval::

      source_tensors = (input ids [B, T] int32, sample lengths [B], mel [B, F, M], frames [B])
      target_tensors = (target ids [B, T] int32, loss mask [B, T] float32)

  with ``F = ceil(T / hop)``; the mask is 0 on batch padding and on the first
  ``receptive_field`` samples of each window (context only). Training windows start at a
  random frame; eval takes each utterance's centred window. In infer (and
  ``interactive_infer``, where each input line is a ``.wav`` file or a ``.npy`` array of
  mel frames [F, M] in this layer's feature layout) ``source_tensors = (mel [B, F, M],
  frames [B])``: the model synthesizes ``F * hop`` samples from them.
  """

  PARAMS = {
      "dataset_files": Param((list, None), None, "CSV files (name|raw|normalized)."),
      "dataset_location": Param((str, None), None, "Folder holding wavs/ or the wavs "
                                "themselves (default: each CSV's folder)."),
      "dataset": Param((str, None), None, "'LJ' (22050 Hz, n_fft 1024) or 'MAILABS' (16 kHz, "
                       "800): sets sampling_rate and n_fft unless given.",
                       choices=(*DATASETS, None)),
      "num_audio_features": Param(int, doc="Mel channels of the conditioning frames."),
      "quantization_channels": Param(int, 256, "Mu-law bins of a sample (the encoder's "
                                     "quantization_channels)."),
      "window_size": Param((int, None), 16384, "Samples per training/eval window, rounded "
                           "down to whole frames (None: whole utterances, as OpenSeq2Seq)."),
      "receptive_field": Param(int, 0, "Leading samples of each training/eval window given "
                               "as context only: the loss skips their predictions."),
      "max_infer_frames": Param((int, None), None, "Infer: synthesize at most this many "
                                "frames per input (None: all)."),
      **AUDIO_PARAMS,
      "data_min": Param(float, 1e-5, "Floor of the mel energies before the log."),
      "shuffle": Param(bool, True, "Shuffle training utterances (never in eval/infer)."),
      "repeat": Param(bool, True, "Repeat training data forever (eval/infer: one pass)."),
  }

  def __init__(self, params: dict[str, Any], mode: str = "train", batch_size: int = 32,
               num_workers: int = 1, worker_id: int = 0, random_seed: int | None = None):
    super().__init__(params, mode, batch_size, num_workers, worker_id, random_seed)
    self.features = self._make_features()
    self.quantization_channels = self._check_sizes()
    self.names: list[str] = []
    self.paths: list[str] = []
    if mode != "interactive_infer":
      if not self.params["dataset_files"]:
        raise ConfigError(f"data_layer_params/dataset_files: needed in {mode} mode")
      self._read_csvs(self.params["dataset_files"])

  # ------------------------------------------------------------------ configuration
  def _make_features(self) -> SpectrogramFeatures:
    return mel_features(self.params)

  def _check_sizes(self) -> int:
    p, hop = self.params, self.features.hop_length
    if p["quantization_channels"] < 2:
      raise ConfigError(f"data_layer_params/quantization_channels: must be at least 2, got "
                        f"{p['quantization_channels']}")
    if p["window_size"] is not None and p["window_size"] < hop:
      raise ConfigError(f"data_layer_params/window_size: {p['window_size']} samples is less "
                        f"than one frame (hop_length {hop}); use at least {hop}")
    if p["receptive_field"] < 0:
      raise ConfigError(f"data_layer_params/receptive_field: must be >= 0, got "
                        f"{p['receptive_field']}")
    if p["window_size"] is not None and p["receptive_field"] >= self.window_frames * hop:
      raise ConfigError(f"data_layer_params/receptive_field: {p['receptive_field']} context "
                        f"samples leave nothing to learn in a window of "
                        f"{self.window_frames * hop}; raise window_size above it")
    if p["max_infer_frames"] is not None and p["max_infer_frames"] < 1:
      raise ConfigError(f"data_layer_params/max_infer_frames: must be at least 1, got "
                        f"{p['max_infer_frames']}")
    return p["quantization_channels"]

  @property
  def window_frames(self) -> int | None:
    """Frames per training/eval window (None: whole utterances)."""
    size = self.params["window_size"]
    return None if size is None else size // self.features.hop_length

  @property
  def description(self) -> WavenetDescription:
    f = self.features
    return WavenetDescription(num_audio_features=f.num_mel,
                              quantization_channels=self.quantization_channels,
                              hop_length=f.hop_length, sample_rate=f.sample_rate)

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

  def get_size_in_samples(self) -> int:
    return len(range(self.worker_id, len(self.names), self.num_workers))

  # ------------------------------------------------------------------ throughput
  @property
  def throughput_unit(self) -> str:
    # samples, not seconds: a CPU trains on a fraction of a second of audio per second
    return "samples"

  def count_units(self, batch: dict) -> tf.Tensor:
    """Predicted samples (the loss mask's sum); examples at inference."""
    if "target_tensors" not in batch:
      return tf.cast(tf.shape(batch["id"])[0], tf.int64)
    return tf.cast(tf.reduce_sum(batch["target_tensors"][1]), tf.int64)

  # ------------------------------------------------------------------ datasets
  def build_dataset(self) -> tf.data.Dataset:
    rows = transforms.slices({"id": np.arange(len(self.names), dtype=np.int64)})
    batching = transforms.Batching(self.batch_size)
    common = dict(num_shards=self.num_workers, shard_index=self.worker_id,
                  map_fn=self._model_inputs)
    if self.inference:
      return transforms.inference_pipeline(rows, batching, process_fn=self._infer_process,
                                           **common)
    if self.mode != "train":
      return transforms.inference_pipeline(rows, batching, process_fn=self._window_process,
                                           **common)
    buffer = max(1, self.get_size_in_samples()) if self.params["shuffle"] else None
    return transforms.training_pipeline(rows, batching, shuffle_buffer_size=buffer,
                                        seed=self._seed, repeat=self.params["repeat"],
                                        process_fn=self._window_process, **common)

  def _read(self, index: np.int64) -> np.ndarray:
    return read_audio(self.paths[int(index)], self.features.sample_rate,
                      self.params["resample"]).astype(np.float32)

  def _load(self, row: dict) -> tf.Tensor:
    signal = tf.numpy_function(self._read, [row["id"]], tf.float32, stateful=False)
    signal.set_shape([None])
    return signal

  def _window_process(self, rows: tf.data.Dataset) -> tf.data.Dataset:
    """Rows -> one window per utterance (random start in training, centred in eval)."""
    training = self.mode == "train"
    # Stateless randomness from a seeded stream: the same seed gives the same windows.
    seeds = tf.data.Dataset.random(seed=self._seed).batch(2)
    dataset = tf.data.Dataset.zip((rows, seeds))
    return dataset.map(lambda row, seed: self.window(row, self._load(row), seed, training),
                       num_parallel_calls=tf.data.AUTOTUNE)

  def window(self, row: dict, signal: tf.Tensor, seed: tf.Tensor, training: bool) -> dict:
    """One window of ``signal`` (float32 [samples]): ids, mel frames and the loss mask."""
    hop, q = self.features.hop_length, self.quantization_channels
    length = tf.shape(signal)[0]
    frames = (length + hop - 1) // hop  # frames whose samples exist (the last one partly)
    mel = self.features.compute(signal)[:frames]
    targets = mu_law_encode(signal, q)
    inputs = tf.concat([tf.fill([1], q // 2), targets[:-1]], axis=0)  # q // 2 is silence
    wanted = frames if self.window_frames is None else tf.minimum(self.window_frames, frames)
    spare = frames - wanted
    if training:
      start = tf.random.stateless_uniform([], tf.cast(seed, tf.int32), 0, spare + 1, tf.int32)
    else:
      start = spare // 2
    first = start * hop
    count = tf.minimum(wanted * hop, length - first)
    position = tf.range(count)
    mask = tf.cast(position >= self.params["receptive_field"], tf.float32)
    return {"source": inputs[first:first + count], "source_length": count,
            "mel": mel[start:start + wanted], "mel_length": wanted,
            "target": targets[first:first + count], "mask": mask, "id": row["id"]}

  def _infer_process(self, rows: tf.data.Dataset) -> tf.data.Dataset:
    def mel_of(row):
      signal = self._load(row)
      hop = self.features.hop_length
      frames = (tf.shape(signal)[0] + hop - 1) // hop
      return self._infer_element(self.features.compute(signal)[:frames], row["id"])
    return rows.map(mel_of, num_parallel_calls=tf.data.AUTOTUNE)

  def _infer_element(self, mel: tf.Tensor, index: tf.Tensor) -> dict:
    if self.params["max_infer_frames"] is not None:
      mel = mel[:self.params["max_infer_frames"]]
    mel = tf.ensure_shape(mel, [None, self.features.num_mel])
    return {"mel": mel, "mel_length": tf.shape(mel)[0], "id": index}

  def _model_inputs(self, batch: dict) -> dict:
    if "target" not in batch:
      return {"source_tensors": (batch["mel"], batch["mel_length"]), "id": batch["id"]}
    return {"source_tensors": (batch["source"], batch["source_length"], batch["mel"],
                               batch["mel_length"]),
            "target_tensors": (batch["target"], batch["mask"]), "id": batch["id"]}

  def dataset_from_inputs(self, inputs: Iterable[str]) -> tf.data.Dataset:
    """Batches of mel frames of the given ``.wav`` files or ``.npy`` frame arrays
    (``interactive_infer``)."""
    paths = [str(s).strip() for s in inputs]
    if not paths or not all(paths):
      raise DataError("interactive input is empty; type the path of a .wav or .npy file")
    mels = [self._interactive_mel(path) for path in paths]
    self.names = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    lengths = np.array([len(m) for m in mels], np.int64)
    rows = transforms.slices({"mel": tf.RaggedTensor.from_row_lengths(
        np.concatenate(mels), lengths), "id": np.arange(len(mels), dtype=np.int64)})
    rows = rows.map(lambda row: self._infer_element(row["mel"], row["id"]))
    return transforms.inference_pipeline(rows, transforms.Batching(self.batch_size),
                                         map_fn=self._model_inputs)

  def _interactive_mel(self, path: str) -> np.ndarray:
    if not os.path.isfile(path):
      raise DataError(f"{path}: no such file; give a .wav file or a .npy array of mel frames")
    if path.endswith(".npy"):
      mel = np.load(path).astype(np.float32)
      if mel.ndim != 2 or mel.shape[1] != self.features.num_mel or not len(mel):
        raise DataError(f"{path}: expected mel frames [frames, {self.features.num_mel}], got "
                        f"shape {mel.shape}")
      return mel
    signal = read_audio(path, self.features.sample_rate, self.params["resample"])
    if not len(signal):
      raise DataError(f"{path}: holds no audio samples")
    hop = self.features.hop_length
    frames = -(-len(signal) // hop)
    return self.features.compute(signal).numpy()[:frames]
