"""Tiny audio corpora made at test time and small Speech2Text configs for the speech tests."""

from __future__ import annotations

import csv
import importlib.util
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCAB = os.path.join(ROOT, "open_seq2seq", "test_utils", "toy_speech_data", "vocab.txt")
CONFIG_DIR = os.path.join(ROOT, "example_configs", "speech2text")
POCKETSPHINX_DIR = "/usr/share/pocketsphinx/test/data"


def load_script(name):
  """Imports ``scripts/<name>.py`` afresh as a module, registered under ``scripts.<name>``
  (dataclasses and pickling look a class's module up there)."""
  key = f"scripts.{name}"
  spec = importlib.util.spec_from_file_location(key, os.path.join(ROOT, "scripts", name + ".py"))
  module = importlib.util.module_from_spec(spec)
  sys.modules[key] = module
  try:
    spec.loader.exec_module(module)
  except BaseException:
    del sys.modules[key]
    raise
  return module


TINY_TDNN = {
    "convnet_layers": [
        {"type": "conv1d", "repeat": 1, "kernel_size": [5], "stride": [2], "num_channels": 16},
        {"type": "conv1d", "repeat": 2, "kernel_size": [5], "stride": [1], "num_channels": 16,
         "residual": True, "residual_dense": True},
        {"type": "sep_conv1d", "repeat": 2, "kernel_size": [7], "stride": [1],
         "num_channels": 16, "residual": True, "residual_dense": True},
        {"type": "conv1d", "repeat": 1, "kernel_size": [3], "stride": [1], "num_channels": 24,
         "dilation": [2]},
    ],
    "normalization": "batch_norm",
}


def tone(duration: float, freq: float, sample_freq: int = 16000, seed: int = 0) -> np.ndarray:
  """A chirp-ish tone plus a little noise, float32 in [-0.5, 0.5]."""
  rng = np.random.default_rng(seed)
  t = np.arange(int(duration * sample_freq)) / sample_freq
  signal = 0.4 * np.sin(2 * np.pi * (freq + 200 * t) * t) + 0.02 * rng.standard_normal(len(t))
  return signal.astype(np.float32)


def write_corpus(directory: str, transcripts: list[str], durations: list[float] | None = None,
                 sample_freq: int = 16000, fmt: str = "wav", csv_name: str = "data.csv",
                 subdir: str = "audio") -> str:
  """Writes one tone per transcript and a CSV (paths relative to the CSV); returns the CSV."""
  import soundfile
  os.makedirs(os.path.join(directory, subdir), exist_ok=True)
  durations = durations or [0.3 + 0.1 * (i % 5) for i in range(len(transcripts))]
  csv_path = os.path.join(directory, csv_name)
  with open(csv_path, "w", encoding="utf-8", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["wav_filename", "wav_filesize", "transcript"])
    for i, (text, duration) in enumerate(zip(transcripts, durations)):
      rel = os.path.join(subdir, f"{i:04d}.{fmt}")
      path = os.path.join(directory, rel)
      soundfile.write(path, tone(duration, 200 + 50 * i, sample_freq, i), sample_freq,
                      subtype="PCM_16", format=fmt.upper())
      writer.writerow([rel, os.path.getsize(path), text])
  return csv_path


def speech_config(csv_files: list[str], encoder=None, encoder_params=None,
                  data_params=None, decoder_params=None, **top) -> dict:
  """An unvalidated Speech2Text config dict over ``csv_files`` with a tiny TDNN."""
  from open_seq2seq.data.speech2text.speech2text import Speech2TextDataLayer
  from open_seq2seq.decoders.fc_decoders import FullyConnectedCTCDecoder
  from open_seq2seq.encoders.tdnn_encoder import TDNNEncoder
  from open_seq2seq.losses.ctc_loss import CTCLoss
  config = {
      "random_seed": 0, "max_steps": 10, "batch_size_per_gpu": 4,
      "encoder": encoder or TDNNEncoder,
      "encoder_params": dict(TINY_TDNN if encoder_params is None else encoder_params),
      "decoder": FullyConnectedCTCDecoder, "decoder_params": dict(decoder_params or {}),
      "loss": CTCLoss,
      "data_layer": Speech2TextDataLayer,
      "data_layer_params": {"num_audio_features": 32, "input_type": "logfbank",
                            "vocab_file": VOCAB, "dataset_files": list(csv_files),
                            **(data_params or {})},
  }
  config.update(top)
  return config


