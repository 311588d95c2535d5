"""Every OpenSeq2Seq summary name ends up in TensorBoard, only when asked for and when due."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import validate_top_level
from open_seq2seq.errors import ConfigError
from open_seq2seq.models.model import Model
from open_seq2seq.optimizers import variable_path
from open_seq2seq.training.step_summaries import SUMMARY_NAMES, VariableSummaries
from open_seq2seq.training.trainer import Trainer
from tests.helpers import linear


def read_events(logdir):
  """``{tag: [(step, plugin, value)]}`` of every event file directly in ``logdir``."""
  found = {}
  for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        found.setdefault(value.tag, []).append(
            (event.step, value.metadata.plugin_data.plugin_name, tf.make_ndarray(value.tensor)))
  return found


def test_every_summary_name_is_written_at_summary_steps(tmp_path):
  eta, lr = 0.01, 0.1
  trainer = linear.trainer(str(tmp_path), summaries=list(SUMMARY_NAMES),
                           save_summaries_steps=2, max_steps=2,
                           optimizer_params={"learning_rate": lr}, max_grad_norm=100.0,
                           loss_scaling="Backoff", larc_params={"larc_eta": eta})
  model = trainer.model
  trainer.train(model.data_layer)
  events = read_events(str(tmp_path))
  paths = [variable_path(v) for v in (model.encoder.kernel, model.encoder.bias)]
  assert paths == ["encoder/kernel", "encoder/bias"]
  expected = {f"train/{name}": "scalars" for name in (
      "loss", "learning_rate", "global_gradient_norm", "global_clipped_gradient_norm",
      "loss_scale", "step_time", "examples_per_s")}  # throughput: always, for curves
  for path in paths:
    expected.update({f"gradients/{path}": "histograms", f"variables/{path}": "histograms"})
    for name in ("gradient_norm", "variable_norm", "larc_grad_update", "larc_final_lr",
                 "larc_clip_on"):
      expected[f"{name}/{path}"] = "scalars"
  assert set(events) == set(expected)
  for tag, plugin in expected.items():
    assert [(step, kind) for step, kind, _ in events[tag]] == [(2, plugin)], tag

  def value(tag):
    return events[tag][0][2]

  final = linear.weights(model)
  for path, weight in zip(paths, final):
    # variables are read after the update of the step they are labelled with
    assert float(value(f"variable_norm/{path}")) == pytest.approx(np.linalg.norm(weight),
                                                                  rel=1e-5)
    histogram = value(f"variables/{path}")  # rows of (left edge, right edge, count)
    assert histogram[:, 2].sum() == weight.size
    assert histogram[0, 0] == pytest.approx(weight.min(), rel=1e-5)
    factor = float(value(f"larc_grad_update/{path}"))
    assert float(value(f"larc_final_lr/{path}")) == pytest.approx(lr * factor, rel=1e-6)
    assert float(value(f"larc_clip_on/{path}")) == float(factor < 1.0)
  assert float(value("train/loss_scale")) == 2.0 ** 14
  # the gradients of step 2 (no clipping at norm 100, LARC after the summary)
  grads = linear.gradients(*after_one_step(lr, eta))
  for path, grad in zip(paths, grads):
    assert float(value(f"gradient_norm/{path}")) == pytest.approx(np.linalg.norm(grad), rel=1e-4)
  assert float(value("train/global_gradient_norm")) == pytest.approx(
      np.sqrt(sum(np.sum(g * g) for g in grads)), rel=1e-4)


def after_one_step(lr, eta):
  """Weights after one SGD + LARC (clip) step of the linear model, in numpy."""
  out = []
  for w, g in zip([linear.W0, linear.B0], linear.gradients(linear.W0, linear.B0)):
    w = w.astype(np.float64)
    factor = min(max(eta * np.linalg.norm(w) / (lr * (np.linalg.norm(g) + 1e-7)), 1e-7), 1.0)
    out.append(w - lr * factor * g)
  return out


def test_default_summaries_add_nothing_to_the_step():
  trainer, _ = linear.built(summaries=["learning_rate", "global_gradient_norm", "loss_scale"],
                            max_grad_norm=1.0)
  model = trainer.model
  function = trainer.step.function()
  assert isinstance(function, tf.types.experimental.PolymorphicFunction)  # no wrapper
  values = function(iter(model.data_layer.build_dataset()))
  assert "summaries" not in values
  assert "global_clipped_gradient_norm" in values


def test_gradient_norms_come_from_the_step_only_when_asked():
  trainer, _ = linear.built(summaries=["gradient_norm"])
  model = trainer.model
  values = trainer.step.function()(iter(model.data_layer.build_dataset()))
  summaries = values["summaries"]
  assert isinstance(summaries, VariableSummaries)
  assert summaries.histograms() == {}
  norms = summaries.scalars()
  grads = linear.gradients(linear.W0, linear.B0)
  assert norms == pytest.approx({"gradient_norm/encoder/kernel": np.linalg.norm(grads[0]),
                                 "gradient_norm/encoder/bias": np.linalg.norm(grads[1])},
                                rel=1e-5)
  assert "global_clipped_gradient_norm" not in values  # no max_grad_norm


BASE = {"data_layer": linear.RowsLayer, "encoder": linear.AffineEncoder,
        "decoder": linear.PassDecoder, "batch_size_per_gpu": 1}


def test_unknown_summary_name_is_a_config_error_with_a_suggestion():
  with pytest.raises(ConfigError, match=r"^summaries: unknown summary 'gradient_norms'; did "
                                        r"you mean 'gradient_norm'\? valid names are "):
    validate_top_level(Model, {**BASE, "summaries": ["learning_rate", "gradient_norms"]})
  with pytest.raises(ConfigError, match=r"^summaries: expected list of summary names"):
    validate_top_level(Model, {**BASE, "summaries": "gradients"})
  assert validate_top_level(Model, {**BASE, "summaries": []})["summaries"] == []
  assert set(validate_top_level(Model, {**BASE, "summaries": list(SUMMARY_NAMES)})["summaries"]) \
      == {"learning_rate", "gradients", "variables", "variable_norm", "gradient_norm",
          "global_gradient_norm", "loss_scale", "larc_summaries"}
