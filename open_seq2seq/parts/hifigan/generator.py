"""HiFi-GAN's generator (Kong et al., 2020): mel frames to a waveform.

``conv_pre`` (kernel 7) widens the mel frames to ``upsample_initial_channel`` channels; each
upsampling stage is leaky ReLU (slope 0.1), a transposed convolution by ``upsample_rates[i]``
halving the channels, and multi-receptive-field fusion: the mean of one residual block per
``resblock_kernel_sizes`` entry, each with its own dilations; then leaky ReLU (slope 0.01, the
reference implementation's default slope at that point), ``conv_post`` (kernel 7, one channel)
and tanh. ResBlock1 (V1, V2) repeats ``x += conv_1(lrelu(conv_d(lrelu(x))))`` per dilation d;
ResBlock2 (V3) repeats ``x += conv_d(lrelu(x))``.

**Padded batches.** With ``lengths`` (mel frames per utterance), every convolution reads the
frames past an utterance's length as zeros (``convs.py``'s padding rule), so each
utterance's first ``lengths * hop_length`` samples equal those it gets alone, whatever the
batch's padding; the samples past them are zero. No receptive-field margin is lost: the
equality holds up to the last sample (to float rounding).

**DC removal.** The mel frames carry no information about a constant offset (the mel
filters give the DC bin no weight), so nothing in the mel loss stops the generator from
inventing one. ``remove_dc=True`` subtracts each utterance's mean over its valid samples
(``lengths * hop_length``; all samples without ``lengths``) from the output, in training and
inference alike; the padding stays zero, and the samples may then exceed [-1, 1] by that
mean.

**Weight norm** is on by default (the paper's); ``weight_norm=False`` trains plain kernels.
**Mixed precision**: everything runs in the layer's compute dtype; the waveform is float32.
"""

from __future__ import annotations

from typing import Any, Sequence

import keras
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.hifigan.convs import HiFiConv1D, HiFiConv1DTranspose, apply_mask
from open_seq2seq.utils.params import Param

LRELU_SLOPE = 0.1
POST_LRELU_SLOPE = 0.01

