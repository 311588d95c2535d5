"""Learning-rate policies against their formulas, computed independently in numpy."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.optimizers import lr_policies as lp
from open_seq2seq.utils.signatures import signature_params

STEPS = [0, 1, 2, 5, 9, 10, 11, 19, 20, 21, 50, 99, 100, 101, 119, 120, 121, 150, 500, 10**6]


def _values(policy, steps=STEPS, **params):
  """The policy at each step, called with Python ints."""
  return np.array([float(policy(s, **params)) for s in steps])


def _assert_formula(policy, reference, **params):
  got = _values(policy, **params)
  want = np.array([reference(s) for s in STEPS])
  np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-9)


# ----------------------------------------------------------------------------- fixed / piecewise
def test_fixed_lr():
  _assert_formula(lp.fixed_lr, lambda s: 0.3, learning_rate=0.3)


def test_piecewise_constant_steps_boundary_uses_previous_value():
  bounds, rates = [10, 100], [0.5, 0.01]

  def ref(s):
    if s <= 10:
      return 0.2
    return 0.2 * 0.5 if s <= 100 else 0.2 * 0.01

  _assert_formula(lp.piecewise_constant, ref, learning_rate=0.2, boundaries=bounds,
                  decay_rates=rates)


def test_piecewise_constant_in_epochs():
  def ref(s):
    return 1.0 if s <= 20 else (0.1 if s <= 100 else 0.01)

  _assert_formula(lp.piecewise_constant, ref, learning_rate=1.0, boundaries=[2, 10],
                  decay_rates=[0.1, 0.01], steps_per_epoch=10)


def test_piecewise_constant_rejects_mismatched_lists():
  with pytest.raises(ConfigError, match="decay_rates"):
    lp.piecewise_constant(0, 0.1, [10, 20], [0.1])


# ----------------------------------------------------------------------------- exp_decay
@pytest.mark.parametrize("staircase", [False, True])
def test_exp_decay(staircase):
  lr, decay_steps, rate, begin, min_lr = 0.1, 20, 0.5, 10, 1e-3

  def ref(s):
    if s < begin:
      return lr
    p = (s - begin) / decay_steps
    if staircase:
      p = math.floor(p)
    return max(min_lr, lr * rate ** p)

  _assert_formula(lp.exp_decay, ref, learning_rate=lr, decay_steps=decay_steps,
                  decay_rate=rate, use_staircase_decay=staircase, begin_decay_at=begin,
                  min_lr=min_lr)
  # the floor is reached within STEPS, so clipping is exercised
  assert _values(lp.exp_decay, learning_rate=lr, decay_steps=decay_steps, decay_rate=rate,
                 use_staircase_decay=staircase, begin_decay_at=begin,
                 min_lr=min_lr)[-1] == pytest.approx(min_lr)


def test_exp_decay_staircase_is_flat_between_jumps():
  values = _values(lp.exp_decay, steps=[20, 25, 39, 40], learning_rate=1.0, decay_steps=20,
                   decay_rate=0.5, use_staircase_decay=True)
  np.testing.assert_allclose(values, [0.5, 0.5, 0.5, 0.25])


# ----------------------------------------------------------------------------- poly / cosine
def _warmup_then_hold(step, lr, warmup):
  """Reference lr before decay starts: linear warmup to ``lr``, then ``lr``."""
  return lr * step / warmup if step < warmup else lr


@pytest.mark.parametrize("warmup,begin", [(0, 0), (20, 0), (10, 20), (20, 10)])
def test_poly_decay(warmup, begin):
  lr, decay_steps, power, min_lr = 0.05, 100, 2.0, 1e-4
  start = max(warmup, begin)

  def ref(s):
    if s < start:
      return _warmup_then_hold(s, lr, warmup)
    t = min(s - start, decay_steps)
    return (lr - min_lr) * (1 - t / decay_steps) ** power + min_lr

  _assert_formula(lp.poly_decay, ref, learning_rate=lr, decay_steps=decay_steps, power=power,
                  begin_decay_at=begin, min_lr=min_lr, warmup_steps=warmup)


def test_poly_decay_landmarks():
  kwargs = dict(learning_rate=1.0, decay_steps=100, warmup_steps=10)
  assert float(lp.poly_decay(0, **kwargs)) == 0.0
  assert float(lp.poly_decay(5, **kwargs)) == pytest.approx(0.5)
  assert float(lp.poly_decay(10, **kwargs)) == pytest.approx(1.0)  # peak, decay starts
  assert float(lp.poly_decay(60, **kwargs)) == pytest.approx(0.5)
  assert float(lp.poly_decay(110, **kwargs)) == pytest.approx(0.0)
  assert float(lp.poly_decay(10**7, **kwargs)) == pytest.approx(0.0)


@pytest.mark.parametrize("warmup,begin,min_lr", [(0, 0, 0.0), (20, 0, 0.1), (10, 30, 0.01)])
def test_cosine_decay(warmup, begin, min_lr):
  lr, decay_steps = 0.01, 100
  start = max(warmup, begin)

  def ref(s):
    if s < start:
      return _warmup_then_hold(s, lr, warmup)
    t = min(s - start, decay_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * t / decay_steps))
    return lr * ((1 - min_lr) * cosine + min_lr)  # min_lr is a fraction of lr (TF alpha)

  _assert_formula(lp.cosine_decay, ref, learning_rate=lr, decay_steps=decay_steps,
                  begin_decay_at=begin, min_lr=min_lr, warmup_steps=warmup)


# ----------------------------------------------------------------------------- transformer
@pytest.mark.parametrize("max_lr", [None, 1e-3])
def test_transformer_policy(max_lr):
  lr, d_model, warmup, coefficient = 2.0, 512, 20, 0.5

  def ref(s):
    n = s + 1
    value = lr * coefficient * d_model ** -0.5 * min(n * warmup ** -1.5, n ** -0.5)
    return value if max_lr is None else min(max_lr, value)

  _assert_formula(lp.transformer_policy, ref, learning_rate=lr, d_model=d_model,
                  warmup_steps=warmup, max_lr=max_lr, coefficient=coefficient)


def test_transformer_policy_peaks_at_warmup():
  values = _values(lp.transformer_policy, steps=range(0, 60), learning_rate=1.0, d_model=64,
                   warmup_steps=20)
  assert int(np.argmax(values)) in (18, 19)  # (step + 1) == warmup_steps


# ----------------------------------------------------------------------------- inv_poly
@pytest.mark.parametrize("power,warmup", [(1.0, 0), (2.0, 0), (2.0, 10)])
def test_inv_poly_decay(power, warmup):
  lr, decay_steps, min_lr = 0.02, 100, 8e-6
  scale = ((lr / min_lr) ** (1 / power) - 1) / decay_steps

  def ref(s):
    if s < warmup:
      return lr * s / warmup
    t = min(s - warmup, decay_steps)
    return lr / (1 + scale * t) ** power

  _assert_formula(lp.inv_poly_decay, ref, learning_rate=lr, decay_steps=decay_steps,
                  min_lr=min_lr, power=power, warmup_steps=warmup)
  assert float(lp.inv_poly_decay(decay_steps, lr, decay_steps, min_lr, power)) == \
      pytest.approx(min_lr)


def test_inv_poly_decay_rejects_bad_power():
  with pytest.raises(ConfigError, match="power"):
    lp.inv_poly_decay(0, 0.1, 100, 1e-5, power=0.0)


# ----------------------------------------------------------------------------- tensors & graphs
ALL_POLICIES = [
    (lp.fixed_lr, dict(learning_rate=0.1)),
    (lp.piecewise_constant, dict(learning_rate=0.1, boundaries=[10, 100], decay_rates=[.5, .1])),
    (lp.exp_decay, dict(learning_rate=0.1, decay_steps=10, decay_rate=0.9,
                        use_staircase_decay=True, min_lr=0.01)),
    (lp.poly_decay, dict(learning_rate=0.1, decay_steps=100, warmup_steps=10)),
    (lp.cosine_decay, dict(learning_rate=0.1, decay_steps=100, warmup_steps=10)),
    (lp.transformer_policy, dict(learning_rate=2.0, d_model=64, warmup_steps=10)),
    (lp.inv_poly_decay, dict(learning_rate=0.1, decay_steps=100, min_lr=1e-4, power=2.0)),
]


@pytest.mark.parametrize("policy,params", ALL_POLICIES, ids=lambda p: getattr(p, "__name__", ""))
def test_float32_int64_tensor_and_tf_function_agree(policy, params):
  traced = tf.function(lambda step: policy(step, **params))
  for step in (0, 7, 10, 55, 100, 1000):
    eager = policy(step, **params)
    graph = traced(tf.constant(step, tf.int64))
    assert eager.dtype == tf.float32 and graph.dtype == tf.float32
    assert eager.shape == () and graph.shape == ()
    assert float(graph) == pytest.approx(float(eager), rel=1e-5)  # graph cos may differ by ulps
  # one trace serves all steps: the step is a tensor, never a Python branch
  assert traced.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("policy,params", ALL_POLICIES, ids=lambda p: getattr(p, "__name__", ""))
def test_signatures_are_typed_for_config_validation(policy, params):
  declared = signature_params(policy, skip=("global_step",))
  assert "global_step" not in declared
  assert declared["learning_rate"].type_tuple() == (float,)
  for key, value in params.items():
    declared[key].check(value, key)  # the values used above validate
  if "decay_steps" in declared:
    with pytest.raises(ConfigError, match="decay_steps: expected int"):
      declared["decay_steps"].check("100", "decay_steps")


def test_max_lr_none_or_float_validates():
  declared = signature_params(lp.transformer_policy, skip=("global_step",))
  declared["max_lr"].check(None, "max_lr")
  declared["max_lr"].check(1e-3, "max_lr")
  with pytest.raises(ConfigError):
    declared["max_lr"].check("big", "max_lr")


# ----------------------------------------------------------------------------- plumbing
def test_complete_lr_policy_params_fills_decay_steps_and_steps_per_epoch():
  params = lp.complete_lr_policy_params(lp.poly_decay, {"learning_rate": 0.1}, last_step=500)
  assert params == {"learning_rate": 0.1, "decay_steps": 500}
  given = lp.complete_lr_policy_params(lp.poly_decay, {"learning_rate": 0.1, "decay_steps": 7},
                                       last_step=500)
  assert given["decay_steps"] == 7
  piecewise = lp.complete_lr_policy_params(
      lp.piecewise_constant, {"learning_rate": 0.1, "boundaries": [1], "decay_rates": [0.1]},
      last_step=500, steps_per_epoch=50)
  assert piecewise["steps_per_epoch"] == 50
  fixed = lp.complete_lr_policy_params(lp.fixed_lr, {"learning_rate": 0.1}, last_step=500)
  assert fixed == {"learning_rate": 0.1}


@pytest.mark.parametrize("policy,params,end", [
    (lp.poly_decay, dict(learning_rate=0.1, min_lr=1e-4, warmup_steps=30), 1e-4),
    (lp.poly_decay, dict(learning_rate=0.1, min_lr=1e-4, begin_decay_at=120,
                         warmup_steps=30), 1e-4),
    (lp.cosine_decay, dict(learning_rate=0.1, min_lr=0.01, warmup_steps=50), 0.1 * 0.01),
    (lp.inv_poly_decay, dict(learning_rate=0.1, min_lr=1e-4, power=2.0, warmup_steps=40), 1e-4),
    (lp.exp_decay, dict(learning_rate=0.1, decay_rate=0.5, begin_decay_at=100), 0.05),
])
def test_filled_decay_window_ends_at_the_last_step(policy, params, end):
  # decay_steps = last_step - max(begin_decay_at, warmup_steps), as OpenSeq2Seq: the
  # schedule reaches its end value exactly at the last update, not past the end of the run.
  last = 400
  full = lp.complete_lr_policy_params(policy, params, last_step=last)
  begin = max(params.get("begin_decay_at", 0), params.get("warmup_steps", 0))
  assert full["decay_steps"] == last - begin
  assert float(policy(last, **full)) == pytest.approx(end, rel=1e-5)
  if policy is not lp.exp_decay:  # exp_decay only halves once per window
    assert float(policy(last - 1, **full)) > end


def test_filled_decay_window_is_at_least_one_step():
  full = lp.complete_lr_policy_params(lp.poly_decay, {"learning_rate": 0.1,
                                                       "warmup_steps": 900}, last_step=500)
  assert full["decay_steps"] == 1


def test_complete_lr_policy_params_reports_missing_required():
  with pytest.raises(ConfigError, match="lr_policy_params/learning_rate: required"):
    lp.complete_lr_policy_params(lp.poly_decay, {}, last_step=100)


def test_schedule_drives_a_keras_optimizer():
  schedule = lp.LRPolicySchedule(lp.poly_decay, {"learning_rate": 1.0, "decay_steps": 4})
  optimizer = keras.optimizers.SGD(learning_rate=schedule)
  variable = keras.Variable(np.zeros(1, np.float32))
  seen = []
  for _ in range(5):
    seen.append(float(optimizer.learning_rate))
    optimizer.apply_gradients([(tf.ones(1), variable)])
  np.testing.assert_allclose(seen, [1.0, 0.75, 0.5, 0.25, 0.0], atol=1e-7)
  # SGD moved the variable by the sum of the rates applied
  assert float(variable.numpy()[0]) == pytest.approx(-2.5)
  restored = lp.LRPolicySchedule.from_config(schedule.get_config())
  assert float(restored(2)) == pytest.approx(0.5)


# ----------------------------------------------------------------------------- declarations
def test_policies_are_an_explicit_registry_without_helpers():
  assert set(lp.POLICIES) == {p.__name__ for p, _ in ALL_POLICIES}
  for helper in ("complete_lr_policy_params", "policy_declarations", "LRPolicySchedule"):
    assert helper not in lp.POLICIES


@pytest.mark.parametrize("policy", list(lp.POLICIES.values()), ids=list(lp.POLICIES))
def test_every_policy_parameter_has_a_one_line_description(policy):
  declared = lp.policy_declarations(policy)
  assert "global_step" not in declared and "learning_rate" in declared
  for key, param in declared.items():
    assert param.doc and "\n" not in param.doc, f"{policy.__name__}.{key} has no description"
    assert param.doc[0].isupper() and "``" not in param.doc
