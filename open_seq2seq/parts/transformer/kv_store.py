"""Keys and values of the decoded positions, for incremental (greedy or beam) decoding.

A cache per hypothesis would cost beam search two copies of every cached position, per
layer and step: gather the surviving hypotheses' caches, then append the new position. Here
each position's keys and values are written once, in place, into one buffer allocated for
the whole decode; a hypothesis only keeps the rows of its positions' keys, int32
[batch, t, heads]. Beam search reorders these rows, a few bytes per position; attention
gathers its keys and values through them: one copy of the history per step instead of two.

Buffer layout: one ``depth`` vector per row, row
``((t * layers + layer) * 2 + kind) * batch * heads + slot * heads + head`` (kind 0 keys,
1 values). Rows of positions not yet decoded are left unset: every row that is read was
written earlier in the same decode.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf


class KeyValueStore:
  """Row arithmetic of the buffer for ``num_layers`` layers of ``num_heads`` x ``depth``."""

  def __init__(self, num_layers: int, num_heads: int, depth: int):
    self.num_layers, self.num_heads, self.depth = num_layers, num_heads, depth

  def buffer(self, batch_size: Any, max_length: Any, dtype: Any) -> tf.Tensor:
    """Unset buffer for ``max_length`` positions of ``batch_size`` slots.

    ``Empty`` is stateful: the buffer is never folded into a constant nor shared with
    another op's output, so writing it in place cannot change anything else.
    """
    rows = max_length * self.num_layers * 2 * batch_size * self.num_heads
    return tf.raw_ops.Empty(shape=tf.stack([rows, self.depth]), dtype=dtype)

  def initial_rows(self, batch_size: Any) -> tf.Tensor:
    """Rows of hypotheses with no decoded position: int32 [batch, 0, heads]."""
    return tf.zeros([batch_size, 0, self.num_heads], tf.int32)

  def step(self, buffer: tf.Tensor, rows: tf.Tensor, step: Any) -> tuple:
    """The view of the layers at decoding position ``step``, and the hypotheses' rows.

    Args:
      buffer: from :meth:`buffer`, as the previous step left it.
      rows: int32 [batch, step, heads] of the hypotheses in the current slots (their
        state, reordered with them): the row of layer 0's keys of each of their positions.
      step: 0-based position being decoded.

    Returns:
      ``(cache, rows)``: a :class:`StepCache` for layer 0 (each layer's ``append`` returns
      the next one's) and int32 [batch, step + 1, heads], the current slots' rows last.
    """
    batch, heads = tf.shape(rows)[0], self.num_heads
    stride = self.num_layers * 2 * batch * heads  # rows of one position
    current = step * stride + tf.range(batch)[:, None] * heads + tf.range(heads)[None, :]
    # [batch, heads, step]: gathered, the keys come out as attention takes them
    history = tf.transpose(rows, [0, 2, 1])
    return (StepCache(self, buffer, buffer, history, step, 0),
            tf.concat([rows, current[:, None, :]], 1))


class StepCache:
  """One layer's view of the store at one decoding position (see :class:`KeyValueStore`).

  A plain object, not a tuple: Keras passes it to a layer's ``call`` as one argument.
  """

  __slots__ = ("store", "buffer", "history_buffer", "history", "step", "layer")

  def __init__(self, store: KeyValueStore, buffer: tf.Tensor, history_buffer: tf.Tensor,
               history: tf.Tensor, step: Any, layer: int):
    self.store, self.buffer, self.history_buffer = store, buffer, history_buffer
    self.history, self.step, self.layer = history, step, layer

  def append(self, k: tf.Tensor, v: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, StepCache]:
    """Writes the position's keys and values; reads those of the earlier positions.

    The reads take the buffer as the step began: they depend on no computation of this
    step, so they can run while the layers below compute. The writes of this step change
    that same memory in place, but only rows of this position, which no read touches.

    Args:
      k, v: [batch, heads, 1, depth] of the position being decoded.

    Returns:
      ``(keys, values, next_layer_cache)``, keys and values [batch, heads, step, depth] of
      the earlier positions of each slot's hypothesis.
    """
    store = self.store
    block = tf.shape(self.history)[0] * store.num_heads
    start = (self.step * store.num_layers + self.layer) * 2 * block
    new = tf.reshape(tf.stack([k, v]), [-1, store.depth])  # kind, slot, head
    # The op aliases its input: the buffer is updated in place, not copied.
    buffer = tf.raw_ops.InplaceUpdate(x=self.buffer, i=tf.range(start, start + 2 * block),
                                      v=tf.cast(new, self.buffer.dtype))
    offset = self.layer * 2 * block
    keys = tf.gather(self.history_buffer, self.history + offset)
    values = tf.gather(self.history_buffer, self.history + offset + block)
    return keys, values, StepCache(store, buffer, self.history_buffer, self.history,
                                   self.step, self.layer + 1)
