"""Loss scalers: their scale sequences against independent numpy references, state, config."""

import math

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.training.loss_scaling import (BackoffScaler, LogMaxScaler, LossScaler,
                                                loss_scaling_declarations, make_loss_scaler,
                                                scaler_class, validate_loss_scaling_params)

INF, NAN = float("inf"), float("nan")

# A scripted run: (max |unscaled gradient|, all gradients finite). Overflows show up as an
# infinite/NaN maximum, or as a finite maximum with some other gradient non-finite.
SCRIPT = ([(1e-3, True)] * 5 + [(INF, False)] + [(2e-3, True)] * 4 + [(NAN, False)] * 2 +
          [(5e-4, False)] + [(3e-2, True)] * 7 + [(INF, False)] * 6 + [(1e-5, True)] * 9 +
          [(0.0, True)] + [(4.0, True)] * 3)

# LogMax needs spread-out magnitudes to move between its bounds; after an overflow
# (x = 2^log_max) sigma is huge and the scale sits at scale_min for thousands of steps.
LOGMAX_SCRIPT = ([(1.3 * 2.0 ** e, True) for e in (-2, 5, 0, 8, 3, -1, 6, 2, 7, 1, 4, 9, -3, 5)] +
                 [(0.0, True), (INF, False), (NAN, False), (7e-3, False)] + [(10.0, True)] * 3)


def backoff_reference(script, scale_min=1.0, scale_max=2.0 ** 14, factor=2.0, window=2000):
  """Scale after each step, written from OpenSeq2Seq's description of Backoff."""
  scale, last_overflow, out = scale_max, -1, []
  for step, (amax, finite) in enumerate(script):
    if not finite or not math.isfinite(amax):
      scale = min(max(scale / factor, scale_min), scale_max)
      last_overflow = step
    elif (step - last_overflow) % window == 0:
      scale = min(max(scale * factor, scale_min), scale_max)
    out.append(scale)
  return np.array(out)


def logmax_reference(script, scale_min=1.0, scale_max=2.0 ** 14, log_max=16.0, beta1=0.99,
                     beta2=0.999, k=3.09):
  """Scale after each step, written from OpenSeq2Seq's description of LogMax (float64)."""
  xs, out = [], []
  for amax, finite in script:
    if not finite or not math.isfinite(amax):
      xs.append(2.0 ** log_max)
    else:
      xs.append(math.log2(max(amax, 2.0 ** -126)))
    x = np.array(xs)
    t = len(xs)
    # bias-corrected exponential moving averages, written as explicit weighted sums
    w1 = (1 - beta1) * beta1 ** np.arange(t - 1, -1, -1)
    w2 = (1 - beta2) * beta2 ** np.arange(t - 1, -1, -1)
    mu = np.sum(w1 * x) / (1 - beta1 ** t)
    mean2 = np.sum(w2 * x) / (1 - beta2 ** t)
    sq2 = np.sum(w2 * x * x) / (1 - beta2 ** t)
    sigma = math.sqrt(max(sq2 - mean2 ** 2, 0.0))
    out.append(min(max(2.0 ** (log_max - (mu + k * sigma)), scale_min), scale_max))
  return np.array(out)


def run_scaler(scaler, script, compiled=False):
  update = tf.function(scaler.update) if compiled else scaler.update
  scales = []
  for amax, finite in script:
    returned = update(tf.constant(amax, tf.float32), tf.constant(finite))
    after = float(scaler.scale.numpy())
    assert float(returned.numpy()) == after
    scales.append(after)
  return np.array(scales)


def test_script_exercises_every_branch():
  ref = backoff_reference(SCRIPT, scale_min=2.0, scale_max=64.0, window=3)
  assert ref.min() == 2.0 and ref.max() == 64.0
  assert np.any(np.diff(ref) > 0) and np.any(np.diff(ref) < 0)


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("params", [
    {},
    {"scale_min": 2.0, "scale_max": 64.0, "step_window": 3},
    {"scale_min": 1.0, "scale_max": 2.0 ** 10, "step_factor": 4.0, "step_window": 2},
])
def test_backoff_matches_reference(params, compiled):
  scaler = make_loss_scaler("Backoff", params)
  assert isinstance(scaler, BackoffScaler)
  got = run_scaler(scaler, SCRIPT, compiled)
  ref = backoff_reference(SCRIPT, params.get("scale_min", 1.0), params.get("scale_max", 2.0 ** 14),
                          params.get("step_factor", 2.0), params.get("step_window", 2000))
  np.testing.assert_array_equal(got, ref)


def test_backoff_defaults_start_at_scale_max():
  scaler = make_loss_scaler("backoff")
  assert float(scaler.scale.numpy()) == 2.0 ** 14
  assert scaler.params == {"scale_min": 1.0, "scale_max": 2.0 ** 14, "step_factor": 2.0,
                           "step_window": 2000}


