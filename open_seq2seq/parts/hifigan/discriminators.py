"""HiFi-GAN's discriminators: multi-period (MPD) and multi-scale (MSD).

Each takes waveforms ``[B, samples]`` (and optionally ``lengths``, samples per utterance) and
returns a :class:`DiscriminatorOutput`: per sub-discriminator its scores ``[B, N]`` and its
feature maps (every layer's output after the activation, then the scores' map), which the
feature-matching loss compares between real and generated audio.

* **MPD**, one sub-discriminator per period p (2, 3, 5, 7, 11): the waveform, zero-padded at
  the end to a multiple of p, is read as ``[samples / p, p]`` and each of the p columns goes
  through the same stack of ``(5, 1)`` convolutions (stride 3 in time but for the last, then a
  ``(3, 1)`` convolution to one channel): as 1-D convolutions over the ``B * p`` columns,
  the same weights and arithmetic as the paper's 2-D ones. Feature maps are
  ``[B, p, rows, C]``. (The reference pads to the multiple of p by reflection; zeros keep the
  padding rule below.)
* **MSD**, ``num_scales`` sub-discriminators on the waveform and its 2x, 4x ... average-pooled
  versions (window 4, stride 2, two zeros of padding each side counted in the mean), each a
  stack of strided, grouped 1-D convolutions. The first scale's kernels are spectrally
  normalized (``first_scale_normalization``, the paper's), the others weight-normalized.
  Feature maps are ``[B, T', C]``.

All kernels are weight-normalized by default (``normalization``), as the paper's.

**Padding.** With ``lengths``, every layer reads the samples (frames) past an utterance's
length as zeros, so each utterance's scores and feature maps over its valid positions equal
those it gets alone; the output's ``score_masks`` / ``feature_masks`` (float32 1 on valid
positions, broadcastable to the scores / maps) say which positions those are, and the
losses count only them. Without ``lengths`` every position counts (masks None).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import keras
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.hifigan.convs import HiFiConv1D, apply_mask, check_normalization

LRELU_SLOPE = 0.1


class DiscriminatorOutput(NamedTuple):
  """What a multi-discriminator returns; every list has one entry per sub-discriminator.

  Attributes:
    scores: ``[B, N_d]`` in the layer's compute dtype.
    feature_maps: per sub-discriminator, the list of its layers' outputs.
    score_masks: float32 ``[B, N_d]`` (None without lengths).
    feature_masks: per sub-discriminator, one float32 mask per feature map, broadcastable
      to it (None without lengths).
  """

  scores: list
  feature_maps: list
  score_masks: list | None
  feature_masks: list | None


def _mask(lengths: tf.Tensor, size: tf.Tensor) -> tf.Tensor:
  return tf.sequence_mask(lengths, size, dtype=tf.float32)


def _initializer() -> Any:
  # PyTorch's default for convolutions (kaiming uniform, a = sqrt(5)): U(+-1/sqrt(fan_in)).
  return keras.initializers.VarianceScaling(1.0 / 3.0, "fan_in", "uniform")


class _ConvStack(keras.layers.Layer):
  """Strided 1-D convolutions, each followed by leaky ReLU, then a one-channel convolution;
  ``call`` returns (scores' map, feature maps, their lengths)."""

  def __init__(self, channels: Sequence[int], kernel_sizes: Sequence[int],
               strides: Sequence[int], groups: Sequence[int], post_kernel_size: int,
               normalization: str | None, **kwargs: Any):
    super().__init__(**kwargs)
    counts = {len(channels), len(kernel_sizes), len(strides), len(groups)}
    if len(counts) != 1:
      raise ConfigError(f"{self.name}: channels, kernel_sizes, strides and groups need one "
                        f"entry per layer, got {len(channels)}, {len(kernel_sizes)}, "
                        f"{len(strides)}, {len(groups)}")
    policy, in_channels, convs = self.dtype_policy, 1, []
    for i, (out, kernel, stride, group) in enumerate(zip(channels, kernel_sizes, strides,
                                                         groups)):
      convs.append(HiFiConv1D(out, kernel, in_channels, strides=stride, groups=group,
                              padding=(kernel - 1) // 2, normalization=normalization,
                              kernel_initializer=_initializer(), dtype=policy,
                              name=f"conv{i}"))
      in_channels = out
    self.convs = convs
    self.conv_post = HiFiConv1D(1, post_kernel_size, in_channels,
                                padding=(post_kernel_size - 1) // 2,
                                normalization=normalization, kernel_initializer=_initializer(),
                                dtype=policy, name="conv_post")

  def build(self, input_shape: Any = None) -> None:
    for conv in [*self.convs, self.conv_post]:
      conv.build()
    self.built = True

  def call(self, x: tf.Tensor, lengths: tf.Tensor | None = None,
           training: bool | None = None) -> tuple[tf.Tensor, list, list]:
    maps, map_lengths = [], []
    for conv in [*self.convs, self.conv_post]:
      x = conv(x, lengths, training=training)
      lengths = None if lengths is None else conv.output_lengths(lengths)
      if conv is not self.conv_post:
        x = tf.nn.leaky_relu(x, LRELU_SLOPE)
      maps.append(x)
      map_lengths.append(lengths)
    return x, maps, map_lengths


class PeriodDiscriminator(keras.layers.Layer):
  """One MPD sub-discriminator (module docstring); ``call`` -> (scores, maps, score mask,
  map masks)."""

  def __init__(self, period: int, channels: Sequence[int], kernel_size: int, stride: int,
               normalization: str | None, **kwargs: Any):
    super().__init__(**kwargs)
    self.period = period
    n = len(channels)
    self.stack = _ConvStack(channels, [kernel_size] * n, [stride] * (n - 1) + [1], [1] * n,
                            3, normalization, dtype=self.dtype_policy, name="stack")

  def build(self, input_shape: Any = None) -> None:
    self.stack.build()
    self.built = True

  def call(self, audio: tf.Tensor, lengths: tf.Tensor | None = None,
           training: bool | None = None) -> tuple:
    p = self.period
    audio = apply_mask(audio[:, :, None], lengths)[:, :, 0]
    batch, samples = tf.shape(audio)[0], tf.shape(audio)[1]
    audio = tf.pad(audio, [[0, 0], [0, (-samples) % p]])
    # [B, rows, p] -> [B, p, rows] -> columns [B * p, rows, 1]
    columns = tf.reshape(tf.transpose(tf.reshape(audio, [batch, -1, p]), [0, 2, 1]),
                         [batch * p, -1, 1])
    rows = None if lengths is None else (lengths + p - 1) // p
    column_rows = None if rows is None else tf.repeat(rows, p)
    scores, maps, map_rows = self.stack(columns, column_rows, training=training)
    maps = [tf.reshape(m, [batch, p, -1, tf.shape(m)[-1]]) for m in maps]
    scores = tf.reshape(scores, [batch, -1])
    if lengths is None:
      return scores, maps, None, None
    map_masks = [_mask(r[::p], tf.shape(m)[2])[:, None, :, None]
                 for r, m in zip(map_rows, maps)]
    score_mask = tf.reshape(tf.tile(map_masks[-1][:, :, :, 0], [1, p, 1]), [batch, -1])
    return scores, maps, score_mask, map_masks


class MultiPeriodDiscriminator(keras.layers.Layer):
  """HiFi-GAN's multi-period discriminator.

  Args:
    periods: one sub-discriminator per period (the paper's 2, 3, 5, 7, 11).
    channels: output channels of the ``(kernel_size, 1)`` convolutions (the paper's 32,
      128, 512, 1024, 1024); the last has stride 1, the others ``stride``.
    kernel_size, stride: of those convolutions (5, 3).
    normalization: "weight" (the paper's), "spectral" or None.
  """

  def __init__(self, periods: Sequence[int] = (2, 3, 5, 7, 11),
               channels: Sequence[int] = (32, 128, 512, 1024, 1024), kernel_size: int = 5,
               stride: int = 3, normalization: str | None = "weight", **kwargs: Any):
    super().__init__(**kwargs)
    check_normalization(normalization, "normalization")
    if not periods or any(p < 1 for p in periods):
      raise ConfigError(f"periods: {list(periods)} must be a non-empty list of periods >= 1")
    self.periods = list(periods)
    self.discriminators = [PeriodDiscriminator(p, channels, kernel_size, stride, normalization,
                                               dtype=self.dtype_policy, name=f"period_{p}")
                           for p in self.periods]

  def build(self, input_shape: Any = None) -> None:
    for discriminator in self.discriminators:
      discriminator.build()
    self.built = True

  def call(self, audio: tf.Tensor, lengths: tf.Tensor | None = None,
           training: bool | None = None) -> DiscriminatorOutput:
    """audio [B, samples] (or [B, samples, 1]), lengths [B] samples (None: all valid)."""
    return _collect([d(_waveform(audio), lengths, training=training)
                     for d in self.discriminators], lengths)


class MultiScaleDiscriminator(keras.layers.Layer):
  """HiFi-GAN's multi-scale discriminator.

  Args:
    num_scales: sub-discriminators, each on a 2x average-pooled version of the previous
      one's input (the paper's 3).
    channels, kernel_sizes, strides, groups: the convolutions of each scale, before the
      final ``post_kernel_size`` one; the paper's by default.
    post_kernel_size: kernel of the final one-channel convolution (3).
    normalization: of every scale but the first: "weight" (the paper's), "spectral", None.
    first_scale_normalization: of the first (raw waveform) scale: "spectral" (the
      paper's), "weight" or None.
  """

  def __init__(self, num_scales: int = 3,
               channels: Sequence[int] = (128, 128, 256, 512, 1024, 1024, 1024),
               kernel_sizes: Sequence[int] = (15, 41, 41, 41, 41, 41, 5),
               strides: Sequence[int] = (1, 2, 2, 4, 4, 1, 1),
               groups: Sequence[int] = (1, 4, 16, 16, 16, 16, 1), post_kernel_size: int = 3,
               normalization: str | None = "weight",
               first_scale_normalization: str | None = "spectral", **kwargs: Any):
    super().__init__(**kwargs)
    check_normalization(normalization, "normalization")
    check_normalization(first_scale_normalization, "first_scale_normalization")
    if num_scales < 1:
      raise ConfigError(f"num_scales: {num_scales} must be at least 1")
    self.discriminators = [
        _ConvStack(channels, kernel_sizes, strides, groups, post_kernel_size,
                   first_scale_normalization if i == 0 else normalization,
                   dtype=self.dtype_policy, name=f"scale_{i}")
        for i in range(num_scales)]

  def build(self, input_shape: Any = None) -> None:
    for discriminator in self.discriminators:
      discriminator.build()
    self.built = True

  def call(self, audio: tf.Tensor, lengths: tf.Tensor | None = None,
           training: bool | None = None) -> DiscriminatorOutput:
    """audio [B, samples] (or [B, samples, 1]), lengths [B] samples (None: all valid)."""
    x, scale_lengths = _waveform(audio)[:, :, None], lengths
    results = []
    for i, discriminator in enumerate(self.discriminators):
      if i:
        x, scale_lengths = average_pool(x, scale_lengths)
      scores, maps, map_lengths = discriminator(x, scale_lengths, training=training)
      if lengths is None:
        results.append((scores[..., 0], maps, None, None))
      else:
        masks = [_mask(n, tf.shape(m)[1])[:, :, None] for n, m in zip(map_lengths, maps)]
        results.append((scores[..., 0], maps, masks[-1][..., 0], masks))
    return _collect(results, lengths)


def average_pool(x: tf.Tensor, lengths: tf.Tensor | None) -> tuple:
  """Mean over windows of 4 samples, stride 2, with 2 zeros of padding on each side counted
  in the mean (PyTorch's ``AvgPool1d(4, 2, padding=2)``): x [B, T, C] -> [B, T // 2 + 1, C],
  and the lengths of utterances alone."""
  x = tf.pad(apply_mask(x, lengths), [[0, 0], [2, 2], [0, 0]])
  pooled = tf.nn.avg_pool1d(x, 4, 2, "VALID")
  return pooled, None if lengths is None else lengths // 2 + 1


def _waveform(audio: tf.Tensor) -> tf.Tensor:
  if audio.shape.rank == 3:
    audio = audio[..., 0]
  return audio


def _collect(results: list, lengths: tf.Tensor | None) -> DiscriminatorOutput:
  scores, maps, score_masks, map_masks = (list(field) for field in zip(*results))
  if lengths is None:
    return DiscriminatorOutput(scores, maps, None, None)
  return DiscriminatorOutput(scores, maps, score_masks, map_masks)
