"""Convolutional decoder of ConvS2S (Gehring et al. 2017): causal gated convolutions with
multi-step attention in every layer; teacher forcing with targets, incremental greedy or
beam-search decoding without."""

from __future__ import annotations

import logging
from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.decoders import decoding
from open_seq2seq.decoders.decoder import (BEAM_FINISH, BEAM_STOP, MIN_DECODE_LENGTH,
                                           EmbeddingSharingDecoder)
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts import beam_search
from open_seq2seq.parts.convs2s.attention_wn_layer import AttentionLayerNormalized, source_scale
from open_seq2seq.parts.convs2s.conv_wn_layer import Conv1DNetworkNormalized
from open_seq2seq.parts.convs2s.embedding_layer import ConvS2SEmbedding, PositionEmbedding
from open_seq2seq.parts.convs2s.ffn_wn_layer import FeedForwardNetworkNormalized
from open_seq2seq.parts.convs2s.utils import (SHARED_PARAMS, conv_layers,
                                            normalized_layer_kwargs, residual_scale)
from open_seq2seq.parts.dropout import dropout, dropout_seed_generator
from open_seq2seq.parts.transformer.utils import get_padding_mask
from open_seq2seq.utils.component import resolve_size
from open_seq2seq.utils.params import Param

_log = logging.getLogger(__name__)


