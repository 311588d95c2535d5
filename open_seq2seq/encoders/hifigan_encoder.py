"""HiFiGANEncoder: the HiFi-GAN generator (Kong et al., 2020) in a model's encoder slot.

As with OpenSeq2Seq's WaveNet vocoder, the encoder does the work (mel frames in, waveform
out) and the model names ``FakeDecoder`` as its decoder; the network is
:class:`~open_seq2seq.parts.hifigan.HiFiGANGenerator` ("v1", "v2", "v3" presets and their
overrides, :data:`~open_seq2seq.parts.hifigan.GENERATOR_PARAMS`).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.hifigan import GENERATOR_PARAMS, HiFiGANGenerator
from open_seq2seq.utils import keras_compat
from open_seq2seq.utils.component import resolve_size
from open_seq2seq.utils.initializers import fresh, make_initializer
from open_seq2seq.utils.params import AnyType, Param


class HiFiGANEncoder(Encoder):
  """HiFi-GAN generator: mel frames ``[B, F, M]`` -> waveform ``[B, F * hop]`` (float32).

  Inputs (``source_tensors``): ``(mel [B, F, M], frames [B])``; frames past an utterance's
  length never reach its samples. Returns ``audio`` (zero past ``audio_lengths = frames *
  hop``), and the same as ``outputs`` / ``src_lengths``.

  The model passes ``num_mels`` and ``hop_length`` (its data layer's); the generator's
  upsampling rates must multiply to that hop length. Kernels start as the paper's (the
  first convolution Glorot uniform, the others N(0, 0.01)) unless ``initializer`` or the
  model's top-level one is set: that one then draws every kernel (weight-norm gains start
  at the drawn kernel's norm).
  """

  PARAMS = {
      **GENERATOR_PARAMS,
      "initializer": Param(AnyType, None, "Kernel initializer of every convolution: Keras "
                           "name, class or instance (None: the model's top-level one, else "
                           "the paper's)."),
      "initializer_params": Param(dict, {}, "Keyword arguments of the initializer class."),
  }

  def __init__(self, params: dict[str, Any], *, mode: str = "train", name: str = "encoder",
               dtype: Any = "float32", initializer: Any = None, num_mels: int | None = None,
               hop_length: int | None = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    own = make_initializer(p["initializer"], p["initializer_params"],
                           f"{self.PARAMS_KEY}/initializer")
    # None: the generator's own (the paper's) initializers
    keras_compat.set_untracked(self, "_kernel_initializer", own if own is not None else
                               initializer)
    num_mels = resolve_size({}, "num_mels", num_mels, self.PARAMS_KEY)
    try:
      self.generator = HiFiGANGenerator(
          p["preset"], num_mels, upsample_rates=p["upsample_rates"],
          upsample_kernel_sizes=p["upsample_kernel_sizes"],
          upsample_initial_channel=p["upsample_initial_channel"], resblock=p["resblock"],
          resblock_kernel_sizes=p["resblock_kernel_sizes"],
          resblock_dilation_sizes=p["resblock_dilation_sizes"], weight_norm=p["weight_norm"],
          remove_dc=p["remove_dc"], dtype=self.dtype_policy, name="generator")
    except ConfigError as e:
      raise ConfigError(f"{self.PARAMS_KEY}/{e}") from None
    if hop_length is not None and self.generator.hop_length != hop_length:
      raise ConfigError(f"{self.PARAMS_KEY}/upsample_rates: "
                        f"{self.generator.config['upsample_rates']} multiply to "
                        f"{self.generator.hop_length} samples per frame, but the data layer's "
                        f"hop_length is {hop_length}; make them equal")

  @property
  def hop_length(self) -> int:
    return self.generator.hop_length

  def build(self, input_shape: Any = None) -> None:
    self.generator.build()
    if self._kernel_initializer is not None:
      self._draw_kernels(self._kernel_initializer)
    self.built = True

  def _draw_kernels(self, initializer: Any) -> None:
    """Every convolution's kernel drawn from ``initializer`` (a weight-norm gain set to the
    new kernel's norm, so the kernel is the draw)."""
    g = self.generator
    convs = [g.conv_pre, *g.ups, *[c for block in g.resblocks
                                    for c in block.dilated + block.undilated], g.conv_post]
    for conv in convs:
      value = tf.cast(fresh(initializer)(conv.kernel_v.shape, "float32"), tf.float32)
      conv.kernel_v.assign(value)
      if conv.normalization == "weight":
        axes = [a for a in range(len(value.shape)) if a != conv.out_axis]
        conv.kernel_g.assign(tf.sqrt(tf.reduce_sum(tf.square(value), axis=axes)))

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    mel, frames = input_dict["source_tensors"][:2]
    frames = tf.cast(frames, tf.int32)
    audio = self.generator(mel, frames, training=training)
    lengths = self.generator.output_lengths(frames)
    return {"audio": audio, "audio_lengths": lengths, "outputs": audio, "src_lengths": lengths}


__all__ = ["HiFiGANEncoder"]
