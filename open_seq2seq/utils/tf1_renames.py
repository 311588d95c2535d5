"""The renaming table of OpenSeq2Seq (TF 1) names: what each becomes in TF 2 / Keras 3.

:data:`RENAMES` maps each ``tf.contrib.*``, ``tf.layers.*``, ``tf.nn.rnn_cell.*``, TF 1
initializer or ``tf.train.*Optimizer`` name (or prefix, ending in ".") to its replacement, the
import the replacement needs and a note on what changes; :data:`KEPT` lists names that stay.
:mod:`open_seq2seq.porting` applies the table to a config's source,
:func:`markdown_table` renders it for ``docs/porting.md``.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

class Rename(NamedTuple):
  """How one TF 1 name ports.

  Attributes:
    new: the replacement text, or None when there is no equivalent (the rewriter warns).
    import_line: the import the replacement needs ("" for none).
    note: what changes in meaning or in parameter spellings (shown with the rename).
  """

  new: str | None
  import_line: str
  note: str


_KERAS = "import keras"
_LR = "from open_seq2seq.optimizers.lr_policies import {}"


def _keras(path: str, note: str = "") -> Rename:
  return Rename(f"keras.{path}", _KERAS, note)


def _name(name: str, note: str = "") -> Rename:
  return Rename(f'"{name}"', "", note)


def _none(note: str) -> Rename:
  return Rename(None, "", note)


_CELL_NOTE = ("TF 1 `num_units` is Keras `units`; `forget_bias` (added at every step) becomes "
              "`unit_forget_bias` (bias initialised to 1); the component translates the TF 1 "
              "spellings")
_LAYER_NOTE = "a Keras layer class built with the same keyword arguments"
_OPT_NOTE = "optimizer_params keep their TF 1 spellings (beta1, use_nesterov, ...)"
_LR_NOTE = ("no drop-in policy: use one of open_seq2seq.optimizers.lr_policies ({}) and its "
            "parameter names")

#: TF 1 name (as spelled with ``import tensorflow as tf``) -> how it ports. A key ending in
#: "." renames every name under it.
RENAMES: dict[str, Rename] = {
    # --- regularizers
    "tf.contrib.layers.l2_regularizer": _keras(
        "regularizers.L2", "`{'scale': s}` keeps TF 1's meaning (s * sum(w**2) / 2, i.e. "
        "Keras l2 = s/2); `{'l2': x}` is Keras' x * sum(w**2)"),
    "tf.contrib.layers.l1_regularizer": _keras(
        "regularizers.L1", "`{'scale': s}` keeps TF 1's meaning (s * sum(abs(w)))"),
    "tf.contrib.layers.l1_l2_regularizer": _keras(
        "regularizers.L1L2", "TF 1 `scale_l1`/`scale_l2` are Keras `l1`/`l2` (no factor 1/2)"),
    # --- initializers
    "tf.contrib.layers.xavier_initializer": _keras(
        "initializers.GlorotUniform", "TF 1's `uniform=False` variant is "
        "keras.initializers.GlorotNormal"),
    "tf.contrib.layers.xavier_initializer_conv2d": _keras(
        "initializers.GlorotUniform", "as xavier_initializer"),
    "tf.contrib.layers.variance_scaling_initializer": _keras(
        "initializers.VarianceScaling", "TF 1 contrib spelling: `factor` is `scale`, "
        "mode 'FAN_IN' is 'fan_in', `uniform=True` is distribution='uniform'"),
    "tf.glorot_uniform_initializer": _keras("initializers.GlorotUniform"),
    "tf.glorot_normal_initializer": _keras("initializers.GlorotNormal"),
    "tf.random_uniform_initializer": _keras("initializers.RandomUniform",
                                            "same `minval`, `maxval`, `seed`"),
    "tf.random_normal_initializer": _keras("initializers.RandomNormal",
                                           "same `mean`, `stddev`, `seed`"),
    "tf.truncated_normal_initializer": _keras("initializers.TruncatedNormal",
                                              "same `mean`, `stddev`, `seed`"),
    "tf.variance_scaling_initializer": _keras(
        "initializers.VarianceScaling", "same `scale`, `mode`, `distribution` (TF 1's "
        "'normal' is 'truncated_normal')"),
    "tf.orthogonal_initializer": _keras("initializers.Orthogonal", "same `gain`"),
    "tf.zeros_initializer": _keras("initializers.Zeros"),
    "tf.ones_initializer": _keras("initializers.Ones"),
    "tf.constant_initializer": _keras("initializers.Constant", "same `value`"),
    "tf.uniform_unit_scaling_initializer": _keras(
        "initializers.VarianceScaling", "TF 1 `factor` is `scale`; use "
        "distribution='uniform' for the same draw"),
    # --- layers (CNNEncoder's `cnn_layers` / `fc_layers`)
    "tf.layers.conv1d": _keras("layers.Conv1D", _LAYER_NOTE),
    "tf.layers.conv2d": _keras("layers.Conv2D", _LAYER_NOTE + "; padding 'SAME'/'VALID' "
                               "in either case"),
    "tf.layers.conv3d": _keras("layers.Conv3D", _LAYER_NOTE),
    "tf.layers.conv2d_transpose": _keras("layers.Conv2DTranspose", _LAYER_NOTE),
    "tf.layers.separable_conv1d": _keras("layers.SeparableConv1D", _LAYER_NOTE),
    "tf.layers.separable_conv2d": _keras("layers.SeparableConv2D", _LAYER_NOTE),
    "tf.layers.dense": _keras("layers.Dense", _LAYER_NOTE),
    "tf.layers.dropout": _keras("layers.Dropout", "same `rate` (the drop probability)"),
    "tf.layers.batch_normalization": _keras(
        "layers.BatchNormalization", "same `momentum`, `epsilon`, `center`, `scale`"),
    "tf.layers.max_pooling1d": _keras("layers.MaxPooling1D", _LAYER_NOTE),
    "tf.layers.max_pooling2d": _keras("layers.MaxPooling2D", _LAYER_NOTE),
    "tf.layers.average_pooling1d": _keras("layers.AveragePooling1D", _LAYER_NOTE),
    "tf.layers.average_pooling2d": _keras("layers.AveragePooling2D", _LAYER_NOTE),
    "tf.layers.flatten": _keras("layers.Flatten", _LAYER_NOTE),
    "tf.layers.": _none("no Keras layer of that name is known here; use the keras.layers "
                        "class of the same operation"),
    # --- recurrent cells and layers
    "tf.nn.rnn_cell.LSTMCell": _keras("layers.LSTMCell", _CELL_NOTE),
    "tf.nn.rnn_cell.BasicLSTMCell": _keras("layers.LSTMCell", _CELL_NOTE),
    "tf.nn.rnn_cell.GRUCell": _keras("layers.GRUCell", "TF 1 `num_units` is Keras `units`"),
    "tf.nn.rnn_cell.BasicRNNCell": _keras("layers.SimpleRNNCell",
                                          "TF 1 `num_units` is Keras `units`"),
    "tf.nn.rnn_cell.MultiRNNCell": _keras("layers.StackedRNNCells", "takes the list of cells"),
    "tf.nn.rnn_cell.": _none("a TF 1 cell wrapper: no Keras cell of that name; components "
                             "apply dropout and residual connections themselves"),
    "tf.contrib.rnn.LSTMCell": _keras("layers.LSTMCell", _CELL_NOTE),
    "tf.contrib.rnn.BasicLSTMCell": _keras("layers.LSTMCell", _CELL_NOTE),
    "tf.contrib.rnn.LSTMBlockCell": _keras("layers.LSTMCell", _CELL_NOTE),
    "tf.contrib.rnn.GRUCell": _keras("layers.GRUCell", "TF 1 `num_units` is Keras `units`"),
    "tf.contrib.rnn.GRUBlockCell": _keras("layers.GRUCell", "TF 1 `num_units` is `units`"),
    "tf.contrib.rnn.GRUBlockCellV2": _keras("layers.GRUCell", "TF 1 `num_units` is `units`"),
    "tf.contrib.rnn.BasicRNNCell": _keras("layers.SimpleRNNCell", "`num_units` is `units`"),
    "tf.contrib.rnn.MultiRNNCell": _keras("layers.StackedRNNCells", "takes the list of cells"),
    "tf.contrib.rnn.LayerNormBasicLSTMCell": _none(
        "Keras has no layer-normalised LSTM cell; the language-model family provides "
        "WeightDropLayerNormBasicLSTMCell"),
    "tf.contrib.rnn.": _none("no Keras cell of that name"),
    "tf.contrib.cudnn_rnn.CudnnLSTM": _keras(
        "layers.LSTM", "Keras' LSTM runs the cuDNN kernel on a GPU when its arguments allow"),
    "tf.contrib.cudnn_rnn.CudnnGRU": _keras(
        "layers.GRU", "Keras' GRU runs the cuDNN kernel on a GPU when its arguments allow"),
    "tf.contrib.cudnn_rnn.": _none("no Keras layer of that name"),
    # --- optimizers
    "tf.train.AdamOptimizer": _name("Adam", "TF 1 epsilon default 1e-8 kept; " + _OPT_NOTE),
    "tf.train.MomentumOptimizer": _name("Momentum", _OPT_NOTE),
    "tf.train.GradientDescentOptimizer": _name("SGD"),
    "tf.train.RMSPropOptimizer": _name("RMSProp", "TF 1 `decay` is accepted (Keras `rho`); "
                                       "the mean square starts at 0 (TF 1: 1)"),
    "tf.train.AdagradOptimizer": _name("Adagrad"),
    "tf.train.FtrlOptimizer": _name("Ftrl"),
    "tf.train.AdadeltaOptimizer": _keras("optimizers.Adadelta",
                                         "Keras epsilon default 1e-7 (TF 1: 1e-8)"),
    "tf.contrib.opt.LazyAdamOptimizer": _name(
        "LazyAdam", "runs as Adam (Keras has no lazy sparse update; equal on dense "
        "gradients); " + _OPT_NOTE),
    "tf.contrib.opt.AdamWOptimizer": _name(
        "AdamW", "Keras decays by lr * weight_decay * w; tf.contrib's AdamW did not "
        "multiply by lr: divide such a weight_decay by the learning rate"),
    "tf.contrib.opt.NadamOptimizer": _keras("optimizers.Nadam",
                                            "Keras spellings: beta_1, beta_2"),
    "tf.train.": _none("not an optimizer or policy this project knows"),
    "tf.contrib.opt.": _none("no Keras optimizer of that name"),
    # --- learning-rate policies
    "tf.train.cosine_decay": Rename(
        "cosine_decay", _LR.format("cosine_decay"), "decay_steps is filled in from the "
        "run's length when not given; TF's `alpha` (end fraction) is min_lr = "
        "alpha * learning_rate"),
    "tf.train.exponential_decay": _none(_LR_NOTE.format("exp_decay")),
    "tf.train.polynomial_decay": _none(_LR_NOTE.format("poly_decay")),
    "tf.train.piecewise_constant": _none(_LR_NOTE.format("piecewise_constant")),
    "tf.train.inverse_time_decay": _none(_LR_NOTE.format("inv_poly_decay")),
    # --- everything else under tf.contrib, and TF 1 switches
    "tf.keras.": Rename("keras.", _KERAS, "Keras 3 is the standalone keras package"),
    "tf.contrib.": _none("tf.contrib does not exist in TF 2"),
    "tf.disable_v2_behavior": _none("a TF 1 compatibility switch: delete the call"),
    "tf.disable_eager_execution": _none("a TF 1 compatibility switch: delete the call"),
}

#: Names that stay as written: TF 2 has them with the same meaning (the table in the docs).
#: Other ``tf.`` names stay too when TF 2 has them.
KEPT = ("tf.float16", "tf.float32", "tf.bfloat16", "tf.int32", "tf.nn.relu", "tf.nn.tanh",
        "tf.nn.sigmoid", "tf.nn.elu", "tf.nn.selu", "tf.nn.leaky_relu", "tf.nn.gelu",
        "tf.minimum", "tf.maximum")


def lookup(canonical: str) -> tuple[str, Rename] | None:
  """The table entry for ``canonical`` (``tf.x.y``, possibly followed by attributes).

  A name key matches the name or its attributes (``tf.a.b`` matches ``tf.a.b.c``); a prefix
  key (ending in ".") matches everything under it. The longest match wins, a name key over
  a prefix key of the same length.
  """
  best, best_rank = None, None
  for key, rename in RENAMES.items():
    if key.endswith("."):
      hit = canonical.startswith(key)
    else:
      hit = canonical == key or canonical.startswith(key + ".")
    rank = (len(key.rstrip(".")), not key.endswith("."))
    if hit and (best_rank is None or rank > best_rank):
      best, best_rank = (key, rename), rank
  return best


def tf2_has(canonical: str) -> bool:
  """Whether the installed TensorFlow 2 has ``canonical`` (``tf.nn.relu``) under that name."""
  module = importlib.import_module("tensorflow")
  obj = module
  for part in canonical.split(".")[1:]:
    if not hasattr(obj, part):
      return False
    obj = getattr(obj, part)
  return True


def markdown_table() -> str:
  """The renaming table of ``docs/porting.md`` (generated from :data:`RENAMES` and KEPT)."""
  rows = ["| TF 1 name | TF 2 / Keras 3 name | notes |", "|---|---|---|"]
  for key, rename in RENAMES.items():
    old = f"`{key}*`" if key.endswith(".") else f"`{key}`"
    new = f"`{rename.new}*`" if rename.new and key.endswith(".") else \
        (f"`{rename.new}`" if rename.new else "— (warning)")
    rows.append(f"| {old} | {new} | {rename.note.replace('|', '/')} |")
  for key in KEPT:
    rows.append(f"| `{key}` | `{key}` (stays) | exists in TF 2 |")
  return "\n".join(rows)


__all__ = ["Rename", "RENAMES", "KEPT", "lookup", "tf2_has", "markdown_table"]
