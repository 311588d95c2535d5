"""Moving averages of the weights (``moving_average_decay``, training/moving_average.py): the
update against numpy, after the last update group; checkpoints and an exact resume; evals,
eval/infer/export restores and towers use the averages; a run without them is unchanged."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq import cli
from open_seq2seq.config import load_config
from open_seq2seq.distributed.backend import Backend
from open_seq2seq.errors import CheckpointError, ConfigError
from open_seq2seq.models.model import Model
from open_seq2seq.training import averaging
from open_seq2seq.training.checkpoints import latest_checkpoint
from open_seq2seq.training.evaluator import Evaluator
from open_seq2seq.training.moving_average import MovingAverage, decay_at
from open_seq2seq.training.run_params import RUN_PARAMS
from open_seq2seq.training.run_rules import check_run_settings
from open_seq2seq.training.train_step import TrainStep
from tests.helpers import distributed as h
from tests.helpers import linear

KERNEL, BIAS = "encoder.kernel", "encoder.bias"
SHADOW = "moving_average/shadows/{}/.ATTRIBUTES/VARIABLE_VALUE"
WEIGHT = "model/weights/{}/.ATTRIBUTES/VARIABLE_VALUE"


def _key(template, name):
  return template.format(name.replace(".", ".."))


def _tensors(path):
  reader = tf.train.load_checkpoint(path)
  return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
          if k.endswith("VARIABLE_VALUE") and not k.startswith("save_counter")}


def _train(logdir, steps, resume=False, **params):
  params = {"moving_average_decay": 0.3, **params}
  trainer = linear.trainer(str(logdir), max_steps=steps, save_checkpoint_steps=1, **params)
  trainer.train(trainer.model.data_layer, continue_learning=resume)
  return trainer


def _loss(w, b):
  y = linear.X.astype(np.float64) @ w + b
  return 0.5 * float(np.sum(y ** 2)) / len(y)


# ------------------------------------------------------------------------------ the update
def test_the_averages_follow_the_warm_up_rule_against_numpy():
  assert decay_at(0.9999, 1) == pytest.approx(2 / 11)
  assert decay_at(0.3, 2) == pytest.approx(3 / 12) and decay_at(0.3, 3) == 0.3
  trainer, step = linear.built(moving_average_decay=0.3)
  averages = trainer.step.moving_average
  assert sorted(averages.names) == [BIAS, KERNEL]
  assert all(s.dtype == tf.float32 for s in averages.shadows)
  w, b = linear.W0.astype(np.float64), linear.B0.astype(np.float64)
  shadow_w = shadow_b = None
  for t in range(1, 7):
    dw, db = linear.gradients(w, b)
    w, b = w - 0.1 * dw, b - 0.1 * db
    if t == 1:  # the run's first update: the weights themselves
      shadow_w, shadow_b = w, b
    else:  # 3/12 at t=2, then the decay (0.3) from t=3
      d = min(0.3, (1 + t) / (10 + t))
      shadow_w, shadow_b = d * shadow_w + (1 - d) * w, d * shadow_b + (1 - d) * b
    step()
    got = {name: s.numpy() for name, s in zip(averages.names, averages.shadows)}
    np.testing.assert_allclose(got[KERNEL], shadow_w, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got[BIAS], shadow_b, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(linear.weights(trainer.model)[0], w, rtol=1e-5, atol=1e-7)
  assert np.abs(shadow_w - w).max() > 1e-3  # the averages lag the weights


def test_float32_shadows_of_float16_weights_skips_and_the_swap():
  variable = tf.Variable(np.array([1.0, 2.0], np.float16))
  averages = MovingAverage(0.9)
  averages.build({"v": variable}, [variable])
  assert averages.shadows[0].dtype == tf.float32
  update = tf.function(averages.update)
  variable.assign([3.0, 4.0])
  update(tf.constant(1, tf.int64), tf.constant(False))
  np.testing.assert_array_equal(averages.shadows[0].numpy(), [3.0, 4.0])
  variable.assign([5.0, 6.0])
  update(tf.constant(1, tf.int64), tf.constant(True))  # a skipped update changes nothing
  np.testing.assert_array_equal(averages.shadows[0].numpy(), [3.0, 4.0])
  update(tf.constant(2, tf.int64), tf.constant(False))  # decay min(0.9, 3/12)
  np.testing.assert_allclose(averages.shadows[0].numpy(), [4.5, 5.5], rtol=1e-6)
  with averages.swapped_in():
    assert variable.dtype == tf.float16
    np.testing.assert_array_equal(variable.numpy(), np.array([4.5, 5.5], np.float16))
  np.testing.assert_array_equal(variable.numpy(), [5.0, 6.0])


def test_a_skipped_first_update_does_not_start_the_averages():
  variable = tf.Variable([1.0])
  averages = MovingAverage(0.5)
  averages.build({"v": variable}, [variable])
  variable.assign([7.0])
  averages.update(tf.constant(0, tf.int64), tf.constant(True))
  assert not bool(averages.started.numpy())
  with averages.swapped_in():  # nothing to swap in before the first update
    np.testing.assert_array_equal(variable.numpy(), [7.0])


@pytest.mark.parametrize("value", [0.0, 1.0, 1.5, -0.1])
def test_a_decay_outside_0_1_is_a_one_line_error(value):
  params = {key: param.default for key, param in RUN_PARAMS.items()}
  params.update(max_steps=10, moving_average_decay=value)
  with pytest.raises(ConfigError, match=r"^moving_average_decay: must be between 0 and 1"):
    check_run_settings(params, "train")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  root = tmp_path_factory.mktemp("ema")
  data = h.make_data(str(root / "data"))
  return root, h.write_config(str(root), data), h.write_config(str(root), data,
                                                               two_optimizers=True)


def test_the_averages_are_updated_after_the_last_update_group(tiny):
  _, _, config = tiny
  cls, loaded = load_config(config, "train", ["--moving_average_decay=0.5"])
  model = cls(loaded["train"], "train")
  step = TrainStep(model, loaded["train"], Backend(), max_steps=3, steps_per_epoch=None,
                   count_units=model.data_layer.count_units)
  batch = next(iter(model.data_layer.build_dataset()))
  step.build(batch, is_chief=False)
  averages = step.moving_average
  assert {id(v) for v in averages.variables} == {id(v) for v in step.variables}
  assert len(step.groups) == 2 and all(g.variables for g in step.groups)
  function = step.function()
  function(iter([batch]))
  first = [np.array(v.numpy(), np.float64) for v in averages.variables]
  function(iter([batch]))
  second = [np.array(v.numpy(), np.float64) for v in averages.variables]
  d = min(0.5, 3 / 12)
  for shadow, w1, w2 in zip(averages.shadows, first, second):
    # both groups' variables as the step left them (the critic's before the generator's
    # update, the generator's after it)
    np.testing.assert_allclose(shadow.numpy(), d * w1 + (1 - d) * w2, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------ checkpoints
def test_a_resumed_run_continues_exactly_shadows_included(tmp_path, capsys):
  straight = _train(tmp_path / "straight", 5)
  _train(tmp_path / "split", 2)
  resumed = _train(tmp_path / "split", 5, resume=True)
  assert resumed.global_step == straight.global_step == 5
  a, b = _tensors(str(tmp_path / "split" / "ckpt-5")), _tensors(str(tmp_path / "straight" /
                                                                    "ckpt-5"))
  assert sorted(a) == sorted(b)
  assert {_key(SHADOW, KERNEL), _key(SHADOW, BIAS), "moving_average/started/.ATTRIBUTES/"
          "VARIABLE_VALUE"} <= set(a)
  for key in a:
    np.testing.assert_array_equal(a[key], b[key], err_msg=key)
  assert np.abs(a[_key(SHADOW, KERNEL)] - a[_key(WEIGHT, KERNEL)]).max() > 1e-3
  assert "Keeping moving averages of 2 trained variables (moving_average_decay 0.3)" in \
      capsys.readouterr().out


def test_a_run_without_the_key_is_unchanged(tmp_path):
  trainer, _ = linear.built()
  assert trainer.step.moving_average is None
  assert set(trainer.step.state()) == {"optimizer", "skipped_steps", "tokens_seen"}
  _train(tmp_path / "plain", 2, moving_average_decay=None)
  _train(tmp_path / "ema", 2)
  plain = set(_tensors(str(tmp_path / "plain" / "ckpt-2")))
  ema = set(_tensors(str(tmp_path / "ema" / "ckpt-2")))
  assert not [k for k in plain if k.startswith("moving_average")]
  assert plain == {k for k in ema if not k.startswith("moving_average/")}


def test_resuming_a_run_trained_without_averages_starts_them(tmp_path, capsys):
  _train(tmp_path, 2, moving_average_decay=None)
  trainer = _train(tmp_path, 3, resume=True)
  out = capsys.readouterr().out
  assert f"notice: moving_average_decay: {tmp_path}/ckpt-2 holds no moving averages of the " \
         f"weights (it was trained without them): they start from the weights of the next " \
         f"update" in out
  tensors = _tensors(str(tmp_path / "ckpt-3"))
  np.testing.assert_array_equal(tensors[_key(SHADOW, KERNEL)], tensors[_key(WEIGHT, KERNEL)])
  assert trainer.global_step == 3
  _train(tmp_path, 4, resume=True, moving_average_decay=None)
  assert "holds moving averages of the weights, but moving_average_decay is not set" in \
      capsys.readouterr().out
  assert not [k for k in _tensors(str(tmp_path / "ckpt-4")) if k.startswith("moving_average")]


# ------------------------------------------------------------------------------ eval
class OnePassRows(linear.RowsLayer):
  """The four rows once (an eval set that ends, so that its evals choose best checkpoints)."""

  def build_dataset(self) -> tf.data.Dataset:
    return super().build_dataset().take(1)


def _eval_layer():
  return Model(linear.config(data_layer=OnePassRows), "eval").data_layer


def test_evals_in_training_use_the_averages_and_leave_training_unchanged(tmp_path):
  with_evals = linear.trainer(str(tmp_path / "evals"), max_steps=4, eval_steps=1,
                              moving_average_decay=0.3)
  last = with_evals.train(with_evals.model.data_layer, _eval_layer())
  _train(tmp_path / "plain", 4)
  a, b = _tensors(str(tmp_path / "evals" / "ckpt-4")), _tensors(str(tmp_path / "plain" /
                                                                    "ckpt-4"))
  for key in b:  # the evals put the weights back: training is the run's without them
    np.testing.assert_array_equal(a[key], b[key], err_msg=key)
  shadows = [a[_key(SHADOW, KERNEL)].astype(np.float64), a[_key(SHADOW, BIAS)]]
  weights = [a[_key(WEIGHT, KERNEL)].astype(np.float64), a[_key(WEIGHT, BIAS)]]
  assert last["eval_loss"] == pytest.approx(_loss(*shadows), rel=1e-5)
  assert abs(_loss(*shadows) - _loss(*weights)) > 1e-3
  # the best checkpoint is saved with the weights, not the averages swapped in
  with open(tmp_path / "evals" / "best_models" / "best.json", encoding="utf-8") as f:
    best_step = json.load(f)["step"]
  best = _tensors(latest_checkpoint(str(tmp_path / "evals"), best=True))
  same_step = _tensors(str(tmp_path / "plain" / f"ckpt-{best_step}"))
  for key in same_step:
    np.testing.assert_array_equal(best[key], same_step[key], err_msg=key)
  metrics = with_evals.evaluate(_eval_layer())
  assert metrics["loss"] == pytest.approx(_loss(*shadows), rel=1e-5)
  np.testing.assert_array_equal(with_evals.model.encoder.kernel.numpy(),
                                a[_key(WEIGHT, KERNEL)])


def _restored(path, **evaluator_args):
  model = linear.model()
  evaluator = Evaluator(model, Backend(), **evaluator_args)
  evaluator.ensure_variables(next(iter(model.data_layer.build_dataset())))
  evaluator.restore(path)
  return model.encoder.kernel.numpy(), model.encoder.bias.numpy()


def test_eval_infer_and_export_restores_load_the_averages(tmp_path, capsys):
  _train(tmp_path / "ema", 3)
  path = str(tmp_path / "ema" / "ckpt-3")
  tensors = _tensors(path)
  capsys.readouterr()
  kernel, bias = _restored(path, moving_average_decay=0.3)
  np.testing.assert_array_equal(kernel, tensors[_key(SHADOW, KERNEL)])
  np.testing.assert_array_equal(bias, tensors[_key(SHADOW, BIAS)])
  assert f"notice: moving_average_decay: the model's weights are the moving averages saved " \
         f"in {path} (2 variables)" in capsys.readouterr().out
  kernel, _ = _restored(path)  # the key unset (--moving_average_decay=None): the weights
  np.testing.assert_array_equal(kernel, tensors[_key(WEIGHT, KERNEL)])
  assert "moving_average" not in capsys.readouterr().out

  _train(tmp_path / "plain", 3, moving_average_decay=None)
  plain = str(tmp_path / "plain" / "ckpt-3")
  capsys.readouterr()
  kernel, _ = _restored(plain, moving_average_decay=0.3)
  np.testing.assert_array_equal(kernel, _tensors(plain)[_key(WEIGHT, KERNEL)])
  assert f"notice: moving_average_decay is set, but {plain} holds no moving averages of the " \
         f"weights (trained without them): using its weights" in capsys.readouterr().out


def test_run_py_eval_and_export_use_the_averages(tiny, tmp_path, capsys):
  """The command line hands the run's key to eval and export (cli.py)."""
  _, config, _ = tiny
  logdir = str(tmp_path / "run")
  common = [f"--config_file={config}", f"--logdir={logdir}"]
  assert cli.main(common + ["--mode=train", "--moving_average_decay=0.5"]) == 0
  tensors = _tensors(latest_checkpoint(logdir))
  shadows = {k: v for k, v in tensors.items() if k.startswith("moving_average/shadows/")}
  assert shadows
  capsys.readouterr()
  assert cli.main(common + ["--mode=eval"]) == 0  # the run's override is remembered
  assert "the model's weights are the moving averages saved in" in capsys.readouterr().out
  export_dir = str(tmp_path / "exported")
  assert cli.main(common + ["--mode=export", f"--export_dir={export_dir}"]) == 0
  exported = list(_tensors(os.path.join(export_dir, "variables", "variables")).values())

  def in_export(value):
    return any(e.shape == value.shape and np.array_equal(e, value) for e in exported)

  found = 0  # (the decoder's embedding of the previous target is not used at inference)
  for key, shadow in shadows.items():
    weight = tensors[key.replace("moving_average/shadows/", "model/weights/")]
    assert not np.array_equal(weight, shadow), key
    if in_export(weight) or in_export(shadow):
      found += 1
      assert in_export(shadow) and not in_export(weight), key
  assert found >= len(shadows) - 1 >= 6


