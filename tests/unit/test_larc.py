"""LARC: the per-variable factors against numpy, its place in the train step, and its config."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import validate_top_level
from open_seq2seq.errors import ConfigError
from open_seq2seq.models.model import Model
from open_seq2seq.optimizers import apply_larc
from tests.helpers import linear


def larc_reference(grads, weights, lr, eta, mode="clip", min_update=1e-7, epsilon=1e-7):
  """OpenSeq2Seq's rule in float64: factor from eta * ||w|| / ||g||, per variable."""
  out, factors = [], []
  for g, w in zip(grads, weights):
    g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
    ratio = eta * np.linalg.norm(w) / (np.linalg.norm(g) + epsilon)
    if mode == "clip":
      factor = min(max(ratio / lr, min_update), 1.0)
    else:
      factor = max(ratio, min_update)
    out.append(g * factor)
    factors.append(factor)
  return out, factors


def _case():
  rng = np.random.default_rng(1)
  weights = [rng.normal(size=(4, 3)), rng.normal(size=(3,)) * 1e-3, np.zeros(5),
             rng.normal(size=())]
  grads = [rng.normal(size=(4, 3)) * 1e-2, rng.normal(size=(3,)), rng.normal(size=5),
           np.array(2.0)]
  return ([np.asarray(w, np.float32) for w in weights],
          [np.asarray(g, np.float32) for g in grads])


@pytest.mark.parametrize("mode,eta,min_update", [("clip", 0.02, 1e-7), ("scale", 0.02, 1e-7),
                                                 ("clip", 0.02, 0.05), ("scale", 1e-3, 0.3)])
def test_larc_matches_numpy(mode, eta, min_update):
  weights, grads = _case()
  lr = 0.5
  got, values = apply_larc([tf.constant(g) for g in grads],
                           [tf.Variable(w) for w in weights], tf.constant(lr), larc_eta=eta,
                           larc_mode=mode, min_update=min_update)
  want, factors = larc_reference(grads, weights, lr, eta, mode, min_update)
  for g, w in zip(got, want):
    np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-12)
  np.testing.assert_allclose([f.numpy() for f in values["larc_grad_update"]], factors, rtol=1e-5)
  np.testing.assert_allclose([f.numpy() for f in values["larc_final_lr"]],
                             np.array(factors) * lr, rtol=1e-5)
  if mode == "clip":
    # the zero weight's factor is floored at min_update; the large ones are capped at 1
    ratios = [0.02 * np.linalg.norm(w) / lr / (np.linalg.norm(g) + 1e-7)
              for g, w in zip(grads, weights)]
    assert [c.numpy() for c in values["larc_clip_on"]] == [float(max(r, min_update) < 1)
                                                           for r in ratios]
    assert 0.0 < min(factors) and max(factors) == 1.0
  else:
    assert "larc_clip_on" not in values
  assert min(factors) == pytest.approx(min_update)


def test_train_step_applies_larc_after_clipping():
  # SGD: w1 = w0 - lr * larc(clip_by_global_norm(g)); OpenSeq2Seq clipped first
  lr, eta, max_norm = 0.1, 0.01, 0.5
  trainer, step = linear.built(optimizer_params={"learning_rate": lr}, max_grad_norm=max_norm,
                               larc_params={"larc_eta": eta, "larc_mode": "clip"})
  model = trainer.model
  values = step()
  grads = linear.gradients(linear.W0, linear.B0)
  norm = np.sqrt(sum(np.sum(g * g) for g in grads))
  assert values["global_gradient_norm"] == pytest.approx(norm, rel=1e-5)
  clipped = [g * max_norm / max(norm, max_norm) for g in grads]
  scaled, factors = larc_reference(clipped, [linear.W0, linear.B0], lr, eta)
  assert min(factors) < 1.0  # LARC changes this step
  for got, w0, g in zip(linear.weights(model), [linear.W0, linear.B0], scaled):
    np.testing.assert_allclose(got, w0 - lr * g, rtol=1e-5, atol=1e-8)
  assert trainer.global_step == 1


def test_train_step_scale_mode_replaces_the_rate():
  lr, eta = 0.1, 0.05
  trainer, step = linear.built(optimizer_params={"learning_rate": lr},
                               larc_params={"larc_eta": eta, "larc_mode": "scale"})
  model = trainer.model
  step()
  grads = linear.gradients(linear.W0, linear.B0)
  scaled, _ = larc_reference(grads, [linear.W0, linear.B0], lr, eta, "scale")
  for got, w0, g in zip(linear.weights(model), [linear.W0, linear.B0], scaled):
    np.testing.assert_allclose(got, w0 - lr * g, rtol=1e-5, atol=1e-8)


BASE = {"data_layer": linear.RowsLayer, "encoder": linear.AffineEncoder,
        "decoder": linear.PassDecoder, "batch_size_per_gpu": 1}


def test_larc_params_config_defaults_and_errors():
  params = validate_top_level(Model, {**BASE, "larc_params": {"larc_eta": 2}})
  assert params["larc_params"] == {"larc_eta": 2.0, "larc_mode": "clip", "min_update": 1e-7,
                                   "epsilon": 1e-7}
  assert validate_top_level(Model, BASE)["larc_params"] is None
  for bad, message in [
      ({"larc_eta": 0.1, "larc_mod": "scale"},
       r"^larc_params/larc_mod: .*did you mean 'larc_mode'"),
      ({"larc_eta": 0.1, "larc_mode": "clamp"},
       r"^larc_params/larc_mode: 'clamp' is not one of"),
      ({"larc_mode": "clip"}, r"^larc_params/larc_eta: required"),
      ({"larc_eta": 0.0}, r"^larc_params/larc_eta: must be a positive number"),
      ({"larc_eta": 0.1, "min_update": -1}, r"^larc_params/min_update: must be a non-negative"),
      ("clip", r"^larc_params: expected dict or None"),
  ]:
    with pytest.raises(ConfigError, match=message):
      validate_top_level(Model, {**BASE, "larc_params": bad})


def test_larc_params_command_line_override():
  from open_seq2seq.config import load_config  # pylint: disable=import-outside-toplevel
  from tests.helpers import toy  # pylint: disable=import-outside-toplevel
  _, configs = load_config(toy.TOY_CONFIG, "train", ["--larc_params={'larc_eta': 0.002}",
                                                     "--larc_params/larc_mode=scale"])
  assert configs["train"]["larc_params"] == {"larc_eta": 0.002, "larc_mode": "scale",
                                             "min_update": 1e-7, "epsilon": 1e-7}
  with pytest.raises(ConfigError, match="did you mean 'min_update'"):
    load_config(toy.TOY_CONFIG, "train", ["--larc_params={'larc_eta': 0.002}",
                                          "--larc_params/min_updates=0.1"])
