"""Exported speech recognizers: waveforms in, transcripts out.

The features are the data layer's own TF ops
(:meth:`open_seq2seq.data.speech2text.features.FeatureExtractor.features_graph`: peak
normalization, spectrogram / log-mel / MFCC, per-utterance normalization), so the graph
hears what training heard. Decoding is the decoder's in-graph one (greedy CTC, or the
attention decoder's search); an n-gram LM beam search runs in Python and is not exported.

With word timestamps (the model's ``word_timestamps``), the words and their times are
computed in the graph as :mod:`open_seq2seq.utils.word_timestamps` computes them for infer's
CSV, from the decoder's ``token_start_frames``/``token_end_frames``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from open_seq2seq.serving.adapter import ServingAdapter
from open_seq2seq.serving.text import import_tensorflow_text

__all__ = ["SpeechToTextServing", "TimestampSettings"]

WORD_OUTPUTS = {"words": "the words of each transcript [batch, words] (padded with '')",
                "word_start": "each word's start in seconds [batch, words]",
                "word_end": "each word's end in seconds [batch, words]",
                "num_words": "the number of words of each row"}


@dataclasses.dataclass(frozen=True)
class TimestampSettings:
  """What word timestamps need besides the decoder's frames (the model's params)."""

  window_stride: float
  start_offset: float
  end_offset: float
  scale: float
  starts_word: np.ndarray  # bool [classes]: the token begins a word
  separator: np.ndarray  # bool [classes]: the token belongs to no word


class SpeechToTextServing(ServingAdapter):
  """``waveform`` [batch, samples] float32 in [-1, 1] at the model's sample rate and
  ``length`` [batch] (real samples of each row) -> ``text`` [batch] and the predicted
  symbol ids.

  Args:
    features: one float32 [samples] signal -> [frames, num_features] (TF ops).
    num_features: features per frame.
    pad_to: the frame dimension of a batch is rounded up to a multiple of this, as the data
      layer pads it.
    targets: the data layer's target encoder (``idx2char``, ``num_symbols``, ``bpe``/``sp``,
      ``autoregressive``/``end_id``).
    sample_rate: Hz, recorded in the export's description.
    timestamps: with settings, also ``words``, ``word_start``, ``word_end`` and
      ``num_words`` (:data:`WORD_OUTPUTS`).
  """

  inputs = {"waveform": (tf.TensorSpec([None, None], tf.float32),
                         "audio samples in [-1, 1] at the model's sample rate, zero-padded "
                         "rows"),
            "length": (tf.TensorSpec([None], tf.int32), "real samples of each row")}
  outputs = {"text": "the transcript of each waveform",
             "ids": "the predicted symbol ids [batch, time] (valid up to their length)",
             "ids_length": "the number of predicted ids of each row"}

  def __init__(self, features: Callable[[tf.Tensor], tf.Tensor], num_features: int,
               pad_to: int, targets: Any, sample_rate: int,
               timestamps: TimestampSettings | None = None):
    super().__init__(name="speech_to_text")
    self.timestamps = timestamps
    if timestamps is not None:
      self.outputs = dict(self.outputs, **WORD_OUTPUTS)
      self.starts_word = tf.constant(timestamps.starts_word, tf.bool)
      self.separator = tf.constant(timestamps.separator, tf.bool)
    self._features = features
    self.num_features = num_features
    self.pad_to = max(1, pad_to)
    self.sample_rate = sample_rate
    self.num_symbols = int(targets.num_symbols)
    self.end_id = targets.end_id if getattr(targets, "autoregressive", False) else None
    self.sentencepiece = None
    if getattr(targets, "bpe", False):
      text = import_tensorflow_text()
      self.sentencepiece = text.SentencepieceTokenizer(
          model=targets.sp.serialized_model_proto(), out_type=tf.int32)
      self.required_imports = ("tensorflow_text",)
    else:
      symbols = [targets.idx2char[i].encode("utf-8") for i in range(self.num_symbols)]
      self.symbols = tf.constant(symbols + [b""], tf.string)

  def describe(self) -> dict[str, Any]:
    return dict(super().describe(), sample_rate=self.sample_rate)

  def example_inputs(self) -> dict[str, tf.Tensor]:
    samples = self.sample_rate // 2
    noise = np.random.default_rng(0).uniform(-0.5, 0.5, samples).astype(np.float32)
    return {"waveform": tf.constant(noise[None]), "length": tf.constant([samples], tf.int32)}

  def to_batch(self, inputs):
    def one(args):
      waveform, length = args
      return self._features(waveform[:length])
    features = tf.map_fn(one, (inputs["waveform"], inputs["length"]),
                         fn_output_signature=tf.RaggedTensorSpec(
                             [None, self.num_features], tf.float32, ragged_rank=0))
    lengths = tf.cast(features.row_lengths(), tf.int32)
    longest = tf.reduce_max(tf.concat([lengths, [1]], 0))
    padded_length = (longest + self.pad_to - 1) // self.pad_to * self.pad_to
    dense = features.to_tensor(0.0)
    dense = tf.pad(dense, [[0, 0], [0, padded_length - tf.shape(dense)[1]], [0, 0]])
    return {"source_tensors": (dense, lengths)}

  def to_outputs(self, inputs, batch, predictions):
    ids = tf.cast(predictions["outputs"], tf.int32)
    lengths = tf.cast(predictions["final_sequence_lengths"], tf.int32)
    valid = tf.sequence_mask(lengths, tf.shape(ids)[1])
    if self.end_id is not None:  # autoregressive outputs end at the first </S>
      valid &= tf.equal(tf.cumsum(tf.cast(tf.equal(ids, self.end_id), tf.int32), axis=1), 0)
    valid &= (ids >= 0) & (ids < self.num_symbols)  # blanks, <S>, out of range
    kept = tf.ragged.boolean_mask(ids, valid)
    outputs = {"text": self._detokenize(kept), "ids": ids, "ids_length": lengths}
    if self.timestamps is not None:
      outputs.update(self._words(batch, predictions, ids, valid))
    return outputs

  def _detokenize(self, ids: tf.RaggedTensor) -> tf.Tensor:
    """The text of each row of ragged symbol ids."""
    if self.sentencepiece is not None:
      return self.sentencepiece.detokenize(ids)
    return tf.strings.reduce_join(tf.gather(self.symbols, ids), axis=1)

  def _words(self, batch, predictions, ids, valid) -> dict[str, tf.Tensor]:
    """The words of each row and their times (as utils/word_timestamps.py gives them)."""
    settings = self.timestamps
    rows = tf.shape(ids)[0]
    tokens = tf.ragged.boolean_mask(ids, valid)
    row_of = tokens.value_rowids()
    tokens = tokens.flat_values
    starts = tf.ragged.boolean_mask(predictions["token_start_frames"], valid).flat_values
    ends = tf.ragged.boolean_mask(predictions["token_end_frames"], valid).flat_values
    # a word begins at a word-starting token or a row's first token; separators are dropped
    first_of_row = tf.concat([tf.ones_like(row_of[:1], tf.bool), row_of[1:] != row_of[:-1]], 0)
    group = tf.cumsum(tf.cast(tf.gather(self.starts_word, tokens) | first_of_row, tf.int32))
    keep = ~tf.gather(self.separator, tokens)
    group, row_of = tf.boolean_mask(group, keep), tf.boolean_mask(row_of, keep)
    tokens, starts, ends = (tf.boolean_mask(x, keep) for x in (tokens, starts, ends))
    new_word = tf.concat([tf.ones_like(group[:1], tf.bool), group[1:] != group[:-1]], 0)
    word = tf.cumsum(tf.cast(new_word, tf.int32)) - 1
    count = tf.reduce_sum(tf.cast(new_word, tf.int32))
    text = self._detokenize(tf.RaggedTensor.from_value_rowids(tokens, word, nrows=count))
    word_row = tf.boolean_mask(row_of, new_word)
    # seconds per encoder frame: the window stride times the encoder's time reduction
    feature_lengths = tf.cast(batch["source_tensors"][1], tf.float32)
    reduction = tf.reduce_sum(feature_lengths) / tf.maximum(
        tf.reduce_sum(tf.cast(predictions["src_lengths"], tf.float32)), 1.0)
    frame_seconds = settings.window_stride * tf.maximum(tf.round(reduction), 1.0)
    duration = tf.gather(feature_lengths * settings.window_stride, word_row)

    def seconds(frames, reduce, offset):
      frames = tf.cast(reduce(frames, word, count), tf.float32)
      return frames * frame_seconds * settings.scale + offset

    start = tf.clip_by_value(seconds(starts, tf.math.unsorted_segment_min,
                                     settings.start_offset), 0.0, duration)
    end = tf.clip_by_value(seconds(ends, tf.math.unsorted_segment_max, settings.end_offset),
                           start, duration)

    def by_row(values, padding):
      return tf.RaggedTensor.from_value_rowids(values, tf.cast(word_row, tf.int64),
                                               nrows=tf.cast(rows, tf.int64)).to_tensor(padding)

    return {"words": tf.strings.strip(by_row(text, "")), "word_start": by_row(start, 0.0),
            "word_end": by_row(end, 0.0),
            "num_words": tf.math.bincount(tf.cast(word_row, tf.int32), minlength=rows,
                                          maxlength=rows, dtype=tf.int32)}
