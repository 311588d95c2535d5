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
  model = linear.model(encoder=PenalisedEncoder)
  _, step = linear.built(model)
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
