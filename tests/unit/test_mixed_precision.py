"""Mixed precision: dtype resolution, what runs in which type, loss scaling in the trainer,
skipped steps, and checkpoints that move between dtypes.

Most tests use a one-weight linear model (x -> x @ W, loss k * sum(y)) whose gradient is
known exactly: dL/dW = k * x per example. The Transformer tests build the toy config.
"""

import math
import weakref

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import load_config, validate_top_level
from open_seq2seq.data.data_layer import DataLayer
from open_seq2seq.decoders.decoder import Decoder
from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.errors import CheckpointError, ConfigError, DivergenceError
from open_seq2seq.losses.loss import Loss
from open_seq2seq.models.model import Model
from open_seq2seq.training import checkpoints
from open_seq2seq.training.restoring import ModelMismatch
from open_seq2seq.training.trainer import MAX_CONSECUTIVE_SKIPS, Trainer
from open_seq2seq.utils import precision
from tests.helpers import toy


# ----------------------------------------------------------------------------- dtype resolution
@pytest.mark.parametrize("given,expected", [
    (tf.float32, "float32"), ("float32", "float32"), (tf.float16, "float16"),
    ("mixed", "mixed"), ("Mixed_BFloat16", "mixed_bfloat16"), ("mixed_float16", "mixed_float16"),
])
def test_normalize_dtype(given, expected):
  assert precision.normalize_dtype(given) == expected


@pytest.mark.parametrize("bad", ["mixed16", tf.int32, 16, None])
def test_bad_dtype_is_a_config_error(bad):
  with pytest.raises(ConfigError, match=r"^dtype: .* is not one of float32, float16, mixed"):
    precision.normalize_dtype(bad)


@pytest.fixture
def fresh_resolution():
  precision.resolve_mixed.cache_clear()
  yield
  precision.resolve_mixed.cache_clear()


def test_mixed_means_bfloat16_on_this_cpu(fresh_resolution):
  if tf.config.list_physical_devices("GPU"):
    pytest.skip("this host has a GPU")
  name, why = precision.resolve_mixed()
  assert name == "mixed_bfloat16"
  assert "float16 would be emulated" in why
  assert precision.describe("mixed").startswith("dtype mixed -> mixed_bfloat16 (")
  assert precision.compute_dtype("mixed") == tf.bfloat16
  assert precision.variable_dtype("mixed") == tf.float32


@pytest.mark.parametrize("flags,native", [
    ({"avx512f", "avx512_fp16", "avx512_bf16", "amx_bf16"}, True),  # a Sapphire Rapids Xeon
    ({"avx512f", "avx512_fp16"}, False), ({"avx2"}, False)])
def test_mixed_means_bfloat16_on_every_cpu_avx512_fp16_included(fresh_resolution, monkeypatch,
                                                                  flags, native):
  """TensorFlow's CPU kernels do not use AVX512-FP16: float16 is emulated there too."""
  monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [])
  monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset(flags))
  name, why = precision.resolve_mixed()
  assert name == "mixed_bfloat16"
  assert ("native bfloat16" in why) == native


def test_mixed_means_float16_on_gpus(fresh_resolution, monkeypatch):
  monkeypatch.setattr(tf.config, "list_physical_devices",
                      lambda kind=None: ["gpu:0"] if kind == "GPU" else [])
  assert precision.dtype_policy("mixed").name == "mixed_float16"


@pytest.mark.parametrize("dtype,variables,compute,multiple", [
    ("float32", tf.float32, tf.float32, 1), (tf.float16, tf.float16, tf.float16, 8),
    ("mixed_float16", tf.float32, tf.float16, 8), ("mixed_bfloat16", tf.float32, tf.bfloat16, 8),
])
def test_policy_types_and_padding(dtype, variables, compute, multiple):
  assert precision.variable_dtype(dtype) == variables
  assert precision.compute_dtype(dtype) == compute
  assert precision.pad_multiple(dtype) == multiple
  assert precision.round_up(13, multiple) == (16 if multiple == 8 else 13)