class ConvS2SDecoder(EmbeddingSharingDecoder):
  """ConvS2S decoder with OpenSeq2Seq's parameter names.

  Each layer: ``(attention(conv(x)) + residual(x)) * scaling_factor`` with a causal conv
  (dropout on its input, gated linear units) and multi-step attention (see
  :class:`~open_seq2seq.parts.convs2s.AttentionLayerNormalized`): the query is the conv
  output plus the target embedding, the keys the encoder's ``"outputs"``, the values its
  ``"outputs_b"`` (``"outputs"`` when the encoder gives none, e.g. an RNN encoder); both must
  be ``tgt_emb_size`` wide. After the layers: a linear map to ``out_emb_size``, dropout and
  the projection to the vocabulary (the shared embedding's transpose with ``shared_embed``).

  With targets (teacher forcing) the decoder reads ``[GO_SYMBOL] + ids[:-1]`` and returns
  ``"logits"`` [B, T, vocab] float32 aligned with ``ids``, ``"outputs"`` (argmax) and
  ``"final_sequence_lengths"``. Without targets it decodes at most the source length +
  ``extra_decode_length`` tokens, greedily (``beam_size`` 1), by beam search (GNMT length
  penalty ``alpha``) or by sampling (:mod:`open_seq2seq.decoders.decoding`; never PAD or
  GO), and returns ``"outputs"`` [B, T'] int32 (PAD_SYMBOL after END_SYMBOL),
  ``"final_sequence_lengths"``, ``"scores"`` and, with ``n_best`` > 1, the ``"nbest_*"``
  outputs (the input's ``"source_tensors"``, when given, seed each example's samples).
  Decoding is incremental: every conv keeps its last ``kernel_width - 1`` inputs in the
  search state, so a step costs one pass through the layers at one position.

  The vocabulary size is ``tgt_vocab_size`` if set, else ``vocab_size`` (from the model).
  """

  EMBEDDING_WIDTH_KEY = "tgt_emb_size"

  #: Variables indexed by the target vocabulary (mapped by token on load_model): the
  #: embedding's rows; the projection's columns, gains, bias and norm weights.
  VOCAB_INDEXED = {"embedding_softmax_layer.embeddings": ("input", 0),
                   "output_projection.v": ("output", 1), "output_projection.g": ("output", 0),
                   "output_projection.b": ("output", 0),
                   "output_projection.norm.gamma": ("output", 0),
                   "output_projection.norm.beta": ("output", 0)}

  PARAMS = {
      **SHARED_PARAMS,
      "tgt_emb_size": Param(int, doc="Width of the target embeddings (and of the encoder "
                            "outputs the attention reads)."),
      "tgt_vocab_size": Param((int, None), None,
                              "Target vocabulary size (default: from the data layer)."),
      "decoder_layers": Param((int, None), None, "Number of conv layers; when set it must "
                              "equal len(conv_nchannels_kwidth), which decides."),
      "out_emb_size": Param((int, None), None, "Width before the vocabulary projection "
                            "(default tgt_emb_size; must equal it with shared_embed)."),
      "out_dropout_keep_prob": Param(float, 0.8, "Keep probability of dropout before the "
                                     "vocabulary projection."),
      "pos_embed": Param(bool, True, "Add learned position embeddings to the target "
                         "embeddings."),
      "shared_embed": Param(bool, False, "Use the encoder's embedding_softmax_layer as "
                            "target embedding and output projection (same vocabulary); "
                            "when the encoder has none, the decoder uses its own, as "
                            "OpenSeq2Seq did."),
      "beam_size": Param(int, 1, "Beam width at inference; 1 means greedy decoding."),
      "alpha": Param(float, 0.6, "GNMT length-penalty exponent for beam search."),
      "extra_decode_length": Param(int, 50,
                                   "Decode at most source length + this many tokens."),
      "min_decode_length": MIN_DECODE_LENGTH,
      "beam_stop": BEAM_STOP,
      "beam_finish": BEAM_FINISH,
      **decoding.DECODING_PARAMS,
      "EOS_ID": Param(int, 3, "Ignored: decoding stops at END_SYMBOL, the end id of the "
                      "data layer's vocabulary (OpenSeq2Seq's beam search alone read EOS_ID)."),
      "GO_SYMBOL": Param(int, 2, "Id fed as the first decoder input."),
      "END_SYMBOL": Param(int, 3, "Id that ends a decoded sequence."),
      "PAD_SYMBOL": Param(int, 0, "Id written after the end of a decoded sequence."),
  }

  def __init__(self, params: dict[str, Any], *, vocab_size: int | None = None,
               mode: str = "train", name: str = "convs2s_decoder",
               dtype: Any = "float32", initializer: Any = None,
               random_seed: int | None = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    self.conv_spec = conv_layers(p, "decoder_params", "decoder_layers")
    for key, minimum in (("tgt_emb_size", 1), ("beam_size", 1), ("extra_decode_length", 0),
                         ("min_decode_length", 0)):
      if p[key] < minimum:
        raise ConfigError(f"decoder_params/{key}: must be >= {minimum}, got {p[key]}")
    decoding.Decoding.from_params(p, p["beam_size"], "beam_size")
    self.random_seed = random_seed  # of the samples (decoding.decode)
    self.vocab_size = resolve_size(p, "tgt_vocab_size", vocab_size, "decoder_params")
    emb = p["tgt_emb_size"]
    self.out_emb_size = p["out_emb_size"] if p["out_emb_size"] is not None else emb
    if self.out_emb_size <= 0:
      raise ConfigError(f"decoder_params/out_emb_size: must be positive, "
                        f"got {self.out_emb_size}")
    if p["shared_embed"] and self.out_emb_size != emb:
      raise ConfigError(f"decoder_params/out_emb_size: {self.out_emb_size} differs from "
                        f"tgt_emb_size {emb}, but shared_embed projects with the embedding; "
                        f"make them equal or set shared_embed=False")
    policy = self.dtype_policy
    norm = normalized_layer_kwargs(p, policy)
    # Created even with shared_embed (unbuilt, so without variables): the fallback when the
    # encoder has no embedding to share is built in reuse_embeddings.
    self.embedding_softmax_layer = ConvS2SEmbedding(
        self.vocab_size, emb, p["pad_embeddings_2_eight"], dtype=policy, name="embedding")
    self.position_embedding_layer = None
    if p["pos_embed"]:
      self.position_embedding_layer = PositionEmbedding(
          p["max_input_length"], emb, dtype=policy, name="pos_embedding")
    widths = [c for c, _ in self.conv_spec]
    self.linear_before = FeedForwardNetworkNormalized(
        emb, widths[0], p["embedding_dropout_keep_prob"],
        name="linear_mapping_before_cnn_layers", **norm)
    self.projections, self.convs, self.attentions = [], [], []
    for i, (out_dim, width) in enumerate(self.conv_spec):
      in_dim = widths[i - 1] if i else widths[0]
      self.projections.append(None if in_dim == out_dim else FeedForwardNetworkNormalized(
          in_dim, out_dim, name=f"linear_mapping_cnn_{i + 1}", **norm))
      self.convs.append(Conv1DNetworkNormalized(
          in_dim, out_dim, width, p["hidden_dropout_keep_prob"], causal=True,
          activation=p["conv_activation"], name=f"conv_layer_{i + 1}", **norm))
      self.attentions.append(AttentionLayerNormalized(
          out_dim, emb, p["scaling_factor"], name=f"attention_layer_{i + 1}", **norm))
    self.linear_after = FeedForwardNetworkNormalized(
        widths[-1], self.out_emb_size, name="linear_mapping_after_cnn_layers", **norm)
    self.output_projection = None
    if not p["shared_embed"]:
      self.output_projection = FeedForwardNetworkNormalized(
          self.out_emb_size, self.vocab_size, p["out_dropout_keep_prob"],
          name="linear_mapping_to_vocabspace", **norm)
    # Everything is built now: decoding runs the layers inside a while_loop, where no
    # variable may be created.
    self.build()

  def build(self, input_shape=None):
    if not self.params["shared_embed"]:
      self.embedding_softmax_layer.build()
    layers = [self.position_embedding_layer, self.linear_before, self.linear_after,
              self.output_projection, *self.projections, *self.convs, *self.attentions]
    for layer in layers:
      if layer is not None:
        layer.build()
    self.seed_generator = dropout_seed_generator(
        max(1.0 - self.params["embedding_dropout_keep_prob"],
            1.0 - self.params["out_dropout_keep_prob"]))

  def missing_shared_embedding(self) -> ConvS2SEmbedding:
    """An encoder without an embedding (an RNN's) leaves the decoder its own, as in
    OpenSeq2Seq, built now."""
    _log.warning("decoder_params/shared_embed: the encoder has no embedding_softmax_layer "
                 "to share; the ConvS2S decoder uses its own target embedding")
    if not self.embedding_softmax_layer.built:
      # Under the decoder's name, as if built in build(): path convs2s_decoder/embedding/...
      with keras.name_scope(self.name):
        self.embedding_softmax_layer.build()
    return self.embedding_softmax_layer

  # ----------------------------------------------------------------- pieces
  def _memory(self, encoder_output: dict) -> tuple[tf.Tensor, ...]:
    """(keys, values, source mask, sqrt(source length)) from the encoder's output."""
    keys = encoder_output["outputs"]
    values = encoder_output.get("outputs_b")
    values = keys if values is None else values
    for name, tensor in (("outputs", keys), ("outputs_b", values)):
      if tensor.shape[-1] is not None and tensor.shape[-1] != self.params["tgt_emb_size"]:
        raise ConfigError(f"decoder_params/tgt_emb_size: {self.params['tgt_emb_size']} "
                          f"differs from the width {tensor.shape[-1]} of the encoder's "
                          f"{name!r} the attention reads; make them equal")
    keys, values = tf.cast(keys, self.compute_dtype), tf.cast(values, self.compute_dtype)
    lengths = tf.cast(encoder_output["src_lengths"], tf.int32)
    mask = get_padding_mask(lengths, tf.shape(keys)[1])
    return keys, values, mask, source_scale(lengths, self.compute_dtype)

  def _embed(self, ids: tf.Tensor, positions: tf.Tensor, embedding: Any) -> tf.Tensor:
    x = tf.cast(embedding(ids), self.compute_dtype)
    if self.position_embedding_layer is not None:
      x += self.position_embedding_layer(positions)
    return x

  def _stack(self, x: tf.Tensor, target_embed: tf.Tensor, memory: tuple,
              training: bool | None, padding_mask: tf.Tensor | None,
              caches: list | None = None) -> tuple[tf.Tensor, list | None]:
    """The conv/attention stack on whole sequences, or one step when ``caches`` is given."""
    norm = dict(training=training, padding_mask=padding_mask)
    new_caches = None if caches is None else []
    for i, (projection, conv, attention) in enumerate(
        zip(self.projections, self.convs, self.attentions)):
      residual = x if projection is None else projection(x, **norm)
      if caches is None:
        x = conv(x, **norm)
      else:
        x, cache = conv.step(x, caches[i])
        new_caches.append(cache)
      x = attention(x, target_embed, *memory, **norm)
      x = residual_scale(x + residual, self.params["scaling_factor"])
    return x, new_caches

  def _logits(self, x: tf.Tensor, embedding: Any, training: bool | None,
              padding_mask: tf.Tensor | None = None) -> tf.Tensor:
    """Linear map, dropout and vocabulary projection: float32 [..., vocab]."""
    x = self.linear_after(x, training=training, padding_mask=padding_mask)
    x = dropout(x, 1.0 - self.params["out_dropout_keep_prob"], training, self.seed_generator)
    if self.output_projection is None:
      logits = embedding.linear(x)
    else:
      logits = self.output_projection(x, training=training, padding_mask=padding_mask)
    return tf.cast(logits, tf.float32)

  # ----------------------------------------------------------------- modes
  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    encoder_output = input_dict["encoder_output"]
    embedding = self.embedding
    memory = self._memory(encoder_output)
    if input_dict.get("target_tensors") is None:
      return self._predict(memory, embedding, input_dict.get("source_tensors"))
    targets, target_lengths = input_dict["target_tensors"]
    target_lengths = tf.cast(target_lengths, tf.int32)
    logits = self._teacher_forcing(tf.cast(targets, tf.int32), target_lengths, memory,
                                   embedding, training)
    return {"logits": logits,
            "outputs": tf.argmax(logits, axis=-1, output_type=tf.int32),
            "final_sequence_lengths": target_lengths}

  def _teacher_forcing(self, targets: tf.Tensor, target_lengths: tf.Tensor, memory: tuple,
                       embedding: Any, training: bool | None) -> tf.Tensor:
    p = self.params
    go = tf.fill([tf.shape(targets)[0], 1], p["GO_SYMBOL"])
    inputs = tf.concat([go, targets[:, :-1]], axis=1)
    length = tf.shape(inputs)[1]
    # Target padding needs no zeroing: the convs are causal and padding sits after every
    # real position. Batch norm's statistics do skip it.
    mask = get_padding_mask(target_lengths, length)
    target_embed = self._embed(inputs, tf.range(length)[None], embedding)
    target_embed = dropout(target_embed, 1.0 - p["embedding_dropout_keep_prob"], training,
                           self.seed_generator)
    x = self.linear_before(target_embed, training=training, padding_mask=mask)
    x, _ = self._stack(x, target_embed, memory, training, mask)
    return self._logits(x, embedding, training, mask)

  def initial_caches(self, batch_size: Any) -> list:
    """Each conv's empty input cache (None for width-1 kernels)."""
    return [conv.empty_cache(batch_size, self.compute_dtype) for conv in self.convs]

  def step(self, ids: tf.Tensor, i: Any, caches: list, memory: tuple,
           embedding: Any) -> tuple[tf.Tensor, list]:
    """Logits float32 [batch, vocab] of the token after ``ids`` [batch] (at position ``i``)
    and the updated caches."""
    target_embed = self._embed(ids[:, None], tf.fill([1, 1], i), embedding)
    x = self.linear_before(target_embed, training=False)
    x, caches = self._stack(x, target_embed, memory, False, None, caches)
    return self._logits(x, embedding, False)[:, 0], caches

  def _predict(self, memory: tuple, embedding: Any, sources: tuple | None = None) -> dict:
    p = self.params
    search = decoding.Decoding.from_params(p, p["beam_size"], "beam_size")
    keys = memory[0]
    batch_size = tf.shape(keys)[0]
    # sqrt(length)^2 rounds in half precision: take the lengths from the mask instead.
    src_lengths = tf.reduce_sum(tf.cast(memory[2], tf.int32), axis=1)
    decode_lengths = src_lengths + p["extra_decode_length"]
    if search.rows > 1:
      # Tiled once and captured by the step function; only the caches follow the beams.
      memory = beam_search.tile_beam(memory, search.rows)
    caches = self.initial_caches(batch_size)
    # Width-1 convs have no cache: keep the state a list of tensors only.
    slots = [k for k, cache in enumerate(caches) if cache is not None]

    def step(ids, i, state):
      full = [None] * len(caches)
      for k, cache in zip(slots, state):
        full[k] = cache
      logits, full = self.step(ids, i, full, memory, embedding)
      return logits, [full[k] for k in slots]

    state = [caches[k] for k in slots]
    go = tf.fill([batch_size], p["GO_SYMBOL"])
    return decoding.decode(search, step, go, decode_lengths, p, self.vocab_size,
                           alpha=p["alpha"], states=state, seed=self.random_seed,
                           sources=sources)
