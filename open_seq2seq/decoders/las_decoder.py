"""ListenAttendSpellDecoder: the "speller" of Listen, Attend and Spell, as OpenSeq2Seq built it.

A stack of ``num_layers`` LSTM (or GRU) cells of ``hidden_dim`` units wrapped with attention
over the encoder's outputs (TF's ``AttentionWrapper`` wiring, see
:mod:`open_seq2seq.parts.rnns.attention`): the bottom cell reads ``[embedded previous
character; previous attention]``, the top cell's output queries the memory, an attention
layer (``hidden_dim`` units, no bias) reads ``[top output; context]`` and its output is both
the step's output and the next step's attention. A dense layer with a bias, after dropout,
gives the logits.

``attention_params/attention_type``:

* ``"bahadanu"`` (OpenSeq2Seq's spelling; ``"bahdanau"`` too): content-based additive
  attention ``v . tanh(W q + keys)``;
* ``"chorowski"``: location-aware attention (Chorowski et al., 2015): the score adds features
  of where the attention went, a convolution (10 filters of width 101, OpenSeq2Seq's sizes)
  over the previous step's alignments, or with ``use_coverage`` over their running sum;
* ``"zhaopeng"``: coverage attention (Tu et al., 2016): the score adds a projection of each
  position's running attention sum (the coverage vector).

The location-aware scores reuse Tacotron 2's mechanism
(:class:`open_seq2seq.parts.tacotron.attention.LocationSensitiveAttention`, whose convolution
reads two channels, previous and cumulative alignments): the channel an attention type does
not read gets zeros, so it adds nothing.

Symbols: targets are characters followed by ``END_SYMBOL``; the decoder feeds ``GO_SYMBOL``
first. Both come from the data layer with ``autoregressive: True`` (``<S>`` and ``</S>``),
unless the params set them.

**Training / eval with targets** (teacher forcing): reads ``[GO] + ids[:, :-1]`` and returns
``"logits"`` [B, T, V] float32 aligned with the targets, ``"outputs"`` (their argmax),
``"final_sequence_lengths"`` (the target lengths) and ``"alignments"`` [B, T, S] float32.

**Prediction** (no targets): at most as many characters as the encoder's output has frames
(OpenSeq2Seq's bound), greedily, or, in infer mode with ``beam_width`` > 1, by beam search
(no length penalty, as OpenSeq2Seq; ``beam_stop`` and ``beam_finish`` as the translation
decoders'). Returns ``"outputs"`` [B, T'] int32 (``END_SYMBOL``
after the end), ``"final_sequence_lengths"`` (characters including ``END_SYMBOL``) and
``"scores"`` (summed log-probability of the chosen transcript).
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.decoders.decoder import BEAM_FINISH, BEAM_STOP, MemoryDepthDecoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts import beam_search
from open_seq2seq.parts.rnns.attention import (AttentionDecoderCell, AttentionMemory,
                                               BahdanauAttention)
from open_seq2seq.parts.tacotron.attention import LocationSensitiveAttention
from open_seq2seq.utils.component import resolve_size
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS, fresh
from open_seq2seq.utils.params import Param, dict_of

#: Rows of the learned position tables (OpenSeq2Seq's size); later positions share the last.
MAX_POSITIONS = 1024
_TYPES = ("bahadanu", "bahdanau", "chorowski", "zhaopeng")


def _check_attention(params: dict, path: str) -> dict:
  if params["attention_dim"] < 1:
    raise ConfigError(f"{path}/attention_dim: must be at least 1, got {params['attention_dim']}")
  if params["num_heads"] != 1:
    raise ConfigError(f"{path}/num_heads: only one attention head is available, got "
                      f"{params['num_heads']}")
  return params


ATTENTION_PARAMS = {
    "attention_dim": Param(int, doc="Depth of the attention's keys and query projection."),
    "attention_type": Param(str, "chorowski", "bahadanu (content), chorowski (location-aware) "
                            "or zhaopeng (coverage).", choices=_TYPES),
    "use_coverage": Param(bool, False, "chorowski: convolve the running sum of the alignments "
                          "instead of the previous step's."),
    "num_heads": Param(int, 1, "Attention heads (only 1 is available)."),
    "plot_attention": Param(bool, False, "Ignored: the alignments are always among the "
                            "decoder's training outputs ('alignments')."),
}


class _LocationAttention(LocationSensitiveAttention):
  """Tacotron's location-sensitive attention reading one of its two location channels."""

  def __init__(self, num_units: int, cumulative: bool, **kwargs: Any):
    super().__init__(num_units, **kwargs)
    self.cumulative = cumulative

  def location_alignments(self, query: tf.Tensor, memory: AttentionMemory,
                          previous: tf.Tensor, cumulative: tf.Tensor) -> tf.Tensor:
    zeros = tf.zeros_like(previous)
    if self.cumulative:
      return super().location_alignments(query, memory, zeros, cumulative)
    return super().location_alignments(query, memory, previous, zeros)