# ----------------------------------------------------------------------------- a linear model
class PointsLayer(DataLayer):
  """Every batch: ``batch_size`` copies of the scalar ``x`` (targets unused)."""

  PARAMS = {}
  x = 1e-3

  def build_dataset(self) -> tf.data.Dataset:
    ones = tf.ones([self.batch_size, 1], tf.float32)
    lengths = tf.ones([self.batch_size], tf.int32)
    batch = {"source_tensors": (ones * self.x, lengths), "target_tensors": (ones, lengths),
             "id": tf.range(self.batch_size, dtype=tf.int64)}
    return tf.data.Dataset.from_tensors(batch).repeat()

  def get_size_in_samples(self) -> int:
    return 1000 * self.batch_size


class LinearEncoder(Encoder):
  """y = x @ W with a [1, 1] kernel starting at ``init``."""

  PARAMS = {}
  init = 0.0
  units = 1
  extra = False

  def build(self, input_shape=None):
    self.kernel = self.add_weight(shape=(1, self.units), name="kernel",
                                  initializer=keras.initializers.Constant(self.init))
    if self.extra:
      self.extra_weight = self.add_weight(shape=(), name="extra", initializer="zeros")

  def call(self, input_dict, training=None):
    x, lengths = input_dict["source_tensors"]
    if not self.built:
      self.build()
    x = tf.cast(x, self.compute_dtype)
    return {"outputs": tf.matmul(x, self.kernel), "src_lengths": lengths}


class PassDecoder(Decoder):
  PARAMS = {}

  def call(self, input_dict, training=None):
    return {"logits": input_dict["encoder_output"]["outputs"]}


class SumLoss(Loss):
  """k * sum(y) over the batch, weight = batch size (float32, as every loss)."""

  k = 1e-5

  def compute_loss(self, input_dict):
    y = tf.cast(input_dict["decoder_output"]["logits"], tf.float32)
    return self.k * tf.reduce_sum(y), tf.cast(tf.shape(y)[0], tf.float32)


def linear_config(dtype, loss_scaling=None, loss_scaling_params=None, **extra) -> dict:
  return validate_top_level(Model, {
      "data_layer": PointsLayer, "encoder": LinearEncoder, "decoder": PassDecoder,
      "loss": SumLoss, "batch_size_per_gpu": 4, "max_steps": 1000, "dtype": dtype,
      "optimizer": "SGD", "optimizer_params": {"learning_rate": 1e4},
      "loss_scaling": loss_scaling, "loss_scaling_params": loss_scaling_params or {},
      "print_loss_steps": None, "summaries": [], **extra})


#: The run settings each linear model of this module was made with (the model keeps only
#: its own keys; the trainer takes the run's).
_RUNS: "weakref.WeakKeyDictionary[Model, dict]" = weakref.WeakKeyDictionary()


def linear_model(*args, **kwargs) -> Model:
  run = linear_config(*args, **kwargs)
  model = Model(run, "train")
  _RUNS[model] = run
  return model


def trainer_of(model, logdir) -> Trainer:
  return Trainer(model, _RUNS[model], logdir=str(logdir))


def built_trainer(model, logdir=None):
  trainer = trainer_of(model, logdir or "/nonexistent")
  iterator = iter(model.data_layer.build_dataset())
  trainer.build(next(iter(model.data_layer.build_dataset())))
  step = trainer.step.function()
  return trainer, lambda: {k: v.numpy() for k, v in step(iterator).items()}


def kernel(model) -> np.ndarray:
  return np.array(model.encoder.kernel.numpy(), dtype=np.float64)


# dL/dW = k * x = 1e-5 * 1e-3 = 1e-8 (per-example mean): below float16's smallest subnormal
# (6e-8), so a float16 backward pass flushes it to 0. SGD with lr 1e4 turns it into a weight
# change of 1e-4, which every dtype (float16 included) can hold.
TRUE_GRADIENT = SumLoss.k * PointsLayer.x


@pytest.mark.parametrize("dtype,loss_scaling,recovered", [
    (tf.float16, None, False),             # pure float16, no scaling: the gradient is lost
    ("mixed_float16", None, False),        # float16 backward pass: lost as well
    ("mixed_float16", 2.0 ** 14, True),    # static scaling recovers it
    ("mixed_float16", "Backoff", True),
    ("mixed", "Backoff", True),
    ("mixed_bfloat16", None, True),        # bfloat16 has float32's range
    (tf.float32, None, True),
])
def test_small_gradient_underflows_without_scaling(dtype, loss_scaling, recovered):
  model = linear_model(dtype, loss_scaling)
  _, step = built_trainer(model)
  values = step()
  assert not values["skipped"]
  change = -kernel(model)[0, 0] / 1e4  # W started at 0: W = -lr * g
  if recovered:
    assert change == pytest.approx(TRUE_GRADIENT, rel=1e-2)
  else:
    assert change == 0.0


