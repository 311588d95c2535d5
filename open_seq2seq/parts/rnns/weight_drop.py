"""OpenSeq2Seq's ``WeightDropLayerNormBasicLSTMCell`` as a Keras 3 recurrent cell.

The LSTM of OpenSeq2Seq's language models (AWD-LSTM style): TF 1's ``LayerNormBasicLSTMCell``
(layer norm on each gate's pre-activation and on the new cell state, Ba et al. 2016; dropout
on the candidate without memory loss, Semeniuta et al. 2016) plus DropConnect on its input
kernel W and recurrent kernel U (weight drop, Merity et al. 2017).

Differences from OpenSeq2Seq, all deliberate:

* The DropConnect mask is drawn once per ``keras.layers.RNN`` call and used at every time
  step (AWD-LSTM). OpenSeq2Seq drew a new one at every step; its ``weight_variational`` flag,
  meant to fix that, was never implemented and is an error here.
* Dropouts act only when ``training=True`` (OpenSeq2Seq's encoder set the keep probabilities
  to 1 outside training).
* Keras state order ``[h, c]`` (``keras.layers.LSTMCell``'s), not TF 1's ``(c, h)``.
* Without layer norm the gate bias starts at zeros, not at TF 1's default initializer.

Keras 3 has no public hook for "once per sequence": ``keras.layers.RNN`` prepares masks
before its time loop and clears them after it only for cells that subclass its
``DropoutRNNCell`` mixin, so this cell does (the masks it prepares are the dropped kernels).

``keras.layers.RNN(cell)`` runs it; :class:`WeightDropLSTM` (same results) is faster: it
projects the inputs of all time steps in one matmul before the time loop.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import keras
from keras import ops

from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.keras_compat import DropoutRNNCell

#: ``tf.contrib.layers.layer_norm``'s variance epsilon, used by TF 1's cell.
LAYER_NORM_EPSILON = 1e-12
_GATES = 4  # i, j (candidate), f, o: TF 1's order, kept so that checkpoints map column-wise


def awd_initializer(num_units: int) -> keras.initializers.Initializer:
  """OpenSeq2Seq's ``awd_initializer``: uniform in +-1/sqrt(num_units), for every weight."""
  limit = 1.0 / math.sqrt(num_units)
  return keras.initializers.RandomUniform(minval=-limit, maxval=limit)


def _one_of(name: str, value: Any, alias: str, alias_value: Any, default: Any) -> Any:
  """The value given under either of two spellings of one parameter."""
  if value is not None and alias_value is not None and value != alias_value:
    raise ConfigError(f"WeightDropLayerNormBasicLSTMCell: {name}={value!r} and "
                      f"{alias}={alias_value!r} are two spellings of one parameter; keep one")
  if value is not None:
    return value
  return alias_value if alias_value is not None else default


def _keep_prob(name: str, value: Any) -> float:
  if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
    raise ConfigError(f"WeightDropLayerNormBasicLSTMCell: {name} must be a number in (0, 1], "
                      f"got {value!r}")
  return float(value)


