"""HiFi-GAN (two update groups) under data parallelism and float16: two steps over 2 CPU
towers equal two steps on one device with the same global batch (weights and both
optimizers' state), and a float16 step with loss scaling is finite and close to float32."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import load_config
from open_seq2seq.distributed.backend import Backend
from open_seq2seq.parts.hifigan import convs
from open_seq2seq.training.train_step import TrainStep
from tests.helpers import distributed as d
from tests.helpers import hifigan as h


@pytest.mark.slow
def test_two_towers_step_as_one_device_with_the_same_global_batch(tmp_path):
  """run.py processes: logical devices must be set before TensorFlow starts."""
  config = h.write_tiny_config(str(tmp_path))

  def run(name, *extra):
    logdir = str(tmp_path / name)
    result = d.run("single", [f"--config_file={config}", "--mode=train", f"--logdir={logdir}",
                              "--max_steps=2", *extra])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return d.weights(logdir), result.stdout

  reference, _ = run("single", "--batch_size_per_gpu=4")
  towers, stdout = run("towers", "--batch_size_per_gpu=2", "--cpu_towers=2")
  assert "2 replica(s)" in stdout
  # both groups' weights and slots are in the checkpoint, and they moved
  assert any("discriminator" in k for k in reference) and any("generator" in k
                                                                 for k in reference)
  assert sorted(towers) == sorted(reference)
  # float32 sums in another order: Adam's second moments (up to ~200 here) differ by a few
  # parts in a million (measured 4e-6), the weights by < 1e-6; a wrong reduction is O(1)
  relative = {k: float(np.abs(towers[k].astype(np.float64) - reference[k]).max()) /
                 max(1.0, float(np.abs(reference[k]).max(initial=0.0))) for k in reference}
  assert max(relative.values()) < 3e-5, max(relative.items(), key=lambda kv: kv[1])
  assert max(v for k, v in relative.items() if k.startswith("model/")) < 1e-5


def train_one_step(config, dtype, batch_values):
  cls, loaded = load_config(config, "train", [f"--dtype={dtype}"] + (
      ["--loss_scaling=Backoff"] if dtype != "float32" else []))
  keras.utils.set_random_seed(0)
  model = cls(loaded["train"], "train")
  step = TrainStep(model, loaded["train"], Backend(), max_steps=1, steps_per_epoch=None,
                   count_units=model.data_layer.count_units)
  batch = tf.nest.map_structure(tf.constant, batch_values)
  step.build(batch, is_chief=False)
  before = [v.numpy() for v in model.encoder.trainable_variables]
  loss, _, output = model.compute_loss(batch, training=False)
  values = step.function()(iter([batch]))
  after = [v.numpy() for v in model.encoder.trainable_variables]
  return model, float(loss), output["audio"].numpy(), values, before, after


def test_a_float16_step_with_loss_scaling_is_finite_and_close_to_float32(tmp_path):
  config = h.write_tiny_config(str(tmp_path))
  cls, loaded = load_config(config, "train")
  batch = next(iter(cls(loaded["train"], "train").data_layer.build_dataset()))
  batch = tf.nest.map_structure(lambda t: t.numpy(), batch)
  full = train_one_step(config, "float32", batch)
  half = train_one_step(config, "mixed_float16", batch)
  model = half[0]
  assert model.encoder.generator.compute_dtype == "float16"
  assert model.loss.mpd.compute_dtype == "float16"
  for before32, before16 in zip(full[4], half[4]):  # the same initial weights
    np.testing.assert_array_equal(before32, before16)
  values = half[3]
  assert int(values["skipped"]) == 0
  assert np.isfinite(float(values["loss"])) and np.isfinite(float(values["loss/discriminator"]))
  assert half[1] == pytest.approx(full[1], rel=0.02), (half[1], full[1])
  audio32, audio16 = full[2], half[2]
  assert np.abs(audio16 - audio32).max() < 0.02 * np.abs(audio32).max()
  # the update goes the same way: Adam's first step is about lr * sign(gradient)
  delta32 = np.concatenate([(a - b).ravel() for a, b in zip(full[5], full[4])])
  delta16 = np.concatenate([(a - b).ravel() for a, b in zip(half[5], half[4])])
  assert np.all(np.isfinite(delta16)) and np.abs(delta16).max() > 0
  cosine = delta16 @ delta32 / (np.linalg.norm(delta16) * np.linalg.norm(delta32))
  assert cosine > 0.9, cosine


def test_half_precision_dilated_and_grouped_convolutions_are_the_same_sums():
  """HiFiConv1D computes dilated or grouped convolutions of half types from pieces
  TensorFlow's CPU kernels can differentiate in half precision (space-to-batch, one
  convolution per group): the same values as the direct op, here in float32 where both
  exist; and float16 layers of both kinds train."""
  rng = np.random.default_rng(0)
  x = tf.constant(rng.normal(size=(2, 40, 8)), tf.float32)
  kernel = tf.constant(rng.normal(size=(5, 8, 6)), tf.float32)
  grouped = tf.constant(rng.normal(size=(5, 2, 12)), tf.float32)  # 4 groups of 2 -> 3
  for strides, dilation in ((1, 2), (1, 3), (2, 1), (4, 1)):
    want = tf.nn.conv1d(x, kernel, strides, "VALID", dilations=dilation)
    got = convs.half_conv1d(x, kernel, strides, dilation, 1)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)
    want = tf.nn.conv1d(x, grouped, strides, "VALID", dilations=dilation)
    got = convs.half_conv1d(x, grouped, strides, dilation, 4)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)
  for layer in (convs.HiFiConv1D(6, 3, 8, dilation=3, dtype="mixed_float16"),
                convs.HiFiConv1D(12, 5, 8, strides=2, groups=4, dtype="mixed_float16")):
    with tf.GradientTape() as tape:
      y = layer(tf.cast(x, tf.float16), tf.constant([40, 20]))
      loss = tf.reduce_sum(tf.cast(y, tf.float32) ** 2)
    grads = tape.gradient(loss, layer.trainable_variables)
    assert y.dtype == tf.float16
    assert all(g is not None and np.all(np.isfinite(g.numpy())) for g in grads)