def test_variables_and_optimizer_state_stay_float32_under_mixed():
  model = linear_model("mixed_float16", "Backoff", optimizer="Adam",
                       optimizer_params={"learning_rate": 1e-3})
  trainer, step = built_trainer(model)
  step()
  assert model.encoder.kernel.dtype == "float32"
  assert all(v.dtype in ("float32", "int64") for v in trainer.optimizer.variables)
  assert trainer.loss_scaler.scale.dtype == tf.float32


# ----------------------------------------------------------------------------- skipped steps
def snapshot(trainer) -> list[np.ndarray]:
  return [np.array(v.numpy()) for v in trainer.model.variables + trainer.optimizer.variables]


@pytest.mark.parametrize("dtype", ["mixed_float16", tf.float32])
def test_skipped_step_leaves_weights_and_optimizer_bit_identical(dtype):
  model = linear_model(dtype, "Backoff", {"scale_max": 2.0 ** 40}, optimizer="Adam",
                       optimizer_params={"learning_rate": 1e-3})
  LinearEncoder.init = 0.5
  try:
    trainer, step = built_trainer(model)
  finally:
    LinearEncoder.init = 0.0
  trainer.loss_scaler._scale.assign(1.0)
  step()  # one real update so that the Adam slots hold non-zero values
  assert trainer.global_step == 1
  # float16: 2^40 overflows the backward pass; float32: an infinite scale makes NaN/inf
  trainer.loss_scaler._scale.assign(2.0 ** 40 if dtype == "mixed_float16" else math.inf)
  before = snapshot(trainer)
  values = step()
  assert values["skipped"] == 1
  assert trainer.global_step == 1
  assert int(trainer.skipped_steps.numpy()) == 1
  for old, new in zip(before, snapshot(trainer)):
    assert old.tobytes() == new.tobytes()
  if dtype == "mixed_float16":
    assert float(trainer.loss_scaler.scale.numpy()) == 2.0 ** 39  # Backoff halved it
  trainer.loss_scaler._scale.assign(8.0)
  values = step()
  assert not values["skipped"] and trainer.global_step == 2
  assert any(old.tobytes() != new.tobytes() for old, new in zip(before, snapshot(trainer)))


def test_endless_overflow_stops_training_with_a_clear_error(tmp_path):
  model = linear_model("mixed_float16", "Backoff", {"scale_min": 2.0 ** 40,
                                                    "scale_max": 2.0 ** 40})
  trainer = trainer_of(model, str(tmp_path))
  with pytest.raises(DivergenceError, match=f"{MAX_CONSECUTIVE_SKIPS} consecutive steps.*"
                     "overflows float16 even at this loss scale; use dtype 'mixed_bfloat16'"):
    trainer.train(model.data_layer)
  assert trainer.global_step == 0


def test_float16_without_scaler_still_skips_overflow():
  model = linear_model("mixed_float16")
  SumLoss.k = 1e6  # dL/dy = k / batch: 2.5e5 overflows float16
  try:
    trainer, step = built_trainer(model)
    values = step()
  finally:
    SumLoss.k = 1e-5
  assert values["skipped"] == 1 and trainer.global_step == 0
  assert kernel(model)[0, 0] == 0.0


def test_small_l2_term_is_computed_on_float32_weights():
  # reg = l2 * w^2 = 1e-3 * (1e-3)^2 = 1e-9: zero in float16, exact on the float32 weights
  LinearEncoder.init = 1e-3
  SumLoss.k = 0.0
  try:
    model = linear_model("mixed_float16", "Backoff", regularizer=keras.regularizers.L2,
                         regularizer_params={"l2": 1e-3},
                         optimizer_params={"learning_rate": 1.0})
    _, step = built_trainer(model)
    values = step()
  finally:
    LinearEncoder.init, SumLoss.k = 0.0, 1e-5
  assert values["loss"] == pytest.approx(1e-9, rel=1e-5)
  # SGD: w -= lr * 2 * l2 * w
  assert kernel(model)[0, 0] == pytest.approx(1e-3 * (1 - 2e-3), rel=1e-6)


