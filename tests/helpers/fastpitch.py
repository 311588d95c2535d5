"""FastPitch test inputs made by hand: batches in FastPitchDataLayer's layout and tiny
components."""

from __future__ import annotations

import types

import numpy as np
import tensorflow as tf

from open_seq2seq.data.description import FastPitchDescription
from open_seq2seq.decoders.fastpitch_decoder import FastPitchDecoder
from open_seq2seq.encoders.fastpitch_encoder import FastPitchEncoder
from open_seq2seq.losses.fastpitch_loss import FastPitchLoss
from tests.helpers import tts

VOCAB, MEL = 12, 6
FFT = {"d_model": 16, "num_layers": 2, "num_heads": 2, "head_size": 8, "filter_size": 24,
       "kernel_size": 3, "dropout": 0.1, "attention_dropout": 0.1}
DECODER = dict(FFT, predictor_filter_size=12, aligner_channels=8)


def batch(text_lengths: list[int], mel_lengths: list[int], seed: int = 0,
          pad_symbols: int = 0, pad_frames: int = 0) -> dict:
  """``source_tensors`` (ids, lengths) and ``target_tensors`` (mel, stop, lengths, pitch) of
  random utterances; padding (up to the longest plus ``pad_*``) holds ids 0, mel frames of
  garbage (the model must not read them) and pitch 0. Pitch is 0 on about a third of the
  frames (unvoiced)."""
  r = np.random.default_rng(seed)
  n, t = max(text_lengths) + pad_symbols, max(mel_lengths) + pad_frames
  ids = np.zeros((len(text_lengths), n), np.int32)
  mel = 50.0 * r.normal(size=(len(mel_lengths), t, MEL)).astype(np.float32)
  pitch = np.zeros((len(mel_lengths), t), np.float32)
  stop = np.ones((len(mel_lengths), t), np.float32)
  for b, (symbols, frames) in enumerate(zip(text_lengths, mel_lengths)):
    ids[b, :symbols] = r.integers(3, VOCAB, symbols)
    mel[b, :frames] = r.normal(size=(frames, MEL))
    voiced = r.random(frames) > 0.33
    pitch[b, :frames] = np.where(voiced, r.normal(size=frames), 0.0)
    stop[b, :frames - 1] = 0.0
  return {"source_tensors": (tf.constant(ids), tf.constant(text_lengths, tf.int32)),
          "target_tensors": (tf.constant(mel), tf.constant(stop),
                             tf.constant(mel_lengths, tf.int32), tf.constant(pitch))}


def row(data: dict, b: int, symbols: int, frames: int) -> dict:
  """Utterance ``b`` of ``batch``'s output alone, cut to its own lengths."""
  ids, text_lengths = data["source_tensors"]
  mel, stop, mel_lengths, pitch = data["target_tensors"]
  return {"source_tensors": (ids[b:b + 1, :symbols], text_lengths[b:b + 1]),
          "target_tensors": (mel[b:b + 1, :frames], stop[b:b + 1, :frames],
                             mel_lengths[b:b + 1], pitch[b:b + 1, :frames])}


def components(dtype: str = "float32", seed: int = 0, params: dict | None = None,
               **decoder_kwargs) -> tuple[FastPitchEncoder, FastPitchDecoder, FastPitchLoss]:
  """A tiny encoder, decoder (``params`` over :data:`DECODER`; ``decoder_kwargs``: pace,
  pitch_shift) and loss, weights drawn with ``seed``."""
  tf.keras.utils.set_random_seed(seed)
  encoder = FastPitchEncoder(dict(FFT), dtype=dtype, src_vocab_size=VOCAB)
  decoder = FastPitchDecoder(dict(DECODER, **(params or {})), dtype=dtype, num_mel_features=MEL,
                             **decoder_kwargs)
  return encoder, decoder, FastPitchLoss({"binarization_start_step": 10},
                                         num_mel_features=MEL)


def run(encoder, decoder, data: dict, training: bool = False, targets: bool = True) -> dict:
  """Encoder then decoder on ``data`` (teacher forced when ``targets``)."""
  encoded = encoder({"source_tensors": data["source_tensors"]}, training=training)
  inputs = {"encoder_output": encoded}
  if targets:
    inputs["target_tensors"] = data["target_tensors"]
  return decoder(inputs, training=training)


def description(pitch_mean: float = 200.0, pitch_std: float = 50.0) -> FastPitchDescription:
  """What a FastPitch data layer of :data:`VOCAB` symbols and :data:`MEL` mel channels
  describes (the features reduced to their sizes)."""
  return FastPitchDescription(src_vocab_size=VOCAB, idx2symbol=tuple(str(i) for i in range(VOCAB)),
                              features=types.SimpleNamespace(num_mel=MEL, num_magnitude=0),
                              pitch_mean=pitch_mean, pitch_std=pitch_std)


def example_config_overrides(directory: str) -> tuple[list[str], int]:
  """FastPitch configs: Text2Speech's four tone clips, with the pitch statistics of the same
  CSV (eval and infer need the training corpus's)."""
  overrides, count = tts.example_config_overrides(directory)
  csv_path = [o for o in overrides if o.startswith("--data_layer_params/dataset_files=")][0]
  return overrides + [csv_path.replace("dataset_files", "pitch_stats_files")], count
