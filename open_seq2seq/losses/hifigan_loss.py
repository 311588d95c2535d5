"""HiFiGANLoss: HiFi-GAN's discriminators and both of its objectives (Kong et al., 2020).

The discriminators are a learned loss: this component is a Keras layer holding the
multi-period and multi-scale discriminators (``parts/hifigan/discriminators.py``), so its
variables are the model's ``loss`` layer, which the HiFi-GAN model updates with an optimizer
of its own (the ``discriminator`` update group). It computes, over waveforms masked by their
lengths (``parts/hifigan/losses.py``):

* :meth:`HiFiGANLoss.discriminator_loss`: LSGAN, real audio pulled to 1 and the generator's
  (gradient stopped) to 0, summed over every sub-discriminator;
* :meth:`HiFiGANLoss.compute_loss`: the generator's objective, ``adversarial +
  feature_matching_weight * feature matching + mel_weight * mel L1`` (the paper's 2 and 45)
  ``+ stft_weight * multi-resolution STFT loss`` (Parallel WaveGAN's auxiliary loss, as
  many HiFi-GAN recipes add it; 0, the paper's objective, by default).

Real and generated audio go through each discriminator as one batch of ``2B`` (the same
weights and masks; a spectrally normalized scale advances its power iteration once per
call). The mel L1 reads the log mel spectrogram of the data layer's STFT and mel filters
(:func:`~open_seq2seq.parts.hifigan.log_mel_spectrogram`, magnitude, floor 1e-5) up to
``mel_fmax`` (None: Nyquist, the paper's loss spectrogram). Every term is float32 whatever
the compute dtype; both objectives return ``(B * loss, B)``, the batch's utterances as the
weight, so replicas and micro-batches combine by their sizes.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.hifigan import (MultiPeriodDiscriminator, MultiScaleDiscriminator,
                                        discriminator_loss, feature_matching_loss,
                                        generator_adversarial_loss, log_mel_spectrogram,
                                        mel_spectrogram_loss, multi_resolution_stft_loss)
from open_seq2seq.parts.hifigan.convs import NORMALIZATIONS
from open_seq2seq.utils.component import LayerComponent
from open_seq2seq.utils.params import Param

def _positive_ints(value: Any) -> bool:
  return (isinstance(value, (list, tuple)) and len(value) > 0 and
          all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value))


_positive_ints.type_name = "non-empty list of ints >= 1"


def _resolutions(value: Any) -> bool:
  return (isinstance(value, (list, tuple)) and len(value) > 0 and
          all(_positive_ints(v) and len(v) == 3 for v in value))


_resolutions.type_name = "non-empty list of [n_fft, hop_length, win_length] (ints >= 1)"


def mel_options_of(features: Any, fmax: float | None = None) -> dict[str, Any]:
  """The keywords of :func:`~open_seq2seq.parts.hifigan.log_mel_spectrogram` for the data
  layer's STFT and mel filters (``features``), up to ``fmax`` (None: Nyquist)."""
  return {"sample_rate": features.sample_rate, "n_fft": features.n_fft,
          "hop_length": features.hop_length, "win_length": features.win_length,
          "num_mels": features.num_mel, "fmin": features.fmin, "fmax": fmax,
          "mel_type": features.mel_type}