# ----------------------------------------------------------------------------- checkpoints
def train_and_save(dtype, logdir, steps=3):
  """A few Adam steps (g = 0.1: slots well inside float16's range) and a checkpoint."""
  scaled = dtype != tf.float32
  model = linear_model(dtype, "Backoff" if scaled else None,
                       {"scale_max": 2.0 ** 10} if scaled else None, optimizer="Adam",
                       optimizer_params={"learning_rate": 0.1},
                       max_steps=steps, save_checkpoint_steps=None)
  SumLoss.k = 100.0
  try:
    trainer = trainer_of(model, str(logdir))
    trainer.train(model.data_layer)
  finally:
    SumLoss.k = 1e-5
  return kernel(model)[0, 0], trainer


@pytest.mark.parametrize("train_dtype,eval_dtype", [
    ("mixed", tf.float32), (tf.float32, "mixed"), ("mixed_float16", tf.float16),
    (tf.float16, tf.float32), (tf.float32, tf.float16),
])
def test_weights_restore_across_dtypes(tmp_path, train_dtype, eval_dtype):
  trained, _ = train_and_save(train_dtype, tmp_path)
  assert trained != 0.0
  model = linear_model(eval_dtype)
  model.mode = "eval"
  trainer = trainer_of(model, str(tmp_path))
  trainer.build(next(iter(model.data_layer.build_dataset())))
  trainer.restore_checkpoint(checkpoints.latest_checkpoint(str(tmp_path)))
  assert model.encoder.kernel.dtype == precision.variable_dtype(eval_dtype).name
  assert kernel(model)[0, 0] == pytest.approx(trained, rel=1e-3)


@pytest.mark.parametrize("first,second", [("mixed_float16", tf.float16),
                                          (tf.float16, "mixed_bfloat16")])
def test_continue_learning_across_dtypes(tmp_path, first, second):
  trained, old = train_and_save(first, tmp_path, steps=3)
  old_slots = [np.array(v.numpy(), np.float64) for v in old.optimizer.variables]
  model = linear_model(second, "Backoff", optimizer="Adam",
                       optimizer_params={"learning_rate": 0.1}, max_steps=3)
  trainer = trainer_of(model, str(tmp_path))
  trainer.train(model.data_layer, continue_learning=True)  # already at max_steps: restores only
  assert trainer.global_step == 3
  assert kernel(model)[0, 0] == pytest.approx(trained, rel=1e-3)
  new_slots = [np.array(v.numpy(), np.float64) for v in trainer.optimizer.variables]
  for new, old_slot in zip(new_slots, old_slots):
    np.testing.assert_allclose(new, old_slot, rtol=5e-3, atol=1e-7)
  assert float(trainer.loss_scaler.scale.numpy()) == float(old.loss_scaler.scale.numpy())


def test_load_model_across_dtypes(tmp_path):
  trained, _ = train_and_save("mixed", tmp_path / "a")
  model = linear_model(tf.float16, load_model=str(tmp_path / "a"), max_steps=0)
  trainer = trainer_of(model, str(tmp_path / "b"))
  trainer.train(model.data_layer)
  assert kernel(model)[0, 0] == pytest.approx(trained, rel=1e-3)