@keras.saving.register_keras_serializable(package="open_seq2seq")
class WeightDropLayerNormBasicLSTMCell(keras.layers.Layer, DropoutRNNCell):
  """LSTM cell with layer norm, recurrent (candidate) dropout and weight drop (DropConnect).

  One step, with x the input, (h, c) the state and ``LN`` a layer norm with its own gain and
  shift per use::

    i, j, f, o = split(x @ W + h @ U (+ bias without layer norm))   # TF 1's gate order
    i, j, f, o = LN_i(i), LN_j(j), LN_f(f), LN_o(o)                  # if layer_norm
    g = dropout(activation(j), 1 - recurrent_keep_prob)              # new mask every step
    c' = c * sigmoid(f + forget_bias) + sigmoid(i) * g
    c' = LN_c(c')                                                     # if layer_norm
    h' = activation(c') * sigmoid(o)

  In training, W and U are replaced by dropped copies (``input_weight_keep_prob``,
  ``recurrent_weight_keep_prob``, scaled by 1/keep) drawn once per ``keras.layers.RNN``
  call, the same at every step and for every sequence of the batch. A cell stepped by hand
  keeps its dropped kernels until :meth:`reset_dropout_mask` /
  :meth:`reset_recurrent_dropout_mask`, like Keras' own cells.

  Under a mixed dtype policy the matmuls run in the compute dtype; the gates, the layer-norm
  statistics and the cell-state update run in float32, and the state is handed back in the
  compute dtype (``keras.layers.RNN`` carries all states in it).

  Args:
    num_units: LSTM size (``units`` is accepted too, so that ``make_cell`` can build it).
    forget_bias: added to the forget gate's (normalised) pre-activation at every step.
    activation: of the candidate and of the cell state; default tanh.
    layer_norm: normalise the four gate pre-activations and the new cell state.
    norm_gain: initial layer-norm gain (ignored without layer norm).
    norm_shift: initial layer-norm shift (ignored without layer norm).
    recurrent_keep_prob: keep probability of the candidate dropout (TF 1's
      ``dropout_keep_prob``, also accepted).
    input_weight_keep_prob: keep probability of each entry of the input kernel W.
    recurrent_weight_keep_prob: keep probability of each entry of the recurrent kernel U.
    dropout_seed: seed of all three dropouts (TF 1's ``dropout_prob_seed``, also accepted).
    weight_variational: OpenSeq2Seq never implemented it; True is a ConfigError.
    reuse: TF 1 variable scoping; ignored.
    dtype: dtype or dtype policy of the layer.
    input_size: TF 1's deprecated, unused argument; ignored.
    kernel_initializer: of W (default Glorot uniform; see :func:`awd_initializer`).
    recurrent_initializer: of U (default Glorot uniform; TF 1 drew one Glorot uniform over
      the stacked [W; U]).
  """

  def __init__(self,
               num_units: int | None = None,
               forget_bias: float = 1.0,
               activation: str | Callable = "tanh",
               layer_norm: bool = True,
               norm_gain: float = 1.0,
               norm_shift: float = 0.0,
               recurrent_keep_prob: float | None = None,
               input_weight_keep_prob: float = 1.0,
               recurrent_weight_keep_prob: float = 1.0,
               dropout_seed: int | None = None,
               weight_variational: bool = False,
               reuse: Any = None,
               dtype: Any = None,
               *,
               input_size: Any = None,
               dropout_keep_prob: float | None = None,
               dropout_prob_seed: int | None = None,
               units: int | None = None,
               kernel_initializer: Any = "glorot_uniform",
               recurrent_initializer: Any = "glorot_uniform",
               **kwargs: Any):
    del reuse, input_size  # TF 1 leftovers: Keras layers own their variables
    super().__init__(dtype=dtype, **kwargs)
    if weight_variational:
      raise ConfigError("WeightDropLayerNormBasicLSTMCell: weight_variational was never "
                        "implemented in OpenSeq2Seq; weight drop here already keeps one mask "
                        "per sequence, remove the key")
    num_units = _one_of("num_units", num_units, "units", units, None)
    if isinstance(num_units, bool) or not isinstance(num_units, int) or num_units <= 0:
      raise ConfigError(f"WeightDropLayerNormBasicLSTMCell: num_units must be a positive "
                        f"int, got {num_units!r}")
    self.num_units = num_units
    self.forget_bias = float(forget_bias)
    self.activation = keras.activations.get(activation)
    self.layer_norm = bool(layer_norm)
    self.norm_gain = float(norm_gain)
    self.norm_shift = float(norm_shift)
    self.recurrent_keep_prob = _keep_prob("recurrent_keep_prob", _one_of(
        "recurrent_keep_prob", recurrent_keep_prob, "dropout_keep_prob", dropout_keep_prob,
        1.0))
    self.input_weight_keep_prob = _keep_prob("input_weight_keep_prob",
                                             input_weight_keep_prob)
    self.recurrent_weight_keep_prob = _keep_prob("recurrent_weight_keep_prob",
                                                 recurrent_weight_keep_prob)
    self.dropout_seed = _one_of("dropout_seed", dropout_seed, "dropout_prob_seed",
                                dropout_prob_seed, None)
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
    self.seed_generator = keras.random.SeedGenerator(self.dropout_seed)
    # Read by keras.layers.RNN / DropoutRNNCell: "does this cell drop anything per sequence".
    self.dropout = 1.0 - self.input_weight_keep_prob
    self.recurrent_dropout = 1.0 - self.recurrent_weight_keep_prob
    self._dropout_mask = None            # dropped W for the current sequence
    self._recurrent_dropout_mask = None  # dropped U for the current sequence
    self._inputs_projected = False  # set by WeightDropLSTM around its time loop

  @property
  def state_size(self) -> list[int]:
    return [self.num_units, self.num_units]

  @property
  def output_size(self) -> int:
    return self.num_units

  def build(self, input_shape) -> None:
    n = self.num_units
    self.kernel = self.add_weight(shape=(input_shape[-1], _GATES * n), name="kernel",
                                  initializer=self.kernel_initializer)
    self.recurrent_kernel = self.add_weight(shape=(n, _GATES * n), name="recurrent_kernel",
                                            initializer=self.recurrent_initializer)
    # Used in float32 whatever the dtype policy (autocast=False): see _step_float32.
    def vector(name, size, value):
      return self.add_weight(shape=(size,), name=name, autocast=False,
                             initializer=keras.initializers.Constant(value))
    if self.layer_norm:
      # One gain/shift per gate, stored side by side in the gates' column order.
      self.gates_gamma = vector("gates_gamma", _GATES * n, self.norm_gain)
      self.gates_beta = vector("gates_beta", _GATES * n, self.norm_shift)
      self.state_gamma = vector("state_gamma", n, self.norm_gain)
      self.state_beta = vector("state_beta", n, self.norm_shift)
    else:
      self.bias = vector("bias", _GATES * n, 0.0)
    self.built = True

  def get_initial_state(self, batch_size=None) -> list:
    return [ops.zeros((batch_size, self.num_units), dtype=self.compute_dtype)
            for _ in range(2)]

  # -- weight drop: DropoutRNNCell's hooks, called by keras.layers.RNN around its time loop.

  def _dropped(self, variable, keep_prob: float):
    kernel = ops.cast(variable, self.compute_dtype)
    return keras.random.dropout(kernel, rate=1.0 - keep_prob, seed=self.seed_generator)

  def get_dropout_mask(self, step_input=None):
    """The dropped input kernel W of the current sequence (drawn on first use)."""
    if self._dropout_mask is None and self.input_weight_keep_prob < 1.0:
      self._dropout_mask = self._dropped(self.kernel, self.input_weight_keep_prob)
    return self._dropout_mask

  def get_recurrent_dropout_mask(self, step_input=None):
    """The dropped recurrent kernel U of the current sequence (drawn on first use)."""
    if self._recurrent_dropout_mask is None and self.recurrent_weight_keep_prob < 1.0:
      self._recurrent_dropout_mask = self._dropped(self.recurrent_kernel,
                                                   self.recurrent_weight_keep_prob)
    return self._recurrent_dropout_mask

  def effective_kernels(self, training: bool = False) -> tuple:
    """``(W, U)`` as the next step uses them, in the compute dtype: in training with weight
    drop on, the dropped copies (the same until the masks are reset), else the variables."""
    return self._input_kernel(training), self._recurrent_kernel(training)

  def _input_kernel(self, training: bool):
    if training and self.input_weight_keep_prob < 1.0:
      return self.get_dropout_mask()
    return ops.cast(self.kernel, self.compute_dtype)

  def _recurrent_kernel(self, training: bool):
    if training and self.recurrent_weight_keep_prob < 1.0:
      return self.get_recurrent_dropout_mask()
    return ops.cast(self.recurrent_kernel, self.compute_dtype)

  # -- one step.

  def _normalize(self, x, groups: int, gamma, beta):
    """Layer norm of each of ``groups`` equal slices of x's last axis (float32)."""
    grouped = ops.reshape(x, (-1, groups, self.num_units)) if groups > 1 else x
    centered = grouped - ops.mean(grouped, axis=-1, keepdims=True)
    variance = ops.mean(ops.square(centered), axis=-1, keepdims=True)
    grouped = centered * ops.rsqrt(variance + LAYER_NORM_EPSILON)
    if groups > 1:
      grouped = ops.reshape(grouped, (-1, groups * self.num_units))
    return grouped * gamma + beta

  def project_inputs(self, sequences, training: bool = False):
    """``x @ W`` for every step of ``[batch, time, depth]`` sequences, in one matmul."""
    # As one 2-D matmul: a 3-D one broadcasts W over the batch, and its gradient sums it back.
    shape = ops.shape(sequences)
    flat = ops.reshape(ops.cast(sequences, self.compute_dtype), (-1, shape[-1]))
    projected = ops.matmul(flat, self._input_kernel(training))
    return ops.reshape(projected, (shape[0], shape[1], _GATES * self.num_units))

  def call(self, inputs, states, training=None):
    h, c = states[0], states[1]
    training = bool(training)
    if not self._inputs_projected:
      inputs = ops.matmul(inputs, self._input_kernel(training))
    z = inputs + ops.matmul(h, self._recurrent_kernel(training))
    # Gates, statistics and cell state in float32: bf16/fp16 lose the small differences
    # layer norm divides by, and the cell state accumulates over the sequence.
    z = ops.cast(z, "float32")
    if self.layer_norm:
      z = self._normalize(z, _GATES, self.gates_gamma, self.gates_beta)
    else:
      z = z + self.bias
    i, j, f, o = ops.split(z, _GATES, axis=-1)
    g = self.activation(j)
    if training and self.recurrent_keep_prob < 1.0:
      g = keras.random.dropout(g, rate=1.0 - self.recurrent_keep_prob,
                               seed=self.seed_generator)
    new_c = (ops.cast(c, "float32") * ops.sigmoid(f + self.forget_bias) +
             ops.sigmoid(i) * g)
    if self.layer_norm:
      new_c = self._normalize(new_c, 1, self.state_gamma, self.state_beta)
    new_h = ops.cast(self.activation(new_c) * ops.sigmoid(o), self.compute_dtype)
    return new_h, [new_h, ops.cast(new_c, self.compute_dtype)]

  def get_config(self) -> dict:
    return {
        **super().get_config(),
        "num_units": self.num_units,
        "forget_bias": self.forget_bias,
        "activation": keras.activations.serialize(self.activation),
        "layer_norm": self.layer_norm,
        "norm_gain": self.norm_gain,
        "norm_shift": self.norm_shift,
        "recurrent_keep_prob": self.recurrent_keep_prob,
        "input_weight_keep_prob": self.input_weight_keep_prob,
        "recurrent_weight_keep_prob": self.recurrent_weight_keep_prob,
        "dropout_seed": self.dropout_seed,
        "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
    }


