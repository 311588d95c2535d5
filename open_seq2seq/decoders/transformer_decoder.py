"""Transformer decoder (Vaswani et al. 2017): causal self-attention, encoder-decoder
attention and feed-forward layers; teacher forcing with targets, incremental (cached)
greedy or beam-search decoding without."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.decoders import decoding
from open_seq2seq.decoders.decoder import (BEAM_FINISH, BEAM_STOP, MIN_DECODE_LENGTH,
                                           EmbeddingSharingDecoder)
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts import beam_search
from open_seq2seq.parts.transformer.attention import Attention, SelfAttention
from open_seq2seq.parts.transformer.embedding_layer import EmbeddingSharedWeights
from open_seq2seq.parts.transformer.ffn_layer import FeedForwardNetwork
from open_seq2seq.parts.transformer.kv_store import KeyValueStore
from open_seq2seq.parts.transformer.normalization import make_norm
from open_seq2seq.parts.dropout import dropout, dropout_seed_generator
from open_seq2seq.parts.transformer.utils import (SHARED_PARAMS, ResidualNorm,
                                                  check_shared_params,
                                                  get_decoder_self_attention_bias,
                                                  get_padding_bias, get_padding_mask,
                                                  get_position_encoding)
from open_seq2seq.utils.component import resolve_size
from open_seq2seq.utils.params import Param


class TransformerDecoderLayer(keras.layers.Layer):
  """Causal self-attention, encoder-decoder attention and feed-forward sublayers."""

  def __init__(self, params: dict, initializer: Any, **kwargs):
    super().__init__(**kwargs)
    hidden, heads, policy = params["hidden_size"], params["num_heads"], self.dtype_policy
    residual = dict(hidden_size=hidden, dropout_rate=params["layer_postprocess_dropout"],
                    norm_placement=params["norm_placement"],
                    norm_params=params["norm_params"], dtype=policy)
    self.self_attention = SelfAttention(hidden, heads, params["attention_dropout"],
                                        initializer, params["max_relative_positions"],
                                        dtype=policy, name="self_attention")
    self.self_attention_norm = ResidualNorm(**residual, name="self_attention_wrapper")
    self.encdec_attention = Attention(hidden, heads, params["attention_dropout"], initializer,
                                      dtype=policy, name="encdec_attention")
    self.encdec_attention_norm = ResidualNorm(**residual, name="encdec_attention_wrapper")
    self.ffn = FeedForwardNetwork(hidden, params["filter_size"], params["relu_dropout"],
                                  initializer, dtype=policy, name="ffn")
    self.ffn_norm = ResidualNorm(**residual, name="ffn_wrapper")

  def build(self, input_shape=None):
    for layer in (self.self_attention, self.self_attention_norm, self.encdec_attention,
                  self.encdec_attention_norm, self.ffn, self.ffn_norm):
      layer.build()

  def call(self, x: tf.Tensor, memory: tf.Tensor | None, self_bias: tf.Tensor | None,
           memory_bias: tf.Tensor, cache: dict | None = None, memory_kv: tuple | None = None,
           training: bool | None = None, padding_mask: tf.Tensor | None = None):
    """Returns outputs, or ``(outputs, new_cache)`` when decoding with a ``cache``.

    ``padding_mask`` (bool [B, T], True at real target positions) feeds batch norm's
    training statistics; incremental decoding runs with moving statistics and needs none.
    """
    norm = dict(training=training, padding_mask=padding_mask)
    y = self.self_attention(self.self_attention_norm.pre(x, **norm), self_bias, cache=cache,
                            training=training)
    if cache is not None:
      y, cache = y
    x = self.self_attention_norm.post(x, y, **norm)
    y = self.encdec_attention(self.encdec_attention_norm.pre(x, **norm), memory, memory_bias,
                              memory_kv=memory_kv, training=training)
    x = self.encdec_attention_norm.post(x, y, **norm)
    y = self.ffn(self.ffn_norm.pre(x, **norm), training=training)
    x = self.ffn_norm.post(x, y, **norm)
    return x if cache is None else (x, cache)


class TransformerDecoder(EmbeddingSharingDecoder):
  """Transformer decoder with OpenSeq2Seq's parameter names.

  Input: ``{"encoder_output": dict, "target_tensors": (ids [B, T], lengths [B])}``; the
  encoder output needs ``"outputs"`` [B, S, hidden_size] and ``"src_lengths"``, and may give
  ``"inputs_attention_bias"``.

  With targets (teacher forcing) the decoder reads ``[GO_SYMBOL] + ids[:-1]`` and returns
  ``"logits"`` [B, T, vocab] float32 aligned with ``ids``, ``"outputs"`` (their argmax) and
  ``"final_sequence_lengths"`` (the target lengths).

  Without targets it decodes incrementally (cached keys/values) for at most the source
  length + ``extra_decode_length`` tokens per example: greedily when ``beam_size`` is 1, else
  by beam search with the GNMT length penalty ``alpha``, or by random sampling
  (:mod:`open_seq2seq.decoders.decoding`; never PAD or GO). It returns ``"outputs"``
  [B, T'] int32 (best hypothesis, no GO symbol, PAD_SYMBOL after END_SYMBOL),
  ``"final_sequence_lengths"`` [B] (tokens including END_SYMBOL) and ``"scores"`` [B]
  (length-penalised score of the best beam; summed log-probability when greedy or sampled),
  and with ``n_best`` > 1 the ``"nbest_*"`` outputs. The input may carry the batch's
  ``"source_tensors"``, from which each example's samples follow.

  The vocabulary size is ``tgt_vocab_size`` if set, else ``vocab_size`` (which the model
  takes from its data layer's description). With ``shared_embed`` the decoder has no
  embedding of its own: the model hands it the encoder's through :meth:`reuse_embeddings`.
  """

  #: Variables indexed by the target vocabulary (mapped by token on load_model): the
  #: embedding's rows, the untied projection's columns and bias.
  VOCAB_INDEXED = {"embedding_softmax_layer.embeddings": ("input", 0),
                   "output_projection.kernel": ("output", 1),
                   "output_projection.bias": ("output", 0)}

  PARAMS = {
      "num_hidden_layers": Param(int, doc="Number of decoder layers."),
      **SHARED_PARAMS,
      "tgt_vocab_size": Param((int, None), None,
                              "Target vocabulary size (default: from the data layer)."),
      "beam_size": Param(int, 1, "Beam width at inference; 1 means greedy decoding."),
      "alpha": Param(float, 0.6, "GNMT length-penalty exponent for beam search."),
      "extra_decode_length": Param(int, 50,
                                   "Decode at most source length + this many tokens."),
      "min_decode_length": MIN_DECODE_LENGTH,
      "beam_stop": BEAM_STOP,
      "beam_finish": BEAM_FINISH,
      **decoding.DECODING_PARAMS,
      "EOS_ID": Param(int, 3, "Ignored: every decoder stops at END_SYMBOL, the end id of the "
                      "data layer's vocabulary (OpenSeq2Seq's beam search alone read EOS_ID)."),
      "GO_SYMBOL": Param(int, 2, "Id fed as the first decoder input."),
      "END_SYMBOL": Param(int, 3, "Id that ends a decoded sequence."),
      "PAD_SYMBOL": Param(int, 0, "Id written after the end of a decoded sequence."),
      "tie_weights": Param(bool, True, "Use the target embedding matrix (transposed) as the "
                           "pre-softmax projection."),
      "shared_embed": Param(bool, False, "Use the encoder's embedding_softmax_layer as target "
                            "embedding (source and target vocabularies must be the same)."),
  }

  def __init__(self, params: dict[str, Any], *, vocab_size: int | None = None,
               mode: str = "train", name: str = "transformer_decoder",
               dtype: Any = "float32", initializer: Any = None,
               random_seed: int | None = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    check_shared_params(p, "decoder_params")
    for key, minimum in (("num_hidden_layers", 1), ("beam_size", 1),
                         ("extra_decode_length", 0),
                         ("min_decode_length", 0)):
      if p[key] < minimum:
        raise ConfigError(f"decoder_params/{key}: must be >= {minimum}, got {p[key]}")
    decoding.Decoding.from_params(p, p["beam_size"], "beam_size")
    self.random_seed = random_seed  # of the samples (decoding.decode)
    self.vocab_size = resolve_size(p, "tgt_vocab_size", vocab_size, "decoder_params")
    initializer = self.kernel_initializer()
    policy = self.dtype_policy
    hidden = p["hidden_size"]

    self.embedding_softmax_layer = None
    if not p["shared_embed"]:
      self.embedding_softmax_layer = EmbeddingSharedWeights(
          self.vocab_size, hidden, p["pad_embeddings_2_eight"], p["scale_embeddings"],
          dtype=policy, name="embedding")
    self.output_projection = None
    if not p["tie_weights"]:
      units = -(-self.vocab_size // 8) * 8 if p["pad_embeddings_2_eight"] else self.vocab_size
      self.output_projection = keras.layers.Dense(
          units, kernel_initializer=initializer, dtype=policy, name="output_projection")
    self.decoder_layers = [
        TransformerDecoderLayer(p, initializer, dtype=policy, name=f"layer_{i}")
        for i in range(p["num_hidden_layers"])]
    self.output_normalization = None
    if p["norm_placement"] == "pre":
      self.output_normalization = make_norm(p["norm_params"], dtype=policy,
                                            name="output_normalization")
    # Everything is built now: variables get nested paths (decoder/layer_0/...) and exist
    # before the first tf.function trace (decoding runs the layers inside a while_loop,
    # where no variable may be created).
    self.build()

  def build(self, input_shape=None):
    hidden = self.params["hidden_size"]
    if self.embedding_softmax_layer is not None:
      self.embedding_softmax_layer.build()
    if self.output_projection is not None:
      self.output_projection.build((None, hidden))
    for layer in self.decoder_layers:
      layer.build()
    if self.output_normalization is not None:
      self.output_normalization.build((None, hidden))
    self.seed_generator = dropout_seed_generator(self.params["layer_postprocess_dropout"])

  # ----------------------------------------------------------------- pieces
  def _logits(self, x: tf.Tensor, embedding: EmbeddingSharedWeights,
              training: bool | None = False, padding_mask: tf.Tensor | None = None
              ) -> tf.Tensor:
    """Final norm and projection: [..., hidden] -> float32 [..., vocab]."""
    if self.output_normalization is not None:
      x = self.output_normalization(x, padding_mask=padding_mask, training=training)
    if self.output_projection is None:
      logits = embedding.linear(x)
    else:
      logits = self.output_projection(x)
      if self.output_projection.units != self.vocab_size:
        logits = logits[..., :self.vocab_size]
    return tf.cast(logits, tf.float32)

  @staticmethod
  def _memory(encoder_output: dict) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    memory = encoder_output["outputs"]
    lengths = tf.cast(encoder_output["src_lengths"], tf.int32)
    bias = encoder_output.get("inputs_attention_bias")
    if bias is None:
      bias = get_padding_bias(lengths, tf.shape(memory)[1], memory.dtype)
    return memory, lengths, bias

  # ----------------------------------------------------------------- modes
  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    encoder_output = input_dict["encoder_output"]
    embedding = self.embedding
    if input_dict.get("target_tensors") is None:
      return self._predict(encoder_output, embedding, input_dict.get("source_tensors"))
    targets, target_lengths = input_dict["target_tensors"]
    logits = self._teacher_forcing(targets, target_lengths, encoder_output, embedding,
                                   training)
    return {"logits": logits,
            "outputs": tf.argmax(logits, axis=-1, output_type=tf.int32),
            "final_sequence_lengths": tf.cast(target_lengths, tf.int32)}

  def _teacher_forcing(self, targets: tf.Tensor, target_lengths: tf.Tensor,
                       encoder_output: dict, embedding: EmbeddingSharedWeights,
                       training: bool | None) -> tf.Tensor:
    memory, _, memory_bias = self._memory(encoder_output)
    targets = tf.cast(targets, tf.int32)
    go = tf.fill([tf.shape(targets)[0], 1], self.params["GO_SYMBOL"])
    inputs = tf.concat([go, targets[:, :-1]], axis=1)
    length = tf.shape(inputs)[1]
    x = embedding(inputs)
    if not self.params["max_relative_positions"]:
      x += tf.cast(get_position_encoding(length, self.params["hidden_size"]), x.dtype)
    x = dropout(x, self.params["layer_postprocess_dropout"], training, self.seed_generator)
    # Target padding needs no attention mask: it sits at the end, after every real position.
    # Batch norm's statistics do: the inputs GO, y_0 .. y_{n-2} of a target of n ids are real.
    self_bias = get_decoder_self_attention_bias(length, x.dtype)
    mask = get_padding_mask(tf.cast(target_lengths, tf.int32), length)
    for layer in self.decoder_layers:
      x = layer(x, memory, self_bias, memory_bias, training=training, padding_mask=mask)
    return self._logits(x, embedding, training, mask)

  def _predict(self, encoder_output: dict, embedding: EmbeddingSharedWeights,
               sources: tuple | None = None) -> dict:
    p = self.params
    memory, src_lengths, memory_bias = self._memory(encoder_output)
    search = decoding.Decoding.from_params(p, p["beam_size"], "beam_size")
    rows = search.rows  # hypotheses per example
    batch_size = tf.shape(memory)[0]
    decode_lengths = src_lengths + p["extra_decode_length"]
    positions = None  # relative positions: the self-attention knows the step
    if not p["max_relative_positions"]:
      positions = tf.cast(
          get_position_encoding(tf.reduce_max(decode_lengths) + 1, p["hidden_size"]),
          self.compute_dtype)
    # Memory keys/values are computed once (before tiling) and captured by the step
    # function. (Tiled: one matrix-vector product per hypothesis is faster on CPU than one
    # small matrix product per example once sources are long, docs/benchmarks.md.)
    # Self-attention keys/values go to one store (kv_store.py): the search reorders only
    # each hypothesis' row indices into it.
    memory_kv = [layer.encdec_attention.memory_kv(memory) for layer in self.decoder_layers]
    if rows > 1:
      memory_kv, memory_bias = beam_search.tile_beam((memory_kv, memory_bias), rows)
    store = KeyValueStore(len(self.decoder_layers), p["num_heads"],
                          p["hidden_size"] // p["num_heads"])
    buffer = store.buffer(batch_size * rows, tf.reduce_max(decode_lengths),
                          self.compute_dtype)
    states = {"rows": store.initial_rows(batch_size)}

    def step(ids, i, states, buffer):
      cache, rows = store.step(buffer, states["rows"], i)
      x = embedding(ids[:, None])
      if positions is not None:
        x += positions[i]
      for layer, layer_kv in zip(self.decoder_layers, memory_kv):
        x, cache = layer(x, None, None, memory_bias, cache=cache, memory_kv=layer_kv,
                         training=False)
      return self._logits(x[:, 0], embedding), {"rows": rows}, cache.buffer

    go = tf.fill([batch_size], p["GO_SYMBOL"])
    return decoding.decode(search, step, go, decode_lengths, p, self.vocab_size,
                           alpha=p["alpha"], states=states, buffers=buffer,
                           seed=self.random_seed, sources=sources)
