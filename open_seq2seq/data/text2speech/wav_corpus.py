"""LJSpeech-layout CSVs (``name|raw|normalized``) of WAV files: what the waveform data layers
(WaveNet's, the vocoder's) read.

A name is looked up as ``<base>/wavs/<name>.wav``, else ``<base>/<name>.wav`` (OpenSeq2Seq's
configs point at the wavs folder itself), ``<base>`` being ``dataset_location`` or the CSV's
folder. Each worker checks the headers (sample rate) of its own share of the files.
"""

from __future__ import annotations

import os
from typing import Any

from open_seq2seq.data.speech2text.audio import check_audio_header
from open_seq2seq.errors import ConfigError, DataError


def wav_path(base: str, name: str) -> str:
  """The WAV file of ``name`` under ``base`` (module doc)."""
  file = name if name.endswith(".wav") else name + ".wav"
  path = os.path.join(base, "wavs", file)
  flat = os.path.join(base, file)
  return flat if not os.path.isfile(path) and os.path.isfile(flat) else path


def read_wav_csvs(csv_files: list, dataset_location: str | None, sample_rate: int,
                  resample: bool, worker_id: int = 0, num_workers: int = 1
                  ) -> tuple[list[str], list[str]]:
  """``(names, paths)`` of every utterance of ``csv_files``, in order; a missing file, an
  empty name or a WAV at another rate (unless ``resample``) is a one-line DataError naming
  ``<csv>:<line>``."""
  names, paths = [], []
  for csv_path in csv_files:
    if not isinstance(csv_path, str) or not os.path.isfile(csv_path):
      raise DataError(f"data_layer_params/dataset_files: {csv_path} does not exist")
    base = dataset_location or os.path.dirname(os.path.abspath(csv_path))
    with open(csv_path, encoding="utf-8") as f:
      for number, line in enumerate(f, 1):
        line = line.rstrip("\r\n")
        if not line.strip():
          continue
        where = f"{csv_path}:{number}"
        name = line.split("|")[0].strip()
        if not name:
          raise DataError(f"{where}: expected 'name|raw|normalized' with a non-empty name")
        path = wav_path(base, name)
        if not os.path.isfile(path):
          raise DataError(f"{where}: {path} not found")
        if len(paths) % num_workers == worker_id:
          check_audio_header(path, sample_rate, resample, where)
        names.append(name)
        paths.append(path)
  if not names:
    raise DataError(f"data_layer_params/dataset_files: {', '.join(map(str, csv_files))} "
                    f"hold no utterances")
  return names, paths


def mel_features(p: dict, normalize_mean: float = 0.0, normalize_std: float = 1.0) -> Any:
  """The log-mel :class:`~open_seq2seq.data.text2speech.features.SpectrogramFeatures` of a
  waveform layer's audio keys (``dataset``, ``sampling_rate``, ``n_fft``, ``hop_length``,
  ``win_length``, ``num_audio_features``, ``mel_type``, ``fmin``, ``fmax``, ``mag_power``,
  ``data_min``: Tacotron's, so that its mels can be vocoded); sizes checked in one line."""
  # pylint: disable=import-outside-toplevel
  from open_seq2seq.data.text2speech.features import SpectrogramFeatures
  from open_seq2seq.data.text2speech.text2speech import DATASETS
  rate, n_fft = DATASETS.get(p["dataset"], (22050, 1024))
  rate, n_fft = p["sampling_rate"] or rate, p["n_fft"] or n_fft
  if p["num_audio_features"] < 1:
    raise ConfigError(f"data_layer_params/num_audio_features: must be at least 1, got "
                      f"{p['num_audio_features']}")
  if p["fmax"] is not None and p["fmax"] > rate / 2:
    raise ConfigError(f"data_layer_params/fmax: {p['fmax']} Hz is above the Nyquist "
                      f"frequency {rate / 2:g} Hz of sampling_rate {rate}")
  return SpectrogramFeatures(
      output_type="mel", num_mel=p["num_audio_features"], num_magnitude=0, sample_rate=rate,
      n_fft=n_fft, hop_length=p["hop_length"] or n_fft // 4, win_length=p["win_length"] or n_fft,
      mel_type=p["mel_type"], fmin=p["fmin"],
      fmax=None if p["fmax"] is None else float(p["fmax"]), mag_power=float(p["mag_power"]),
      data_min_mel=p["data_min"], normalize_mean=normalize_mean, normalize_std=normalize_std)
