"""Optimizer names and TF 1 parameter names, regularization and variable freezing."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq import optimizers
from open_seq2seq.optimizers import (LRPolicySchedule, freeze_filter, get_optimizer,
                                     optimizer_declarations, poly_decay,
                                     validate_optimizer_params)
from open_seq2seq.utils import regularizers
from open_seq2seq.utils.regularizers import (REGULARIZERS, is_regularized, regularization_loss,
                                             regularizer_declarations)


# ----------------------------------------------------------------------------- names
@pytest.mark.parametrize("name,klass", [
    ("Adam", keras.optimizers.Adam), ("adam", keras.optimizers.Adam),
    ("LazyAdam", keras.optimizers.Adam), ("AdamW", keras.optimizers.AdamW),
    ("SGD", keras.optimizers.SGD), ("RMSProp", keras.optimizers.RMSprop),
    ("rmsprop", keras.optimizers.RMSprop), ("Adagrad", keras.optimizers.Adagrad),
    ("Ftrl", keras.optimizers.Ftrl),
])
def test_names_map_to_keras_classes(name, klass):
  optimizer = get_optimizer(name, {}, 0.01)
  assert type(optimizer) is klass
  assert float(optimizer.learning_rate) == pytest.approx(0.01)


def test_momentum_is_sgd_with_momentum_and_nesterov_translated():
  optimizer = get_optimizer("Momentum", {"momentum": 0.9, "use_nesterov": True}, 0.1)
  assert type(optimizer) is keras.optimizers.SGD
  assert optimizer.momentum == pytest.approx(0.9)
  assert optimizer.nesterov is True


def test_momentum_requires_momentum():
  with pytest.raises(ConfigError, match="optimizer_params/momentum: required"):
    get_optimizer("Momentum", {}, 0.1)


def test_unknown_optimizer_names_the_valid_ones():
  with pytest.raises(ConfigError, match="unknown optimizer 'Adamm'.*Adam, AdamW.*RMSProp"):
    get_optimizer("Adamm", {}, 0.1)
  with pytest.raises(ConfigError, match="unknown optimizer"):
    optimizer_declarations("Adadelta")


def test_optimizer_class_is_accepted():
  optimizer = get_optimizer(keras.optimizers.Nadam, {"beta_1": 0.8}, 0.01)
  assert type(optimizer) is keras.optimizers.Nadam and optimizer.beta_1 == 0.8
  adam_subclass = type("MyAdam", (keras.optimizers.Adam,), {})
  assert get_optimizer(adam_subclass, {"beta2": 0.98}, 0.01).beta_2 == 0.98


def test_a_class_that_is_not_an_optimizer_is_rejected():
  with pytest.raises(ConfigError, match="did not build a keras.optimizers.Optimizer"):
    get_optimizer(lambda learning_rate: object(), {}, 0.1)


# ----------------------------------------------------------------------------- TF 1 names
def test_adam_tf1_names_and_tf1_epsilon_default():
  optimizer = get_optimizer("Adam", {"beta1": 0.9, "beta2": 0.997}, 0.001)
  assert optimizer.beta_1 == 0.9 and optimizer.beta_2 == 0.997
  assert optimizer.epsilon == 1e-8  # TF 1 default, not Keras' 1e-7
  assert get_optimizer("Adam", {"epsilon": 1e-9}, 0.001).epsilon == 1e-9
  assert get_optimizer("AdamW", {"beta1": 0.5}, 0.001).beta_1 == 0.5


def test_rmsprop_decay_means_rho():
  optimizer = get_optimizer("RMSProp", {"decay": 0.95, "momentum": 0.1, "centered": True}, 0.1)
  assert optimizer.rho == 0.95 and optimizer.momentum == 0.1 and optimizer.centered


def test_adamw_weight_decay_and_use_locking_ignored():
  optimizer = get_optimizer("AdamW", {"weight_decay": 0.01, "use_locking": True}, 0.001)
  assert optimizer.weight_decay == pytest.approx(0.01)


def test_both_spellings_of_one_key_is_an_error():
  with pytest.raises(ConfigError, match="beta1: given together with 'beta_1'"):
    get_optimizer("Adam", {"beta_1": 0.9, "beta1": 0.9}, 0.001)


# ----------------------------------------------------------------------------- declarations
def test_declarations_list_both_spellings():
  declared = optimizer_declarations("adam")
  for key in ("learning_rate", "beta_1", "beta1", "beta_2", "beta2", "epsilon", "amsgrad",
              "weight_decay", "use_locking"):
    assert key in declared
  assert declared["epsilon"].default == 1e-8
  assert "gradient_accumulation_steps" not in declared
  assert {"decay", "rho"} <= set(optimizer_declarations("RMSProp"))
  assert {"use_nesterov", "nesterov"} <= set(optimizer_declarations("Momentum"))


def test_unknown_key_suggests_the_closest():
  with pytest.raises(ConfigError, match="optimizer_params/epsilom: unknown parameter of Adam; "
                                        "did you mean 'epsilon'"):
    validate_optimizer_params("Adam", {"epsilom": 1e-8})
  with pytest.raises(ConfigError, match="did you mean 'momentum'"):
    get_optimizer("SGD", {"momentun": 0.9}, 0.1)


def test_wrong_type_and_trainer_owned_keys():
  with pytest.raises(ConfigError, match="optimizer_params/beta1: expected float, got str"):
    validate_optimizer_params("Adam", {"beta1": "0.9"})
  with pytest.raises(ConfigError, match="top-level 'iter_size'"):
    validate_optimizer_params("Adam", {"gradient_accumulation_steps": 2})
  with pytest.raises(ConfigError, match="top-level 'max_grad_norm'"):
    validate_optimizer_params("SGD", {"global_clipnorm": 1.0})
  with pytest.raises(ConfigError, match="weight_decay: expected float or None"):
    validate_optimizer_params("Adam", {"weight_decay": "high"})


# ----------------------------------------------------------------------------- learning rate
def test_learning_rate_sources():
  assert float(get_optimizer("SGD", {"learning_rate": 0.3}).learning_rate) == pytest.approx(0.3)
  assert float(get_optimizer("SGD", {}, lambda: 0.2).learning_rate) == pytest.approx(0.2)
  schedule = LRPolicySchedule(poly_decay, {"learning_rate": 0.5, "decay_steps": 10})
  assert float(get_optimizer("Adam", {}, schedule).learning_rate) == pytest.approx(0.5)
  with pytest.raises(ConfigError, match="learning rate is already set"):
    get_optimizer("SGD", {"learning_rate": 0.3}, 0.1)


def test_momentum_update_matches_tf1_rule_at_constant_lr():
  optimizer = get_optimizer("Momentum", {"momentum": 0.5}, 0.1)
  w = keras.Variable(np.zeros(1, np.float32))
  accumulator, expected = 0.0, 0.0
  for g in (1.0, 2.0, -1.0):
    optimizer.apply_gradients([(tf.constant([g]), w)])
    accumulator = 0.5 * accumulator + g  # TF 1: a = m a + g; w -= lr a
    expected -= 0.1 * accumulator
  assert float(w.numpy()[0]) == pytest.approx(expected)


# ----------------------------------------------------------------------------- regularization
def _tiny_model(dtype="float32"):
  inputs = keras.Input((3,), dtype="int32")
  x = keras.layers.Embedding(7, 4, name="embed", dtype=dtype)(inputs)
  x = keras.layers.LayerNormalization(name="layer_norm", dtype=dtype)(x)
  x = keras.layers.Dense(5, name="dense", dtype=dtype)(x)
  x = keras.layers.BatchNormalization(name="batch_norm", dtype=dtype)(x)
  return keras.Model(inputs, x)


def test_only_kernels_and_embeddings_are_regularized():
  model = _tiny_model()
  chosen = sorted(v.path for v in model.trainable_variables if is_regularized(v))
  assert chosen == ["dense/kernel", "embed/embeddings"]


@pytest.mark.parametrize("regularizer,params,factor", [
    (keras.regularizers.L2, {"l2": 0.01}, 0.01),
    (keras.regularizers.L2, {"scale": 0.01}, 0.005),  # TF 1: scale * sum(w**2) / 2
    (keras.regularizers.L2(0.02), {}, 0.02),
])
def test_l2_regularization_value(regularizer, params, factor):
  model = _tiny_model()
  embeddings = model.get_layer("embed").embeddings.numpy()
  kernel = model.get_layer("dense").kernel.numpy()
  expected = factor * (np.sum(embeddings ** 2) + np.sum(kernel ** 2))
  loss = regularization_loss(model.trainable_variables, regularizer, params)
  assert loss.dtype == tf.float32
  assert float(loss) == pytest.approx(expected, rel=1e-5)


def test_l1_and_function_regularizers():
  model = _tiny_model()
  weights = [model.get_layer("embed").embeddings.numpy(), model.get_layer("dense").kernel.numpy()]
  l1 = regularization_loss(model.trainable_variables, keras.regularizers.L1, {"scale": 0.1})
  assert float(l1) == pytest.approx(0.1 * sum(np.abs(w).sum() for w in weights), rel=1e-5)

  def l2_regularizer(scale: float):  # TF 1 factory style
    return lambda w: scale * tf.reduce_sum(w ** 2) / 2

  factory = regularization_loss(model.trainable_variables, l2_regularizer, {"scale": 0.2})
  assert float(factory) == pytest.approx(0.1 * sum((w ** 2).sum() for w in weights), rel=1e-5)
  direct = regularization_loss(model.trainable_variables, lambda w: tf.reduce_max(w), None)
  assert float(direct) == pytest.approx(sum(w.max() for w in weights), rel=1e-5)
  assert float(regularization_loss(model.trainable_variables, None, {})) == 0.0


def test_regularization_reads_float32_master_weights_under_mixed_precision():
  model = _tiny_model("mixed_bfloat16")
  kernel = model.get_layer("dense").kernel
  assert kernel.dtype == "float32"
  kernel.assign(np.full(kernel.shape, 1.001, np.float32))  # 1.001 is not a bfloat16 value
  loss = regularization_loss([kernel], keras.regularizers.L2, {"l2": 1.0})
  assert loss.dtype == tf.float32
  assert float(loss) == pytest.approx(kernel.shape[0] * kernel.shape[1] * 1.001 ** 2, rel=1e-6)


def test_the_optimizers_package_re_exports_the_regularizers():
  # The trainer and OpenSeq2Seq-style imports take them from open_seq2seq.optimizers.
  for name in regularizers.__all__:
    assert getattr(optimizers, name) is getattr(regularizers, name)


def test_regularizer_declarations_and_errors():
  assert {"l2", "scale"} <= set(regularizer_declarations(keras.regularizers.L2))
  with pytest.raises(ConfigError, match="regularizer_params/scal: unknown parameter of L2; "
                                        "did you mean 'scale'"):
    regularization_loss([], keras.regularizers.L2, {"scal": 0.1})
  with pytest.raises(ConfigError, match="keep one"):
    regularization_loss([], keras.regularizers.L2, {"scale": 0.1, "l2": 0.1})


# ----------------------------------------------------------------------------- freezing
def test_freeze_filter_matches_at_start_of_path():
  model = _tiny_model()
  names = lambda vs: sorted(v.path for v in vs)  # noqa: E731
  everything = names(model.trainable_variables)
  assert names(freeze_filter(model.variables, None)) == everything  # moving stats dropped
  assert names(freeze_filter(model.trainable_variables, "embed")) == \
      [n for n in everything if not n.startswith("embed")]
  # re.match anchors at the start: "kernel" alone matches nothing
  assert names(freeze_filter(model.trainable_variables, "kernel")) == everything
  assert names(freeze_filter(model.trainable_variables, ".*kernel")) == \
      [n for n in everything if not n.endswith("kernel")]
  with pytest.raises(ConfigError, match="freeze_variables_regex"):
    freeze_filter(model.trainable_variables, "(")


def test_every_optimizer_and_regularizer_key_is_documented():
  from open_seq2seq.optimizers import OPTIMIZERS, SUMMARIES
  assert set(SUMMARIES) == set(OPTIMIZERS)
  for name in OPTIMIZERS:
    for key, param in optimizer_declarations(name).items():
      assert param.doc, f"optimizer {name}: {key} has no description"
  assert "TF 1 default 1e-08" in optimizer_declarations("Adam")["epsilon"].doc
  for regularizer in REGULARIZERS:
    for key, param in regularizer_declarations(regularizer).items():
      assert param.doc, f"{regularizer.__name__}: {key} has no description"
