"""Recurrent encoders of translation models, with OpenSeq2Seq's names and parameters.

* :class:`UnidirectionalRNNEncoderWithEmbedding`: embeddings, then ``encoder_layers``
  recurrent layers left to right.
* :class:`BidirectionalRNNEncoderWithEmbedding`: two independent stacks of
  ``encoder_layers`` layers, one reading left to right and one right to left; their last
  layers' outputs are concatenated (OpenSeq2Seq's ``bidirectional_dynamic_rnn`` over two
  ``MultiRNNCell`` stacks: the directions do not mix between layers).
* :class:`GNMTLikeEncoderWithEmbedding` (Wu et al. 2016): one bidirectional layer, then
  ``encoder_layers - 1`` left-to-right layers; residual connections from the third layer on.

Every layer is the config's ``core_cell`` (``keras.layers.LSTMCell``, ``GRUCell``,
:class:`~open_seq2seq.parts.rnns.weight_drop.WeightDropLayerNormBasicLSTMCell`, any Keras
cell) built by :func:`~open_seq2seq.parts.rnns.cells.make_cell` from ``core_cell_params`` in
TF 1 or Keras spelling. A plain ``LSTMCell`` / ``GRUCell`` runs as the fused
``keras.layers.LSTM`` / ``GRU`` layer with the same arguments (the same computation; cuDNN
kernels on GPUs); other cells run in ``keras.layers.RNN``.

Padding never changes a real position's output or a final state: every layer reads a mask
built from the lengths (a padded step leaves the state as it was), the right-to-left
direction reads each sequence reversed within its own length, so it starts at the real last
word, and the outputs at padded positions are zeros, as TF 1's ``dynamic_rnn`` returned them.

Differences from OpenSeq2Seq, deliberate:

* With ``encoder_use_skip_connections`` the uni- and bidirectional encoders add each layer's
  input to its (dropped-out) output, ``x + dropout(f(dropout(x)))``; OpenSeq2Seq's wrapper
  order gave ``dropout(f(dropout(x)) + dropout(x))``. Without dropout (eval, inference) the
  two are the same.
* The GNMT encoder honours ``encoder_use_skip_connections`` (False: no residuals);
  OpenSeq2Seq always added them from the third layer and ignored the key. The ported
  configs set it to True, which gives OpenSeq2Seq's model.
"""

from __future__ import annotations

import inspect
from typing import Any, Sequence

import keras
import tensorflow as tf

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.rnns.cells import make_cell, translate_cell_params
from open_seq2seq.parts.rnns.stack import RecurrentStack, state_sizes
from open_seq2seq.parts.rnns.weight_drop import WeightDropLayerNormBasicLSTMCell, WeightDropLSTM
from open_seq2seq.utils.component import resolve_size
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS, fresh
from open_seq2seq.utils.params import Param, callable_or_class

_WHERE = "encoder_params"
#: Cells that run as the fused Keras layer taking the same keyword arguments.
_FUSED = {keras.layers.LSTMCell: keras.layers.LSTM, keras.layers.GRUCell: keras.layers.GRU}


def _takes(cls: Any, keyword: str) -> bool:
  try:
    return keyword in inspect.signature(cls).parameters
  except (TypeError, ValueError):
    return False


def _output_size(layer: keras.layers.Layer) -> int:
  size = getattr(layer.cell, "output_size", None)
  return int(size if size is not None else state_sizes(layer)[0])


def _unwrap(states: list) -> Any:
  """A layer's final state as OpenSeq2Seq gave it: [h, c] for an LSTM, h for a GRU."""
  return states[0] if len(states) == 1 else list(states)