@keras.saving.register_keras_serializable(package="open_seq2seq")
class WeightDropLSTM(keras.layers.RNN):
  """``keras.layers.RNN`` over a :class:`WeightDropLayerNormBasicLSTMCell`, faster.

  The same results as ``keras.layers.RNN(cell)`` (masking, ``return_state``,
  ``initial_state``, ``go_backwards`` included), but the input projection ``x @ W`` of all
  time steps is one matmul before the time loop, leaving one matmul (``h @ U``) per step.
  """

  def __init__(self, cell: WeightDropLayerNormBasicLSTMCell, **kwargs: Any):
    if not isinstance(cell, WeightDropLayerNormBasicLSTMCell):
      raise ConfigError(f"WeightDropLSTM: needs a WeightDropLayerNormBasicLSTMCell, got "
                        f"{type(cell).__name__}; use keras.layers.RNN for other cells")
    super().__init__(cell, **kwargs)

  def inner_loop(self, sequences, initial_state, mask, training=False):
    # keras.layers.RNN.call has drawn this call's dropped kernels already.
    projected = self.cell.project_inputs(sequences, bool(training))
    self.cell._inputs_projected = True
    try:
      return super().inner_loop(projected, initial_state, mask, training=training)
    finally:
      self.cell._inputs_projected = False


__all__ = ["WeightDropLayerNormBasicLSTMCell", "WeightDropLSTM", "awd_initializer",
           "LAYER_NORM_EPSILON"]
