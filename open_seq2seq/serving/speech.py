"""Exported speech recognizers: waveforms in, transcripts out.

The features are the data layer's own TF ops
(:meth:`open_seq2seq.data.speech2text.features.FeatureExtractor.features_graph`: peak
normalization, spectrogram / log-mel / MFCC, per-utterance normalization), so the graph
hears what training heard. Decoding is the decoder's in-graph one (greedy CTC, or the
attention decoder's search); an n-gram LM beam search runs in Python and is not exported.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import tensorflow as tf

from open_seq2seq.serving.adapter import ServingAdapter
from open_seq2seq.serving.text import import_tensorflow_text

__all__ = ["SpeechToTextServing"]


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
  """

  inputs = {"waveform": (tf.TensorSpec([None, None], tf.float32),
                         "audio samples in [-1, 1] at the model's sample rate, zero-padded "
                         "rows"),
            "length": (tf.TensorSpec([None], tf.int32), "real samples of each row")}
  outputs = {"text": "the transcript of each waveform",
             "ids": "the predicted symbol ids [batch, time] (valid up to their length)",
             "ids_length": "the number of predicted ids of each row"}

  def __init__(self, features: Callable[[tf.Tensor], tf.Tensor], num_features: int,
               pad_to: int, targets: Any, sample_rate: int):
    super().__init__(name="speech_to_text")
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
    if self.sentencepiece is not None:
      text = self.sentencepiece.detokenize(kept)
    else:
      text = tf.strings.reduce_join(tf.gather(self.symbols, kept), axis=1)
    return {"text": text, "ids": ids, "ids_length": lengths}
