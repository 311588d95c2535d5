"""FastPitchDataLayer: Text2SpeechDataLayer's batches plus each mel frame's normalised pitch."""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

import numpy as np
import tensorflow as tf

from open_seq2seq.data import transforms
from open_seq2seq.data.description import FastPitchDescription
from open_seq2seq.data.speech2text.audio import read_audio
from open_seq2seq.data.text2speech.pitch import (PITCH_PARAMS, FramePitch, PitchStore,
                                                 normalize, require_librosa)
from open_seq2seq.data.text2speech.text2speech import Text2SpeechDataLayer
from open_seq2seq.data.text2speech.wav_corpus import read_wav_csvs
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.utils.params import Param

_log = logging.getLogger(__name__)


class FastPitchDataLayer(Text2SpeechDataLayer):
  """Text2SpeechDataLayer for FastPitch: the same batches, plus the pitch of each mel frame.

  ``target_tensors`` = (frames [B, T, F], stop tokens [B, T], lengths [B], pitch [B, T]
  float32). The stop tokens stay so the layout is Tacotron's; FastPitch ignores them.
  ``pitch`` is ``(f0 - pitch_mean) / pitch_std`` on voiced frames and exactly 0 on unvoiced
  frames, end-of-speech frames and batch padding; frame i is mel frame i's audio (same
  waveform, trimming, hop and centring: :mod:`~open_seq2seq.data.text2speech.pitch`). No
  targets at inference.

  Pitch is computed on the host by librosa (``pitch_method``) and kept in ``pitch_cache_dir``
  (one ``.npy`` per audio file), so only the first epoch of the first run computes it; the
  ``tf.data`` map reads it by example id through ``tf.numpy_function``, beside the waveform.

  Statistics: the corpora have one speaker each (this layer has no speaker notion), so one
  mean and standard deviation (Hz, over the voiced frames) normalise everything. Eval and
  infer must use the training corpus's: give ``pitch_mean``/``pitch_std``, or
  ``pitch_stats_files`` (the training CSVs, in ``base_params`` so every mode shares them, as
  the vocabulary) over which they are computed once and cached; in train mode they default
  to ``dataset_files``. Without either, eval and infer are a ConfigError. The statistics
  include utterances the duration filter later drops.
  """

  PARAMS = {
      **PITCH_PARAMS,
      "pitch_mean": Param((float, None), None, "Mean f0 (Hz) of the training corpus's voiced "
                          "frames (None: computed over pitch_stats_files)."),
      "pitch_std": Param((float, None), None, "Standard deviation of that f0 (Hz; with "
                         "pitch_mean)."),
      "pitch_stats_files": Param((list, None), None, "Training CSVs whose voiced frames give "
                                 "pitch_mean/pitch_std (default in train: dataset_files; "
                                 "eval/infer need them, or pitch_mean/pitch_std)."),
      "pitch_cache_dir": Param((str, None), "pitch_cache", "Cached pitch (.npy per file, "
                               "statistics); relative: under dataset_location, else the "
                               "first CSV's folder; None: no files, kept in memory."),
  }

  def __init__(self, params: dict[str, Any], mode: str = "train", batch_size: int = 32,
               num_workers: int = 1, worker_id: int = 0, random_seed: int | None = None):
    super().__init__(params, mode, batch_size, num_workers, worker_id, random_seed)
    p = self.params
    self.pitch = FramePitch.for_features(self.features, p)
    given = (p["pitch_mean"], p["pitch_std"])
    if (given[0] is None) != (given[1] is None):
      raise ConfigError("data_layer_params/pitch_mean: give pitch_mean and pitch_std together "
                        "(or neither, to compute them over pitch_stats_files)")
    if given[1] is not None and not given[1] > 0:
      raise ConfigError(f"data_layer_params/pitch_std: must be positive, got {given[1]}")
    stats_files = p["pitch_stats_files"] or (p["dataset_files"] if mode == "train" else None)
    if given[0] is None and not stats_files:
      raise ConfigError(f"data_layer_params/pitch_stats_files: {mode} needs the training "
                        f"corpus's pitch statistics: set pitch_stats_files to the training "
                        f"CSVs (in base_params) or pitch_mean and pitch_std")
    self.store = None
    if given[0] is None or not self.inference:
      require_librosa()
      self.store = PitchStore(self.pitch, self._read_path, self._cache_dir(stats_files))
    if given[0] is not None:
      self.pitch_mean, self.pitch_std = float(given[0]), float(given[1])
    else:
      self.pitch_mean, self.pitch_std = self.store.statistics(
          self._stats_paths(stats_files), "data_layer_params/pitch_stats_files")
      _log.info("pitch statistics: pitch_mean=%.4f pitch_std=%.4f", self.pitch_mean,
                self.pitch_std)

  # ------------------------------------------------------------------ pitch files
  def _cache_dir(self, stats_files: list | None) -> str | None:
    directory = self.params["pitch_cache_dir"]
    if directory is None or os.path.isabs(directory):
      return directory
    base = self.params["dataset_location"]
    if base is None:
      csvs = [c for c in (self.params["dataset_files"] or stats_files or []) if isinstance(c, str)]
      base = os.path.dirname(os.path.abspath(csvs[0])) if csvs else "."
    return os.path.join(base, directory)

  def _stats_paths(self, stats_files: list) -> list[str]:
    """The audio files of the statistics' CSVs (this layer's own when they are its own)."""
    if stats_files == self.params["dataset_files"] and self.paths:
      return list(self.paths)
    for csv_path in stats_files:
      if not isinstance(csv_path, str) or not os.path.isfile(csv_path):
        raise DataError(f"data_layer_params/pitch_stats_files: {csv_path} does not exist")
    return read_wav_csvs(stats_files, self.params["dataset_location"],
                         self.features.sample_rate, self.params["resample"])[1]

  def _read_path(self, path: str) -> np.ndarray:
    return read_audio(path, self.features.sample_rate,
                      self.params["resample"]).astype(np.float32)

  def _f0(self, index: np.int64) -> np.ndarray:
    return self.store.f0(self.paths[int(index)])

  @property
  def description(self) -> FastPitchDescription:
    base = super().description
    return FastPitchDescription(**{f.name: getattr(base, f.name)
                                   for f in dataclasses.fields(base)},
                                pitch_mean=self.pitch_mean, pitch_std=self.pitch_std)

  # ------------------------------------------------------------------ datasets
  def _batching(self) -> transforms.Batching:
    batching = super()._batching()
    return dataclasses.replace(batching, pad_keys=batching.pad_keys + ("pitch",))

  def _process(self, rows: tf.data.Dataset) -> tf.data.Dataset:
    """Text2Speech's elements + ``pitch`` [target_length] (0 on the end-of-speech frames)."""
    dataset = super()._process(rows)
    if self.inference:  # infer reading style references: no targets, no pitch
      return dataset
    mean, std = self.pitch_mean, self.pitch_std

    def add_pitch(element):
      f0 = tf.numpy_function(self._f0, [element["id"]], tf.float32, stateful=False)
      f0.set_shape([None])
      speech = tf.cast(element["speech_length"], tf.int32)
      check = tf.debugging.assert_equal(tf.shape(f0)[0], speech,
                                        message="pitch and mel frame counts differ")
      with tf.control_dependencies([check]):
        pitch = normalize(f0, mean, std)
      total = tf.cast(element["target_length"], tf.int32)
      return dict(element, pitch=tf.pad(pitch, [[0, total - speech]]))

    return dataset.map(add_pitch, num_parallel_calls=tf.data.AUTOTUNE)

  def _model_inputs(self, batch: dict) -> dict:
    inputs = super()._model_inputs(batch)
    if "target_tensors" in inputs:
      inputs["target_tensors"] += (batch["pitch"],)
    return inputs
