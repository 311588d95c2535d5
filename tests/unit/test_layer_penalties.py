"""Weight penalties a component attaches itself (Keras layer losses, e.g. a batch-norm
``norm_params/regularizer``) enter the training loss and gradients like the top-level
regularizer's."""

import keras
import numpy as np

from tests.helpers import linear


class PenalisedEncoder(linear.AffineEncoder):
  """The affine encoder with an L2 penalty of its own on the bias."""

  def build(self, input_shape=None):
    self.kernel = self.add_weight(shape=(2, 3), name="kernel",
                                  initializer=keras.initializers.Constant(linear.W0))
    self.bias = self.add_weight(shape=(3,), name="bias", regularizer=keras.regularizers.L2(0.5),
                                initializer=keras.initializers.Constant(linear.B0))


def test_component_penalty_enters_loss_and_update():
  trainer, step = linear.built(encoder=PenalisedEncoder)
  model = trainer.model
  values = step()
  w, b = linear.W0.astype(np.float64), linear.B0.astype(np.float64)
  y = linear.X @ w + b
  penalty = 0.5 * np.sum(b ** 2)
  np.testing.assert_allclose(values["loss"], 0.5 * np.sum(y ** 2) / len(y) + penalty,
                             rtol=1e-5)
  d_w, d_b = linear.gradients(w, b)
  d_b = d_b + 2 * 0.5 * b
  new_w, new_b = linear.weights(model)
  np.testing.assert_allclose(new_w, w - 0.1 * d_w, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(new_b, b - 0.1 * d_b, rtol=1e-5, atol=1e-7)


def _first_step_loss(**params):
  trainer, step = linear.built(**params)
  model = trainer.model
  return float(step()["loss"])


def test_a_component_regularizer_replaces_the_top_level_one_for_its_variables():
  import keras as k
  w = linear.W0.astype(np.float64)
  data_loss = _first_step_loss()
  # L2(l2) adds l2 * sum(w**2) over kernels (the bias is not regularized)
  top = _first_step_loss(regularizer=k.regularizers.L2, regularizer_params={"l2": 0.1})
  np.testing.assert_allclose(top - data_loss, 0.1 * np.sum(w ** 2), rtol=1e-5)
  # OpenSeq2Seq's per-encoder regularizer: TF 1 scale -> l2 = scale / 2
  own = _first_step_loss(encoder_params={"regularizer": k.regularizers.L2,
                                         "regularizer_params": {"scale": 0.4}})
  np.testing.assert_allclose(own - data_loss, 0.2 * np.sum(w ** 2), rtol=1e-5)
  both = _first_step_loss(regularizer=k.regularizers.L2, regularizer_params={"l2": 0.1},
                          encoder_params={"regularizer": k.regularizers.L2,
                                          "regularizer_params": {"scale": 0.4}})
  np.testing.assert_allclose(both, own, rtol=1e-6)


def test_component_regularizer_params_are_checked_when_built():
  import keras as k
  import pytest
  from open_seq2seq.errors import ConfigError
  with pytest.raises(ConfigError, match="encoder_params/regularizer_params/scal"):
    linear.model(encoder_params={"regularizer": k.regularizers.L2,
                                 "regularizer_params": {"scal": 0.4}})
  with pytest.raises(ConfigError, match="encoder_params/regularizer_params: given, but"):
    linear.model(encoder_params={"regularizer_params": {"scale": 0.4}})
