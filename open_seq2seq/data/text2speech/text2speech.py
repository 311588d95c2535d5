"""Text2SpeechDataLayer: transcripts in, spectrogram frames and stop tokens out."""

from __future__ import annotations

import os
from typing import Any, Iterable

import numpy as np
import tensorflow as tf

from open_seq2seq.data import transforms
from open_seq2seq.data.data_layer import DataLayer
from open_seq2seq.data.description import Text2SpeechDescription
from open_seq2seq.data.speech2text.audio import check_audio_header, read_audio
from open_seq2seq.data.text2speech.features import OUTPUT_TYPES, SpectrogramFeatures
from open_seq2seq.data.text2speech.text import CLEANERS, TextEncoder
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.utils.params import AnyType, Param

#: OpenSeq2Seq's ``dataset`` names and the audio they imply: (sample rate, n_fft).
DATASETS = {"LJ": (22050, 1024), "MAILABS": (16000, 800)}


#: The audio and STFT keys of the speech-synthesis data layers (Tacotron, WaveNet).
AUDIO_PARAMS = {
    "sampling_rate": Param((int, None), None, "Audio rate (default: the dataset's, else 22050)."),
    "resample": Param(bool, True, "Resample files at another rate (else a DataError)."),
    "n_fft": Param((int, None), None, "FFT size (default: the dataset's, else 1024)."),
    "hop_length": Param((int, None), None, "Samples between frames (default n_fft / 4)."),
    "win_length": Param((int, None), None, "Hann window length (default n_fft)."),
    "mel_type": Param(str, "htk", "Mel filters: 'htk' or 'slaney'.", choices=("htk", "slaney")),
    "fmin": Param(float, 0.0, "Lowest mel filter frequency (Hz)."),
    "fmax": Param((float, int, None), None, "Highest mel filter frequency (None: Nyquist)."),
    "mag_power": Param((int, float), 2, "Power of the magnitude before mel and log."),
}


def packaged_path(path: str) -> str:
  """``path`` as given, or, when it is relative and missing, the file the package ships under
  that name (OpenSeq2Seq's configs name ``open_seq2seq/test_utils/vocab_tts.txt`` relative to
  the repository, so they also work from another directory or an installed package)."""
  if os.path.isabs(path) or os.path.exists(path):
    return path
  package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__)))))
  shipped = os.path.join(package_parent, path)
  return shipped if os.path.exists(shipped) else path


def _per_part(value: Any, key: str, part: str, default: float) -> float:
  """``value`` for one feature kind: a number applies to both, a dict names each."""
  if value is None:
    return default
  if isinstance(value, dict):
    if part not in value:
      raise ConfigError(f"data_layer_params/{key}: the dict needs a {part!r} entry")
    return float(value[part])
  return float(value)