class _RNNEncoderWithEmbedding(Encoder):
  """Embeddings and recurrent stacks: what the three encoders share.

  Subclasses create their recurrent stacks in :meth:`_make_stacks` (with
  :meth:`_stack`) and run them in :meth:`_encode`.
  """

  #: Variables indexed by the source vocabulary (rows mapped by token on load_model).
  VOCAB_INDEXED = {"embedding": ("input", 0)}

  PARAMS = {
      "src_vocab_size": Param((int, None), None,
                              "Source vocabulary size (default: from the data layer)."),
      "src_emb_size": Param(int, doc="Size of the source word embeddings."),
      "core_cell": Param(callable_or_class, doc="Recurrent cell of every layer: "
                         "keras.layers.LSTMCell (TF 1: tf.nn.rnn_cell.LSTMCell), GRUCell, "
                         "WeightDropLayerNormBasicLSTMCell or any Keras cell."),
      "core_cell_params": Param(dict, {}, "Keyword arguments of core_cell, TF 1 or Keras "
                                "spelling (num_units or units, forget_bias ...)."),
      "encoder_layers": Param(int, doc="Number of recurrent layers (per direction)."),
      "encoder_use_skip_connections": Param(bool, False, "Residual connections around the "
                                            "layers (input and output sizes must match)."),
      "encoder_dp_input_keep_prob": Param(float, 1.0, "Keep probability of dropout on each "
                                          "layer's inputs (training only)."),
      "encoder_dp_output_keep_prob": Param(float, 1.0, "Keep probability of dropout on each "
                                           "layer's outputs (training only)."),
      "time_major": Param(bool, False, "Ignored: batches are always batch-major here."),
      "use_swap_memory": Param(bool, False, "Ignored: TF 1 while-loop option to swap "
                               "activations to host memory; Keras recurrent layers have none."),
      "proj_size": Param((int, None), None, "Ignored: OpenSeq2Seq declared it, never used it."),
      "num_groups": Param((int, None), None, "Ignored: OpenSeq2Seq declared it, never used "
                          "it."),
      **INITIALIZER_PARAMS,
  }
  #: The fewest ``encoder_layers`` the architecture takes.
  MIN_LAYERS = 1

  def __init__(self, params: dict[str, Any], *, vocab_size: int | None = None,
               mode: str = "train", name: str = "encoder", dtype: Any = "float32",
               initializer: Any = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    self.vocab_size = resolve_size(p, "src_vocab_size", vocab_size, _WHERE)
    if p["src_emb_size"] <= 0:
      raise ConfigError(f"{_WHERE}/src_emb_size: must be positive, got {p['src_emb_size']}")
    if p["encoder_layers"] < self.MIN_LAYERS:
      raise ConfigError(f"{_WHERE}/encoder_layers: {type(self).__name__} needs at least "
                        f"{self.MIN_LAYERS}, got {p['encoder_layers']}")
    for key in ("encoder_dp_input_keep_prob", "encoder_dp_output_keep_prob"):
      if not 0.0 < p[key] <= 1.0:
        raise ConfigError(f"{_WHERE}/{key}: a keep probability must be in (0, 1], got "
                          f"{p[key]}")
    self._make_stacks()
    # Everything is built now: variables exist before the first tf.function trace.
    self.build()

  # ------------------------------------------------------------------ construction
  def _make_layer(self, name: str) -> keras.layers.Layer:
    """One recurrent layer of ``core_cell`` returning its sequence and final state."""
    cell_class = self.params["core_cell"]
    cell_params = dict(self.params["core_cell_params"])
    where = f"{_WHERE}/core_cell_params"
    extra: dict[str, Any] = {}
    if not {"kernel_initializer", "initializer"} & set(cell_params) and \
        _takes(cell_class, "kernel_initializer"):
      # TF 1 gave every encoder variable the scope's (model or encoder) initializer.
      init = self.kernel_initializer()
      extra["kernel_initializer"] = init
      if "recurrent_initializer" not in cell_params and \
          _takes(cell_class, "recurrent_initializer"):
        extra["recurrent_initializer"] = fresh(init)
    common = {"return_sequences": True, "return_state": True, "dtype": self.dtype_policy,
              "name": name}
    if isinstance(cell_class, type) and issubclass(cell_class, keras.layers.RNN):
      return make_cell(cell_class, cell_params, where, **extra, **common)  # fused, as given
    if cell_class in _FUSED:
      kwargs = {**translate_cell_params(cell_class, cell_params, where), **extra, **common}
      try:
        return _FUSED[cell_class](**kwargs)
      except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: {cell_class.__name__} rejected the parameters: {e}"
                          ) from None
    cell = make_cell(cell_class, cell_params, where, **extra, dtype=self.dtype_policy,
                     name=f"{name}_cell")
    if not hasattr(cell, "state_size"):
      raise ConfigError(f"{_WHERE}/core_cell: {getattr(cell_class, '__name__', cell_class)} "
                        f"is not a recurrent cell; use e.g. keras.layers.LSTMCell")
    if isinstance(cell, WeightDropLayerNormBasicLSTMCell):
      return WeightDropLSTM(cell, **common)  # input projections in one matmul
    return keras.layers.RNN(cell, **common)

  def _stack(self, name: str, layer_names: Sequence[str], dropout: bool, residual: bool
             ) -> RecurrentStack:
    """Layers of ``core_cell``; ``dropout``: with the encoder's keep probabilities."""
    count = len(layer_names)
    keep_in = self.params["encoder_dp_input_keep_prob"] if dropout else 1.0
    keep_out = self.params["encoder_dp_output_keep_prob"] if dropout else 1.0
    layers = [self._make_layer(layer_name) for layer_name in layer_names]
    stack = RecurrentStack(layers, [keep_in] * count, [keep_out] * count, residual=residual,
                           dtype=self.dtype_policy, name=name)
    # It takes the mask as step_mask; this only tells Keras not to warn about the mask the
    # previous stack's outputs carry.
    stack.supports_masking = True
    return stack

  def _make_stacks(self) -> None:
    raise NotImplementedError

  def _build_stack(self, stack: RecurrentStack, size: int) -> int:
    """Builds ``stack`` for inputs of ``size`` features; returns its output size."""
    input_shape = (None, None, size)
    for layer in stack.rnn_layers:
      out = _output_size(layer)
      if stack.residual and out != size:
        raise ConfigError(f"{_WHERE}/encoder_use_skip_connections: layer {layer.name} "
                          f"gets {size} features and returns {out}; a residual connection "
                          f"needs them equal (set src_emb_size / num_units to match)")
      layer.build((None, None, size))
      size = out
    stack.build(input_shape)
    return size

  def build(self, input_shape: Any = None) -> None:
    if self.built:
      return
    self.embedding = self.add_weight(name="embedding",
                                     shape=(self.vocab_size, self.params["src_emb_size"]),
                                     initializer=self.kernel_initializer())
    self._build_stacks(self.params["src_emb_size"])
    self.built = True

  def _build_stacks(self, emb_size: int) -> None:
    raise NotImplementedError

  @property
  def enc_emb_w(self) -> keras.Variable:
    """The source embedding matrix [src_vocab_size, src_emb_size] (float32 weights)."""
    return self.embedding

  @property
  def src_vocab_size(self) -> int:
    return self.vocab_size

  @property
  def src_emb_size(self) -> int:
    return self.params["src_emb_size"]

  # ------------------------------------------------------------------ running
  @staticmethod
  def _run(stack: RecurrentStack, x: tf.Tensor, mask: tf.Tensor, training: bool | None
           ) -> tuple[tf.Tensor, list]:
    outputs, states = stack(x, step_mask=mask, training=training)
    return outputs, [_unwrap(s) for s in states]

  @classmethod
  def _run_backward(cls, stack: RecurrentStack, x: tf.Tensor, mask: tf.Tensor,
                    lengths: tf.Tensor, training: bool | None) -> tuple[tf.Tensor, list]:
    """``stack`` right to left: each sequence reversed within its length, so the first
    step is its last real word and the padding stays at the end."""
    reversed_x = tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)
    outputs, states = cls._run(stack, reversed_x, mask, training)
    return tf.reverse_sequence(outputs, lengths, seq_axis=1, batch_axis=0), states

  def _encode(self, x: tf.Tensor, mask: tf.Tensor, lengths: tf.Tensor,
              training: bool | None) -> tuple[tf.Tensor, Any]:
    raise NotImplementedError

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    ids, lengths = input_dict["source_tensors"][:2]
    lengths = tf.cast(lengths, tf.int32)
    mask = tf.sequence_mask(lengths, tf.shape(ids)[1])
    x = tf.cast(tf.gather(self.embedding, ids), self.compute_dtype)
    outputs, state = self._encode(x, mask, lengths, training)
    outputs *= tf.cast(mask, outputs.dtype)[:, :, None]  # padded positions: zeros
    return {"outputs": outputs, "state": state, "src_lengths": lengths,
            "encoder_input": ids}


