"""NovoGrad: the update rule against numpy, its config entry, and training through TrainStep
(loss scaling, iter_size, towers, checkpoints)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.optimizers import (NovoGrad, get_optimizer, optimizer_declarations,
                                     validate_optimizer_params)
from tests.helpers import linear


def novograd_reference(weights, grads_per_step, lr, beta1=0.95, beta2=0.98, epsilon=1e-8,
                       weight_decay=0.0, grad_averaging=False, grad_fn=None):
  """The NovoGrad rule in float64: per variable a scalar moving average of ||g||^2 (started
  at the first non-zero norm), m = beta1 m + (g / sqrt(v + eps) + wd w) [* (1 - beta1)],
  w -= lr m. Gradients come from ``grads_per_step`` or ``grad_fn(weights)``."""
  weights = [np.array(w, np.float64) for w in weights]
  m = [np.zeros_like(w) for w in weights]
  v = [0.0 for _ in weights]
  steps = len(grads_per_step) if grad_fn is None else grads_per_step
  for t in range(steps):
    grads = grad_fn(weights) if grad_fn is not None else grads_per_step[t]
    for i, g in enumerate(grads):
      g = np.asarray(g, np.float64)
      norm_sq = float(np.sum(g * g))
      v[i] = norm_sq if v[i] == 0.0 else beta2 * v[i] + (1 - beta2) * norm_sq
      d = g / np.sqrt(v[i] + epsilon) + weight_decay * weights[i]
      if grad_averaging:
        d = d * (1 - beta1)
      m[i] = beta1 * m[i] + d
      weights[i] = weights[i] - lr * m[i]
  return weights, m, v


SHAPES = [(3, 4), (5,), (), (2, 2, 3)]


@pytest.mark.parametrize("weight_decay,grad_averaging", [(0.0, False), (0.01, False),
                                                         (0.0, True), (0.05, True)])
def test_update_rule_matches_numpy_over_several_steps(weight_decay, grad_averaging):
  rng = np.random.default_rng(0)
  initial = [rng.normal(size=s).astype(np.float32) for s in SHAPES]
  grads = [[rng.normal(size=s).astype(np.float32) * 10 ** rng.uniform(-3, 1) for s in SHAPES]
           for _ in range(6)]
  grads[0][1] = np.zeros(SHAPES[1], np.float32)  # a variable without gradient at first
  variables = [keras.Variable(w, name=f"w{i}") for i, w in enumerate(initial)]
  optimizer = NovoGrad(learning_rate=0.05, beta1=0.9, beta2=0.5, epsilon=1e-6,
                       weight_decay=weight_decay, grad_averaging=grad_averaging)
  optimizer.build(variables)

  @tf.function
  def apply(step_grads):
    optimizer.apply_gradients(zip(step_grads, variables))

  for step_grads in grads:
    apply([tf.constant(g) for g in step_grads])
  expected, m, v = novograd_reference(initial, grads, 0.05, 0.9, 0.5, 1e-6, weight_decay,
                                      grad_averaging)
  for variable, want in zip(variables, expected):
    np.testing.assert_allclose(variable.numpy(), want, rtol=2e-5, atol=1e-6)
  for slot, want in zip(optimizer._momentums, m):
    np.testing.assert_allclose(slot.numpy(), want, rtol=2e-5, atol=1e-6)
  for slot, want in zip(optimizer._norm_averages, v):
    np.testing.assert_allclose(slot.numpy(), want, rtol=2e-5)
  assert int(optimizer.iterations.numpy()) == len(grads)


def test_beta2_zero_is_openseq2seq_per_step_norm():
  # OpenSeq2Seq's TF 1 graph never stored its average: each step used ||g||^2 alone.
  variable = keras.Variable(np.zeros(3, np.float32))
  optimizer = NovoGrad(learning_rate=1.0, beta1=0.0, beta2=0.0, epsilon=0.0)
  for g in ([3.0, 4.0, 0.0], [0.0, 0.0, 0.5]):
    before = variable.numpy().copy()
    optimizer.apply_gradients([(tf.constant(g), variable)])
    step = before - variable.numpy()
    np.testing.assert_allclose(np.linalg.norm(step), 1.0, rtol=1e-6)  # unit step each time


def test_state_is_float32_for_float16_weights():
  variable = keras.Variable(np.ones(4, np.float16), dtype="float16")
  optimizer = NovoGrad(learning_rate=1e-3, weight_decay=0.1)
  optimizer.apply_gradients([(tf.constant([1e-4, 0, 0, 0], tf.float16), variable)])
  slots = optimizer._momentums + optimizer._norm_averages
  assert all(slot.dtype == "float32" for slot in slots)
  assert variable.dtype == "float16"
  # ||g||^2 = 1e-8 is below float16's range; the float32 average keeps it
  assert optimizer._norm_averages[0].numpy() == pytest.approx(1e-8, rel=1e-2)


def test_config_entry_openseq2seq_names_and_defaults():
  optimizer = get_optimizer("novograd", {"beta1": 0.9, "beta2": 0.25, "weight_decay": 0.001,
                                         "grad_averaging": True, "use_locking": False}, 0.01)
  assert isinstance(optimizer, NovoGrad)
  assert (optimizer.beta1, optimizer.beta2, optimizer.decay_rate,
          optimizer.grad_averaging) == (0.9, 0.25, 0.001, True)
  assert optimizer.weight_decay is None  # not Keras' decoupled decay on top
  declared = optimizer_declarations("NovoGrad")
  assert {k: declared[k].default for k in ("learning_rate", "beta1", "beta2", "epsilon",
                                           "weight_decay", "grad_averaging")} == {
      "learning_rate": 1.0, "beta1": 0.95, "beta2": 0.98, "epsilon": 1e-8,
      "weight_decay": 0.0, "grad_averaging": False}
  assert "normalised gradient" in declared["weight_decay"].doc
  assert all(param.doc for param in declared.values())
  with pytest.raises(ConfigError, match="did you mean 'beta1'"):
    validate_optimizer_params("NovoGrad", {"beta_1": 0.9})
  with pytest.raises(ConfigError, match="grad_averaging: expected bool"):
    validate_optimizer_params("NovoGrad", {"grad_averaging": "yes"})
  with pytest.raises(ConfigError, match="set the top-level 'max_grad_norm'"):
    validate_optimizer_params("NovoGrad", {"global_clipnorm": 1.0})
  with pytest.raises(ConfigError, match="beta1 must be in"):
    get_optimizer("NovoGrad", {"beta1": 1.5}, 0.01)
  restored = NovoGrad.from_config(optimizer.get_config())
  assert (restored.beta2, restored.decay_rate) == (0.25, 0.001)


# ----------------------------------------------------------------------------- through TrainStep
NOVOGRAD = {"learning_rate": 0.02, "beta1": 0.9, "beta2": 0.7, "weight_decay": 0.01,
            "grad_averaging": True}


@pytest.mark.parametrize("extra", [
    {},
    {"batch_size_per_gpu": 2, "iter_size": 2, "loss_scaling": 1024.0},
    {"batch_size_per_gpu": 2, "iter_size": 2, "loss_scaling": "Backoff"},
], ids=["plain", "iter_size_static_scale", "iter_size_backoff"])
def test_train_step_novograd_matches_numpy(extra):
  trainer, step = linear.built(optimizer="NovoGrad", optimizer_params=NOVOGRAD, **extra)
  model = trainer.model
  for _ in range(4):
    assert not step()["skipped"]
  expected, _, _ = novograd_reference(
      [linear.W0, linear.B0], 4, 0.02, 0.9, 0.7, 1e-8, 0.01, True,
      grad_fn=lambda w: linear.gradients(*w))
  for got, want in zip(linear.weights(model), expected):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_train_step_novograd_checkpoint_round_trip(tmp_path):
  def fresh():
    return linear.built(str(tmp_path), optimizer="NovoGrad", optimizer_params=NOVOGRAD)

  trainer, step = fresh()
  step()
  step()
  trainer.make_store().save(trainer.global_step)
  reference_state = [np.array(v.numpy()) for v in trainer.optimizer.variables]
  step()
  after_three = linear.weights(trainer.model)

  restored, restored_step = fresh()
  assert restored.make_store().restore_latest()[0]
  assert restored.global_step == 2
  for variable, want in zip(restored.optimizer.variables, reference_state):
    np.testing.assert_array_equal(variable.numpy(), want)
  assert any(np.any(v.numpy() != 0) for v in restored.optimizer._norm_averages)
  restored_step()
  for got, want in zip(linear.weights(restored.model), after_three):
    np.testing.assert_array_equal(got, want)


# ----------------------------------------------------------------------------- towers
@pytest.mark.slow
def test_novograd_under_towers_and_iter_size_matches_one_device(tmp_path):
  """2 CPU towers x batch 8, and batch 8 x iter_size 2 with loss scaling, equal one batch of
  16 (run.py processes: logical devices must be set before TensorFlow starts)."""
  from tests.helpers import distributed as h  # pylint: disable=import-outside-toplevel
  data = h.make_data(str(tmp_path / "data"))
  config = h.write_config(str(tmp_path), data)
  novograd = ["--optimizer=NovoGrad", "--optimizer_params/weight_decay=0.001",
              "--optimizer_params/grad_averaging=True"]

  def run(name, *extra):
    logdir = str(tmp_path / name)
    result = h.run("single", [f"--config_file={config}", "--mode=train", f"--logdir={logdir}",
                              *novograd, *extra])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return h.weights(logdir), result.stdout

  reference, _ = run("single", "--batch_size_per_gpu=16")
  towers, stdout = run("towers", "--batch_size_per_gpu=8", "--cpu_towers=2")
  assert "2 replica(s)" in stdout
  accumulated, _ = run("iter_size", "--batch_size_per_gpu=8", "--iter_size=2",
                       "--loss_scaling=Backoff")
  # NovoGrad's state is saved: iterations, learning rate, then per variable m and scalar v
  state = [reference[k] for k in reference if k.startswith("optimizer/")]
  weights = [k for k in reference if k.startswith("model/")]
  assert len(state) == 2 + 2 * len(weights)
  assert sum(a.shape == () for a in state) == 2 + len(weights)
  assert h.max_difference(towers, reference) < 1e-4
  # the loss scaler's state is saved too: compare what both runs hold
  assert h.max_difference({k: accumulated[k] for k in reference}, reference) < 1e-4
