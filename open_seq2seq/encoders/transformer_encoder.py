"""Transformer encoder (Vaswani et al. 2017): embeddings + positions, then a stack of
self-attention and feed-forward layers with residual connections and normalization (layer
norm, or OpenSeq2Seq's L1 layer norm or batch norm)."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.transformer.attention import SelfAttention
from open_seq2seq.parts.transformer.embedding_layer import EmbeddingSharedWeights
from open_seq2seq.parts.transformer.ffn_layer import FeedForwardNetwork
from open_seq2seq.parts.transformer.normalization import make_norm
from open_seq2seq.parts.dropout import dropout, dropout_seed_generator
from open_seq2seq.parts.transformer.utils import (SHARED_PARAMS, ResidualNorm,
                                                  check_shared_params,
                                                  get_padding_bias, get_padding_mask,
                                                  get_position_encoding)
from open_seq2seq.utils.component import resolve_size
from open_seq2seq.utils.params import Param


class TransformerEncoderLayer(keras.layers.Layer):
  """Self-attention then feed-forward, each wrapped in :class:`ResidualNorm`."""

  def __init__(self, params: dict, initializer: Any, **kwargs):
    super().__init__(**kwargs)
    hidden, policy = params["hidden_size"], self.dtype_policy
    residual = dict(hidden_size=hidden, dropout_rate=params["layer_postprocess_dropout"],
                    norm_placement=params["norm_placement"],
                    norm_params=params["norm_params"], dtype=policy)
    self.self_attention = SelfAttention(hidden, params["num_heads"],
                                        params["attention_dropout"], initializer,
                                        params["max_relative_positions"], dtype=policy,
                                        name="self_attention")
    self.self_attention_norm = ResidualNorm(**residual, name="self_attention_wrapper")
    self.ffn = FeedForwardNetwork(hidden, params["filter_size"], params["relu_dropout"],
                                  initializer, dtype=policy, name="ffn")
    self.ffn_norm = ResidualNorm(**residual, name="ffn_wrapper")

  def build(self, input_shape=None):
    for layer in (self.self_attention, self.self_attention_norm, self.ffn, self.ffn_norm):
      layer.build()

  def call(self, x: tf.Tensor, bias: tf.Tensor, training: bool | None = None,
           padding_mask: tf.Tensor | None = None) -> tf.Tensor:
    """``padding_mask``: bool [B, T], True at real positions (batch norm's statistics)."""
    norm = dict(training=training, padding_mask=padding_mask)
    y = self.self_attention(self.self_attention_norm.pre(x, **norm), bias, training=training)
    x = self.self_attention_norm.post(x, y, **norm)
    y = self.ffn(self.ffn_norm.pre(x, **norm), training=training)
    return self.ffn_norm.post(x, y, **norm)


class TransformerEncoder(Encoder):
  """Transformer encoder with OpenSeq2Seq's parameter names.

  Input: ``{"source_tensors": (ids [B, T] int, lengths [B] int)}``. Output dict:

  * ``"outputs"``: [B, T, hidden_size] in the compute dtype (padded positions hold
    values that nothing downstream attends to);
  * ``"src_lengths"``: [B] int32;
  * ``"inputs_attention_bias"``: [B, 1, 1, T] additive mask of padded source positions;
  * ``"encoder_input"``: the source ids.

  The source :class:`EmbeddingSharedWeights` is the attribute ``embedding_softmax_layer``
  (with ``shared_embed`` the model hands it to the decoder's ``reuse_embeddings``). Unlike
  OpenSeq2Seq it is not in the output dict: Keras 3 rejects a layer object mixed with
  tensors in the decoder's call argument.

  The vocabulary size is ``src_vocab_size`` if set, else ``vocab_size`` (which the model
  takes from its data layer's description).
  """

  #: Variables indexed by the source vocabulary (rows mapped by token on load_model).
  VOCAB_INDEXED = {"embedding_softmax_layer.embeddings": ("input", 0)}

  PARAMS = {
      "encoder_layers": Param(int, doc="Number of encoder layers."),
      **SHARED_PARAMS,
      "src_vocab_size": Param((int, None), None,
                              "Source vocabulary size (default: from the data layer)."),
      "remove_padding": Param(bool, True, "Ignored: OpenSeq2Seq's speed-up that ran the "
                              "feed-forward network on non-padding positions only; outputs at "
                              "real positions are the same without it."),
  }

  def __init__(self, params: dict[str, Any], *, vocab_size: int | None = None,
               mode: str = "train", name: str = "transformer_encoder",
               dtype: Any = "float32", initializer: Any = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    check_shared_params(self.params, "encoder_params")
    if self.params["encoder_layers"] <= 0:
      raise ConfigError(f"encoder_params/encoder_layers: must be positive, "
                        f"got {self.params['encoder_layers']}")
    self.vocab_size = resolve_size(self.params, "src_vocab_size", vocab_size, "encoder_params")
    initializer = self.kernel_initializer()
    policy = self.dtype_policy
    self.embedding_softmax_layer = EmbeddingSharedWeights(
        self.vocab_size, self.params["hidden_size"], self.params["pad_embeddings_2_eight"],
        self.params["scale_embeddings"], dtype=policy, name="embedding")
    self.encoder_layers = [
        TransformerEncoderLayer(self.params, initializer, dtype=policy, name=f"layer_{i}")
        for i in range(self.params["encoder_layers"])]
    self.output_normalization = None
    if self.params["norm_placement"] == "pre":
      self.output_normalization = make_norm(self.params["norm_params"], dtype=policy,
                                            name="output_normalization")
    # Everything is built now: variables get nested paths (encoder/layer_0/...) and exist
    # before the first tf.function trace.
    self.build()

  def build(self, input_shape=None):
    self.embedding_softmax_layer.build()
    for layer in self.encoder_layers:
      layer.build()
    if self.output_normalization is not None:
      self.output_normalization.build((None, self.params["hidden_size"]))
    self.seed_generator = dropout_seed_generator(self.params["layer_postprocess_dropout"])

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    ids, lengths = input_dict["source_tensors"]
    lengths = tf.cast(lengths, tf.int32)
    length = tf.shape(ids)[1]
    bias = get_padding_bias(lengths, length, self.compute_dtype)
    mask = get_padding_mask(lengths, length)

    x = self.embedding_softmax_layer(ids)
    if not self.params["max_relative_positions"]:
      x += tf.cast(get_position_encoding(length, self.params["hidden_size"]), x.dtype)
    x = dropout(x, self.params["layer_postprocess_dropout"], training, self.seed_generator)
    for layer in self.encoder_layers:
      x = layer(x, bias, training=training, padding_mask=mask)
    if self.output_normalization is not None:
      x = self.output_normalization(x, padding_mask=mask, training=training)
    return {
        "outputs": x,
        "src_lengths": lengths,
        "inputs_attention_bias": bias,
        "encoder_input": ids,
    }
