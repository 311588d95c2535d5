"""Several optimizers in the one training loop (training/update_group.py): a model's update
groups run in order within a step, each with its own loss, variables and settings; the last
group's counter is the global step; checkpoints hold every optimizer; the run's
``optimizers`` key is checked like the top-level keys."""

import copy
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import load_config, resolve_config
from open_seq2seq.distributed.backend import Backend
from open_seq2seq.errors import ConfigError
from open_seq2seq.training.train_step import TrainStep
from tests.helpers import distributed as h


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
  root = tmp_path_factory.mktemp("groups")
  data = h.make_data(str(root / "data"))
  return h.write_config(str(root), data, two_optimizers=True), h.write_config(str(root), data)


def build(path, *overrides):
  cls, loaded = load_config(path, "train", list(overrides))
  run = loaded["train"]
  model = cls(run, "train")
  step = TrainStep(model, run, Backend(), max_steps=3, steps_per_epoch=None,
                   count_units=model.data_layer.count_units)
  iterator = iter(model.data_layer.build_dataset())
  batch = next(iterator)
  step.build(batch, is_chief=False)
  return model, step, batch


def values_of(variables):
  return [np.array(v.numpy()) for v in variables]


def test_the_groups_update_in_order_each_with_its_own_loss_and_settings(configs):
  model, step, batch = build(configs[0])
  critic, generator = step.groups
  assert [g.name for g in step.groups] == ["critic", "generator"]
  assert isinstance(critic.optimizer, keras.optimizers.SGD)
  assert isinstance(generator.optimizer, keras.optimizers.Adam)
  assert {id(v) for v in critic.variables} == {id(v) for v in model.encoder.trainable_variables}
  assert {id(v) for v in generator.variables} == {
      id(v) for v in model.decoder.trainable_variables}
  encoder0, decoder0 = values_of(critic.variables), values_of(generator.variables)

  # what the step must do: SGD on the critic's loss, then Adam (clipped to norm 1) on the
  # cross-entropy with the encoder as SGD left it
  with tf.GradientTape() as tape:
    loss, weight, _ = critic.loss(batch, training=True)
  grads = tape.gradient(loss, critic.variables)
  encoder1 = [v - 0.2 * tf.convert_to_tensor(g).numpy() / float(weight)
              for v, g in zip(encoder0, grads)]
  for variable, value in zip(critic.variables, encoder1):
    variable.assign(value)
  with tf.GradientTape() as tape:
    loss, weight, _ = model.compute_loss(batch, training=True)
  grads = [tf.convert_to_tensor(g) / weight
           for g in tape.gradient(loss, generator.variables)]
  grads, _ = tf.clip_by_global_norm(grads, 1.0)
  copies = [tf.Variable(v) for v in decoder0]
  # the run's Adam (TF 1's epsilon 1e-8: Keras' 1e-7 moves the near-zero gradients less)
  keras.optimizers.Adam.from_config(generator.optimizer.get_config()).apply_gradients(
      zip(grads, copies))
  decoder1 = values_of(copies)
  for variable, value in zip(critic.variables, encoder0):
    variable.assign(value)

  values = step.function()(iter([batch]))
  for got, want in zip(values_of(critic.variables), encoder1):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  # Adam's first step is lr * g / (|g| + eps): ill-conditioned where |g| ~ eps, so float
  # rounding moves such elements by up to ~1e-5 (a wrong order moves many by ~1e-2)
  for got, want in zip(values_of(generator.variables), decoder1):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-4)
  assert step.global_step == 1 and int(critic.optimizer.iterations.numpy()) == 1
  assert values["loss/critic"] > values["loss"] > 0  # the critic's loss has the penalty
  assert set(values) >= {"loss", "learning_rate", "skipped", "units", "learning_rate/critic",
                         "skipped/critic"}
  assert np.isclose(float(values["learning_rate/critic"]), 0.2)


def test_checkpoints_hold_every_optimizer_and_resume_exactly(configs, tmp_path):
  def trained(steps, restore=None):
    model, step, batch = build(configs[0])
    checkpoint = tf.train.Checkpoint(encoder=model.encoder, decoder=model.decoder,
                                     **step.state())
    if restore:
      checkpoint.restore(restore).assert_existing_objects_matched()
    function = step.function()
    for _ in range(steps):
      function(iter([batch]))
    return step, checkpoint

  step, checkpoint = trained(0)
  assert {"optimizer", "optimizer_critic", "skipped_steps", "skipped_steps_critic"} <= set(
      step.state())
  start = checkpoint.save(str(tmp_path / "start"))
  step, checkpoint = trained(2, restore=start)
  middle = checkpoint.save(str(tmp_path / "middle"))
  resumed, _ = trained(1, restore=middle)
  straight, _ = trained(3, restore=start)
  assert resumed.global_step == straight.global_step == 3
  for group, other in zip(resumed.groups, straight.groups):
    assert int(group.optimizer.iterations.numpy()) == 3
    for a, b in zip(values_of(group.variables + list(group.optimizer.variables)),
                    values_of(other.variables + list(other.optimizer.variables))):
      np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_one_group_keeps_the_checkpoint_names_of_a_one_optimizer_run(configs):
  _, step, _ = build(configs[1])
  assert [g.name for g in step.groups] == ["model"]
  assert set(step.state()) == {"optimizer", "skipped_steps", "tokens_seen"}


