"""Mel-cepstra and mel-cepstral distortion (parts/audio/mel_cepstrum.py) against cases whose
answer is known in closed form, and the properties a distance must have."""

import numpy as np
import pytest

from open_seq2seq.parts.audio import mel_cepstrum as mc

RATE = 16000


def speechlike(seconds=0.5, rate=RATE, seed=0):
  """A harmonic tone with vibrato under a slowly moving two-formant envelope, plus noise."""
  rng = np.random.default_rng(seed)
  t = np.arange(int(seconds * rate)) / rate
  f0 = 140.0 * (1.0 + 0.05 * np.sin(2 * np.pi * 3 * t))
  phase = 2 * np.pi * np.cumsum(f0) / rate
  signal = sum(np.sin(k * phase) / k * (1.0 + np.cos(2 * np.pi * k * 140 / 2000))
               for k in range(1, 25))
  return 0.1 * signal + 0.003 * rng.normal(size=len(t))


def cepstrum_to_power(cepstrum, n_fft):
  """|H|^2 on the n_fft // 2 + 1 FFT bins of log|H(e^jw)| = sum_m c_m cos(m w)."""
  w = np.linspace(0.0, np.pi, n_fft // 2 + 1)
  m = np.arange(len(cepstrum))
  return np.exp(2.0 * np.cos(np.outer(w, m)) @ cepstrum)


def test_the_real_cepstrum_of_a_single_pole_is_a_power_series():
  # 1 / (1 - a z^-1) is minimum phase and log of it is sum_n a^n / n z^-n.
  a, n_fft = 0.8, 2048
  w = np.linspace(0.0, np.pi, n_fft // 2 + 1)
  power = 1.0 / np.abs(1.0 - a * np.exp(-1j * w)) ** 2
  n = np.arange(1, 31)
  c = mc.real_cepstrum(power, 30)
  np.testing.assert_allclose(c[1:], a ** n / n, atol=1e-12)
  assert abs(c[0]) < 1e-12
  # a gain g adds log g to c0 only
  np.testing.assert_allclose(mc.real_cepstrum(4.0 * power, 30) - c,
                             np.r_[np.log(2.0), np.zeros(30)], atol=1e-12)


def test_alpha_zero_is_the_plain_cepstrum():
  power = mc.power_spectrogram(speechlike(), 512, 80) + 1e-9
  np.testing.assert_allclose(mc.mel_cepstrum(power, 24, alpha=0.0),
                             mc.real_cepstrum(power, 24), atol=1e-12)
  assert not np.allclose(mc.mel_cepstrum(power, 24, alpha=0.42), mc.real_cepstrum(power, 24),
                         atol=1e-3)


def test_a_spectrum_that_is_one_mel_cepstral_term_gives_that_term():
  # log H = b z~^-1 with z~^-1 = (z^-1 - a) / (1 - a z^-1) has the linear cepstrum
  # c_0 = -a b, c_n = b (1 - a^2) a^(n-1): warping it by a must give (0, b, 0, 0, ...).
  a, b = 0.42, 0.8
  n = np.arange(1, 400)
  linear = np.r_[-a * b, b * (1.0 - a * a) * a ** (n - 1)]
  np.testing.assert_allclose(mc.warp_cepstrum(linear, a, 8), [0, b, 0, 0, 0, 0, 0, 0, 0],
                             atol=1e-12)
  # the same from the power spectrum, through the cepstrum of its log
  np.testing.assert_allclose(mc.mel_cepstrum(cepstrum_to_power(linear, 4096), 8, a),
                             [0, b, 0, 0, 0, 0, 0, 0, 0], atol=1e-9)
  # and a warped all-pole spectrum is not its linear cepstrum
  assert abs(mc.warp_cepstrum(linear, 0.0, 8)[2] - b * (1 - a * a) * a) < 1e-12


def test_warping_by_alpha_then_minus_alpha_gives_the_cepstrum_back():
  rng = np.random.default_rng(1)
  cepstrum = rng.normal(size=40) * 0.7 ** np.arange(40)
  for alpha in (0.31, 0.42, 0.554):
    there = mc.warp_cepstrum(cepstrum, alpha, 400)
    back = mc.warp_cepstrum(there, -alpha, 39)
    np.testing.assert_allclose(back, cepstrum, atol=1e-10)
    assert not np.allclose(there[:40], cepstrum, atol=1e-2)  # warping does change it
  with pytest.raises(ValueError, match="all-pass"):
    mc.warp_cepstrum(cepstrum, 1.0, 10)


def test_default_alphas_follow_the_mel_scale_fit():
  assert mc.default_alpha(8000) == 0.31 and mc.default_alpha(16000) == 0.42
  assert mc.default_alpha(22050) == 0.455 and mc.default_alpha(24000) == 0.466
  for rate, alpha in mc.ALPHAS.items():  # SPTK's manual values sit within 0.01 of the fit
    assert abs(mc.fit_alpha(rate) - alpha) <= 0.011, (rate, mc.fit_alpha(rate), alpha)
  assert 0.466 < mc.default_alpha(28000) < 0.504  # rates between known ones are fitted


def test_mcd_is_zero_on_itself_symmetric_and_grows_with_noise():
  clean = speechlike()
  rng = np.random.default_rng(2)
  noise = rng.normal(size=len(clean))
  assert mc.mel_cepstral_distortion(clean, clean, RATE) == 0.0
  values = [mc.mel_cepstral_distortion(clean, clean + level * noise, RATE)
            for level in (0.001, 0.01, 0.05)]
  assert 0.0 < values[0] < values[1] < values[2], values
  noisy = clean + 0.01 * noise
  assert mc.mel_cepstral_distortion(noisy, clean, RATE) == pytest.approx(values[1], rel=1e-12)
  # a gain moves c0 alone, which the distortion leaves out (but for the few bins that the
  # common floor clips in one signal and not the other); scaling both changes nothing
  assert mc.mel_cepstral_distortion(clean, 0.5 * clean, RATE) < 0.01 < values[0]
  assert mc.mel_cepstral_distortion(3 * clean, 3 * noisy, RATE) == pytest.approx(values[1])


def test_mcd_is_the_formula_on_the_frames_cepstra():
  clean, other = speechlike(), speechlike(seed=5) + 0.02 * np.sin(np.arange(8000) * 0.3)
  got = mc.mcd_frames(clean, other, RATE, order=12, n_fft=512, hop_length=160)
  loudest = max(mc.power_spectrogram(x, 512, 160).max() for x in (clean, other))
  cepstra = [mc.mel_cepstrum(np.maximum(mc.power_spectrogram(x, 512, 160), loudest * 1e-12),
                             12, 0.42) for x in (clean, other)]
  want = 10 / np.log(10) * np.sqrt(2 * np.sum((cepstra[0] - cepstra[1])[:, 1:] ** 2, -1))
  np.testing.assert_allclose(got, want, rtol=1e-10)
  assert len(got) == 1 + 8000 // 160


def naive_dtw_cost(x, y):
  """Total Euclidean cost of the best alignment, by the textbook double loop."""
  d = np.linalg.norm(x[:, None] - y[None], axis=-1)
  total = np.full((len(x) + 1, len(y) + 1), np.inf)
  total[0, 0] = 0.0
  for i in range(1, len(x) + 1):
    for j in range(1, len(y) + 1):
      total[i, j] = d[i - 1, j - 1] + min(total[i - 1, j], total[i, j - 1],
                                          total[i - 1, j - 1])
  return total[-1, -1]


def test_dtw_finds_the_cheapest_alignment():
  rng = np.random.default_rng(3)
  for shape in ((7, 11), (12, 5), (1, 4), (9, 9)):
    x, y = rng.normal(size=(shape[0], 3)), rng.normal(size=(shape[1], 3))
    i, j = mc.dtw_path(x, y)
    assert (i[0], j[0]) == (0, 0) and (i[-1], j[-1]) == (shape[0] - 1, shape[1] - 1)
    steps = np.stack([np.diff(i), np.diff(j)], 1)
    assert np.all((steps >= 0) & (steps <= 1)) and np.all(steps.sum(1) >= 1)
    cost = np.linalg.norm(x[i] - y[j], axis=-1).sum()
    assert cost == pytest.approx(naive_dtw_cost(x, y), rel=1e-12)


def test_dtw_aligns_a_slowed_down_copy_to_zero_distortion():
  cepstra = mc.mel_cepstra(speechlike(), RATE)
  # every third frame held twice as long: another length, the same frames
  slowed = np.repeat(cepstra, 1 + (np.arange(len(cepstra)) % 3 == 0), axis=0)
  assert len(slowed) > len(cepstra)
  assert np.all(mc.cepstral_distortions(cepstra, slowed, dtw=True) < 1e-9)
  with pytest.raises(ValueError, match="dtw=True"):
    mc.cepstral_distortions(cepstra, slowed)
  shifted = mc.mel_cepstra(speechlike(seed=4)[400:], RATE)
  assert np.mean(mc.cepstral_distortions(cepstra, shifted, dtw=True)) > 0.1
