"""Chunked limited-context attention: what a streaming Conformer's frames may attend to.

The subsampled frames are cut into chunks of ``chunk`` frames (frame ``t`` is in chunk
``t // chunk``). A frame attends to every frame of its own chunk (the chunk's last frame is
its lookahead) and of the ``left_chunks`` chunks before it, nothing later: NeMo's
``chunked_limited`` attention with ``att_context_size = [left_chunks * chunk, chunk - 1]``.
Training applies this mask to whole utterances, so the model learns what it will see when
it runs chunk by chunk; inference on a chunk then needs the keys and values of the
``memory = left_chunks * chunk`` frames before it and nothing after it, and gives the same
outputs (the encoder's ``stream_step``).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

#: Additive attention bias of a hidden key (float32; the softmax runs in float32).
HIDDEN = -1e9


def chunk_visibility(length: Any, chunk: int, left_chunks: int, memory: Any = 0) -> tf.Tensor:
  """bool [length, memory + length]: may query ``i`` attend to key ``j``?

  The queries are the last ``length`` of the ``memory + length`` keys, and ``memory`` is a
  multiple of ``chunk`` (the cached frames of earlier chunks), so that key ``j`` sits at
  position ``j - memory`` relative to the first query. Query chunk ``q`` sees key chunks
  ``q - left_chunks ... q``.
  """
  queries = tf.range(length) // chunk
  keys = tf.math.floordiv(tf.range(memory + length) - memory, chunk)  # floor: negatives too
  behind = queries[:, None] - keys[None, :]
  return (behind >= 0) & (behind <= left_chunks)


def visibility_bias(visible: tf.Tensor) -> tf.Tensor:
  """float32 bias (0 or :data:`HIDDEN`) of a boolean visibility."""
  return tf.where(visible, 0.0, HIDDEN)


def cached_frames_valid(seen: tf.Tensor, memory: int) -> tf.Tensor:
  """bool [B, memory]: which slots of a cache of the last ``memory`` frames hold a frame of
  the utterance, after ``seen`` [B] frames (the cache starts as zeros, filled from the end)."""
  filled = tf.minimum(tf.cast(seen, tf.int32), memory)
  return tf.range(memory)[None, :] >= memory - filled[:, None]


__all__ = ["chunk_visibility", "visibility_bias", "cached_frames_valid", "HIDDEN"]
