"""A streaming recognizer: a streaming ConformerEncoder and its decoder's greedy decoding,
one chunk of features at a time, with everything carried between chunks in one flat dict of
tensors (what a SavedModel signature takes and returns).

* Encoder: :meth:`~open_seq2seq.encoders.ConformerEncoder.stream_step` (state keys
  ``encoder_*``).
* CTC (:class:`~open_seq2seq.decoders.fc_decoders.FullyConnectedCTCDecoder`): the best path
  of each chunk; the last frame's class is carried (``decoder_last``), so a label repeated
  across a chunk boundary is merged as in the whole utterance's best path.
* Transducer (:class:`~open_seq2seq.decoders.TransducerDecoder`): greedy search resumed with
  the prediction network's context (:mod:`open_seq2seq.parts.transducer.streaming`;
  ``decoder_*``).

Chunk by chunk, the labels are those the decoder's greedy decoding gives the whole
utterance's encoder outputs (``tests/unit/test_conformer_streaming_decoding.py``). Beam
searches and LM decoding look ahead over the whole utterance: they are refused.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from open_seq2seq.errors import ConfigError


def _prefixed(prefix: str, state: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
  return {f"{prefix}_{name}": value for name, value in state.items()}


def _unprefixed(prefix: str, state: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
  start = len(prefix) + 1
  return {name[start:]: value for name, value in state.items()
          if name.startswith(prefix + "_")}


class CTCStreamDecoder:
  """Greedy CTC decoding chunk by chunk (module doc)."""

  def __init__(self, decoder: Any, encoder_depth: int):
    p = decoder.params
    if p["use_beam_search"] or p["use_language_model"]:
      raise ConfigError("decoder_params: streaming decodes CTC greedily; set "
                        "use_beam_search: False and use_language_model: False")
    if not decoder.fc.built:
      decoder.fc.build((None, encoder_depth))
    self.decoder = decoder
    self.blank = decoder.vocab_size - 1

  def initial_state(self, batch_size: Any) -> dict[str, tf.Tensor]:
    return {"last": tf.fill([batch_size], -1)}  # no frame before the first

  def step(self, encoder_outputs: tf.Tensor, lengths: tf.Tensor, state: dict[str, tf.Tensor]
           ) -> tuple[tf.Tensor, tf.Tensor, dict[str, tf.Tensor]]:
    best = tf.argmax(tf.cast(self.decoder.fc(encoder_outputs), tf.float32), axis=-1,
                     output_type=tf.int32)
    previous = tf.concat([state["last"][:, None], best[:, :-1]], axis=1)
    lengths = tf.cast(lengths, tf.int32)
    keep = ((best != previous) & (best != self.blank)
            & tf.sequence_mask(lengths, tf.shape(best)[1]))
    ids = tf.ragged.boolean_mask(best, keep)
    last = tf.gather(best, tf.maximum(lengths - 1, 0), batch_dims=1)
    return (ids.to_tensor(default_value=-1), tf.cast(ids.row_lengths(), tf.int32),
            {"last": tf.where(lengths > 0, last, state["last"])})


class StreamingRecognizer:
  """``initial_state(batch, num_features)`` and ``step(features, lengths, state) -> (ids
  [B, L] padded with -1, counts [B], new state)`` of a streaming encoder and its decoder.

  ``features`` [B, n * encoder.chunk_frames, F] are the next frames of each utterance;
  a row given fewer real frames than the chunk ends there.
  """

  def __init__(self, encoder: Any, decoder: Any):
    # pylint: disable=import-outside-toplevel
    from open_seq2seq.decoders.fc_decoders import FullyConnectedCTCDecoder
    from open_seq2seq.decoders.transducer_decoder import TransducerDecoder
    from open_seq2seq.parts.transducer.streaming import TransducerStreamDecoder
    if not hasattr(encoder, "stream_step"):
      raise ConfigError(f"encoder: {type(encoder).__name__} does not stream; use "
                        "ConformerEncoder with att_context_size and conv_causal: True")
    encoder.require_streaming()
    depth = encoder.params["d_model"]
    if isinstance(decoder, TransducerDecoder):
      self.decoding = TransducerStreamDecoder(decoder, depth)
    elif isinstance(decoder, FullyConnectedCTCDecoder):
      self.decoding = CTCStreamDecoder(decoder, depth)
    else:
      raise ConfigError(f"decoder: streaming decodes with FullyConnectedCTCDecoder or "
                        f"TransducerDecoder, not {type(decoder).__name__}")
    self.encoder = encoder

  @property
  def chunk_frames(self) -> int:
    return self.encoder.chunk_frames

  def initial_state(self, batch_size: Any, num_features: int) -> dict[str, tf.Tensor]:
    return {**_prefixed("encoder", self.encoder.initial_state(batch_size, num_features)),
            **_prefixed("decoder", self.decoding.initial_state(batch_size))}

  def step(self, features: tf.Tensor, lengths: tf.Tensor, state: dict[str, tf.Tensor]
           ) -> tuple[tf.Tensor, tf.Tensor, dict[str, tf.Tensor]]:
    outputs, out_lengths, encoder_state = self.encoder.stream_step(
        features, lengths, _unprefixed("encoder", state))
    ids, counts, decoder_state = self.decoding.step(outputs, out_lengths,
                                                    _unprefixed("decoder", state))
    return ids, counts, {**_prefixed("encoder", encoder_state),
                         **_prefixed("decoder", decoder_state)}


__all__ = ["StreamingRecognizer", "CTCStreamDecoder"]
