"""Exported speech synthesizers: text in, waveform (and spectrogram) out.

The graph normalizes text as the "basic" cleaner does (lowercase, whitespace collapsed)
and keeps the characters of the vocabulary. The "english" cleaner's number, money and
abbreviation expansion and the CMU dictionary are Python and stay out of the graph: a client
spells those out (``"12"`` -> ``"twelve"``) before calling the model; for text without them
the export says what ``--mode=infer`` says. Waveforms come from the in-graph Griffin-Lim
(peak-normalised to 0.9), or from a neural vocoder saved inside the export (a HiFi-GAN
export loaded by :mod:`open_seq2seq.models.vocoder_link`: its weights and graph become part
of this SavedModel; its waveform is returned as it is, not normalised).
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from open_seq2seq.serving.adapter import ServingAdapter

__all__ = ["TextToSpeechServing"]


class TextToSpeechServing(ServingAdapter):
  """``text`` [batch] -> ``audio`` [batch, samples] (peak 0.9, zero-padded), ``audio_length``,
  ``spectrogram`` [batch, frames, features] and ``spectrogram_length``.

  Args:
    symbols: the text encoder's symbols (index = id; 0-2 pad, start, end).
    pad_eos: the data layer wraps ids in start/end symbols.
    to_audio: (spectrogram [b, t, f], magnitude or None) -> waveform [b, samples] (TF ops).
    samples_per_frame: the hop length.
    sample_rate: Hz, recorded in the export's description (also under ``audio_outputs``,
      which names ``audio`` as a waveform with its length in ``audio_length``).
    vocoder: None (Griffin-Lim through ``to_audio``), or a neural vocoder: a callable
      (mel [b, t, f], frames [b]) -> (waveforms [b, samples], samples [b]) with a ``module``
      (the trackable holding its weights, saved with this adapter) and ``describe()``.
  """

  inputs = {"text": (tf.TensorSpec([None], tf.string),
                     "sentences to speak (numbers and abbreviations spelled out)")}
  outputs = {"audio": "the waveform of each sentence [batch, samples], zero-padded",
             "audio_length": "samples of each waveform",
             "spectrogram": "the predicted spectrogram [batch, frames, features]",
             "spectrogram_length": "frames of each spectrogram"}

  def __init__(self, symbols: tuple[str, ...], pad_eos: bool,
               to_audio: Callable[[tf.Tensor, Any], tf.Tensor], samples_per_frame: int,
               sample_rate: int, vocoder: Any = None):
    super().__init__(name="text_to_speech")
    chars = [(s, i) for i, s in enumerate(symbols) if i >= 3 and len(s) == 1]
    self.table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(tf.constant([c for c, _ in chars]),
                                            tf.constant([i for _, i in chars], tf.int32)),
        default_value=-1)
    self.pad_eos = pad_eos
    self._to_audio = to_audio
    self.samples_per_frame = samples_per_frame
    self.sample_rate = sample_rate
    self._vocoder = vocoder
    if vocoder is not None:
      self.vocoder_module = vocoder.module  # tracked: its variables go into the export

  def describe(self) -> dict[str, Any]:
    # audio_outputs: which outputs are waveforms, how long each row is and at what rate, so
    # that a client (scripts/run_export.py) writes them as audio files, not as numbers
    described = dict(super().describe(), sample_rate=self.sample_rate,
                     audio_outputs={"audio": {"length": "audio_length",
                                              "sample_rate": self.sample_rate}})
    described["vocoder"] = ("Griffin-Lim" if self._vocoder is None
                            else self._vocoder.describe())
    return described

  def example_inputs(self) -> dict[str, tf.Tensor]:
    return {"text": tf.constant(["a b"])}

  def to_batch(self, inputs):
    text = tf.strings.lower(tf.strings.strip(
        tf.strings.regex_replace(inputs["text"], r"\s+", " ")), encoding="utf-8")
    ids = tf.ragged.map_flat_values(self.table.lookup,
                                    tf.strings.unicode_split(text, "UTF-8"))
    ids = tf.ragged.boolean_mask(ids, ids >= 0)  # characters outside the vocabulary
    if self.pad_eos:
      rows = tf.shape(inputs["text"], out_type=tf.int64)[:1]
      edge = tf.concat([rows, [1]], 0)
      ids = tf.concat([tf.RaggedTensor.from_tensor(tf.fill(edge, 1)), ids,
                       tf.RaggedTensor.from_tensor(tf.fill(edge, 2))], axis=1)
    return {"source_tensors": (ids.to_tensor(0), tf.cast(ids.row_lengths(), tf.int32))}

  def to_outputs(self, inputs, batch, predictions):
    frames = tf.cast(predictions["final_sequence_lengths"], tf.int32)
    spectrogram = tf.cast(predictions["spectrogram"], tf.float32)
    valid = tf.sequence_mask(frames, tf.shape(spectrogram)[1])[:, :, None]
    if self._vocoder is not None:  # its frames past each length are read as silence
      audio, lengths = self._vocoder(tf.where(valid, spectrogram, 0.0), frames)
      return {"audio": tf.cast(audio, tf.float32), "audio_length": tf.cast(lengths, tf.int32),
              "spectrogram": spectrogram, "spectrogram_length": frames}
    magnitude = predictions.get("magnitude")
    if magnitude is not None:
      magnitude = tf.where(valid, tf.cast(magnitude, tf.float32), 0.0)

    def one(args):  # each sentence alone, as inference synthesizes it
      spec, length = args[0][:args[2]], args[2]
      mag = None if magnitude is None else args[1][:length]
      wave = self._to_audio(spec[None], None if mag is None else mag[None])[0]
      peak = tf.reduce_max(tf.abs(wave))
      return tf.where(peak > 0, wave / tf.maximum(peak, 1e-30) * 0.9, wave)

    mags = magnitude if magnitude is not None else spectrogram
    audio = tf.map_fn(one, (spectrogram, mags, frames),
                      fn_output_signature=tf.RaggedTensorSpec([None], tf.float32,
                                                              ragged_rank=0))
    return {"audio": audio.to_tensor(0.0), "audio_length": tf.cast(audio.row_lengths(), tf.int32),
            "spectrogram": spectrogram, "spectrogram_length": frames}