class UnidirectionalRNNEncoderWithEmbedding(_RNNEncoderWithEmbedding):
  """Embeddings, then ``encoder_layers`` recurrent layers reading left to right.

  Input: ``{"source_tensors": (ids [B, S] int, lengths [B] int)}``. Output dict:
  ``"outputs"`` [B, S, units] in the compute dtype (zeros at padded positions),
  ``"state"`` the final state of each layer (a list, one entry per layer: ``[h, c]`` for an
  LSTM, ``h`` for a GRU), ``"src_lengths"`` [B] int32 and ``"encoder_input"`` (the ids).

  The embedding matrix is the attribute :attr:`enc_emb_w` (OpenSeq2Seq's name). There is
  no ``embedding_softmax_layer``: as in OpenSeq2Seq, a decoder with ``shared_embed`` keeps
  its own embedding (tied to its own output layer).
  """

  def _make_stacks(self) -> None:
    p = self.params
    names = [f"layer_{i}" for i in range(p["encoder_layers"])]
    self.stack = self._stack("stack", names, dropout=True,
                             residual=p["encoder_use_skip_connections"])

  def _build_stacks(self, emb_size: int) -> None:
    self._build_stack(self.stack, emb_size)

  def _encode(self, x, mask, lengths, training):
    return self._run(self.stack, x, mask, training)