#: The published generator sizes (hop 256 at 22.05 kHz): V1 13.92 M parameters, V2 0.92 M,
#: V3 1.46 M.
PRESETS = {
    "v1": {"upsample_rates": [8, 8, 2, 2], "upsample_kernel_sizes": [16, 16, 4, 4],
           "upsample_initial_channel": 512, "resblock": 1,
           "resblock_kernel_sizes": [3, 7, 11],
           "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]]},
    "v2": {"upsample_rates": [8, 8, 2, 2], "upsample_kernel_sizes": [16, 16, 4, 4],
           "upsample_initial_channel": 128, "resblock": 1,
           "resblock_kernel_sizes": [3, 7, 11],
           "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]]},
    "v3": {"upsample_rates": [8, 8, 4], "upsample_kernel_sizes": [16, 16, 8],
           "upsample_initial_channel": 256, "resblock": 2,
           "resblock_kernel_sizes": [3, 5, 7],
           "resblock_dilation_sizes": [[1, 2], [2, 6], [3, 12]]},
}


def _positive_ints(value: Any) -> bool:
  return (isinstance(value, (list, tuple)) and len(value) > 0
          and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value))


_positive_ints.type_name = "non-empty list of ints >= 1"


def _lists_of_positive_ints(value: Any) -> bool:
  return (isinstance(value, (list, tuple)) and len(value) > 0
          and all(_positive_ints(v) for v in value))


_lists_of_positive_ints.type_name = "non-empty list of non-empty lists of ints >= 1"

#: The generator's keys, for the component that builds it (None: the preset's value).
GENERATOR_PARAMS = {
    "preset": Param(str, "v1", "Published size: 'v1' (13.9 M), 'v2' (0.9 M) or 'v3' (1.5 M); "
                    "the keys below override it.", choices=tuple(PRESETS)),
    "upsample_rates": Param((_positive_ints, None), None,
                            "Upsampling factor per stage; their product is the hop length."),
    "upsample_kernel_sizes": Param((_positive_ints, None), None,
                                   "Transposed-convolution kernel per stage (>= its rate)."),
    "upsample_initial_channel": Param((int, None), None, "Channels after conv_pre; each "
                                      "stage halves them."),
    "resblock": Param((int, None), None, "Residual block type: 1 (V1, V2) or 2 (V3).",
                      choices=(1, 2, None)),
    "resblock_kernel_sizes": Param((_positive_ints, None), None,
                                   "Kernel of each parallel residual block (MRF)."),
    "resblock_dilation_sizes": Param((_lists_of_positive_ints, None), None,
                                     "Dilations of each parallel residual block."),
    "weight_norm": Param(bool, True, "Weight-normalize every convolution (the paper's)."),
    "remove_dc": Param(bool, False, "Subtract each utterance's mean over its valid samples "
                       "from the output (the mel frames carry no DC)."),
}


def generator_config(preset: str = "v1", **overrides: Any) -> dict:
  """The preset's sizes with ``overrides`` (None values ignored), checked.

  Raises:
    ConfigError: unknown preset or key, or sizes that do not fit together.
  """
  if preset not in PRESETS:
    raise ConfigError(f"preset: {preset!r} is not one of {', '.join(map(repr, PRESETS))}")
  unknown = sorted(set(overrides) - set(PRESETS[preset]))
  if unknown:
    raise ConfigError(f"{unknown[0]}: not a generator size; use one of "
                      f"{', '.join(PRESETS[preset])}")
  config = {key: value for key, value in PRESETS[preset].items()}
  config.update({key: value for key, value in overrides.items() if value is not None})
  rates, kernels = list(config["upsample_rates"]), list(config["upsample_kernel_sizes"])
  if len(rates) != len(kernels):
    raise ConfigError(f"upsample_kernel_sizes: {len(kernels)} kernels for {len(rates)} "
                      f"upsample_rates; give one kernel per rate")
  for rate, kernel in zip(rates, kernels):
    if kernel < rate:
      raise ConfigError(f"upsample_kernel_sizes: kernel {kernel} is below its rate {rate}; "
                        f"use at least the rate (the paper uses 2x)")
  channels = config["upsample_initial_channel"]
  if channels < 1 or channels % 2 ** len(rates):
    raise ConfigError(f"upsample_initial_channel: {channels} is not divisible by "
                      f"2^{len(rates)} (each of the {len(rates)} stages halves it)")
  if config["resblock"] not in (1, 2):
    raise ConfigError(f"resblock: {config['resblock']!r} is not 1 or 2")
  if len(config["resblock_kernel_sizes"]) != len(config["resblock_dilation_sizes"]):
    raise ConfigError(f"resblock_dilation_sizes: {len(config['resblock_dilation_sizes'])} "
                      f"entries for {len(config['resblock_kernel_sizes'])} "
                      f"resblock_kernel_sizes; give one list of dilations per kernel")
  return config


class ResBlock(keras.layers.Layer):
  """One residual block of the multi-receptive-field fusion (type 1 or 2, module docstring)
  over ``channels`` channels, kernel ``kernel_size``, one residual unit per dilation."""

  def __init__(self, channels: int, kernel_size: int, dilations: Sequence[int],
               block_type: int, normalization: str | None, **kwargs: Any):
    super().__init__(**kwargs)
    policy = self.dtype_policy

    def conv(dilation: int, name: str) -> HiFiConv1D:
      return HiFiConv1D(channels, kernel_size, channels, dilation=dilation,
                        normalization=normalization,
                        kernel_initializer=keras.initializers.RandomNormal(0.0, 0.01),
                        dtype=policy, name=name)

    self.block_type = block_type
    self.dilated = [conv(d, f"conv_d{i}") for i, d in enumerate(dilations)]
    self.undilated = ([conv(1, f"conv_1_{i}") for i in range(len(dilations))]
                      if block_type == 1 else [])

  def build(self, input_shape: Any = None) -> None:
    for layer in self.dilated + self.undilated:
      layer.build()
    self.built = True

  def call(self, x: tf.Tensor, lengths: tf.Tensor | None = None,
           training: bool | None = None) -> tf.Tensor:
    for i, conv in enumerate(self.dilated):
      y = conv(tf.nn.leaky_relu(x, LRELU_SLOPE), lengths, training=training)
      if self.block_type == 1:
        y = self.undilated[i](tf.nn.leaky_relu(y, LRELU_SLOPE), lengths, training=training)
      x = x + y
    return x


class HiFiGANGenerator(keras.layers.Layer):
  """Mel frames ``[B, T, num_mels]`` -> waveform ``[B, T * hop_length]`` (float32, in
  [-1, 1]); see the module docstring.

  Args:
    preset: "v1", "v2" or "v3" (:data:`PRESETS`).
    num_mels: mel channels of the input.
    upsample_rates, upsample_kernel_sizes, upsample_initial_channel, resblock,
      resblock_kernel_sizes, resblock_dilation_sizes: override the preset (None: keep it).
    weight_norm: weight-normalize the convolutions.
    remove_dc: subtract each utterance's mean over its valid samples from the output.
  """

  def __init__(self, preset: str = "v1", num_mels: int = 80,
               upsample_rates: Sequence[int] | None = None,
               upsample_kernel_sizes: Sequence[int] | None = None,
               upsample_initial_channel: int | None = None, resblock: int | None = None,
               resblock_kernel_sizes: Sequence[int] | None = None,
               resblock_dilation_sizes: Sequence[Sequence[int]] | None = None,
               weight_norm: bool = True, remove_dc: bool = False, **kwargs: Any):
    super().__init__(**kwargs)
    self.remove_dc = remove_dc
    config = generator_config(
        preset, upsample_rates=upsample_rates, upsample_kernel_sizes=upsample_kernel_sizes,
        upsample_initial_channel=upsample_initial_channel, resblock=resblock,
        resblock_kernel_sizes=resblock_kernel_sizes,
        resblock_dilation_sizes=resblock_dilation_sizes)
    self.config, self.num_mels = config, num_mels
    norm = "weight" if weight_norm else None
    policy = self.dtype_policy
    channels = config["upsample_initial_channel"]
    # conv_pre keeps the Keras default initializer; the rest draw from N(0, 0.01) as the
    # reference implementation's.
    self.conv_pre = HiFiConv1D(channels, 7, num_mels, normalization=norm, dtype=policy,
                               name="conv_pre")
    ups, resblocks = [], []
    for i, (rate, kernel) in enumerate(zip(config["upsample_rates"],
                                           config["upsample_kernel_sizes"])):
      ups.append(HiFiConv1DTranspose(
          channels // 2, kernel, rate, channels, normalization=norm,
          kernel_initializer=keras.initializers.RandomNormal(0.0, 0.01), dtype=policy,
          name=f"up{i}"))
      channels //= 2
      resblocks += [ResBlock(channels, k, d, config["resblock"], norm, dtype=policy,
                             name=f"resblock{i}_{j}")
                    for j, (k, d) in enumerate(zip(config["resblock_kernel_sizes"],
                                                   config["resblock_dilation_sizes"]))]
    # assigned whole, flat (stage-major): Keras tracks the layers of a list attribute
    self.ups, self.resblocks = ups, resblocks
    self.conv_post = HiFiConv1D(1, 7, channels, normalization=norm,
                                kernel_initializer=keras.initializers.RandomNormal(0.0, 0.01),
                                dtype=policy, name="conv_post")

  @property
  def hop_length(self) -> int:
    """Samples per mel frame: the product of the upsampling rates."""
    hop = 1
    for rate in self.config["upsample_rates"]:
      hop *= rate
    return hop

  def output_lengths(self, lengths: tf.Tensor) -> tf.Tensor:
    """Samples of utterances of ``lengths`` mel frames."""
    return lengths * self.hop_length

  def build(self, input_shape: Any = None) -> None:
    for layer in [self.conv_pre, *self.ups, *self.resblocks, self.conv_post]:
      layer.build()
    self.built = True

  def call(self, mel: tf.Tensor, lengths: tf.Tensor | None = None,
           training: bool | None = None) -> tf.Tensor:
    """mel [B, T, num_mels], lengths [B] int (None: all T frames) -> [B, T * hop] float32,
    zero past ``lengths * hop_length``."""
    if mel.shape[-1] is not None and mel.shape[-1] != self.num_mels:
      raise ValueError(f"{self.name}: expected {self.num_mels} mel channels, got "
                       f"{mel.shape[-1]}")
    x = self.conv_pre(mel, lengths, training=training)
    per_stage = len(self.config["resblock_kernel_sizes"])
    for i, up in enumerate(self.ups):
      blocks = self.resblocks[i * per_stage:(i + 1) * per_stage]
      x = up(tf.nn.leaky_relu(x, LRELU_SLOPE), lengths, training=training)
      lengths = None if lengths is None else up.output_lengths(lengths)
      fused = blocks[0](x, lengths, training=training)
      for block in blocks[1:]:
        fused += block(x, lengths, training=training)
      x = fused / len(blocks)
    x = self.conv_post(tf.nn.leaky_relu(x, POST_LRELU_SLOPE), lengths, training=training)
    audio = tf.cast(apply_mask(tf.tanh(x), lengths)[..., 0], tf.float32)
    if self.remove_dc:
      audio = remove_mean(audio, lengths)
    return audio


def remove_mean(audio: tf.Tensor, lengths: tf.Tensor | None = None) -> tf.Tensor:
  """``audio`` [B, S] minus each row's mean over its first ``lengths`` [B] samples (None:
  all S), zero past them."""
  if lengths is None:
    return audio - tf.reduce_mean(audio, axis=1, keepdims=True)
  mask = tf.sequence_mask(lengths, tf.shape(audio)[1], dtype=audio.dtype)
  mean = tf.math.divide_no_nan(tf.reduce_sum(audio * mask, axis=1, keepdims=True),
                               tf.reduce_sum(mask, axis=1, keepdims=True))
  return (audio - mean) * mask
