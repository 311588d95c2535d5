"""Attention for recurrent decoders: Bahdanau (additive) and Luong (multiplicative) scores over
a masked memory, and the decoder cell that applies them at every time step.

The mechanisms follow OpenSeq2Seq's (TF 1 ``contrib.seq2seq``) ones:

* the memory's padded positions (beyond ``src_lengths``) are zeroed and their scores masked,
  so they get exactly zero weight;
* keys are the memory projected to ``num_units`` once per sequence (``memory_layer``, no bias);
* Bahdanau: ``v . tanh(keys + W q)``; with ``normalize`` (GNMT) the score vector is weight
  normalised, ``g * v / |v|`` with a learned scalar ``g`` (starting at ``sqrt(1/num_units)``)
  and a bias ``b`` inside the tanh;
* Luong: ``q . keys`` (the query's size must be ``num_units``), with ``scale`` times a learned
  scalar ``g`` (starting at 1).

Scores, their softmax (the *alignments*) and their running sum (the *coverage*, for beam
search's coverage penalty) are float32 under mixed precision; everything else runs in the
layer's compute dtype.

:class:`AttentionDecoderCell` runs one time step of a stack of recurrent cells with attention,
wired as OpenSeq2Seq's ``attention_type`` chose:

* ``"standard"`` (bahdanau, luong; TF's ``AttentionWrapper`` around the whole stack): the
  bottom cell reads ``[input; previous attention]``, the top cell's output queries the memory,
  the attention is the context (or, with ``attention_layer_units``, a Luong attention layer
  over ``[top output; context]``) and the step's output is the attention
  (``output_attention=True``, OpenSeq2Seq's setting), the top output (False) or both
  concatenated (``"both"``);
* ``"gnmt"`` / ``"gnmt_v2"`` (GNMT's multi-cell): only the bottom cell is wrapped with
  attention (input feeding, no attention layer); every upper cell reads ``[output of the cell
  below; context]``, where the context is the previous step's (gnmt) or the one the bottom
  cell's output just computed (gnmt_v2, NVIDIA's GNMT v2); the output is the top cell's.

A *location-aware* mechanism (one with a ``location_alignments(query, memory, previous,
cumulative)`` method, e.g. :class:`open_seq2seq.parts.tacotron.attention.LocationSensitiveAttention`)
also reads where the attention went: the cell then keeps the previous step's alignments in its
state (``"alignments"``, zeros at first) and passes them with the coverage.

Dropout and residual connections copy TF 1's wrappers: standard wiring applies OpenSeq2Seq's
``DropoutWrapper(ResidualWrapper(cell))`` (the residual adds the dropped-out input), GNMT's
``ResidualWrapper(DropoutWrapper(cell))`` on the third cell and above (the residual adds the
input without the context, before dropout).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import keras
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.initializers import fresh

WIRINGS = ("standard", "gnmt", "gnmt_v2")


class AttentionMemory(NamedTuple):
  """A memory prepared for attention (see :meth:`AttentionMechanism.prepare`)."""

  values: tf.Tensor  # [batch, source, depth]: zero at padded positions
  keys: tf.Tensor  # [batch, source, num_units]: the values projected for scoring
  mask: tf.Tensor  # bool [batch, source]: True at real positions


def masked_softmax(score: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
  """Float32 softmax over the last axis where padded positions get exactly zero weight.

  (A row without any real position gets uniform weights rather than NaNs.)
  """
  score = tf.where(mask, tf.cast(score, tf.float32), tf.float32.min)
  return tf.nn.softmax(score, axis=-1)


def attention_context(alignments: tf.Tensor, values: tf.Tensor) -> tf.Tensor:
  """Weighted sum of the memory: alignments [B, S] x values [B, S, D] -> [B, D]."""
  return tf.einsum("bs,bsd->bd", tf.cast(alignments, values.dtype), values)


class AttentionMechanism(keras.layers.Layer):
  """Base of the scoring mechanisms: projects the memory once, scores one query per step.

  Call :meth:`build` with the memory's and the query's depths, then :meth:`prepare` once per
  sequence and :meth:`alignments` at every step.

  Args:
    num_units: depth of the keys (OpenSeq2Seq's ``attention_layer_size``).
    initializer: kernel initializer (None: Glorot uniform).
  """

  def __init__(self, num_units: int, initializer: Any = None, **kwargs: Any):
    super().__init__(**kwargs)
    self.num_units = num_units
    self._initializer = initializer or keras.initializers.GlorotUniform()
    self.memory_layer = keras.layers.Dense(num_units, use_bias=False,
                                           kernel_initializer=fresh(self._initializer),
                                           dtype=self.dtype_policy, name="memory_layer")

  def build(self, memory_depth: int, query_depth: int) -> None:
    self.memory_layer.build((None, None, memory_depth))
    self.built = True

  def prepare(self, memory: tf.Tensor, lengths: tf.Tensor) -> AttentionMemory:
    """Masks ``memory`` [B, S, D] beyond ``lengths`` [B] and computes its keys."""
    memory = tf.cast(memory, self.compute_dtype)
    mask = tf.sequence_mask(lengths, tf.shape(memory)[1])
    values = memory * tf.cast(mask, memory.dtype)[:, :, None]
    return AttentionMemory(values, self.memory_layer(values), mask)

  def score(self, query: tf.Tensor, keys: tf.Tensor) -> tf.Tensor:
    """Unnormalised float32 scores [B, S] of ``query`` [B, Q] against ``keys``."""
    raise NotImplementedError

  def alignments(self, query: tf.Tensor, memory: AttentionMemory) -> tf.Tensor:
    """Float32 attention weights [B, S] of ``query`` [B, Q] over ``memory``."""
    return masked_softmax(self.score(tf.cast(query, self.compute_dtype), memory.keys),
                          memory.mask)


class BahdanauAttention(AttentionMechanism):
  """Additive attention ``v . tanh(keys + W q [+ b])``; ``normalize``: weight-normalised
  ``v`` with a learned scale and a bias (GNMT's form)."""

  def __init__(self, num_units: int, normalize: bool = False, initializer: Any = None,
               **kwargs: Any):
    super().__init__(num_units, initializer, **kwargs)
    self.normalize = normalize
    self.query_layer = keras.layers.Dense(num_units, use_bias=False,
                                          kernel_initializer=fresh(self._initializer),
                                          dtype=self.dtype_policy, name="query_layer")

  def build(self, memory_depth: int, query_depth: int) -> None:
    self.query_layer.build((None, query_depth))
    n = self.num_units
    # The score vector and its scale stay float32 (no autocast): see score().
    self.attention_v = self.add_weight(shape=(n,), initializer=fresh(self._initializer),
                                       name="attention_v", autocast=False)
    if self.normalize:
      self.attention_g = self.add_weight(
          shape=(), initializer=keras.initializers.Constant(math.sqrt(1.0 / n)),
          name="attention_g", autocast=False)
      self.attention_b = self.add_weight(shape=(n,), initializer="zeros", name="attention_b")
    super().build(memory_depth, query_depth)

  def score(self, query: tf.Tensor, keys: tf.Tensor) -> tf.Tensor:
    hidden = keys + self.query_layer(query)[:, None, :]
    v = tf.cast(self.attention_v, tf.float32)
    if self.normalize:
      hidden += tf.cast(self.attention_b, hidden.dtype)
      v = tf.cast(self.attention_g, tf.float32) * v * tf.math.rsqrt(tf.reduce_sum(v * v))
    # The reduction over units in float32: it decides the softmax.
    return tf.reduce_sum(tf.cast(tf.tanh(hidden), tf.float32) * v, -1)


class LuongAttention(AttentionMechanism):
  """Multiplicative attention ``q . keys``; ``scale``: times a learned scalar."""

  def __init__(self, num_units: int, scale: bool = False, initializer: Any = None,
               **kwargs: Any):
    super().__init__(num_units, initializer, **kwargs)
    self.scale = scale

  def build(self, memory_depth: int, query_depth: int) -> None:
    if query_depth != self.num_units:
      raise ConfigError(f"Luong attention scores a dot product: the query's size "
                        f"({query_depth}) must equal the attention depth ({self.num_units})")
    if self.scale:
      self.attention_g = self.add_weight(shape=(), initializer="ones", name="attention_g",
                                         autocast=False)
    super().build(memory_depth, query_depth)

  def score(self, query: tf.Tensor, keys: tf.Tensor) -> tf.Tensor:
    score = tf.cast(tf.einsum("bd,bsd->bs", query, keys), tf.float32)
    if self.scale:
      score *= tf.cast(self.attention_g, tf.float32)
    return score


def _units(cell: Any) -> int:
  size = getattr(cell, "output_size", None)
  if size is None:
    size = cell.state_size
    size = size[0] if isinstance(size, (list, tuple)) else size
  return int(size)


def _state_sizes(cell: Any) -> list[int]:
  size = cell.state_size
  return [int(s) for s in size] if isinstance(size, (list, tuple)) else [int(size)]


class AttentionDecoderCell(keras.layers.Layer):
  """One decoder time step: recurrent cells with attention over a memory (module doc).

  Call :meth:`build_for` with the input and memory depths before the first step (outside any
  ``tf.while_loop``: it creates the variables), :meth:`initial_state` once per sequence, then
  :meth:`step`. The state is a dict: ``cells`` (each cell's state tensors, zeros at first),
  ``attention`` (the previous step's attention, fed to the bottom cell), ``coverage``
  (float32 alignments summed over the steps so far) and, for a location-aware mechanism
  only, ``alignments`` (the previous step's, float32).

  Args:
    cells: Keras recurrent cells, bottom first.
    mechanism: the scoring mechanism.
    wiring: "standard", "gnmt" or "gnmt_v2".
    input_keep_prob, output_keep_prob: keep probabilities of the dropout on each cell's
      input and output (in training only).
    residual: residual connections (standard: every cell, sizes must match; GNMT: from the
      third cell up).
    attention_layer_units: standard wiring only: size of a Luong attention layer over
      ``[top output; context]`` (None: the attention is the context).
    output_attention: standard wiring only: True, False or "both" (module doc).
    initializer: kernel initializer of the attention layer.
  """

  def __init__(self, cells: Sequence[keras.layers.Layer], mechanism: AttentionMechanism,
               wiring: str = "standard", input_keep_prob: float = 1.0,
               output_keep_prob: float = 1.0, residual: bool = False,
               attention_layer_units: int | None = None, output_attention: bool | str = True,
               initializer: Any = None, **kwargs: Any):
    super().__init__(**kwargs)
    if wiring not in WIRINGS:
      raise ValueError(f"wiring must be one of {WIRINGS}, got {wiring!r}")
    if output_attention not in (True, False, "both"):
      raise ValueError(f"output_attention must be True, False or 'both', got "
                       f"{output_attention!r}")
    if wiring != "standard" and attention_layer_units is not None:
      raise ValueError("GNMT wirings use the context as attention (no attention layer)")
    self.cells = list(cells)
    self.mechanism = mechanism
    #: The mechanism scores with the previous and cumulative alignments (module doc).
    self.location_aware = hasattr(mechanism, "location_alignments")
    self.wiring = wiring
    self.input_keep_prob = input_keep_prob
    self.output_keep_prob = output_keep_prob
    self.residual = residual
    self.output_attention = output_attention
    self.attention_layer = None
    if attention_layer_units is not None:
      self.attention_layer = keras.layers.Dense(
          attention_layer_units, use_bias=False, dtype=self.dtype_policy,
          kernel_initializer=initializer or keras.initializers.GlorotUniform(),
          name="attention_layer")

  # ------------------------------------------------------------------ sizes
  def attention_size(self, memory_depth: int) -> int:
    return self.attention_layer.units if self.attention_layer is not None else memory_depth

  def output_size(self, memory_depth: int) -> int:
    top = _units(self.cells[-1])
    if self.wiring != "standard" or self.output_attention is False:
      return top
    attention = self.attention_size(memory_depth)
    return attention if self.output_attention is True else top + attention

  def query_size(self) -> int:
    """Size of the attention query: the top cell's output (standard) or the bottom's."""
    return _units(self.cells[-1] if self.wiring == "standard" else self.cells[0])

  def build_for(self, input_size: int, memory_depth: int) -> None:
    """Creates every variable for inputs of ``input_size`` and a memory of ``memory_depth``.

    Raises:
      ConfigError: residual connections between layers of different sizes.
    """
    attention = self.attention_size(memory_depth)
    size = input_size + attention  # the bottom cell always reads [input; attention]
    for i, cell in enumerate(self.cells):
      units = _units(cell)
      if self._has_residual(i):
        actual = size if self.wiring == "standard" else size - memory_depth
        # GNMT's residual adds the first `units` features of a wider input (a weight-tied
        # last layer is narrower than the one below it), as GNMT's residual function did
        if actual != units and (self.wiring == "standard" or actual < units):
          raise ConfigError(f"decoder_use_skip_connections: layer {i} adds its input "
                            f"({actual}) to its output ({units}); sizes must match")
      cell.build((None, size))
      size = units + (memory_depth if self.wiring != "standard" else 0)
    self.mechanism.build(memory_depth, self.query_size())
    if self.attention_layer is not None:
      self.attention_layer.build((None, _units(self.cells[-1]) + memory_depth))
    self.built = True

  def _has_residual(self, index: int) -> bool:
    return self.residual and (self.wiring == "standard" or index >= 2)

  # ------------------------------------------------------------------ running
  def initial_state(self, batch_size: Any, memory: AttentionMemory) -> dict:
    """Zero cell states and attention, zero coverage, for ``batch_size`` sequences."""
    dtype = self.compute_dtype
    cells = [[tf.zeros(tf.stack([batch_size, n]), dtype) for n in _state_sizes(cell)]
             for cell in self.cells]
    depth = memory.values.shape[-1]
    attention = tf.zeros(tf.stack([batch_size, self.attention_size(depth)]), dtype)
    coverage = tf.zeros(tf.stack([batch_size, tf.shape(memory.mask)[1]]), tf.float32)
    state = {"cells": cells, "attention": attention, "coverage": coverage}
    if self.location_aware:
      state["alignments"] = tf.zeros_like(coverage)
    return state

  def _dropout(self, x: tf.Tensor, keep: float, seed: tf.Tensor | None, slot: int
               ) -> tf.Tensor:
    if seed is None or keep >= 1.0:
      return x
    # Stateless: no RNG variable changes inside the caller's while_loop.
    return tf.nn.experimental.stateless_dropout(
        x, rate=1.0 - keep, seed=seed + tf.constant([0, slot], seed.dtype))

  def _run_cell(self, index: int, inputs: tf.Tensor, states: list, seed: tf.Tensor | None,
                actual_input: tf.Tensor | None = None) -> tuple[tf.Tensor, list]:
    cell = self.cells[index]
    x = self._dropout(inputs, self.input_keep_prob, seed, 2 * index)
    output, new_states = cell(tf.cast(x, cell.compute_dtype), list(states),
                              training=seed is not None)
    new_states = list(new_states) if isinstance(new_states, (list, tuple)) else [new_states]
    if self._has_residual(index) and self.wiring == "standard":
      output += tf.cast(x, output.dtype)
    output = self._dropout(output, self.output_keep_prob, seed, 2 * index + 1)
    if self._has_residual(index) and self.wiring != "standard":
      output += tf.cast(actual_input[..., :output.shape[-1]], output.dtype)
    return output, new_states

  def step(self, inputs: tf.Tensor, state: dict, memory: AttentionMemory,
           dropout_seed: tf.Tensor | None = None) -> tuple[tf.Tensor, dict, tf.Tensor]:
    """One time step.

    Args:
      inputs: [B, input_size] (the embedded previous token).
      state: from :meth:`initial_state` or the previous step.
      memory: the prepared memory (tiled like ``inputs`` under beam search).
      dropout_seed: int64 [2] seed of this step's dropout masks (distinct per step), or
        None: no dropout (inference).

    Returns:
      (output [B, output_size] compute dtype, new state, alignments [B, S] float32).
    """
    previous = state["attention"]
    x = tf.concat([tf.cast(inputs, previous.dtype), previous], -1)
    cell_states = []
    if self.wiring == "standard":
      for i in range(len(self.cells)):
        x, s = self._run_cell(i, x, state["cells"][i], dropout_seed)
        cell_states.append(s)
      alignments = self._alignments(x, state, memory)
      context = attention_context(alignments, memory.values)
      attention = context
      if self.attention_layer is not None:
        attention = self.attention_layer(tf.concat([tf.cast(x, context.dtype), context], -1))
      if self.output_attention == "both":
        output = tf.concat([tf.cast(x, attention.dtype), attention], -1)
      else:
        output = attention if self.output_attention else x
    else:
      x, s = self._run_cell(0, x, state["cells"][0], dropout_seed)
      cell_states.append(s)
      alignments = self._alignments(x, state, memory)
      attention = attention_context(alignments, memory.values)
      fed = attention if self.wiring == "gnmt_v2" else previous
      for i in range(1, len(self.cells)):
        inputs_i = tf.concat([tf.cast(x, fed.dtype), fed], -1)
        x, s = self._run_cell(i, inputs_i, state["cells"][i], dropout_seed, actual_input=x)
        cell_states.append(s)
      output = x
    new_state = {"cells": cell_states, "attention": tf.cast(attention, previous.dtype),
                 "coverage": state["coverage"] + alignments}
    if self.location_aware:
      new_state["alignments"] = alignments
    return tf.cast(output, self.compute_dtype), new_state, alignments

  def _alignments(self, query: tf.Tensor, state: dict, memory: AttentionMemory) -> tf.Tensor:
    if self.location_aware:
      return self.mechanism.location_alignments(query, memory, state["alignments"],
                                                state["coverage"])
    return self.mechanism.alignments(query, memory)


__all__ = ["AttentionMemory", "AttentionMechanism", "BahdanauAttention", "LuongAttention",
           "AttentionDecoderCell", "masked_softmax", "attention_context", "WIRINGS"]