def test_backoff_grows_after_exactly_one_window():
  scaler = make_loss_scaler("Backoff", {"scale_max": 2.0 ** 20, "step_window": 4})
  scaler._scale.assign(8.0)
  got = run_scaler(scaler, [(1.0, True)] * 8 + [(INF, False)] + [(1.0, True)] * 4)
  np.testing.assert_array_equal(got, [8, 8, 8, 16, 16, 16, 16, 32, 16, 16, 16, 16, 32])


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("params", [
    {},
    {"scale_min": 0.5, "scale_max": 2.0 ** 20, "beta1": 0.9, "beta2": 0.95,
     "overflow_std_dev": 2.0, "log_max": 15.0},
])
def test_logmax_matches_reference(params, compiled):
  scaler = make_loss_scaler("LogMax", params)
  assert isinstance(scaler, LogMaxScaler)
  assert float(scaler.scale.numpy()) == 1.0
  got = run_scaler(scaler, LOGMAX_SCRIPT, compiled)
  ref = logmax_reference(LOGMAX_SCRIPT, params.get("scale_min", 1.0),
                         params.get("scale_max", 2.0 ** 14), params.get("log_max", 16.0), params.get("beta1", 0.99),
                         params.get("beta2", 0.999), params.get("overflow_std_dev", 3.09))
  # float32 moving averages against a float64 reference: scales are 2^y, compare y
  np.testing.assert_allclose(np.log2(got), np.log2(ref), atol=2e-3)
  assert len(set(np.round(ref, 3))) > 8, "the script should move the LogMax scale"
  assert ref[-1] == (params.get("scale_min", 1.0)), "an overflow should drop it to scale_min"


def test_logmax_without_overflow_tracks_gradient_magnitude():
  # constant max |g| = 2^-10: sigma 0, mu -10 -> scale 2^(16 + 10), clipped to scale_max
  scaler = make_loss_scaler("LogMax", {"scale_max": 2.0 ** 30})
  got = run_scaler(scaler, [(2.0 ** -10, True)] * 20)
  np.testing.assert_allclose(got, 2.0 ** 26, rtol=1e-4)


def test_static_scaler_is_constant():
  scaler = make_loss_scaler(128)
  assert type(scaler) is LossScaler
  np.testing.assert_array_equal(run_scaler(scaler, SCRIPT[:10]), [128.0] * 10)
  assert make_loss_scaler(None) is None
  # numeric strings arrive from command-line overrides (--loss_scaling=512)
  assert float(make_loss_scaler("512").scale.numpy()) == 512.0


@pytest.mark.parametrize("name", ["Backoff", "LogMax"])
def test_scaler_state_survives_a_checkpoint(tmp_path, name):
  scaler = make_loss_scaler(name, {"step_window": 3} if name == "Backoff" else {})
  run_scaler(scaler, SCRIPT[:13])
  path = tf.train.Checkpoint(loss_scaler=scaler).save(str(tmp_path / "ckpt"))
  expected = run_scaler(scaler, SCRIPT[13:])
  fresh = make_loss_scaler(name, {"step_window": 3} if name == "Backoff" else {})
  tf.train.Checkpoint(loss_scaler=fresh).restore(path).assert_consumed()
  np.testing.assert_array_equal(run_scaler(fresh, SCRIPT[13:]), expected)


@pytest.mark.parametrize("loss_scaling,params,message", [
    ("Backof", {}, "loss_scaling: 'Backof' is not a number, 'Backoff' or 'LogMax'"),
    ("Backoff", {"step_windw": 10}, "loss_scaling_params/step_windw: unknown parameter of "
                                    "BackoffScaler; did you mean 'step_window'?"),
    ("LogMax", {"step_window": 10}, "loss_scaling_params/step_window: unknown parameter"),
    ("logmax", {"beta2": 1.0}, "loss_scaling_params/beta2: must be in (0, 1)"),
    ("BACKOFF", {"step_factor": 1.0}, "loss_scaling_params/step_factor: must be greater than 1"),
    ("Backoff", {"scale_min": 8.0, "scale_max": 4.0}, "loss_scaling_params/scale_max"),
    ("Backoff", {"step_window": 0}, "loss_scaling_params/step_window: must be at least 1"),
    (64.0, {"scale_min": 1.0}, "loss_scaling_params: a static loss_scaling takes no parameters"),
    (-1.0, {}, "loss_scaling: a static scale must be a positive finite number"),
    (True, {}, "loss_scaling: expected a number"),
])
def test_config_errors_are_one_clear_line(loss_scaling, params, message):
  with pytest.raises(ConfigError) as info:
    make_loss_scaler(loss_scaling, params)
  assert message in str(info.value)
  assert "\n" not in str(info.value)


def test_scaler_class_and_declarations_follow_loss_scaling():
  assert scaler_class(None) is None and loss_scaling_declarations(None) is None
  assert scaler_class(64) is LossScaler and loss_scaling_declarations("64") == {}
  assert scaler_class("BACKOFF") is BackoffScaler and scaler_class("logmax") is LogMaxScaler
  assert set(loss_scaling_declarations("Backoff")) == {"scale_min", "scale_max", "step_factor",
                                                       "step_window"}
  with pytest.raises(ConfigError, match="loss_scaling: 'Backof' is not a number"):
    scaler_class("Backof")


def test_validate_loss_scaling_params_fills_defaults_and_rejects_orphans():
  params = validate_loss_scaling_params("Backoff", {"step_window": 7})
  assert params == {"scale_min": 1.0, "scale_max": 2.0 ** 14, "step_factor": 2.0,
                    "step_window": 7}
  assert make_loss_scaler("Backoff", params).params == params  # validating again is a no-op
  assert validate_loss_scaling_params(None, {}) == {} == validate_loss_scaling_params(8.0, None)
  with pytest.raises(ConfigError, match="^loss_scaling_params: given, but loss_scaling is None"):
    validate_loss_scaling_params(None, {"step_window": 7})
  with pytest.raises(ConfigError, match="^loss_scaling_params: a static loss_scaling takes no"):
    validate_loss_scaling_params("8", {"step_window": 7})