def test_averaged_checkpoints_average_the_shadows_too(tmp_path, capsys):
  _train(tmp_path / "run", 3)
  paths = [str(tmp_path / "run" / f"ckpt-{s}") for s in (2, 3)]
  spec = importlib.util.spec_from_file_location(
      "average_checkpoints", os.path.join(h.ROOT, "scripts", "average_checkpoints.py"))
  script = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(script)
  capsys.readouterr()
  assert script.main(["--checkpoints", *paths, "--output_dir", str(tmp_path / "avg")]) == 0
  assert "2 model variables averaged (and their 2 moving averages)" in capsys.readouterr().out
  sources = [_tensors(p) for p in paths]
  out = _tensors(str(tmp_path / "avg" / "ckpt-3"))
  for name in (KERNEL, BIAS):
    key = _key(SHADOW, name)
    np.testing.assert_allclose(out[key], (sources[0][key].astype(np.float64) +
                                          sources[1][key]) / 2, rtol=1e-6)
  kernel, _ = _restored(str(tmp_path / "avg" / "ckpt-3"), moving_average_decay=0.3)
  np.testing.assert_array_equal(kernel, out[_key(SHADOW, KERNEL)])


def test_checkpoints_with_and_without_averages_are_not_averaged_together(tmp_path):
  _train(tmp_path / "plain", 2, moving_average_decay=None)
  _train(tmp_path / "ema", 2)
  with pytest.raises(CheckpointError, match=r"differ at moving_average/shadows/encoder\.\.bias"
                     r"/.* \(in ckpt-2 but not in ckpt-2, and 2 more key\(s\)\)"):
    averaging.average_checkpoints([str(tmp_path / "plain" / "ckpt-2"),
                                   str(tmp_path / "ema" / "ckpt-2")], str(tmp_path / "avg"))


