"""Transducer greedy decoding that resumes: the encoder frames arrive chunk by chunk and the
search carries what it needs from one chunk to the next.

The greedy search (:func:`open_seq2seq.parts.transducer.search.greedy_search`) is a walk
over the frames that only ever looks at the current frame and at the prediction network's
output for the labels emitted so far. At a chunk boundary every frame before it has been
left by a blank (or by the per-frame limit), so the count of labels on the current frame is
0 and the walk's whole context is the prediction network's state and its (projected) output
for the last label. Carrying those two, decoding chunk after chunk emits the labels, in
order, that one search over the concatenated frames emits, with the same score.

:class:`TransducerStreamDecoder` holds that context for a
:class:`~open_seq2seq.decoders.TransducerDecoder` as a flat dict of tensors (``prediction``
[B, joint_hidden], ``h<l>`` / ``c<l>`` [B, pred_hidden] per LSTM layer, ``score`` [B]), so
that it can travel through a SavedModel signature.
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from open_seq2seq.errors import ConfigError

#: ``predict(ids [N], state) -> (projected output [N, H], state)``, as for the searches.
Predict = Callable[[tf.Tensor, Any], tuple[tf.Tensor, Any]]
#: ``joint(projected frame [N, H], projected prediction [N, H]) -> logits [N, V]``.
Joint = Callable[[tf.Tensor, tf.Tensor], tf.Tensor]


def _where_rows(mask: tf.Tensor, new: Any, old: Any) -> Any:
  """``new`` on the rows where ``mask`` [N] is True, else ``old`` (nests of [N, ...])."""
  def pick(a, b):
    shape = tf.concat([tf.shape(mask), tf.ones([tf.rank(a) - 1], tf.int32)], 0)
    return tf.where(tf.reshape(mask, shape), a, b)
  return tf.nest.map_structure(pick, new, old)


def greedy_resume(frames: tf.Tensor, lengths: tf.Tensor, predicted: tf.Tensor, state: Any,
                  predict: Predict, joint: Joint, blank: int, max_symbols: int
                  ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor, Any]:
  """Greedy search over one chunk of frames, from a carried context (module doc).

  Args:
    frames: [B, T, H] the chunk's encoder frames through the joint's encoder projection.
    lengths: [B] valid frames of each row in the chunk.
    predicted: [B, H] projected prediction output for the last label (at the start of an
      utterance: for the blank start context).
    state: the prediction network's state after that label.
    predict, joint, blank, max_symbols: as for ``greedy_search``.

  Returns:
    ``(ids [B, L] int32 padded with -1, label counts [B], scores [B] float32, predicted,
    state)``: the chunk's labels, the log-probability of its part of the alignment, and
    the context for the next chunk.
  """
  batch = tf.shape(frames)[0]
  frames = tf.pad(frames, [[0, 0], [0, 1], [0, 0]])  # a finished row reads this extra frame
  lengths = tf.cast(lengths, tf.int32)
  zeros = tf.zeros([batch], tf.int32)

  def body(i, t, count, score, predicted, state, tokens, emitted):
    active = t < lengths
    frame = tf.gather(frames, t, batch_dims=1)
    log_probs = tf.nn.log_softmax(tf.cast(joint(frame, predicted), tf.float32), axis=-1)
    best = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
    emit = active & tf.not_equal(best, blank) & (count < max_symbols)
    advance = active & ~emit
    stepped = predict(best, state)
    predicted, state = _where_rows(emit, stepped, (predicted, state))
    score += tf.where(active, tf.gather(log_probs, tf.where(emit, best, blank),
                                        batch_dims=1), 0.0)
    count = tf.where(advance, 0, count + tf.cast(emit, tf.int32))
    return (i + 1, t + tf.cast(advance, tf.int32), count, score, predicted, state,
            tokens.write(i, best), emitted.write(i, emit))

  arrays = (tf.TensorArray(tf.int32, size=0, dynamic_size=True),
            tf.TensorArray(tf.bool, size=0, dynamic_size=True))
  loop = tf.while_loop(  # at least once: stack() needs an element
      lambda i, t, *_: (i == 0) | tf.reduce_any(t < lengths), body,
      (tf.constant(0), zeros, zeros, tf.zeros([batch]), predicted, state, *arrays))
  score, predicted, state, tokens, emitted = loop[3:]
  tokens = tf.transpose(tf.reshape(tokens.stack(), [-1, batch]))
  emitted = tf.transpose(tf.reshape(emitted.stack(), [-1, batch]))
  labels = tf.ragged.boolean_mask(tokens, emitted)
  return (labels.to_tensor(default_value=-1), tf.cast(labels.row_lengths(), tf.int32), score,
          predicted, state)


class TransducerStreamDecoder:
  """Greedy decoding of a :class:`~open_seq2seq.decoders.TransducerDecoder`, chunk by chunk
  (module doc). ``initial_state(batch)`` -> flat state; ``step(encoder_outputs, lengths,
  state)`` -> ``(ids [B, L] padded with -1, counts [B], new state)``."""

  def __init__(self, decoder: Any, encoder_depth: int):
    if decoder.params["use_beam_search"]:
      raise ConfigError("decoder_params/use_beam_search: streaming decodes a transducer "
                        "greedily; set use_beam_search: False")
    if decoder.params["use_language_model"]:
      raise ConfigError("decoder_params/use_language_model: streaming decodes a transducer "
                        "greedily; set use_language_model: False")
    decoder._ensure_built(encoder_depth)  # pylint: disable=protected-access
    self.decoder = decoder
    self.layers = len(decoder.prediction.lstms)

  def _predict(self, ids: tf.Tensor, state: Any) -> tuple[tf.Tensor, Any]:
    output, state = self.decoder.prediction.step(ids, state)
    return self.decoder.joint.project_prediction(output), state

  def _joint(self, frame: tf.Tensor, predicted: tf.Tensor) -> tf.Tensor:
    return self.decoder.joint.logits(frame, predicted, training=False)

  def initial_state(self, batch_size: Any) -> dict[str, tf.Tensor]:
    """The start context (the blank through the prediction network) for ``batch_size``."""
    zero = self.decoder.prediction.initial_state(batch_size)
    predicted, lstm = self._predict(tf.fill([batch_size], self.decoder.blank), zero)
    state = {"prediction": predicted, "score": tf.zeros([batch_size])}
    for i, (h, c) in enumerate(lstm):
      state[f"h{i + 1}"], state[f"c{i + 1}"] = h, c
    return state

  def step(self, encoder_outputs: tf.Tensor, lengths: tf.Tensor, state: dict[str, tf.Tensor]
           ) -> tuple[tf.Tensor, tf.Tensor, dict[str, tf.Tensor]]:
    lstm = [[state[f"h{i + 1}"], state[f"c{i + 1}"]] for i in range(self.layers)]
    frames = self.decoder.joint.project_encoder(encoder_outputs)
    ids, counts, scores, predicted, lstm = greedy_resume(
        frames, lengths, state["prediction"], lstm, self._predict, self._joint,
        self.decoder.blank, self.decoder.params["max_symbols_per_step"])
    new_state = {"prediction": predicted, "score": state["score"] + scores}
    for i, (h, c) in enumerate(lstm):
      new_state[f"h{i + 1}"], new_state[f"c{i + 1}"] = h, c
    return ids, counts, new_state


__all__ = ["greedy_resume", "TransducerStreamDecoder"]