class ListenAttendSpellDecoder(MemoryDepthDecoder):
  """Attention-based character decoder (module doc)."""

  PARAMS = {
      **INITIALIZER_PARAMS,
      "GO_SYMBOL": Param((int, None), None, "Id fed first (default: the data layer's <S>)."),
      "END_SYMBOL": Param((int, None), None, "Id ending a transcript (default: the data "
                          "layer's </S>)."),
      "tgt_vocab_size": Param((int, None), None, "Output classes (default: the data layer's)."),
      "tgt_emb_size": Param(int, doc="Size of the character embeddings."),
      "attention_params": Param(dict_of(ATTENTION_PARAMS, "attention_params", _check_attention),
                                doc="The attention: attention_dim, attention_type, "
                                "use_coverage, num_heads, plot_attention."),
      "rnn_type": Param(str, "lstm", "Decoder cells: lstm or gru.", choices=("lstm", "gru")),
      "hidden_dim": Param(int, doc="Units of each decoder layer and of the attention layer."),
      "num_layers": Param(int, 1, "Number of stacked decoder layers."),
      "dropout_keep_prob": Param(float, 1.0, "Keep probability of the dropout on each layer's "
                                 "output and on the output layer's input (training only)."),
      "pos_embedding": Param(bool, False, "Add learned position embeddings to the encoder's "
                             "outputs and to the decoder's inputs."),
      "beam_width": Param(int, 1, "Infer mode: beam width (1: greedy; eval is greedy)."),
      "beam_stop": BEAM_STOP,
      "beam_finish": BEAM_FINISH,
      "use_language_model": Param(bool, False, "Must be False: no external language model for "
                                  "the attention decoder."),
  }

  def __init__(self, params: dict[str, Any], *, vocab_size: int | None = None,
               go_symbol: int | None = None, end_symbol: int | None = None,
               mode: str = "train", name: str = "las_decoder", dtype: Any = "float32",
               initializer: Any = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    where = self.PARAMS_KEY
    for key in ("tgt_emb_size", "hidden_dim", "num_layers", "beam_width"):
      if p[key] < 1:
        raise ConfigError(f"{where}/{key}: must be at least 1, got {p[key]}")
    if not 0.0 < p["dropout_keep_prob"] <= 1.0:
      raise ConfigError(f"{where}/dropout_keep_prob: must be in (0, 1], got "
                        f"{p['dropout_keep_prob']}")
    if p["use_language_model"]:
      raise ConfigError(f"{where}/use_language_model: the attention decoder has no language "
                        f"model decoding; set it to False")
    self.vocab_size = resolve_size(p, "tgt_vocab_size", vocab_size, where)
    self.go_symbol = p["GO_SYMBOL"] if p["GO_SYMBOL"] is not None else go_symbol
    self.end_symbol = p["END_SYMBOL"] if p["END_SYMBOL"] is not None else end_symbol
    if self.go_symbol is None or self.end_symbol is None:
      raise ConfigError(f"{where}/GO_SYMBOL: unknown start/end symbols; set "
                        f"data_layer_params/autoregressive: True (or GO_SYMBOL and END_SYMBOL)")
    for key, value in (("GO_SYMBOL", self.go_symbol), ("END_SYMBOL", self.end_symbol)):
      if not 0 <= value < self.vocab_size:
        raise ConfigError(f"{where}/{key}: {value} is not an id below tgt_vocab_size "
                          f"{self.vocab_size}")
    policy = self.dtype_policy
    init = self.kernel_initializer()
    keep = p["dropout_keep_prob"]
    self.embedding_matrix = self.add_weight(
        shape=(self.vocab_size, p["tgt_emb_size"]), initializer=fresh(init),
        name="TargetEmbeddingMatrix")
    self.dec_pos_table = None
    if p["pos_embedding"]:
      self.dec_pos_table = self.add_weight(shape=(MAX_POSITIONS, p["tgt_emb_size"]),
                                           initializer=fresh(init),
                                           name="DecoderPositionEmbeddingMatrix")
    self.enc_pos_table = None  # needs the memory's depth: build_for_memory
    cell_class = keras.layers.LSTMCell if p["rnn_type"] == "lstm" else keras.layers.GRUCell
    cells = [cell_class(p["hidden_dim"], kernel_initializer=fresh(init),
                        recurrent_initializer=fresh(init), dtype=policy, name=f"cell_{i}")
             for i in range(p["num_layers"])]
    self.cell = AttentionDecoderCell(
        cells, self._mechanism(p["attention_params"], init), wiring="standard",
        output_keep_prob=keep, attention_layer_units=p["hidden_dim"], output_attention=True,
        initializer=fresh(init), dtype=policy, name="attention_cell")
    self.output_dropout = keras.layers.Dropout(1.0 - keep, dtype=policy) if keep < 1 else None
    self.output_projection = keras.layers.Dense(self.vocab_size, kernel_initializer=fresh(init),
                                                dtype=policy, name="output_projection")
    self.seed_generator = None
    if keep < 1.0:
      # A variable: checkpoints hold it, so a resumed run draws the same dropout masks.
      self.seed_generator = keras.random.SeedGenerator(name="dropout_seed")
    self.built = True

  def _mechanism(self, attention: dict, init: Any) -> Any:
    kind, units = attention["attention_type"], attention["attention_dim"]
    common = dict(initializer=fresh(init), dtype=self.dtype_policy, name="attention_mechanism")
    if kind in ("bahadanu", "bahdanau"):
      return BahdanauAttention(units, normalize=False, **common)
    if kind == "chorowski":
      return _LocationAttention(units, cumulative=attention["use_coverage"],
                                location_filters=10, location_kernel_size=101, **common)
    # zhaopeng: a projection of each position's coverage (a width-1 "convolution")
    return _LocationAttention(units, cumulative=True, location_filters=1,
                              location_kernel_size=1, **common)

  @classmethod
  def ignored_combinations(cls, params: dict[str, Any]) -> list[str]:
    """Keys that change nothing beside the other settings (one notice line each)."""
    attention = params.get("attention_params") or {}
    if attention.get("use_coverage") and attention.get("attention_type") in _TYPES[:2]:
      return ["attention_params/use_coverage: ignored: content-based attention reads no "
              "alignments"]
    return []

  def build(self, input_shape: Any = None) -> None:
    self.built = True

  def build_for_memory(self, memory_depth: int) -> None:
    p = self.params
    if p["pos_embedding"]:
      self.enc_pos_table = self.add_weight(shape=(MAX_POSITIONS, memory_depth),
                                           initializer=self.kernel_initializer(),
                                           name="EncoderPositionEmbeddingMatrix")
    self.cell.build_for(p["tgt_emb_size"], memory_depth)
    self.output_projection.build((None, self.cell.output_size(memory_depth)))

  # ----------------------------------------------------------------- pieces
  def _positions(self, table: Any, positions: tf.Tensor) -> tf.Tensor:
    positions = tf.minimum(tf.cast(positions, tf.int32), MAX_POSITIONS - 1)
    return tf.cast(tf.gather(table, positions), self.compute_dtype)

  def _memory(self, encoder_output: dict) -> tuple[AttentionMemory, tf.Tensor]:
    memory = encoder_output["outputs"]
    lengths = tf.cast(encoder_output["src_lengths"], tf.int32)
    self._ensure_built(memory.shape[-1])
    memory = tf.cast(memory, self.compute_dtype)
    if self.enc_pos_table is not None:
      memory += self._positions(self.enc_pos_table, tf.range(tf.shape(memory)[1]))[None]
    return self.cell.mechanism.prepare(memory, lengths), lengths

  def _logits(self, outputs: tf.Tensor, training: bool | None) -> tf.Tensor:
    if self.output_dropout is not None and training:
      outputs = self.output_dropout(outputs, training=True)
    return tf.cast(self.output_projection(outputs), tf.float32)

  # ----------------------------------------------------------------- modes
  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    memory, src_lengths = self._memory(input_dict["encoder_output"])
    table = tf.cast(tf.convert_to_tensor(self.embedding_matrix), self.compute_dtype)
    if input_dict.get("target_tensors") is None:
      beam = self.params["beam_width"] if self.mode == "infer" else 1
      return self.search(memory, src_lengths, table, beam)
    targets, target_lengths = input_dict["target_tensors"][:2]
    logits, alignments = self._teacher_forcing(tf.cast(targets, tf.int32), memory, table,
                                               training)
    return {"logits": logits, "outputs": tf.argmax(logits, axis=-1, output_type=tf.int32),
            "final_sequence_lengths": tf.cast(target_lengths, tf.int32),
            "alignments": alignments}

  def _teacher_forcing(self, targets: tf.Tensor, memory: AttentionMemory, table: tf.Tensor,
                       training: bool | None) -> tuple[tf.Tensor, tf.Tensor]:
    batch_size, steps = tf.shape(targets)[0], tf.shape(targets)[1]
    go = tf.fill([batch_size, 1], self.go_symbol)
    inputs = tf.gather(table, tf.concat([go, targets[:, :-1]], axis=1))  # [B, T, E]
    if self.dec_pos_table is not None:
      inputs += self._positions(self.dec_pos_table, tf.range(steps))[None]
    inputs = tf.TensorArray(inputs.dtype, size=steps).unstack(tf.transpose(inputs, [1, 0, 2]))
    seed = None
    if training and self.seed_generator is not None:
      seed = tf.cast(self.seed_generator.next(), tf.int64)
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
    return self._logits(outputs, training), tf.transpose(alignments.stack(), [1, 0, 2])

  def search(self, memory: AttentionMemory, src_lengths: tf.Tensor, table: tf.Tensor,
             beam_width: int, use_beam_search: bool | None = None) -> dict:
    """Decodes without targets: greedy, or beam search when ``beam_width`` > 1 (or
    ``use_beam_search``: a beam of 1 goes through the same search, for tests)."""
    batch_size = tf.shape(src_lengths)[0]
    decode_lengths = tf.maximum(src_lengths, 1)
    state = self.cell.initial_state(batch_size, memory)  # beam_search tiles it itself
    beam = beam_width > 1 if use_beam_search is None else use_beam_search
    if beam:
      memory = beam_search.tile_beam(memory, beam_width)

    def step(ids, i, state):
      inputs = tf.gather(table, ids)
      if self.dec_pos_table is not None:
        inputs += self._positions(self.dec_pos_table, i)[None]
      output, state, _ = self.cell.step(inputs, state, memory)
      return self._logits(output, False), state

    go = tf.fill([batch_size], self.go_symbol)
    if not beam:
      ids, scores, lengths = beam_search.greedy_decode(
          step, go, decode_lengths, self.end_symbol, states=state, pad_id=self.end_symbol)
    else:
      result = beam_search.beam_search(step, go, beam_width, decode_lengths, self.vocab_size,
                                       0.0, self.end_symbol, states=state,
                                       pad_id=self.end_symbol, stop=self.params["beam_stop"],
                                       finish=self.params["beam_finish"])
      ids, scores, lengths = result.ids[:, 0], result.scores[:, 0], result.lengths[:, 0]
    return {"outputs": ids, "final_sequence_lengths": lengths, "scores": scores,
            "src_lengths": src_lengths}


__all__ = ["ListenAttendSpellDecoder", "ATTENTION_PARAMS"]
