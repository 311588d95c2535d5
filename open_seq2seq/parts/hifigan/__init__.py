"""HiFi-GAN vocoder building blocks (Kong et al., 2020): the generator, the multi-period and
multi-scale discriminators, and the losses.

- ``convs``: 1-D convolution and transposed convolution with explicit padding, groups,
  weight or spectral normalization, and the padding rule that keeps a batch's padding out
  of every utterance's output.
- ``generator``: :class:`HiFiGANGenerator` (presets "v1", "v2", "v3").
- ``discriminators``: :class:`MultiPeriodDiscriminator`, :class:`MultiScaleDiscriminator`.
- ``losses``: LSGAN discriminator and generator losses, feature matching, mel L1,
  multi-resolution STFT; plain functions of tensors, masked by lengths.
"""

from open_seq2seq.parts.hifigan.discriminators import (DiscriminatorOutput,
                                                       MultiPeriodDiscriminator,
                                                       MultiScaleDiscriminator)
from open_seq2seq.parts.hifigan.generator import (GENERATOR_PARAMS, PRESETS, HiFiGANGenerator,
                                                  generator_config)
from open_seq2seq.parts.hifigan.losses import (discriminator_loss, feature_matching_loss,
                                               generator_adversarial_loss, log_mel_spectrogram,
                                               mel_spectrogram_loss,
                                               multi_resolution_stft_loss)

__all__ = ["DiscriminatorOutput", "GENERATOR_PARAMS", "HiFiGANGenerator",
           "MultiPeriodDiscriminator", "MultiScaleDiscriminator", "PRESETS",
           "discriminator_loss", "feature_matching_loss", "generator_adversarial_loss",
           "generator_config", "log_mel_spectrogram", "mel_spectrogram_loss",
           "multi_resolution_stft_loss"]