def build_model(config: dict, mode: str = "train"):
  from open_seq2seq.config import resolve_config
  from open_seq2seq.models.speech2text import Speech2Text
  return Speech2Text(resolve_config(Speech2Text, config, mode), mode)


def to_numpy(structure):
  import tensorflow as tf
  return tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, structure)


def example_config_overrides(directory: str) -> tuple[list[str], int]:
  """Speech2Text family: tiny audio for a shipped config, as run.py overrides.

  Four short utterances (0.4-0.7 s) in one CSV serve every mode, two per step: only the data
  shrinks (the step's batch included), never the model, so
  ``tests/e2e/test_example_configs.py`` steps the config at its own size.

  Returns:
    The overrides, and the number of utterances every mode reads (infer transcribes them all).
  """
  transcripts = ["one two", "three", "four five", "six"]
  csv_path = write_corpus(directory, transcripts, durations=[0.7, 0.45, 0.6, 0.4])
  return ([f"--data_layer_params/dataset_files=['{csv_path}']", "--batch_size_per_gpu=2"],
          len(transcripts))


def padded_features(lengths: list[int], num_features: int, garbage: bool = False,
                    seed: int = 0) -> np.ndarray:
  """A batch [B, max(lengths), num_features] of random frames, zeros after each length (or,
  with ``garbage``, large random values there: the real frames stay the same)."""
  rng = np.random.default_rng(seed)
  x = np.zeros((len(lengths), max(lengths), num_features), np.float32)
  for i, n in enumerate(lengths):
    x[i, :n] = rng.normal(size=(n, num_features))
  for i, n in enumerate(lengths if garbage else []):
    x[i, n:] = 100.0 * rng.normal(size=(max(lengths) - n, num_features))
  return x


def run_encoder(encoder, x: np.ndarray, lengths: list[int], training: bool = False):
  """A speech encoder's (outputs, src_lengths) on a padded feature batch, as numpy."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  out = encoder({"source_tensors": (tf.constant(x), tf.constant(lengths, tf.int32))},
                training=training)
  return out["outputs"].numpy(), out["src_lengths"].numpy()


def held_out_wer(predictions_csv: str, test_csv: str) -> float:
  """The WER of an infer CSV (``predicted_transcript``) against the test CSV it was made from,
  after checking that both list the same files in the same order."""
  from open_seq2seq.utils.metrics import word_error_rate  # pylint: disable=import-outside-toplevel

  def rows(path):
    with open(path, encoding="utf-8", newline="") as f:
      return list(csv.DictReader(f))

  predictions, references = rows(predictions_csv), rows(test_csv)
  assert [p["wav_filename"] for p in predictions] == [r["wav_filename"] for r in references]
  return word_error_rate([r["transcript"] for r in references],
                         [p["predicted_transcript"] for p in predictions])


def sentencepiece_stand_in(params: dict, directory: str, vocab_size: int = 128) -> list[str]:
  """The ``vocab_file`` override for a config whose SentencePiece targets its recipe trains
  (``data_layer_params/vocab_file`` a ``.model`` that is not here): a unigram model of
  ``vocab_size`` pieces learnt from generated words, written into ``directory``. Nothing for
  any other config. The shipped SentencePiece speech configs name models of 128 pieces, so
  the model keeps its size."""
  vocab = (params.get("data_layer_params") or {}).get("vocab_file")
  if not isinstance(vocab, str) or not vocab.endswith(".model") or os.path.exists(vocab):
    return []
  rng = np.random.default_rng(0)
  letters = list("abcdefghijklmnopqrstuvwxyz'")
  words = ["".join(rng.choice(letters, size=rng.integers(2, 9))) for _ in range(400)]
  sentences = [" ".join(rng.choice(words, size=rng.integers(3, 12))) for _ in range(2000)]
  model = load_script("build_sentencepiece").train(sentences, vocab_size, "unigram")
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, f"stand_in_{vocab_size}.model")
  with open(path, "wb") as f:
    f.write(model)
  return [f"--data_layer_params/vocab_file={path}"]