class BidirectionalRNNEncoderWithEmbedding(_RNNEncoderWithEmbedding):
  """Embeddings, then a left-to-right and a right-to-left stack of ``encoder_layers``
  layers each; the outputs are their last layers' outputs side by side (forward first).

  Output dict as :class:`UnidirectionalRNNEncoderWithEmbedding`'s, with ``"outputs"``
  [B, S, 2 * units] and ``"state"`` = ``[forward_states, backward_states]``, each a list
  with one entry per layer (``[h, c]`` for an LSTM, ``h`` for a GRU) -- OpenSeq2Seq's
  ``(state_fw, state_bw)``. The backward final state is the one after reading each
  sequence's first word.
  """

  def _make_stacks(self) -> None:
    p = self.params
    count, residual = p["encoder_layers"], p["encoder_use_skip_connections"]
    self.forward = self._stack("fw", [f"fw_{i}" for i in range(count)], dropout=True,
                               residual=residual)
    self.backward = self._stack("bw", [f"bw_{i}" for i in range(count)], dropout=True,
                                residual=residual)

  def _build_stacks(self, emb_size: int) -> None:
    self._build_stack(self.forward, emb_size)
    self._build_stack(self.backward, emb_size)

  def _encode(self, x, mask, lengths, training):
    fw, fw_states = self._run(self.forward, x, mask, training)
    bw, bw_states = self._run_backward(self.backward, x, mask, lengths, training)
    return tf.concat([fw, bw], -1), [fw_states, bw_states]


class GNMTLikeEncoderWithEmbedding(_RNNEncoderWithEmbedding):
  """The GNMT encoder (Wu et al. 2016): a bidirectional first layer, then
  ``encoder_layers - 1`` left-to-right layers.

  As in OpenSeq2Seq: the bidirectional layer has no dropout; the left-to-right layers have
  the encoder's input and output dropout; with ``encoder_use_skip_connections`` each of them
  from the second on (the third layer of the encoder) adds its input to its output. Needs
  ``encoder_layers >= 2``.

  Output dict as :class:`UnidirectionalRNNEncoderWithEmbedding`'s, with ``"outputs"``
  [B, S, units] and ``"state"`` the final states of the ``encoder_layers - 1``
  left-to-right layers (OpenSeq2Seq returned no state of the bidirectional layer).
  """

  MIN_LAYERS = 2

  def _make_stacks(self) -> None:
    p = self.params
    count = p["encoder_layers"]
    # Layer 0 is bidirectional, layers 1 .. count - 1 read left to right.
    self.bi_forward = self._stack("bi_fw", ["layer_0_fw"], dropout=False, residual=False)
    self.bi_backward = self._stack("bi_bw", ["layer_0_bw"], dropout=False, residual=False)
    self.first = self._stack("uni_first", ["layer_1"], dropout=True, residual=False)
    self.rest = self._stack("uni_rest", [f"layer_{i}" for i in range(2, count)],
                            dropout=True, residual=p["encoder_use_skip_connections"]) \
        if count > 2 else None

  def _build_stacks(self, emb_size: int) -> None:
    size = self._build_stack(self.bi_forward, emb_size)
    size += self._build_stack(self.bi_backward, emb_size)
    size = self._build_stack(self.first, size)
    if self.rest is not None:
      self._build_stack(self.rest, size)

  def _encode(self, x, mask, lengths, training):
    fw, _ = self._run(self.bi_forward, x, mask, training)
    bw, _ = self._run_backward(self.bi_backward, x, mask, lengths, training)
    outputs, states = self._run(self.first, tf.concat([fw, bw], -1), mask, training)
    if self.rest is not None:
      outputs, more = self._run(self.rest, outputs, mask, training)
      states += more
    return outputs, states


__all__ = ["UnidirectionalRNNEncoderWithEmbedding", "BidirectionalRNNEncoderWithEmbedding",
           "GNMTLikeEncoderWithEmbedding"]
