"""FastSpeech's length regulator: each symbol's vector repeated for its duration in frames."""

from __future__ import annotations

import tensorflow as tf


def regulate_length(x: tf.Tensor, durations: tf.Tensor, max_frames=None
                    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """Expands symbol vectors to frames, vectorised over the batch (no loop over it).

  Frame t of utterance b reads symbol ``searchsorted(cumsum(durations[b]), t, "right")``:
  the first symbol whose cumulative duration exceeds t. Frames past the utterance's total
  duration are zeros.

  Args:
    x: [B, N, D] symbol vectors.
    durations: int [B, N] frames per symbol (padded symbols must have 0).
    max_frames: the output's time size (e.g. the target's padded length); None: the largest
      total duration of the batch.

  Returns:
    (frames [B, T, D] in x's dtype, lengths int32 [B] = the total durations, symbol index
    int32 [B, T] of each frame (-1 past the length)).
  """
  durations = tf.cast(durations, tf.int32)
  ends = tf.cumsum(durations, axis=1)
  lengths = ends[:, -1]
  if max_frames is None:
    max_frames = tf.reduce_max(lengths)
  frames = tf.tile(tf.range(max_frames)[None, :], [tf.shape(x)[0], 1])
  index = tf.searchsorted(ends, frames, side="right", out_type=tf.int32)
  real = frames < lengths[:, None]
  index = tf.where(real, tf.minimum(index, tf.shape(x)[1] - 1), 0)
  out = tf.gather(x, index, batch_dims=1)
  out = tf.where(real[:, :, None], out, tf.zeros([], x.dtype))
  return out, lengths, tf.where(real, index, -1)