@pytest.mark.parametrize("dtype", [tf.float16, tf.float32])
@pytest.mark.parametrize("trained,units,extra,message", [
    (False, 2, False, r"1 have another shape \(encoder.*kernel \[1, 1\] in it, \[1, 2\] here"),
    (False, 1, True, r"1 of the model's variables are not in it \(encoder.*extra"),
    # fewer variables than the checkpoint (a 2-layer model from a 3-layer run): not partial
    (True, 1, False, r"1 of its variables are not in the model \(encoder.*extra"),
])
def test_restoring_another_model_is_a_checkpoint_error(tmp_path, dtype, trained, units, extra,
                                                       message):
  LinearEncoder.extra = trained
  try:
    train_and_save(tf.float32, tmp_path)
  finally:
    LinearEncoder.extra = False
  LinearEncoder.units, LinearEncoder.extra = units, extra
  try:
    model = linear_model(dtype)
    trainer = trainer_of(model, str(tmp_path))
    trainer.build(next(iter(model.data_layer.build_dataset())))
  finally:
    LinearEncoder.units, LinearEncoder.extra = 1, False
  with pytest.raises(ModelMismatch, match=message) as info:
    trainer.restore_checkpoint(checkpoints.latest_checkpoint(str(tmp_path)))
  assert "\n" not in str(info.value) and "--allow_model_changes" in str(info.value)
  # a deliberate change: what fits is loaded, the rest keeps its initial value
  trainer.evaluator.allow_model_changes = True
  trainer.restore_checkpoint(checkpoints.latest_checkpoint(str(tmp_path)))
  if units == 1:
    assert kernel(model)[0, 0] != 0.0


def test_resuming_another_model_is_refused_unless_allowed(tmp_path):
  trained, _ = train_and_save(tf.float32, tmp_path, steps=2)
  LinearEncoder.extra = True
  try:
    model = linear_model(tf.float32, max_steps=2)
    trainer = trainer_of(model, str(tmp_path))
    with pytest.raises(ModelMismatch, match="1 of the model's variables are not in it"):
      trainer.train(model.data_layer, continue_learning=True)
    model = linear_model(tf.float32, max_steps=2)
    trainer = Trainer(model, {**_RUNS[model], "allow_model_changes": True},
                      logdir=str(tmp_path))
    trainer.train(model.data_layer, continue_learning=True)  # at max_steps: restores only
  finally:
    LinearEncoder.extra = False
  assert trainer.global_step == 2 and kernel(model)[0, 0] == pytest.approx(trained, rel=1e-3)


# ----------------------------------------------------------------------------- the Transformer
@pytest.fixture(scope="module")
def toy_data(tmp_path_factory):
  return toy.make_toy_data(str(tmp_path_factory.mktemp("toy")), train=64, dev=8, test=8)


def toy_transformer(data_dir, dtype):
  overrides = (toy.data_overrides(data_dir) + toy.split_overrides(data_dir, "train") +
               toy.TINY_MODEL + [f"--dtype={dtype}", "--batch_size_per_gpu=8"])
  base_model, configs = load_config(toy.TOY_CONFIG, "train", overrides)
  return base_model(configs["train"], "train")


def op_types(concrete_function, kinds) -> list[tuple[str, tf.DType]]:
  """(op type, dtype) of every op of ``kinds`` in a traced function and its sub-graphs."""
  graphs, found = [concrete_function.graph.as_graph_def()], []
  library = graphs[0].library
  nodes = list(graphs[0].node) + [n for f in library.function for n in f.node_def]
  for node in nodes:
    if node.op in kinds:
      found.append((node.op, tf.as_dtype(node.attr["T"].type)))
  return found


@pytest.mark.parametrize("dtype,half", [("mixed", None), ("mixed_float16", tf.float16),
                                        ("mixed_bfloat16", tf.bfloat16)])
def test_transformer_variables_float32_and_matmuls_half(toy_data, dtype, half):
  half = half or precision.compute_dtype("mixed")
  model = toy_transformer(toy_data, dtype)
  batch = next(iter(model.data_layer.build_dataset()))
  traced = tf.function(lambda b: model.compute_loss(b, training=True)).get_concrete_function(batch)
  weights = [v for v in model.variables if "int" not in v.dtype]  # not the dropout RNG states
  assert weights and all(v.dtype == "float32" for v in weights)
  matmuls = op_types(traced, {"MatMul", "BatchMatMulV2", "BatchMatMulV3", "_MklMatMul",
                              "Einsum"})
  assert len(matmuls) >= 10
  assert {t for _, t in matmuls} == {half}, matmuls
  # float32 where it matters: softmaxes (attention and loss) and the loss itself
  softmaxes = op_types(traced, {"Softmax", "LogSoftmax"})
  assert softmaxes and {t for _, t in softmaxes} == {tf.float32}
  loss_sum, weight, out = model.compute_loss(batch, training=True)
  assert loss_sum.dtype == tf.float32 and weight.dtype == tf.float32
  assert out["logits"].dtype == tf.float32
