"""HiFi-GAN parts: published sizes, output lengths, padding never reaching an utterance's
output, mixed precision, the losses on hand-computable cases, weight and spectral norm,
gradients, config errors, and a tiny generator + discriminators fitting one sine wave."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.hifigan import (GENERATOR_PARAMS, HiFiGANGenerator,
                                        MultiPeriodDiscriminator, MultiScaleDiscriminator,
                                        discriminator_loss, feature_matching_loss,
                                        generator_adversarial_loss, generator_config,
                                        log_mel_spectrogram, mel_spectrogram_loss,
                                        multi_resolution_stft_loss)
from open_seq2seq.parts.audio.spectrogram import window_function
from open_seq2seq.parts.hifigan.convs import HiFiConv1D, HiFiConv1DTranspose
from open_seq2seq.parts.hifigan.losses import FEATURE_MATCHING_WEIGHT, MEL_WEIGHT
from open_seq2seq.utils.params import validate_params

MELS, HOP = 8, 16
#: A mel spectrogram small enough for the tiny generator's 4 kHz audio.
MEL_OPTIONS = {"sample_rate": 4000, "n_fft": 64, "hop_length": HOP, "num_mels": 16}


def trainable_count(layer):
  return sum(int(np.prod(v.shape)) for v in layer.trainable_weights)


def tiny_generator(resblock=2, **overrides):
  """hop 16, 16 channels after conv_pre."""
  kwargs = {"num_mels": MELS, "upsample_rates": [4, 4], "upsample_kernel_sizes": [8, 8],
            "upsample_initial_channel": 16, "resblock_kernel_sizes": [3, 5],
            "resblock_dilation_sizes": [[1, 3], [1, 2]]}
  kwargs.update(overrides)
  return HiFiGANGenerator("v3", resblock=resblock, **kwargs)


def tiny_mpd(**kwargs):
  return MultiPeriodDiscriminator(periods=(2, 3), channels=(4, 8, 8), **kwargs)


def tiny_msd(**kwargs):
  return MultiScaleDiscriminator(num_scales=2, channels=(4, 8, 8), kernel_sizes=(5, 9, 3),
                                 strides=(1, 2, 1), groups=(1, 2, 1), **kwargs)


def padded(values, lengths, seed=1):
  """values with large random garbage past each length (on the time axis 1)."""
  garbage = 10.0 * np.random.default_rng(seed).standard_normal(values.shape)
  keep = np.arange(values.shape[1])[None, :] < np.asarray(lengths)[:, None]
  keep = keep.reshape(keep.shape + (1,) * (values.ndim - 2))
  return np.where(keep, values, garbage).astype(np.float32)


# ------------------------------------------------------------------------- sizes

@pytest.mark.parametrize("preset, published, plain", [("v1", 13.92e6, 13_926_017),
                                                      ("v2", 0.92e6, 925_985),
                                                      ("v3", 1.46e6, 1_462_273)])
def test_presets_have_the_published_sizes(preset, published, plain):
  generator = HiFiGANGenerator(preset)
  generator.build()
  assert generator.hop_length == 256
  # weight norm adds one gain per output channel of each convolution (0.02-0.3 %)
  assert abs(trainable_count(generator) / published - 1) < 0.01
  without = HiFiGANGenerator(preset, weight_norm=False)
  without.build()
  assert trainable_count(without) == plain < trainable_count(generator)


def test_discriminators_at_the_papers_size():
  mpd, msd = MultiPeriodDiscriminator(), MultiScaleDiscriminator()
  mpd.build()
  msd.build()
  # per period: 192 + 20,608 + 328,192 + 2,622,464 + 5,243,904 + 3,073 weights and biases,
  # plus 32 + 128 + 512 + 1024 + 1024 + 1 weight-norm gains
  assert trainable_count(mpd) == 5 * (8_218_433 + 2_721) == 41_105_770
  # per scale 9,870,209 weights and biases; the first scale is spectrally normalized (a
  # non-trainable vector of 4,097), the other two have 4,097 weight-norm gains each
  assert trainable_count(msd) == 3 * 9_870_209 + 2 * 4_097 == 29_618_821
  assert sum(int(np.prod(v.shape)) for v in msd.non_trainable_weights) == 4_097


# ------------------------------------------------------------------------- generator

@pytest.mark.parametrize("resblock", [1, 2])
def test_generator_output_is_frames_times_hop_and_ignores_the_batch_padding(resblock):
  keras.utils.set_random_seed(0)
  generator = tiny_generator(resblock)
  lengths = [9, 5, 2]
  mel = np.random.default_rng(0).standard_normal([3, 9, MELS]).astype(np.float32)
  batch = padded(mel, lengths)
  audio = generator(batch, tf.constant(lengths)).numpy()
  assert audio.shape == (3, 9 * HOP) and audio.dtype == np.float32
  assert tf.function(generator)(batch, tf.constant(lengths)).shape == (3, 9 * HOP)
  for b, length in enumerate(lengths):
    alone = generator(mel[b:b + 1, :length]).numpy()[0]
    assert alone.shape == (length * HOP,)
    # every sample up to the utterance's end equals its unpadded output ...
    np.testing.assert_allclose(audio[b, :length * HOP], alone, rtol=1e-4, atol=1e-6)
    # ... and the rest is silence
    assert not audio[b, length * HOP:].any()
  assert np.abs(audio[0]).max() > 0  # not trivially zero


def test_remove_dc_zeroes_each_utterances_mean_over_its_valid_samples_only():
  mel = np.random.default_rng(3).standard_normal([3, 9, MELS]).astype(np.float32)
  lengths = [9, 5, 2]
  batch = padded(mel, lengths)
  outputs = {}
  for remove_dc in (False, True):
    keras.utils.set_random_seed(0)  # the same weights both times
    generator = tiny_generator(remove_dc=remove_dc, upsample_initial_channel=32)
    generator.build()
    for v in generator.weights:  # large enough weights for a clear offset to remove
      if "kernel_g" in v.path:
        v.assign(4.0 * v)
    outputs[remove_dc] = (generator(batch, tf.constant(lengths)).numpy(),
                          generator(mel[1:2, :5]).numpy()[0])
  (plain, plain_alone), (centred, centred_alone) = outputs[False], outputs[True]
  means = [plain[b, :n * HOP].mean() for b, n in enumerate(lengths)]
  assert min(abs(m) for m in means) > 1e-3, means  # there is an offset to remove
  for b, n in enumerate(lengths):
    valid = slice(0, n * HOP)
    assert abs(centred[b, valid].mean()) < 1e-6 * np.abs(plain[b, valid]).max() + 1e-7
    # the waveform minus its own mean: nothing else changes ...
    np.testing.assert_allclose(centred[b, valid], plain[b, valid] - means[b], atol=1e-6)
    # ... and the padding stays silent
    assert not centred[b, n * HOP:].any() and not plain[b, n * HOP:].any()
  # an utterance alone (no lengths: every sample valid) gets the same as in the batch
  np.testing.assert_allclose(centred_alone, centred[1, :5 * HOP], atol=1e-5)
  np.testing.assert_allclose(plain_alone, plain[1, :5 * HOP], rtol=1e-4, atol=1e-6)


def test_generator_mixed_bfloat16_gives_finite_float32_audio():
  keras.utils.set_random_seed(0)
  generator = tiny_generator(1, dtype="mixed_bfloat16")
  mel = tf.random.normal([2, 6, MELS])
  audio = generator(mel, tf.constant([6, 3]))
  assert audio.dtype == tf.float32 and audio.shape == (2, 6 * HOP)
  assert np.isfinite(audio.numpy()).all() and np.abs(audio.numpy()).max() > 0
  assert all(v.dtype == "float32" for v in generator.weights)
  reference = tiny_generator(1)
  reference.build()
  reference.set_weights(generator.get_weights())
  # bfloat16 keeps ~3 significant digits: the same network within a loose tolerance
  np.testing.assert_allclose(audio.numpy(), reference(mel, tf.constant([6, 3])).numpy(),
                             atol=0.05 * np.abs(audio.numpy()).max())


# ------------------------------------------------------------------------- discriminators

@pytest.mark.parametrize("make", [tiny_mpd, tiny_msd], ids=["mpd", "msd"])
def test_discriminators_ignore_the_batch_padding(make):
  keras.utils.set_random_seed(0)
  discriminator = make()
  lengths = [300, 173]
  audio = 0.3 * np.random.default_rng(0).standard_normal([2, 300]).astype(np.float32)
  out = discriminator(padded(audio, lengths), tf.constant(lengths))
  assert len(out.scores) == len(out.feature_maps) == len(out.score_masks) == 2
  alone = discriminator(audio[1:, :173])
  assert alone.score_masks is None and alone.feature_masks is None
  for scores, mask, alone_scores in zip(out.scores, out.score_masks, alone.scores):
    valid = mask.numpy()[1] > 0
    assert valid.sum() == alone_scores.shape[1] and mask.numpy()[0].all()
    np.testing.assert_allclose(scores.numpy()[1][valid], alone_scores.numpy()[0], rtol=1e-4,
                               atol=1e-5)
  for maps, masks, alone_maps in zip(out.feature_maps, out.feature_masks, alone.feature_maps):
    assert len(maps) == len(masks) == len(alone_maps) == 4  # 3 convolutions + the scores
    for fmap, mask, alone_map in zip(maps, masks, alone_maps):
      valid = np.broadcast_to(mask.numpy(), fmap.shape)[1].astype(bool)
      np.testing.assert_allclose(fmap.numpy()[1][valid], alone_map.numpy()[0].ravel(),
                                 rtol=1e-4, atol=1e-5)


def test_discriminators_in_mixed_bfloat16_give_float32_losses():
  keras.utils.set_random_seed(0)
  audio = tf.random.normal([2, 256]) * 0.3
  lengths = tf.constant([256, 100])
  for discriminator in (tiny_mpd(dtype="mixed_bfloat16"), tiny_msd(dtype="mixed_bfloat16")):
    real, fake = discriminator(audio, lengths), discriminator(audio * 0.5, lengths)
    assert real.scores[0].dtype == tf.bfloat16
    for loss in (discriminator_loss(real.scores, fake.scores, real.score_masks),
                 generator_adversarial_loss(fake.scores, fake.score_masks),
                 feature_matching_loss(real.feature_maps, fake.feature_maps,
                                       real.feature_masks)):
      assert loss.dtype == tf.float32 and np.isfinite(loss.numpy()) and loss.numpy() > 0


# ------------------------------------------------------------------------- losses

def test_lsgan_losses_on_hand_computable_scores():
  ones, zeros = tf.ones([2, 5]), tf.zeros([2, 5])
  # a perfect discriminator: real 1, generated 0
  assert discriminator_loss([ones, ones], [zeros, zeros]).numpy() == 0.0
  # the worst one: (1 - 0)^2 + 1^2 per sub-discriminator
  assert discriminator_loss([zeros, zeros], [ones, ones]).numpy() == pytest.approx(4.0)
  assert generator_adversarial_loss([zeros, ones]).numpy() == pytest.approx(1.0)
  half = tf.fill([2, 5], 0.5)
  assert generator_adversarial_loss([half]).numpy() == pytest.approx(0.25)
  # masked positions do not count, whatever they hold
  scores = tf.constant([[1.0, 1.0, 7.0], [1.0, -3.0, 9.0]])
  mask = tf.constant([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
  assert discriminator_loss([scores], [scores - 1.0], [mask]).numpy() == 0.0
  assert generator_adversarial_loss([scores], [mask]).numpy() == 0.0
  assert discriminator_loss([scores], [scores - 1.0]).numpy() > 10


def test_feature_matching_is_the_mean_absolute_difference_per_map_summed():
  real = [[tf.ones([2, 4, 3]), tf.zeros([2, 2, 1])], [tf.ones([2, 6, 2])]]
  assert feature_matching_loss(real, real).numpy() == 0.0
  fake = [[tf.ones([2, 4, 3]) * 1.5, tf.fill([2, 2, 1], -2.0)], [tf.zeros([2, 6, 2])]]
  assert feature_matching_loss(real, fake).numpy() == pytest.approx(0.5 + 2.0 + 1.0)
  # a mask [B, T, 1] keeps the first frame of each map only: there they agree
  first = lambda t: tf.sequence_mask([1, 1], t, dtype=tf.float32)[:, :, None]  # noqa: E731
  fake = [[tf.concat([real[0][0][:, :1], 9 + real[0][0][:, 1:]], 1), real[0][1]],
          [tf.concat([real[1][0][:, :1], -real[1][0][:, 1:]], 1)]]
  masks = [[first(4), first(2)], [first(6)]]
  assert feature_matching_loss(real, fake, masks).numpy() == 0.0
  assert feature_matching_loss(real, fake).numpy() > 1


def two_tones():
  """Two 800-sample tones at 4 kHz (300 and 700 Hz), and the same with a little noise."""
  rng = np.random.default_rng(0)
  t = np.arange(800) / 4000.0
  real = np.stack([0.5 * np.sin(2 * np.pi * 300 * t), 0.3 * np.sin(2 * np.pi * 700 * t)])
  real = real.astype(np.float32)
  return real, (real + 0.05 * rng.standard_normal(real.shape)).astype(np.float32)


def test_mel_loss_is_zero_for_the_same_audio_positive_otherwise_and_ignores_padding():
  real, fake = two_tones()
  assert mel_spectrogram_loss(real, real, **MEL_OPTIONS).numpy() == 0.0
  loss = mel_spectrogram_loss(real, fake, **MEL_OPTIONS).numpy()
  assert loss > 0.1 and mel_spectrogram_loss(real, fake).dtype == tf.float32
  # the second utterance is 500 samples: garbage past them changes nothing, and the loss
  # is the mean over the frames each utterance has alone
  lengths = [800, 500]
  masked = mel_spectrogram_loss(padded(real, lengths), padded(fake, lengths, seed=2),
                                tf.constant(lengths), **MEL_OPTIONS).numpy()
  mels = [log_mel_spectrogram(x[None], **MEL_OPTIONS)[0].numpy()[0]
          for x in (real[0], fake[0], real[1, :500], fake[1, :500])]
  assert mels[0].shape[0] == 1 + 800 // HOP and mels[2].shape[0] == 1 + 500 // HOP
  differences = np.concatenate([np.abs(mels[0] - mels[1]), np.abs(mels[2] - mels[3])])
  assert masked == pytest.approx(differences.mean(), rel=1e-5)


STFT_RESOLUTIONS = [[64, 16, 64], [32, 8, 24]]


def numpy_stft_loss(real, fake, resolutions):
  """Parallel WaveGAN's loss written out: per resolution, centred frames through a Hann
  window of win_length zero-padded to n_fft, spectral convergence over all frames of all
  utterances (lists of 1-D signals) + mean |log magnitude difference|; averaged."""
  total = 0.0
  for n_fft, hop, win in resolutions:
    window = window_function("hann", win, n_fft).astype(np.float64)

    def magnitudes(signals):
      out = []
      for x in signals:
        x = np.pad(np.asarray(x, np.float64), (n_fft // 2, n_fft // 2))
        frames = np.stack([x[i:i + n_fft] for i in range(0, len(x) - n_fft + 1, hop)])
        out.append(np.sqrt(np.abs(np.fft.rfft(frames * window, axis=-1)) ** 2 + 1e-9))
      return np.concatenate(out)

    r, f = magnitudes(real), magnitudes(fake)
    convergence = np.linalg.norm(r - f) / np.linalg.norm(r)
    log_l1 = np.mean(np.abs(np.log(np.maximum(r, 1e-5)) - np.log(np.maximum(f, 1e-5))))
    total += convergence + log_l1
  return total / len(resolutions)


def test_stft_loss_is_parallel_wavegans_and_ignores_padding():
  real, fake = two_tones()
  options = {"resolutions": STFT_RESOLUTIONS}
  assert multi_resolution_stft_loss(real, real, **options).numpy() == 0.0
  loss = multi_resolution_stft_loss(real, fake, **options)
  assert loss.dtype == tf.float32 and loss.numpy() > 0.1
  assert loss.numpy() == pytest.approx(numpy_stft_loss(real, fake, STFT_RESOLUTIONS),
                                       rel=1e-4)
  # a DC offset is one bin of a linear STFT: it costs the loss
  assert multi_resolution_stft_loss(real, real + 0.1, **options).numpy() > 0.1
  # the second utterance is 500 samples: garbage past them changes nothing, and the frames
  # are those each utterance has alone
  lengths = [800, 500]
  masked = multi_resolution_stft_loss(padded(real, lengths), padded(fake, lengths, seed=2),
                                      tf.constant(lengths), **options).numpy()
  expected = numpy_stft_loss([real[0], real[1, :500]], [fake[0], fake[1, :500]],
                             STFT_RESOLUTIONS)
  assert masked == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize("loss", [
    lambda real, fake: mel_spectrogram_loss(real, fake, **MEL_OPTIONS),
    lambda real, fake: multi_resolution_stft_loss(real, fake, resolutions=STFT_RESOLUTIONS)],
                         ids=["mel", "stft"])
def test_spectral_losses_have_a_finite_gradient_where_the_audio_is_silent(loss):
  # |STFT| = 0 has no derivative; the losses' magnitude sqrt(|STFT|^2 + 1e-9) has one
  noise = 0.1 * tf.random.stateless_normal([1, 160], seed=[0, 1])
  fake = tf.Variable(tf.concat([noise, tf.zeros([1, 160])], axis=1))
  real = tf.sin(tf.range(320, dtype=tf.float32) * 0.3)[None]
  with tf.GradientTape() as tape:
    value = loss(real, fake)
  gradient = tape.gradient(value, fake).numpy()
  assert np.isfinite(gradient).all() and np.abs(gradient[0, :160]).max() > 0


# ------------------------------------------------------------------------- normalization

def test_weight_norm_starts_at_the_initial_draw_and_scales_with_its_gain():
  for conv in (HiFiConv1D(6, 3, 4, kernel_initializer="glorot_uniform", name="conv"),
               HiFiConv1DTranspose(6, 4, 2, 4, kernel_initializer="glorot_uniform",
                                   name="conv_t")):
    conv.build()
    np.testing.assert_allclose(conv.kernel().numpy(), conv.kernel_v.numpy(), rtol=1e-6)
    conv.kernel_g.assign(2.0 * conv.kernel_g)
    np.testing.assert_allclose(conv.kernel().numpy(), 2.0 * conv.kernel_v.numpy(), rtol=1e-6)


def test_spectral_norm_divides_by_the_largest_singular_value():
  keras.utils.set_random_seed(0)
  conv = HiFiConv1D(8, 5, 12, groups=4, normalization="spectral", name="conv")
  conv.build()
  frozen = conv.kernel(training=False).numpy()
  for _ in range(30):  # one power iteration per training call
    kernel = conv.kernel(training=True).numpy()
  assert not np.allclose(frozen, kernel)  # u moved
  matrix = np.transpose(kernel, [2, 0, 1]).reshape(8, -1)
  assert np.linalg.svd(matrix, compute_uv=False)[0] == pytest.approx(1.0, rel=1e-3)
  np.testing.assert_allclose(conv.kernel(training=False).numpy(), kernel, rtol=1e-4)


# ------------------------------------------------------------------------- training

def test_gradients_reach_every_generator_and_discriminator_variable():
  keras.utils.set_random_seed(0)
  generator, mpd, msd = tiny_generator(1), tiny_mpd(), tiny_msd()
  mel, lengths = tf.random.normal([2, 8, MELS]), tf.constant([8, 5])
  samples = generator.output_lengths(lengths)
  real = tf.random.normal([2, 8 * HOP]) * 0.3
  with tf.GradientTape(persistent=True) as tape:
    fake = generator(mel, lengths, training=True)
    d_loss = g_loss = 0.0
    for discriminator in (mpd, msd):
      on_real = discriminator(real, samples, training=True)
      on_fake = discriminator(tf.stop_gradient(fake), samples, training=True)
      d_loss += discriminator_loss(on_real.scores, on_fake.scores, on_real.score_masks)
      on_fake = discriminator(fake, samples, training=True)
      g_loss += (generator_adversarial_loss(on_fake.scores, on_fake.score_masks)
                 + FEATURE_MATCHING_WEIGHT * feature_matching_loss(
                     on_real.feature_maps, on_fake.feature_maps, on_real.feature_masks))
    g_loss += MEL_WEIGHT * mel_spectrogram_loss(real, fake, samples, **MEL_OPTIONS)
  d_variables = mpd.trainable_variables + msd.trainable_variables
  for loss, variables in ((g_loss, generator.trainable_variables), (d_loss, d_variables)):
    gradients = tape.gradient(loss, variables)
    assert len(variables) > 10
    for variable, gradient in zip(variables, gradients):
      assert gradient is not None, variable.path
      assert np.isfinite(gradient.numpy()).all() and np.abs(gradient.numpy()).max() > 0, \
          variable.path
  # the discriminator loss sees the generator's output with its gradient stopped
  assert all(g is None for g in tape.gradient(d_loss, generator.trainable_variables))


@pytest.mark.slow
def test_a_tiny_gan_fits_one_sine_wave():
  """300 steps of discriminators then generator (two Adams, the paper's betas, the paper's
  generator objective) on 1,024 samples of a 440 Hz tone at 4 kHz: the mel loss falls to
  below half its untrained value (measured over seeds 0-4: 2.3-3.1x lower, mean of the last
  20 steps; the untrained generator is near silence)."""
  keras.utils.set_random_seed(0)
  wave = tf.constant(0.5 * np.sin(2 * np.pi * 440 * np.arange(1024) / 4000)[None], tf.float32)
  mel = log_mel_spectrogram(wave, **MEL_OPTIONS)[0][:, :1024 // HOP]
  generator = tiny_generator(2, num_mels=16, upsample_initial_channel=32,
                             resblock_kernel_sizes=[3], resblock_dilation_sizes=[[1, 3]])
  discriminators = [MultiPeriodDiscriminator(periods=(2, 3), channels=(8, 16, 16)),
                    MultiScaleDiscriminator(num_scales=2, channels=(8, 16, 16),
                                            kernel_sizes=(5, 9, 3), strides=(1, 2, 1),
                                            groups=(1, 2, 1))]
  generator(mel)
  for discriminator in discriminators:
    discriminator(wave)
  d_variables = [v for d in discriminators for v in d.trainable_variables]
  g_optimizer = keras.optimizers.Adam(2e-3, beta_1=0.8, beta_2=0.99)
  d_optimizer = keras.optimizers.Adam(2e-3, beta_1=0.8, beta_2=0.99)

  @tf.function
  def step():
    fake = tf.stop_gradient(generator(mel, training=True))
    with tf.GradientTape() as tape:
      d_loss = tf.add_n([discriminator_loss(d(wave, training=True).scores,
                                            d(fake, training=True).scores)
                         for d in discriminators])
    d_optimizer.apply_gradients(zip(tape.gradient(d_loss, d_variables), d_variables))
    with tf.GradientTape() as tape:
      fake = generator(mel, training=True)
      mel_loss = mel_spectrogram_loss(wave, fake, **MEL_OPTIONS)
      g_loss = MEL_WEIGHT * mel_loss
      for d in discriminators:
        on_real, on_fake = d(wave, training=True), d(fake, training=True)
        g_loss += generator_adversarial_loss(on_fake.scores) + FEATURE_MATCHING_WEIGHT * \
            feature_matching_loss(on_real.feature_maps, on_fake.feature_maps)
    g_variables = generator.trainable_variables
    g_optimizer.apply_gradients(zip(tape.gradient(g_loss, g_variables), g_variables))
    return mel_loss

  losses = [float(step()) for _ in range(300)]
  assert np.isfinite(losses).all()
  assert np.mean(losses[-20:]) < losses[0] / 2, (losses[0], losses[-20:])


# ------------------------------------------------------------------------- config errors

@pytest.mark.parametrize("overrides, message", [
    ({"preset": "v4"}, "preset: 'v4' is not one of"),
    ({"upsample_kernel_sizes": [16, 16]}, "2 kernels for 4 upsample_rates"),
    ({"upsample_kernel_sizes": [16, 4, 4, 4], "upsample_rates": [8, 8, 2, 2]},
     "kernel 4 is below its rate 8"),
    ({"upsample_initial_channel": 100}, "not divisible by 2^4"),
    ({"resblock": 3}, "resblock: 3 is not 1 or 2"),
    ({"resblock_dilation_sizes": [[1, 3]]}, "1 entries for 3 resblock_kernel_sizes"),
    ({"hop": 256}, "hop: not a generator size"),
])
def test_generator_config_errors_are_one_line(overrides, message):
  with pytest.raises(ConfigError, match=message.replace("^", r"\^")) as error:
    generator_config(**overrides)
  assert "\n" not in str(error.value)


def test_the_declared_generator_keys_build_the_generator_they_describe():
  params = validate_params({"preset": "v3", "upsample_initial_channel": 64,
                            "weight_norm": False}, GENERATOR_PARAMS)
  generator = HiFiGANGenerator(num_mels=MELS, **params)
  assert generator.config["upsample_rates"] == [8, 8, 4]  # the preset's
  assert generator.config["upsample_initial_channel"] == 64 and not generator.conv_pre.weights
  generator.build()
  assert not any("kernel_g" in v.path for v in generator.weights)
  with pytest.raises(ConfigError, match="resblock"):
    validate_params({"resblock": 3}, GENERATOR_PARAMS)
  with pytest.raises(ConfigError, match="upsample_rates"):
    validate_params({"upsample_rates": [8, 0]}, GENERATOR_PARAMS)


def test_discriminator_config_errors():
  with pytest.raises(ConfigError, match="groups 16 must divide the input channels 8"):
    MultiScaleDiscriminator(channels=(8, 8), kernel_sizes=(3, 3), strides=(1, 1),
                            groups=(1, 16))
  with pytest.raises(ConfigError, match="one entry per layer, got 2, 1, 2, 2"):
    MultiScaleDiscriminator(channels=(8, 8), kernel_sizes=(3,), strides=(1, 1), groups=(1, 1))
  with pytest.raises(ConfigError, match="^normalization: 'batch' is not one of"):
    MultiPeriodDiscriminator(normalization="batch")
  with pytest.raises(ConfigError, match="^first_scale_normalization: 'l2' is not one of"):
    MultiScaleDiscriminator(first_scale_normalization="l2")
