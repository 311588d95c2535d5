"""Recurrent decoders with attention (OpenSeq2Seq's ``RNNDecoderWithAttention`` and its beam
search variant): Bahdanau, Luong, GNMT and GNMT v2 attention over the encoder's outputs.

As in OpenSeq2Seq:

* every layer is ``core_cell(**core_cell_params)`` (TF 1 spellings are translated, see
  :mod:`open_seq2seq.parts.rnns.cells`), with dropout on its input and output in training;
* the decoder starts from zero states: the encoder's final ``state`` is not used;
* ``attention_layer_size`` is the depth of the attention mechanism (its keys), not an output
  layer; the bahdanau/luong output layer reads the attention context
  (``output_attention=True``), the GNMT types read the top cell's output;
* the output projection has no bias; the target embedding is its own matrix, or, with
  ``weight_tied``, the projection's kernel.

How each ``attention_type`` wires cells and attention is described in
:mod:`open_seq2seq.parts.rnns.attention`.

**Training / eval with targets** (teacher forcing): the decoder reads ``[GO_SYMBOL] +
ids[:, :-1]`` one step at a time (a ``tf.while_loop``) and returns ``"logits"`` [B, T, V]
float32 aligned with the target ids, ``"outputs"`` (their argmax), ``"final_sequence_lengths"``
and ``"alignments"`` [B, T, S] (float32 attention weights of every step).

**Inference** (no targets): at most ``2 * source length + extra_decode_length`` tokens per
example (OpenSeq2Seq decoded up to twice the longest source of the batch), greedily, by
sampling or, in :class:`BeamSearchRNNDecoderWithAttention` with ``beam_width`` > 1, by beam
search with GNMT's length and coverage penalties (:mod:`open_seq2seq.decoders.decoding`;
never PAD or GO). Returns ``"outputs"`` [B, T'] int32 (no GO symbol, PAD_SYMBOL after
END_SYMBOL), ``"final_sequence_lengths"`` (tokens including END_SYMBOL), ``"scores"``
(penalised score of the best beam; summed log-probability when greedy or sampled) and, with
``n_best`` > 1, the ``"nbest_*"`` outputs (the input's ``"source_tensors"``, when given, seed
each example's samples).
"""

from __future__ import annotations

import inspect
from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.decoders import decoding
from open_seq2seq.decoders.decoder import (BEAM_FINISH, BEAM_STOP, MIN_DECODE_LENGTH,
                                           MemoryDepthDecoder)
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts import beam_search
from open_seq2seq.parts.rnns.attention import (AttentionDecoderCell, AttentionMemory,
                                               BahdanauAttention, LuongAttention)
from open_seq2seq.parts.rnns.cells import make_cell
from open_seq2seq.utils.component import resolve_size
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS, fresh
from open_seq2seq.utils.params import Param, callable_or_class

_KEEP = "Keep probability of dropout on every layer's "
_NOT_GNMT = ("bahdanau", "luong")


def _takes(cls: Any, keyword: str) -> bool:
  try:
    return keyword in inspect.signature(cls).parameters
  except (TypeError, ValueError):
    return False


