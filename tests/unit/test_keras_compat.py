"""The Keras internals the toolkit relies on still exist (see utils/keras_compat.py)."""

import keras

from open_seq2seq.utils import keras_compat


class Block(keras.layers.Layer):
  def __init__(self):
    super().__init__()
    self.inner = keras.layers.Dense(3)
    self.scale = self.add_weight(shape=(), name="scale")


def test_own_variables_are_the_layers_own_not_its_sublayers():
  block = Block()
  block.inner.build((None, 2))
  assert [v.name for v in keras_compat.own_variables(block)] == ["scale"]
  assert sorted(v.name for v in keras_compat.own_variables(block.inner)) == ["bias", "kernel"]


def test_attributes_leave_bookkeeping_out():
  block = Block()
  names = [name for name, _ in keras_compat.attributes(block)]
  assert "inner" in names and "scale" in names
  assert not any(n in ("_layers", "_tracker", "_trainable_variables") or
                 n.startswith("_self_") for n in names)
  assert names == sorted(names)


def test_set_untracked_keeps_a_shared_layer_out_of_the_variables():
  owner, user = Block(), Block()
  owner.inner.build((None, 2))
  keras_compat.set_untracked(user, "shared", owner.inner)
  assert user.shared is owner.inner
  assert not any(v is owner.inner.kernel for v in user.variables)