class Text2SpeechDataLayer(DataLayer):
  """LJSpeech-style corpora for Tacotron-like models (OpenSeq2Seq's parameter names).

  Each CSV line is ``name|raw transcript|normalized transcript`` (``|``-separated, no
  header; the last column is read), audio at ``<dataset_location>/wavs/<name>.wav``. The text
  is cleaned (``text_cleaner``), optionally spelled in ARPAbet from a CMUdict
  (``cmudict_path``; inline ``{HH AH0 L OW1}`` always works with it) and wrapped in ``<s>``
  ... ``</s>`` (``pad_EOS``). The audio becomes log mel and/or magnitude frames inside the
  ``tf.data`` graph (:class:`~open_seq2seq.data.text2speech.features.SpectrogramFeatures`),
  followed by silent end-of-speech frames whose stop token is 1 (``pad_EOS``: at least one,
  up to a multiple of ``pad_to``).

  Batches: ``source_tensors`` = (ids [B, N], lengths), ``target_tensors`` = (frames
  [B, T, F], stop tokens [B, T], lengths with the end frames); no targets at inference.
  With ``style_input: "wav"`` (global style tokens) the source also carries a style
  reference, (mel frames [B, T', F_mel], lengths): the utterance's own in training and eval,
  at inference each CSV line's WAV or the one ``style_wav``.
  """

  PARAMS = {
      "dataset_files": Param((list, None), None, "CSV files (name|raw|normalized)."),
      "dataset_location": Param((str, None), None, "Folder holding wavs/ (default: each "
                                "CSV's folder)."),
      "dataset": Param((str, None), None, "'LJ' (22050 Hz, n_fft 1024) or 'MAILABS' (16 kHz, "
                       "800): sets sampling_rate and n_fft unless given.",
                       choices=(*DATASETS, None)),
      "vocab_file": Param(str, doc="Character vocabulary, one symbol per line."),
      "text_cleaner": Param(str, "english", "Text normalization.", choices=tuple(CLEANERS)),
      "cmudict_path": Param((str, None), None, "CMU Pronouncing Dictionary: dictionary words "
                            "become ARPAbet phonemes."),
      "arpabet_prob": Param(float, 1.0, "Probability of spelling a dictionary word in phonemes."),
      "num_audio_features": Param(AnyType, doc="Features per frame: an int, or for output_type "
                                  "'both' {'mel': n, 'magnitude': m}."),
      "output_type": Param(str, doc="Targets: 'magnitude', 'mel' or 'both'.",
                           choices=OUTPUT_TYPES),
      **AUDIO_PARAMS,
      "data_min": Param((float, dict, None), None, "Floor before the log: a number, or "
                        "{'mel': a, 'magnitude': b} (default 1e-5)."),
      "exp_mag": Param((bool, None), None, "'both': the magnitude part is linear (default True "
                       "for 'both')."),
      "feature_normalize": Param(bool, False, "Normalize features with the mean and std below."),
      "feature_normalize_mean": Param(float, 0.0, "Mean subtracted when feature_normalize."),
      "feature_normalize_std": Param(float, 1.0, "Std divided by when feature_normalize."),
      "trim": Param(bool, False, "Trim leading and trailing silence."),
      "trim_top_db": Param(float, 60.0, "Silence: this many dB below the loudest frame."),
      "pad_EOS": Param(bool, True, "<s>/</s> around the text; silent stop frames after speech."),
      "pad_to": Param(int, 8, "Round text and frame lengths up to a multiple of this."),
      "pad_value": Param((float, None), None, "Value of padded frames (default: each feature's "
                         "floor)."),
      "duration_min": Param(int, 0, "Drop utterances with fewer frames (train and eval; "
                            "infer keeps every input)."),
      "duration_max": Param((int, None), 4000, "Drop utterances with more frames (None: keep; "
                            "train and eval, infer keeps every input)."),
      "shuffle": Param(bool, True, "Shuffle training utterances (never in eval/infer)."),
      "repeat": Param(bool, True, "Repeat training data forever (eval/infer: one pass)."),
      "style_input": Param((str, None), None, "GST: 'wav' adds a style reference to the "
                           "source (each utterance's own mel frames; infer: each CSV line's "
                           "WAV unless style_wav).", choices=(None, "wav")),
      "use_cache": Param(bool, False, "Keep each decoded (resampled) waveform in memory after "
                         "its first read (features are computed in-graph from it)."),
      "style_wav": Param((str, None), None, "infer / interactive_infer with style_input "
                         "'wav': one reference recording for every sentence."),
  }

  def __init__(self, params: dict[str, Any], mode: str = "train", batch_size: int = 32,
               num_workers: int = 1, worker_id: int = 0, random_seed: int | None = None):
    super().__init__(params, mode, batch_size, num_workers, worker_id, random_seed)
    p = self.params
    if p["pad_to"] < 1:
      raise ConfigError(f"data_layer_params/pad_to: must be at least 1, got {p['pad_to']}")
    self.text = TextEncoder(packaged_path(p["vocab_file"]), p["text_cleaner"], p["cmudict_path"],
                            p["arpabet_prob"], seed=random_seed)
    self.features = self._make_features()
    self.names: list[str] = []
    self.paths: list[str] = []
    self.transcripts: list[str] = []
    self._text_ids: list[list[int]] = []
    self._waveforms: dict[int, np.ndarray] = {}  # use_cache
    self._style_frames = self._reference_frames() if self.inference else None
    if mode != "interactive_infer":
      if not p["dataset_files"]:
        raise ConfigError(f"data_layer_params/dataset_files: needed in {mode} mode")
      self._read_csvs(p["dataset_files"])

  # ------------------------------------------------------------------ configuration
  def _make_features(self) -> SpectrogramFeatures:
    p = self.params
    rate, n_fft = DATASETS.get(p["dataset"], (22050, 1024))
    rate, n_fft = p["sampling_rate"] or rate, p["n_fft"] or n_fft
    n = p["num_audio_features"]
    kind = p["output_type"]
    if kind == "both":
      if not (isinstance(n, dict) and isinstance(n.get("mel"), int) and
              isinstance(n.get("magnitude"), int)):
        raise ConfigError("data_layer_params/num_audio_features: output_type 'both' needs "
                          "{'mel': int, 'magnitude': int}")
      num_mel, num_mag = n["mel"], n["magnitude"]
    elif isinstance(n, int) and not isinstance(n, bool):
      num_mel, num_mag = (n, 0) if kind == "mel" else (0, n)
    else:
      raise ConfigError(f"data_layer_params/num_audio_features: an int for output_type "
                        f"{kind!r}, got {n!r}")
    if num_mag > n_fft // 2 + 1:
      raise ConfigError(f"data_layer_params/num_audio_features: {num_mag} magnitude bins, but "
                        f"n_fft {n_fft} has {n_fft // 2 + 1}")
    if p["feature_normalize"] and kind == "both":
      raise ConfigError("data_layer_params/feature_normalize: not available for output_type "
                        "'both' (one mean and std cannot fit log mel and linear magnitude)")
    if p["fmax"] is not None and p["fmax"] > rate / 2:
      raise ConfigError(f"data_layer_params/fmax: {p['fmax']} Hz is above the Nyquist "
                        f"frequency {rate / 2:g} Hz of sampling_rate {rate}")
    normalize = p["feature_normalize"]
    return SpectrogramFeatures(
        output_type=kind, num_mel=num_mel, num_magnitude=num_mag, sample_rate=rate,
        n_fft=n_fft, hop_length=p["hop_length"] or n_fft // 4, win_length=p["win_length"] or n_fft,
        mel_type=p["mel_type"], fmin=p["fmin"],
        fmax=None if p["fmax"] is None else float(p["fmax"]), mag_power=float(p["mag_power"]),
        data_min_mel=_per_part(p["data_min"], "data_min", "mel", 1e-5),
        data_min_magnitude=_per_part(p["data_min"], "data_min", "magnitude", 1e-5),
        exp_mag=kind == "both" and (p["exp_mag"] is None or p["exp_mag"]),
        normalize_mean=p["feature_normalize_mean"] if normalize else 0.0,
        normalize_std=p["feature_normalize_std"] if normalize else 1.0,
        trim=p["trim"], trim_top_db=p["trim_top_db"])

  def _reference_frames(self) -> np.ndarray | None:
    """The style reference of every sentence at inference (``style_wav``), or None."""
    p = self.params
    if p["style_wav"] is None:
      return None
    if p["style_input"] != "wav":
      raise ConfigError("data_layer_params/style_wav: needs style_input 'wav'")
    if not os.path.isfile(p["style_wav"]):
      raise DataError(f"data_layer_params/style_wav: {p['style_wav']} does not exist")
    check_audio_header(p["style_wav"], self.features.sample_rate, p["resample"],
                       "data_layer_params/style_wav")
    signal = read_audio(p["style_wav"], self.features.sample_rate, p["resample"])
    frames = self.features.compute(tf.constant(signal, tf.float32)).numpy()
    return frames[:, :self._style_features]

  @property
  def _style_features(self) -> int:
    """Features of the style reference: the mel part (all frames without mel)."""
    return self.features.num_mel or self.features.num_features

  @property
  def _reads_audio(self) -> bool:
    """Whether the files of each line are read: targets, or per-line style references."""
    return not self.inference or (self.params["style_input"] == "wav" and
                                  self._style_frames is None)

  @property
  def description(self) -> Text2SpeechDescription:
    return Text2SpeechDescription(src_vocab_size=self.text.vocab_size,
                                  idx2symbol=self.text.symbols, features=self.features)

  @property
  def _seed(self) -> int | None:
    return None if self.random_seed is None else self.random_seed * 1000 + self.worker_id

  # ------------------------------------------------------------------ reading CSVs
  def _read_csvs(self, csv_files: list) -> None:
    p = self.params
    for csv_path in csv_files:
      if not isinstance(csv_path, str) or not os.path.isfile(csv_path):
        raise DataError(f"data_layer_params/dataset_files: {csv_path} does not exist")
      base = p["dataset_location"] or os.path.dirname(os.path.abspath(csv_path))
      with open(csv_path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
          line = line.rstrip("\n").rstrip("\r")
          if not line.strip():
            continue
          where = f"{csv_path}:{number}"
          fields = line.split("|")
          if len(fields) < 2 or not fields[0].strip() or not fields[-1].strip():
            raise DataError(f"{where}: expected 'name|transcript' or 'name|raw|normalized' "
                            f"with a non-empty name and transcript")
          name = fields[0].strip()
          self.names.append(name)
          self.transcripts.append(fields[-1].strip())
          self._text_ids.append(self._encode(fields[-1], where))
          if self._reads_audio:
            path = os.path.join(base, "wavs", name if name.endswith(".wav") else name + ".wav")
            if not os.path.isfile(path):
              raise DataError(f"{where}: {path} not found")
            self.paths.append(path)
            if (len(self.paths) - 1) % self.num_workers == self.worker_id:
              check_audio_header(path, self.features.sample_rate, p["resample"], where)
    if not self.names:
      raise DataError(f"data_layer_params/dataset_files: {', '.join(map(str, csv_files))} "
                      f"hold no utterances")

  def _encode(self, text: str, where: str) -> list[int]:
    ids = self.text.encode(text, where)
    if not ids:
      raise DataError(f"{where}: the transcript has no symbol of the vocabulary")
    if self.params["pad_EOS"]:
      ids = [self.text.bos_id] + ids + [self.text.eos_id]
    return ids

  def symbol_ids(self, index: int) -> list[int]:
    """The symbol ids the encoder reads for input ``index`` (e.g. to label a figure)."""
    return self._text_ids[index]

  def get_size_in_samples(self) -> int:
    return len(range(self.worker_id, len(self.names), self.num_workers))

  # ------------------------------------------------------------------ throughput
  @property
  def throughput_unit(self) -> str:
    return "s of audio"

  @property
  def unit_scale(self) -> float:
    return self.features.hop_length / self.features.sample_rate

  def count_units(self, batch: dict) -> tf.Tensor:
    if "target_tensors" not in batch:
      return tf.cast(tf.shape(batch["id"])[0], tf.int64)
    return tf.cast(tf.reduce_sum(batch["target_tensors"][2]), tf.int64)

  # ------------------------------------------------------------------ datasets
  def _batching(self) -> transforms.Batching:
    return transforms.Batching(self.batch_size, pad_multiple=self.params["pad_to"],
                               pad_keys=("source", "target"))

  def build_dataset(self) -> tf.data.Dataset:
    ids = np.arange(len(self.names), dtype=np.int64)
    rows = transforms.slices(self._text_columns(ids))
    common = dict(num_shards=self.num_workers, shard_index=self.worker_id,
                  map_fn=self._model_inputs)
    if not self._reads_audio:
      return transforms.inference_pipeline(rows, self._batching(), **common)
    common["process_fn"] = self._process
    if self.mode != "train":  # eval, or infer reading each line's style reference
      return transforms.inference_pipeline(rows, self._batching(), **common)
    buffer = max(1, self.get_size_in_samples()) if self.params["shuffle"] else None
    return transforms.training_pipeline(rows, self._batching(), shuffle_buffer_size=buffer,
                                        seed=self._seed, repeat=self.params["repeat"], **common)

  def _text_columns(self, ids: np.ndarray) -> dict:
    texts = [self._text_ids[i] for i in ids]
    lengths = np.array([len(t) for t in texts], np.int32)
    return {"source": tf.RaggedTensor.from_row_lengths(
        np.concatenate(texts).astype(np.int32), lengths.astype(np.int64)),
        "source_length": lengths, "id": ids.astype(np.int64)}

  def _read(self, index: np.int64) -> np.ndarray:
    index = int(index)
    signal = self._waveforms.get(index)
    if signal is None:
      signal = read_audio(self.paths[index], self.features.sample_rate,
                          self.params["resample"]).astype(np.float32)
      if self.params["use_cache"]:
        self._waveforms[index] = signal
    return signal

  def _process(self, rows: tf.data.Dataset) -> tf.data.Dataset:
    """Text rows -> + features, end-of-speech frames, duration filter (train and eval)."""
    p, features = self.params, self.features
    pad_frame = tf.constant(self._pad_frame())

    def load(row):
      signal = tf.numpy_function(self._read, [row["id"]], tf.float32, stateful=False)
      signal.set_shape([None])
      frames = features.compute(signal)
      speech = tf.shape(frames)[0]
      total = speech
      if p["pad_EOS"]:
        total = speech + 1 + (-(speech + 1)) % p["pad_to"]
      frames = tf.concat([frames, tf.tile(pad_frame[None], [total - speech, 1])], axis=0)
      frames.set_shape([None, features.num_features])
      return dict(row, target=frames, target_length=total, speech_length=speech)

    def keep(element):
      speech = element["speech_length"]
      ok = speech >= p["duration_min"]
      if p["duration_max"] is not None:
        ok = ok & (speech <= p["duration_max"])
      return ok

    dataset = rows.map(load, num_parallel_calls=tf.data.AUTOTUNE)
    # eval too: one long held-out utterance pads its whole batch to its length (a 73-s prompt
    # in a batch of 16 took FastPitch's eval 12 GB); infer answers every input
    return dataset.filter(keep) if self.mode in ("train", "eval") else dataset

  def _pad_frame(self) -> np.ndarray:
    if self.params["pad_value"] is not None:  # given before normalization, as OpenSeq2Seq's
      f = self.features
      value = (self.params["pad_value"] - f.normalize_mean) / f.normalize_std
      return np.full(f.num_features, value, np.float32)
    return self.features.pad_frame

  def _model_inputs(self, batch: dict) -> dict:
    inputs = {"source_tensors": (batch["source"], batch["source_length"]), "id": batch["id"]}
    if self.params["style_input"] == "wav":
      inputs["source_tensors"] += self._style_reference(batch)
    if "target" in batch and not self.inference:
      frames = tf.shape(batch["target"])[1]
      speech = tf.sequence_mask(batch["speech_length"], frames)
      # Batch padding (zeros) becomes silent frames; the stop token is 1 after the speech.
      target = tf.where(speech[:, :, None], batch["target"], tf.constant(self._pad_frame()))
      if not self.params["pad_EOS"]:
        # No end frames: the last speech frame carries the stop token (as OpenSeq2Seq).
        speech = tf.sequence_mask(batch["speech_length"] - 1, frames)
      stop = 1.0 - tf.cast(speech, tf.float32)
      inputs["target_tensors"] = (target, stop, batch["target_length"])
    return inputs

  def _style_reference(self, batch: dict) -> tuple:
    """(reference frames [B, T, F_style], lengths) for GST, or () when there is none
    (interactive_infer without style_wav: the encoder may use its token_weights)."""
    batch_size = tf.shape(batch["id"])[0]
    if self._style_frames is not None:
      frames = tf.tile(tf.constant(self._style_frames)[None], [batch_size, 1, 1])
      return frames, tf.fill([batch_size], tf.shape(frames)[1])
    if "target" not in batch:
      return ()
    return (batch["target"][:, :, :self._style_features],
            tf.cast(batch["speech_length"], tf.int32))

  def dataset_from_inputs(self, inputs: Iterable[str]) -> tf.data.Dataset:
    """Batches of typed sentences (``interactive_infer``)."""
    sentences = [str(s).strip() for s in inputs]
    if not sentences or not all(sentences):
      raise DataError("interactive input is empty; type a sentence")
    self.transcripts = sentences
    self.names = [f"interactive_{i}" for i in range(len(sentences))]
    self._text_ids = [self._encode(s, f"input {i + 1}") for i, s in enumerate(sentences)]
    rows = transforms.slices(self._text_columns(np.arange(len(sentences), dtype=np.int64)))
    return transforms.inference_pipeline(rows, self._batching(), map_fn=self._model_inputs)
