"""Convolutional subsampling in front of a Conformer: features [B, T, F] -> [B, T', d_model].

Two kinds, both of 3x3 kernels with stride 2 over (time, frequency), padded by one frame and
one bin on each side (NeMo's ``striding`` / ``dw_striding``), so each stage maps L frames to
``(L + 2 - 3) // 2 + 1 = ceil(L / 2)``:

* ``conv2d4`` (Gulati et al. 2020, section 2: "a convolution subsampling layer"): two
  conv2d 3x3 stride 2 with ``channels`` filters, each followed by ReLU; time x4. ESPnet's
  ``Conv2dSubsampling`` has the same two convs unpadded (``((L - 1) // 2 - 1) // 2`` frames,
  dropping a frame at each end); NeMo's ``striding`` pads them as here.
* ``dw_striding8`` (Rekesh et al. 2023, Fast Conformer; NeMo's ``dw_striding`` with factor
  8): one conv2d 3x3 stride 2 + ReLU, then twice a depthwise conv2d 3x3 stride 2 followed by
  a pointwise (1x1) conv2d + ReLU. Time is subsampled x8.

Then the channels and the remaining frequency bins of each frame are flattened and a linear
layer projects them to ``d_model``.

Padding never reaches a real frame: frames past each utterance's length are zeroed before
every convolution (so the frame after the last real one is a zero, as it is alone), the time
padding is fixed (one frame on the left, whatever the batch's length) and the lengths follow
the conv arithmetic exactly.

``causal``: the time padding is two frames on the left and none on the right, so output
frame t of a stage reads its input frames 2t-2, 2t-1 and 2t (the same ``ceil(L / 2)``
frames), and a subsampled frame never reads a later input frame. Such a subsampling runs on
chunks (:meth:`ConvSubsampling.stream`) of a multiple of ``2 ** stages`` frames, each strided
stage carrying its last two (masked) input frames to the next chunk: chunk by chunk it gives
what it gives on the whole utterance.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

#: Subsampling kind -> number of stride-2 stages (the time factor is 2 ** stages).
KINDS = {"conv2d4": 2, "dw_striding8": 3}
KERNEL, STRIDE, PAD = 3, 2, 1
#: Input frames a causal stage reads before its first output's own frame (its chunk cache).
CAUSAL_PAD = KERNEL - 1


def stage_lengths(lengths: tf.Tensor) -> tf.Tensor:
  """Valid output frames of one 3-wide, stride-2 conv padded by one frame each side."""
  return (lengths + 2 * PAD - KERNEL) // STRIDE + 1


def subsampled_lengths(lengths: Any, kind: str) -> Any:
  """Valid frames after the whole subsampling (ints, numpy arrays or int tensors)."""
  for _ in range(KINDS[kind]):
    lengths = stage_lengths(lengths)
  return lengths


class ConvSubsampling(keras.layers.Layer):
  """``call(x, lengths)`` -> ``(y [B, T', d_model], lengths')`` (see the module docstring).

  Args:
    kind: ``"conv2d4"`` or ``"dw_striding8"``.
    d_model: width of the projected frames.
    channels: filters of every convolution.
    kernel_initializer: of the convolutions and the projection.
    causal: pad time on the left only (module doc), which :meth:`stream` needs.
  """

  def __init__(self, kind: str, d_model: int, channels: int,
               kernel_initializer: Any = "glorot_uniform", causal: bool = False, **kwargs):
    super().__init__(**kwargs)
    if kind not in KINDS:
      raise ValueError(f"subsampling {kind!r} is not one of {', '.join(KINDS)}")
    self.kind, self.d_model, self.channels = kind, d_model, channels
    self.causal = causal
    self.factor = 2 ** KINDS[kind]
    self.time_pad = [CAUSAL_PAD, 0] if causal else [PAD, PAD]
    common = dict(padding="valid", dtype=self.dtype_policy)
    # (layer, applies a stride-2 3x3 window: pad and mask before it, ReLU after the stage)
    self.convs: list[tuple[keras.layers.Layer, bool]] = [
        (keras.layers.Conv2D(channels, KERNEL, strides=STRIDE, name="conv1",
                             kernel_initializer=kernel_initializer, **common), True)]
    for stage in range(2, KINDS[kind] + 1):
      if kind == "conv2d4":
        self.convs.append((keras.layers.Conv2D(
            channels, KERNEL, strides=STRIDE, name=f"conv{stage}",
            kernel_initializer=kernel_initializer, **common), True))
      else:
        self.convs.append((keras.layers.DepthwiseConv2D(
            KERNEL, strides=STRIDE, name=f"depthwise{stage}",
            depthwise_initializer=kernel_initializer, **common), True))
        self.convs.append((keras.layers.Conv2D(
            channels, 1, name=f"pointwise{stage}", kernel_initializer=kernel_initializer,
            **common), False))
    self.projection = keras.layers.Dense(d_model, kernel_initializer=kernel_initializer,
                                         dtype=self.dtype_policy, name="projection")

  def stage_inputs(self, num_features: int) -> list[tuple[int, int]]:
    """(frequency bins, channels) of the input of each strided conv."""
    shapes, bins, channels = [], num_features, 1
    for conv, strided in self.convs:
      if strided:
        shapes.append((bins, channels))
        bins = (bins + 2 * PAD - KERNEL) // STRIDE + 1
      channels = getattr(conv, "filters", None) or channels
    return shapes

  def build(self, input_shape):
    bins, channels = int(input_shape[-1]), 1
    for conv, strided in self.convs:
      if strided:
        bins += 2 * PAD
      conv.build((None, None, bins, channels))
      if strided:
        bins = (bins - KERNEL) // STRIDE + 1
      channels = getattr(conv, "filters", None) or channels
    self.projection.build((None, bins * channels))

  def _stages(self, x: tf.Tensor, lengths: tf.Tensor, caches: list[tf.Tensor] | None
              ) -> tuple[tf.Tensor, tf.Tensor, list[tf.Tensor]]:
    x = x[:, :, :, None]  # [B, T, F, 1]: time and frequency are the two spatial axes
    new_caches = []
    for i, (conv, strided) in enumerate(self.convs):
      if strided:
        mask = tf.sequence_mask(lengths, tf.shape(x)[1], x.dtype)
        x = x * mask[:, :, None, None]
        if caches is None:
          x = tf.pad(x, [[0, 0], self.time_pad, [PAD, PAD], [0, 0]])
        else:  # the chunk after the previous chunk's last input frames
          x = tf.concat([caches[len(new_caches)], x], axis=1)
          new_caches.append(x[:, -CAUSAL_PAD:])
          x = tf.pad(x, [[0, 0], [0, 0], [PAD, PAD], [0, 0]])
        lengths = stage_lengths(lengths)
      x = conv(x)
      # ReLU ends a stage: after a full conv, or after the pointwise conv of a dw stage
      next_strided = i + 1 == len(self.convs) or self.convs[i + 1][1]
      if next_strided:
        x = tf.nn.relu(x)
    batch, frames = tf.shape(x)[0], tf.shape(x)[1]
    x = tf.reshape(x, [batch, frames, x.shape[2] * x.shape[3]])
    return self.projection(x), lengths, new_caches

  def call(self, x: tf.Tensor, lengths: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    x, lengths, _ = self._stages(x, lengths, None)
    return x, lengths

  def stream(self, x: tf.Tensor, lengths: tf.Tensor, caches: list[tf.Tensor]
             ) -> tuple[tf.Tensor, tf.Tensor, list[tf.Tensor]]:
    """A chunk [B, T, F] of a causal subsampling, T a multiple of :attr:`factor` and
    ``lengths`` its real frames; ``caches``: per strided conv, its last
    :data:`CAUSAL_PAD` input frames [B, 2, bins, channels] (zeros at the start, see
    :meth:`stage_inputs`). Returns ``(y [B, T / factor, d_model], lengths', caches')``."""
    if not self.causal:
      raise ValueError("only a causal subsampling runs on chunks")
    return self._stages(x, lengths, caches)