# ------------------------------------------------------------------------------ towers
TOWERS_SCRIPT = r'''
import json, sys
import numpy as np
from open_seq2seq.distributed import strategies
devices = strategies.configure_cpu_devices(2)
import tensorflow as tf
from tests.helpers import linear

def shadows(logdir, backend, batch):
  trainer = linear.trainer(logdir, backend=backend, batch_size_per_gpu=batch, max_steps=4,
                           save_checkpoint_steps=None, moving_average_decay=0.3,
                           optimizer="Adam", optimizer_params={"learning_rate": 0.05})
  trainer.train(trainer.model.data_layer)
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(logdir))
  return {k: reader.get_tensor(k).tolist() for k in reader.get_variable_to_shape_map()
          if k.startswith(("moving_average/shadows", "model/weights"))}

towers = strategies.TowersBackend(devices)
assert towers.num_replicas == 2
print(json.dumps({"towers": shadows(sys.argv[1] + "/towers", towers, 2),
                  "single": shadows(sys.argv[1] + "/single", None, 4)}))
'''


@pytest.mark.slow
def test_towers_keep_the_averages_of_one_process(tmp_path):
  """2 CPU towers x batch 2 train (and average) as one device with batch 4 (a process of its
  own: logical devices must be set before TensorFlow starts)."""
  done = subprocess.run([sys.executable, "-c", TOWERS_SCRIPT, str(tmp_path)],
                        capture_output=True, text=True, timeout=300, cwd=h.ROOT,
                        env=h.environment())
  assert done.returncode == 0, done.stderr[-3000:]
  result = json.loads(done.stdout.strip().splitlines()[-1])
  towers, single = result["towers"], result["single"]
  assert sorted(towers) == sorted(single)
  assert [k for k in towers if k.startswith("moving_average")]
  for key in towers:
    np.testing.assert_allclose(towers[key], single[key], rtol=1e-5, atol=1e-6, err_msg=key)