@pytest.mark.parametrize("which,overrides,message", [
    (0, ["--optimizers={'discriminator': {}}"],
     r"optimizers/discriminator: this model updates its groups 'critic', 'generator'"),
    (1, ["--optimizers={'critic': {'max_grad_norm': 1.0}}"],
     r"optimizers/critic: this model updates all its variables with one optimizer"),
])
def test_groups_the_model_does_not_have_are_one_line_errors(configs, which, overrides, message):
  with pytest.raises(ConfigError, match=message):
    build(configs[which], *overrides)


@pytest.mark.parametrize("group,message", [
    ({"optimiser": "SGD"}, r"optimizers/critic/optimiser: .*'optimizer'"),
    ({"optimizer_params": {"beta_1": 0.9}, "optimizer": "SGD"},
     r"optimizers/critic/optimizer_params/beta_1"),
    ({"max_grad_norm": "big"}, r"optimizers/critic/max_grad_norm"),
    ({"loss_scaling": "Sometimes"}, r"optimizers/critic/loss_scaling"),
    ("SGD", r"optimizers/critic: expected a dict"),
])
def test_a_groups_settings_are_checked_like_the_top_level_ones(configs, group, message):
  cls, loaded = load_config(configs[0], "train")
  config = copy.deepcopy(loaded["train"])
  config["optimizers"] = {"critic": group}
  with pytest.raises(ConfigError, match=message):
    resolve_config(cls, config, "train")


def test_a_group_choosing_another_optimizer_starts_from_its_defaults(configs):
  """The top-level optimizer_params (Adam's) are not handed to the group's SGD."""
  cls, loaded = load_config(configs[0], "train")
  config = copy.deepcopy(loaded["train"])
  config["optimizer_params"] = {"learning_rate": 0.05, "beta_1": 0.8}
  config["optimizers"] = {"critic": {"optimizer": "SGD"}}
  resolved = resolve_config(cls, config, "train")
  assert resolved["optimizers"]["critic"]["optimizer_params"] == {}


def test_each_group_has_its_own_loss_scaler_under_float16(configs):
  """Half precision: the generator's Backoff scaler and the critic's static scale are two
  scalers, saved under two names, and a float16 step updates both groups with finite
  weights."""
  model, step, batch = build(configs[0], "--dtype=mixed_float16", "--loss_scaling=Backoff",
                             "--optimizers={'critic': {'optimizer': 'SGD', "
                             "'optimizer_params': {'learning_rate': 0.2}, "
                             "'loss_scaling': 128.0}}")
  critic, generator = step.groups
  assert model.encoder.compute_dtype == "float16"
  assert float(critic.loss_scaler.scale) == 128.0
  assert float(generator.loss_scaler.scale) != 128.0
  assert {"loss_scaler", "loss_scaler_critic"} <= set(step.state())
  assert "critic: " in step.describe_precision() and "generator: " in step.describe_precision()
  before = values_of(critic.variables + generator.variables)
  values = step.function()(iter([batch]))
  assert int(values["skipped"]) == 0 and int(values["skipped/critic"]) == 0
  after = values_of(critic.variables + generator.variables)
  assert all(np.isfinite(a).all() for a in after)
  assert all(np.any(a != b) for a, b in zip(after, before))


def test_gradients_take_their_variables_static_shapes_so_all_reduces_pack():
  """Under MultiWorkerMirroredStrategy the Transformer's kernel gradients come out as
  (None, units) (seen in a traced 2-process run: one all-reduce op per step instead of 18);
  one gradient of unknown shape makes TensorFlow's collectives all-reduce everything in one
  pack. dense_gradients gives each its variable's shape, and the packs come back."""
  from tensorflow.python.distribute import cross_device_utils
  from open_seq2seq.training.update_group import dense_gradients
  variables = [tf.Variable(tf.zeros([300, 8])), tf.Variable(tf.zeros([8])),
               tf.Variable(tf.zeros([50, 4]))]
  seen = {}

  @tf.function(input_signature=[tf.TensorSpec([None, 8]), tf.TensorSpec([None]),
                                tf.TensorSpec([None], tf.int32)])
  def normalise(kernel_grad, bias_grad, rows):
    sparse = tf.IndexedSlices(tf.ones([tf.size(rows), 4]), rows, tf.shape(variables[2]))
    raw = [kernel_grad, bias_grad, sparse]
    seen["raw packs"] = len(cross_device_utils.group_by_size(
        [tf.convert_to_tensor(g) for g in raw], 1024))
    grads = dense_gradients(variables, raw)
    seen["shapes"] = [g.shape for g in grads]
    seen["packs"] = len(cross_device_utils.group_by_size(grads, 1024))
    return grads

  out = normalise(tf.ones([300, 8]), tf.ones([8]), tf.constant([1, 1, 3]))
  assert seen["raw packs"] == 1
  assert seen["shapes"] == [v.shape for v in variables] and seen["packs"] > 1
  assert [o.dtype for o in out] == [tf.float32] * 3
  np.testing.assert_array_equal(out[2].numpy()[[1, 3, 0]], [[2] * 4, [1] * 4, [0] * 4])
  with pytest.raises(tf.errors.InvalidArgumentError):  # a wrong shape is never hidden
    normalise(tf.ones([299, 8]), tf.ones([8]), tf.constant([1]))