class RNNDecoderWithAttention(MemoryDepthDecoder):
  """Stacked recurrent cells with attention; greedy decoding at inference (module doc)."""

  #: Variables indexed by the target vocabulary (mapped by token on load_model).
  VOCAB_INDEXED = {"embedding_matrix": ("input", 0), "output_projection.kernel": ("output", 1)}

  PARAMS = {
      **INITIALIZER_PARAMS,
      "tgt_vocab_size": Param((int, None), None,
                              "Target vocabulary size (default: from the data layer)."),
      "tgt_emb_size": Param(int, doc="Size of the target embeddings."),
      "core_cell": Param((callable_or_class, None), None,
                         "Cell class of every layer: keras.layers.LSTMCell or GRUCell (TF 1 "
                         "cells ported by renaming the class)."),
      "core_cell_params": Param(dict, {}, "Keyword arguments of core_cell (num_units, "
                                "forget_bias ...; TF 1 or Keras spellings)."),
      "decoder_cell_type": Param((str, None), None,
                                 "Older OpenSeq2Seq spelling of the cell, used only when "
                                 "core_cell is not set: 'lstm' or 'gru'.",
                                 choices=("lstm", "gru", "glstm", "slstm", None)),
      "decoder_cell_units": Param((int, None), None, "Units of the decoder_cell_type cells."),
      "decoder_layers": Param(int, doc="Number of stacked recurrent layers."),
      "decoder_use_skip_connections": Param(bool, False,
                                            "Residual connections (GNMT types: from the third "
                                            "layer up, as GNMT)."),
      "decoder_dp_input_keep_prob": Param(float, 1.0, _KEEP + "input (training only)."),
      "decoder_dp_output_keep_prob": Param(float, 1.0, _KEEP + "output (training only)."),
      "attention_type": Param(str, doc="Attention and its wiring: 'bahdanau', 'luong', "
                              "'gnmt' or 'gnmt_v2'.",
                              choices=("bahdanau", "luong", "gnmt", "gnmt_v2")),
      "attention_layer_size": Param(int, doc="Depth of the attention mechanism's keys "
                                    "(luong: must equal the top layer's units)."),
      "bahdanau_normalize": Param(bool, False, "Weight-normalised Bahdanau scores (the gnmt "
                                  "types always use them)."),
      "luong_scale": Param(bool, False, "Learned scalar scale of Luong scores."),
      "output_attention": Param((bool, str), True,
                                "bahdanau/luong: the output projection reads the attention "
                                "context (True, OpenSeq2Seq), the top layer's output (False) "
                                "or both concatenated ('both').",
                                choices=(True, False, "both")),
      "weight_tied": Param(bool, False, "Use the output projection's kernel as target "
                           "embedding; the top layer then has tgt_emb_size units, and the "
                           "decoder's output size must be tgt_emb_size."),
      "GO_SYMBOL": Param(int, 2, "Id fed as the first decoder input."),
      "END_SYMBOL": Param(int, 3, "Id that ends a decoded sequence."),
      "PAD_SYMBOL": Param(int, 0, "Id written after the end of a decoded sequence."),
      "extra_decode_length": Param(int, 0, "Inference decodes at most 2 * source length + "
                                   "this many tokens per example."),
      "min_decode_length": MIN_DECODE_LENGTH,
      "beam_stop": BEAM_STOP,
      "beam_finish": BEAM_FINISH,
      **decoding.DECODING_PARAMS,
      "use_swap_memory": Param(bool, False, "Ignored: TF 2 while loops do not swap their "
                               "activations to host memory (tf.while_loop drops swap_memory)."),
      "time_major": Param(bool, False, "Ignored: tensors stay batch-major (a TF 1 layout "
                          "choice that changed no result)."),
      "proj_size": Param((int, None), None, "Ignored: a parameter of OpenSeq2Seq's group "
                         "LSTM cells, which are not available."),
      "num_groups": Param((int, None), None, "Ignored: a parameter of OpenSeq2Seq's group "
                          "LSTM cells, which are not available."),
  }

  def __init__(self, params: dict[str, Any], *, vocab_size: int | None = None,
               mode: str = "train", name: str = "rnn_decoder_with_attention",
               dtype: Any = "float32", initializer: Any = None,
               random_seed: int | None = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    self.random_seed = random_seed  # of the samples (decoding.decode)
    for key, minimum in (("decoder_layers", 1), ("tgt_emb_size", 1),
                         ("attention_layer_size", 1), ("extra_decode_length", 0),
                         ("min_decode_length", 0)):
      if p[key] < minimum:
        raise ConfigError(f"decoder_params/{key}: must be >= {minimum}, got {p[key]}")
    for key in ("decoder_dp_input_keep_prob", "decoder_dp_output_keep_prob"):
      if not 0.0 < p[key] <= 1.0:
        raise ConfigError(f"decoder_params/{key}: must be in (0, 1], got {p[key]}")
    self._search_settings()  # checks the inference keys now
    self.vocab_size = resolve_size(p, "tgt_vocab_size", vocab_size, "decoder_params")
    policy = self.dtype_policy
    kind = p["attention_type"]

    self.output_projection = keras.layers.Dense(
        self.vocab_size, use_bias=False, kernel_initializer=self.kernel_initializer(),
        dtype=policy, name="output_projection")
    self.embedding_matrix = None
    if not p["weight_tied"]:
      self.embedding_matrix = self.add_weight(
          shape=(self.vocab_size, p["tgt_emb_size"]), initializer=self.kernel_initializer(),
          name="DecoderEmbeddingMatrix")
    count = p["decoder_layers"]
    cells = [self._make_cell(i, i == count - 1) for i in range(count)]
    units = int(cells[-1].units) if hasattr(cells[-1], "units") else None
    if kind == "luong" and units != p["attention_layer_size"]:
      raise ConfigError(f"decoder_params/attention_layer_size: Luong attention scores the top "
                        f"layer's output ({units} units) by a dot product with keys of this "
                        f"depth; set it to {units}")
    mechanism_args = dict(initializer=self.kernel_initializer(), dtype=policy,
                          name="attention_mechanism")
    if kind == "luong":
      mechanism = LuongAttention(p["attention_layer_size"], scale=p["luong_scale"],
                                 **mechanism_args)
    else:
      mechanism = BahdanauAttention(p["attention_layer_size"],
                                    normalize=p["bahdanau_normalize"] or kind not in _NOT_GNMT,
                                    **mechanism_args)
    self.cell = AttentionDecoderCell(
        cells, mechanism, wiring="standard" if kind in _NOT_GNMT else kind,
        input_keep_prob=p["decoder_dp_input_keep_prob"],
        output_keep_prob=p["decoder_dp_output_keep_prob"],
        residual=p["decoder_use_skip_connections"],
        output_attention=p["output_attention"] if kind in _NOT_GNMT else False,
        dtype=policy, name="attention_cell")
    self.seed_generator = None
    if p["decoder_dp_input_keep_prob"] < 1.0 or p["decoder_dp_output_keep_prob"] < 1.0:
      # A variable: checkpoints hold it, so a resumed run draws the same dropout masks.
      self.seed_generator = keras.random.SeedGenerator(name="dropout_seed")
    # The cells' and attention's variables need the memory's depth; they are created at the
    # first call (before any while_loop): build_for_memory.
    self.built = True

  # ----------------------------------------------------------------- construction
  def _cell_config(self) -> tuple[Any, dict]:
    p = self.params
    if p["core_cell"] is not None:
      return p["core_cell"], dict(p["core_cell_params"])
    kind = p["decoder_cell_type"]
    if kind is None:
      raise ConfigError("decoder_params/core_cell: not set; e.g. keras.layers.LSTMCell with "
                        "core_cell_params {'num_units': 512}")
    if kind not in ("lstm", "gru"):
      raise ConfigError(f"decoder_params/decoder_cell_type: {kind!r} cells are not available; "
                        f"use core_cell (keras.layers.LSTMCell or GRUCell)")
    if p["decoder_cell_units"] is None:
      raise ConfigError("decoder_params/decoder_cell_units: needed with decoder_cell_type")
    cell = keras.layers.LSTMCell if kind == "lstm" else keras.layers.GRUCell
    return cell, {"num_units": p["decoder_cell_units"]}  # TF 1 spelling: TF 1 GRU gates

  def _make_cell(self, index: int, last: bool) -> keras.layers.Layer:
    p = self.params
    cell_class, cell_params = self._cell_config()
    where = "decoder_params/core_cell_params"
    if last and p["weight_tied"]:
      cell_params.pop("units", None)
      cell_params["num_units"] = p["tgt_emb_size"]
    for key in ("dropout", "recurrent_dropout"):
      if cell_params.get(key):
        raise ConfigError(f"{where}/{key}: cell dropout is not supported in this decoder; use "
                          f"decoder_dp_input_keep_prob / decoder_dp_output_keep_prob")
    extra: dict[str, Any] = {"dtype": self.dtype_policy, "name": f"cell_{index}"}
    if "kernel_initializer" not in cell_params and "initializer" not in cell_params:
      # TF 1 applied the decoder's initializer to the whole kernel, recurrent part included.
      init = self.kernel_initializer()
      extra["kernel_initializer"] = init
      if _takes(cell_class, "recurrent_initializer"):
        extra["recurrent_initializer"] = fresh(init)
    cell = make_cell(cell_class, cell_params, where, **extra)
    if not hasattr(cell, "state_size") or isinstance(cell, keras.layers.RNN):
      raise ConfigError(f"decoder_params/core_cell: {cell_class!r} is not a recurrent cell; "
                        f"use keras.layers.LSTMCell or keras.layers.GRUCell")
    return cell

  @classmethod
  def ignored_combinations(cls, params: dict[str, Any]) -> list[str]:
    """Keys that change nothing beside the other settings (one notice line each)."""
    lines = []
    if params.get("core_cell") is not None:
      lines += [f"{key}: ignored: core_cell is set" for key in
                ("decoder_cell_type", "decoder_cell_units") if params.get(key) is not None]
    kind = params.get("attention_type")
    if kind in ("gnmt", "gnmt_v2"):
      if params.get("bahdanau_normalize"):
        lines.append("bahdanau_normalize: ignored: gnmt attention is always normalised")
      if params.get("output_attention", True) is not True:
        lines.append("output_attention: ignored: gnmt types output the top layer's output")
    if kind != "luong" and params.get("luong_scale"):
      lines.append(f"luong_scale: ignored: attention_type is {kind!r}")
    return lines

  def build(self, input_shape: Any = None) -> None:
    self.built = True

  def build_for_memory(self, memory_depth: int) -> None:
    p = self.params
    self.cell.build_for(p["tgt_emb_size"], memory_depth)
    output_size = self.cell.output_size(memory_depth)
    if p["weight_tied"] and output_size != p["tgt_emb_size"]:
      raise ConfigError(f"decoder_params/weight_tied: the decoder's outputs ({output_size}) "
                        f"must have tgt_emb_size ({p['tgt_emb_size']}) values to share the "
                        f"projection with the embedding")
    self.output_projection.build((None, output_size))

  # ----------------------------------------------------------------- pieces
  def _embedding_table(self) -> tf.Tensor:
    """Target embeddings [V, E] in the compute dtype (read once per call, outside loops)."""
    if self.embedding_matrix is None:
      table = tf.transpose(self.output_projection.kernel)
    else:
      table = tf.convert_to_tensor(self.embedding_matrix)
    return tf.cast(table, self.compute_dtype)

  def _logits(self, outputs: tf.Tensor) -> tf.Tensor:
    return tf.cast(self.output_projection(outputs), tf.float32)

  def _memory(self, encoder_output: dict) -> tuple[AttentionMemory, tf.Tensor]:
    memory = encoder_output["outputs"]
    lengths = tf.cast(encoder_output["src_lengths"], tf.int32)
    self._ensure_built(memory.shape[-1])
    return self.cell.mechanism.prepare(memory, lengths), lengths

  def _dropout_seed(self, training: bool | None) -> tf.Tensor | None:
    if not training or self.seed_generator is None:
      return None
    return tf.cast(self.seed_generator.next(), tf.int64)

  def _search_settings(self) -> tuple[decoding.Decoding, float, float]:
    """(decoding, length penalty, coverage penalty) of inference: greedy or sampling here."""
    return decoding.Decoding.from_params(self.params, 1, ""), 0.0, 0.0

  # ----------------------------------------------------------------- modes
  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    memory, src_lengths = self._memory(input_dict["encoder_output"])
    table = self._embedding_table()
    if input_dict.get("target_tensors") is None:
      return self._predict(memory, src_lengths, table, input_dict.get("source_tensors"))
    targets, target_lengths = input_dict["target_tensors"]
    logits, alignments = self._teacher_forcing(tf.cast(targets, tf.int32), memory, table,
                                               training)
    return {"logits": logits,
            "outputs": tf.argmax(logits, axis=-1, output_type=tf.int32),
            "final_sequence_lengths": tf.cast(target_lengths, tf.int32),
            "alignments": alignments}

  def _teacher_forcing(self, targets: tf.Tensor, memory: AttentionMemory, table: tf.Tensor,
                       training: bool | None) -> tuple[tf.Tensor, tf.Tensor]:
    batch_size, steps = tf.shape(targets)[0], tf.shape(targets)[1]
    go = tf.fill([batch_size, 1], self.params["GO_SYMBOL"])
    inputs = tf.gather(table, tf.concat([go, targets[:, :-1]], axis=1))  # [B, T, E]
    inputs = tf.TensorArray(inputs.dtype, size=steps).unstack(tf.transpose(inputs, [1, 0, 2]))
    seed = self._dropout_seed(training)
    state = self.cell.initial_state(batch_size, memory)
    outputs = tf.TensorArray(self.compute_dtype, size=steps)
    alignments = tf.TensorArray(tf.float32, size=steps)

    def body(t, state, outputs, alignments):
      step_seed = None if seed is None else seed + tf.stack([tf.cast(t, tf.int64), 0])
      output, state, weights = self.cell.step(inputs.read(t), state, memory, step_seed)
      return t + 1, state, outputs.write(t, output), alignments.write(t, weights)

    _, _, outputs, alignments = tf.while_loop(
        lambda t, *_: t < steps, body, (tf.constant(0), state, outputs, alignments))
    outputs = tf.transpose(outputs.stack(), [1, 0, 2])
    alignments = tf.transpose(alignments.stack(), [1, 0, 2])
    return self._logits(outputs), alignments

  def _predict(self, memory: AttentionMemory, src_lengths: tf.Tensor, table: tf.Tensor,
               sources: tuple | None = None) -> dict:
    p = self.params
    search, alpha, beta = self._search_settings()
    batch_size = tf.shape(src_lengths)[0]
    decode_lengths = 2 * src_lengths + p["extra_decode_length"]
    state = self.cell.initial_state(batch_size, memory)  # the search tiles it itself
    if search.rows > 1:
      memory = beam_search.tile_beam(memory, search.rows)

    def step(ids, i, state):
      output, state, _ = self.cell.step(tf.gather(table, ids), state, memory)
      return self._logits(output), state

    go = tf.fill([batch_size], p["GO_SYMBOL"])
    return decoding.decode(
        search, step, go, decode_lengths, p, self.vocab_size, alpha=alpha, states=state,
        coverage_penalty=beta, seed=self.random_seed, sources=sources,
        coverage_fn=lambda s: beam_search.coverage_score(s["coverage"], memory.mask))


class BeamSearchRNNDecoderWithAttention(RNNDecoderWithAttention):
  """:class:`RNNDecoderWithAttention` decoding by beam search at inference.

  Hypotheses are ranked by GNMT's score ``log P / lp + cp``: length penalty
  ``lp = ((5 + |Y|) / 6) ** length_penalty`` and coverage penalty
  ``cp = coverage_penalty * sum_j log(min(sum_i a_ij, 1))`` over the real source positions j
  (see :mod:`open_seq2seq.parts.beam_search`). Training and eval with targets are those of
  the parent class (OpenSeq2Seq allowed this class in infer mode only).
  """

  PARAMS = {
      "beam_width": Param(int, 1, "Beam width at inference; 1 means greedy decoding."),
      "length_penalty": Param(float, 0.0, "GNMT length-penalty exponent of the beam scores "
                              "(0: plain log-probability)."),
      "coverage_penalty": Param(float, 0.0, "GNMT coverage-penalty weight of the beam scores "
                                "(0: none; not in OpenSeq2Seq)."),
  }

  def _search_settings(self) -> tuple[decoding.Decoding, float, float]:
    p = self.params
    for key, minimum in (("beam_width", 1), ("length_penalty", 0.0),
                         ("coverage_penalty", 0.0)):
      if p[key] < minimum:
        raise ConfigError(f"decoder_params/{key}: must be >= {minimum}, got {p[key]}")
    return (decoding.Decoding.from_params(p, p["beam_width"], "beam_width"),
            p["length_penalty"], p["coverage_penalty"])


__all__ = ["RNNDecoderWithAttention", "BeamSearchRNNDecoderWithAttention"]