class HiFiGANLoss(LayerComponent):
  """HiFi-GAN's multi-period + multi-scale discriminators and losses (module docstring).

  ``compute_loss({"decoder_output": {"audio", "audio_lengths"}, "target_tensors": (audio,
  samples)})`` is the generator's objective; :meth:`discriminator_loss` the
  discriminators'. The model passes the data layer's spectrogram ``features`` (for the mel
  loss), ``mode`` and ``dtype``.
  """

  PARAMS_KEY = "loss_params"
  DEFAULT_NAME = "loss"

  PARAMS = {
      "periods": Param(_positive_ints, [2, 3, 5, 7, 11], "Multi-period discriminator: one "
                       "sub-discriminator per period."),
      "period_channels": Param(_positive_ints, [32, 128, 512, 1024, 1024],
                               "Channels of each period sub-discriminator's convolutions."),
      "period_kernel_size": Param(int, 5, "Kernel (in rows) of those convolutions."),
      "period_stride": Param(int, 3, "Stride of those convolutions but the last."),
      "num_scales": Param(int, 3, "Multi-scale discriminator: sub-discriminators on the "
                          "waveform and its 2x, 4x ... average-pooled versions."),
      "scale_channels": Param(_positive_ints, [128, 128, 256, 512, 1024, 1024, 1024],
                              "Channels of each scale's convolutions."),
      "scale_kernel_sizes": Param(_positive_ints, [15, 41, 41, 41, 41, 41, 5],
                                  "Kernels of each scale's convolutions."),
      "scale_strides": Param(_positive_ints, [1, 2, 2, 4, 4, 1, 1],
                             "Strides of each scale's convolutions."),
      "scale_groups": Param(_positive_ints, [1, 4, 16, 16, 16, 16, 1],
                            "Groups of each scale's convolutions."),
      "normalization": Param((str, None), "weight", "Kernel normalization of every "
                             "discriminator but the first scale: 'weight', 'spectral' or None.",
                             choices=NORMALIZATIONS),
      "first_scale_normalization": Param((str, None), "spectral", "Of the first (raw "
                                         "waveform) scale: 'spectral' (the paper's), 'weight' "
                                         "or None.", choices=NORMALIZATIONS),
      "feature_matching_weight": Param(float, 2.0, "Weight of the feature-matching L1."),
      "mel_weight": Param(float, 45.0, "Weight of the mel-spectrogram L1."),
      "mel_fmax": Param((float, int, None), None, "Highest frequency of the mel loss's "
                        "filters (None: Nyquist, the paper's loss spectrogram)."),
      "stft_weight": Param(float, 0.0, "Weight of the multi-resolution STFT loss (spectral "
                           "convergence + log-magnitude L1, Parallel WaveGAN's); 0: off."),
      "stft_resolutions": Param(_resolutions, [[1024, 120, 600], [2048, 240, 1200],
                                               [512, 50, 240]],
                                "[n_fft, hop_length, win_length] of each STFT of that loss "
                                "(Parallel WaveGAN's at 24 kHz)."),
  }

  @classmethod
  def ignored_combinations(cls, params: dict[str, Any]) -> list[str]:
    """Keys that change nothing with the other settings (one notice line each)."""
    if "stft_resolutions" in params and not params.get("stft_weight"):
      return ["stft_resolutions: ignored: stft_weight is 0, so the STFT loss is off"]
    return []

  def __init__(self, params: dict[str, Any] | None = None, *, mode: str = "train",
               name: str = "loss", dtype: Any = "float32", features: Any = None):
    super().__init__(params or {}, mode=mode, name=name, dtype=dtype)
    p = self.params
    if features is None:
      raise ConfigError("loss: HiFiGANLoss needs the data layer's spectrogram features; "
                        "build it through the HiFiGAN model")
    if p["mel_fmax"] is not None and p["mel_fmax"] > features.sample_rate / 2:
      raise ConfigError(f"loss_params/mel_fmax: {p['mel_fmax']} Hz is above the Nyquist "
                        f"frequency {features.sample_rate / 2:g} Hz")
    for n_fft, _, win_length in p["stft_resolutions"]:
      if win_length > n_fft:
        raise ConfigError(f"loss_params/stft_resolutions: win_length {win_length} is above "
                          f"its n_fft {n_fft}; use a window no longer than the FFT")
    #: Keywords of log_mel_spectrogram: the data layer's STFT and filters.
    self.mel_options = mel_options_of(
        features, None if p["mel_fmax"] is None else float(p["mel_fmax"]))
    try:
      self.mpd = MultiPeriodDiscriminator(
          p["periods"], p["period_channels"], p["period_kernel_size"], p["period_stride"],
          p["normalization"], dtype=self.dtype_policy, name="mpd")
      self.msd = MultiScaleDiscriminator(
          p["num_scales"], p["scale_channels"], p["scale_kernel_sizes"], p["scale_strides"],
          p["scale_groups"], normalization=p["normalization"],
          first_scale_normalization=p["first_scale_normalization"], dtype=self.dtype_policy,
          name="msd")
    except ConfigError as e:
      raise ConfigError(f"{self.PARAMS_KEY}: {e}") from None

  def build(self, input_shape: Any = None) -> None:
    self.mpd.build()
    self.msd.build()
    self.built = True

  def _judge(self, real: tf.Tensor, fake: tf.Tensor, lengths: tf.Tensor, training: bool):
    """(real, fake) DiscriminatorOutput pairs of each discriminator, from one pass of 2B."""
    if not self.built:
      self.build()
    both, lengths2 = tf.concat([real, fake], 0), tf.concat([lengths, lengths], 0)
    size = tf.shape(real)[0]

    def half(values, second):
      if values is None:
        return None
      return [half(v, second) if isinstance(v, list) else
              (v[size:] if second else v[:size]) for v in values]

    pairs = []
    for discriminator in (self.mpd, self.msd):
      out = discriminator(both, lengths2, training=training)
      pairs.append([type(out)(*(half(field, second) for field in out))
                    for second in (False, True)])
    return pairs

  @staticmethod
  def _weight(audio: tf.Tensor) -> tf.Tensor:
    return tf.cast(tf.shape(audio)[0], tf.float32)

  def discriminator_loss(self, generated: tf.Tensor, audio: tf.Tensor, lengths: tf.Tensor,
                         training: bool = True) -> tuple[tf.Tensor, tf.Tensor]:
    """``(B * LSGAN loss, B)`` of real ``audio`` [B, S] and ``generated`` audio (its gradient
    stopped here), both valid up to ``lengths`` samples."""
    real = tf.cast(audio, tf.float32)
    fake = tf.stop_gradient(tf.cast(generated, tf.float32))
    loss = tf.constant(0.0, tf.float32)
    for on_real, on_fake in self._judge(real, fake, lengths, training):
      loss += discriminator_loss(on_real.scores, on_fake.scores, on_real.score_masks)
    return loss * self._weight(audio), self._weight(audio)

  def generator_terms(self, generated: tf.Tensor, audio: tf.Tensor, lengths: tf.Tensor,
                      training: bool = True) -> dict[str, tf.Tensor]:
    """The generator objective's float32 terms (unweighted) and their weighted sum
    ``total``."""
    real, fake = tf.cast(audio, tf.float32), tf.cast(generated, tf.float32)
    adversarial = matching = tf.constant(0.0, tf.float32)
    for on_real, on_fake in self._judge(real, fake, lengths, training):
      adversarial += generator_adversarial_loss(on_fake.scores, on_fake.score_masks)
      matching += feature_matching_loss(on_real.feature_maps, on_fake.feature_maps,
                                        on_real.feature_masks)
    mel = mel_spectrogram_loss(real, fake, lengths, **self.mel_options)
    p = self.params
    stft = (multi_resolution_stft_loss(real, fake, lengths, resolutions=p["stft_resolutions"])
            if p["stft_weight"] else tf.constant(0.0, tf.float32))
    total = (adversarial + p["feature_matching_weight"] * matching + p["mel_weight"] * mel
             + p["stft_weight"] * stft)
    return {"adversarial": adversarial, "feature_matching": matching, "mel_l1": mel,
            "stft": stft, "total": total}

  def compute_loss(self, input_dict: dict, training: bool = True
                   ) -> tuple[tf.Tensor, tf.Tensor]:
    """``(B * generator objective, B)``."""
    audio, lengths = input_dict["target_tensors"][:2]
    output = input_dict["decoder_output"]
    terms = self.generator_terms(output["audio"], audio, tf.cast(lengths, tf.int32), training)
    return terms["total"] * self._weight(audio), self._weight(audio)



def utterance_distances(real: tf.Tensor, fake: tf.Tensor, lengths: tf.Tensor,
                        mel_options: dict) -> dict[str, tf.Tensor]:
  """Per utterance of ``real`` / ``fake`` [B, S] (valid up to ``lengths`` samples):
  ``mel_l1_sum`` (``|log mel difference|`` of the loss's spectrogram summed over frames and
  channels) and ``frames``. (The mel-cepstral distortion is computed on the host from the
  waveforms: :mod:`open_seq2seq.parts.audio.mel_cepstrum`.)"""
  real_mel, frames = log_mel_spectrogram(real, lengths, **mel_options)
  fake_mel, _ = log_mel_spectrogram(fake, lengths, **mel_options)
  mask = tf.sequence_mask(frames, tf.shape(real_mel)[1], dtype=tf.float32)
  l1 = tf.reduce_sum(tf.abs(real_mel - fake_mel), axis=-1)
  return {"mel_l1_sum": tf.reduce_sum(l1 * mask, axis=1), "frames": frames}


__all__ = ["HiFiGANLoss", "mel_options_of", "utterance_distances"]
