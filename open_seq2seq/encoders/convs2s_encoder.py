"""Fully convolutional encoder of ConvS2S (Gehring et al. 2017)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.convs2s.conv_wn_layer import Conv1DNetworkNormalized
from open_seq2seq.parts.convs2s.embedding_layer import ConvS2SEmbedding, PositionEmbedding
from open_seq2seq.parts.convs2s.ffn_wn_layer import FeedForwardNetworkNormalized
from open_seq2seq.parts.convs2s.utils import (SHARED_PARAMS, conv_layers,
                                            normalized_layer_kwargs, residual_scale)
from open_seq2seq.parts.dropout import dropout, dropout_seed_generator
from open_seq2seq.parts.transformer.utils import get_padding_bias, get_padding_mask
from open_seq2seq.utils.component import resolve_size
from open_seq2seq.utils.params import Param


def scale_gradient(x: tf.Tensor, scale: float) -> tf.Tensor:
  """``x`` unchanged going forward; its gradient multiplied by ``scale`` going back."""
  frozen = tf.stop_gradient(x)
  return frozen + tf.cast(scale, x.dtype) * (x - frozen)


class ConvS2SEncoder(Encoder):
  """ConvS2S encoder with OpenSeq2Seq's parameter names.

  Token embedding plus learned position embedding, dropout, a linear map to the first conv
  width, then one block per ``conv_nchannels_kwidth`` entry: ``(conv(x) + residual(x)) *
  scaling_factor``, where ``residual`` is a linear projection when the width changes and
  the conv ("SAME" padding) is preceded by dropout and followed by the activation (gated
  linear units). A last linear map returns to ``src_emb_size``. Padding positions are zeroed
  before every conv, so padding never changes an output at a real position.

  Input: ``{"source_tensors": (ids [B, S] int, lengths [B] int)}``. Output dict:

  * ``"outputs"`` [B, S, src_emb_size] (compute dtype): the attention keys. Going back,
    its gradient is scaled by ``1 / (2 * att_layer_num)`` (every decoder attention layer
    sends one).
  * ``"outputs_b"``: ``(outputs + embeddings) * scaling_factor``, the attention values.
  * ``"state"`` [B, src_emb_size]: mean of ``outputs_b`` over the real positions (for
    decoders that start from a state; OpenSeq2Seq averaged over the padded length).
  * ``"src_lengths"`` [B] int32, ``"encoder_input"`` (the ids), and
    ``"inputs_attention_bias"`` [B, 1, 1, S] (additive mask, the Transformer's format).

  Padding outputs (``outputs``, ``outputs_b``) are zero. The token embedding is the
  attribute ``embedding_softmax_layer`` (a decoder with ``shared_embed`` reuses it).
  """

  #: Variables indexed by the source vocabulary (rows mapped by token on load_model).
  VOCAB_INDEXED = {"embedding_softmax_layer.embeddings": ("input", 0)}

  PARAMS = {
      **SHARED_PARAMS,
      "src_emb_size": Param(int, doc="Width of the token and position embeddings and of "
                            "the outputs."),
      "src_vocab_size": Param((int, None), None,
                              "Source vocabulary size (default: from the data layer)."),
      "encoder_layers": Param((int, None), None, "Number of conv layers; when set it must "
                              "equal len(conv_nchannels_kwidth), which decides."),
      "att_layer_num": Param(int, 1, "Number of decoder attention layers: the keys' "
                             "gradient is scaled by 1 / (2 * att_layer_num)."),
      "PAD_SYMBOL": Param(int, 0, "Ignored: padding positions come from the source lengths "
                          "(OpenSeq2Seq found them by this id)."),
  }

  def __init__(self, params: dict[str, Any], *, vocab_size: int | None = None,
               mode: str = "train", name: str = "convs2s_encoder",
               dtype: Any = "float32", initializer: Any = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    self.conv_spec = conv_layers(p, "encoder_params", "encoder_layers")
    for key in ("src_emb_size", "att_layer_num"):
      if p[key] <= 0:
        raise ConfigError(f"encoder_params/{key}: must be positive, got {p[key]}")
    self.vocab_size = resolve_size(p, "src_vocab_size", vocab_size, "encoder_params")
    policy, emb = self.dtype_policy, p["src_emb_size"]
    norm = normalized_layer_kwargs(p, policy)
    self.embedding_softmax_layer = ConvS2SEmbedding(
        self.vocab_size, emb, p["pad_embeddings_2_eight"], dtype=policy, name="embedding")
    self.position_embedding_layer = PositionEmbedding(
        p["max_input_length"], emb, dtype=policy, name="pos_embedding")
    widths = [c for c, _ in self.conv_spec]
    self.linear_before = FeedForwardNetworkNormalized(
        emb, widths[0], p["embedding_dropout_keep_prob"],
        name="linear_mapping_before_cnn_layers", **norm)
    self.projections, self.convs = [], []
    for i, (out_dim, width) in enumerate(self.conv_spec):
      in_dim = widths[i - 1] if i else widths[0]
      self.projections.append(None if in_dim == out_dim else FeedForwardNetworkNormalized(
          in_dim, out_dim, name=f"linear_mapping_cnn_{i + 1}", **norm))
      self.convs.append(Conv1DNetworkNormalized(
          in_dim, out_dim, width, p["hidden_dropout_keep_prob"], causal=False,
          activation=p["conv_activation"], name=f"conv_layer_{i + 1}", **norm))
    self.linear_after = FeedForwardNetworkNormalized(
        widths[-1], emb, name="linear_mapping_after_cnn_layers", **norm)
    # Everything is built now, before the first tf.function trace.
    self.build()

  def build(self, input_shape=None):
    self.embedding_softmax_layer.build()
    self.position_embedding_layer.build()
    for layer in [self.linear_before, self.linear_after, *self.convs, *self.projections]:
      if layer is not None:
        layer.build()
    self.seed_generator = dropout_seed_generator(
        1.0 - self.params["embedding_dropout_keep_prob"])

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    p = self.params
    ids, lengths = input_dict["source_tensors"]
    lengths = tf.cast(lengths, tf.int32)
    length = tf.shape(ids)[1]
    mask = get_padding_mask(lengths, length)
    real = tf.cast(mask, self.compute_dtype)[:, :, None]
    norm = dict(training=training, padding_mask=mask)

    embedded = self.embedding_softmax_layer(ids) + self.position_embedding_layer(
        tf.range(length))[None]
    embedded = dropout(embedded, 1.0 - p["embedding_dropout_keep_prob"], training,
                       self.seed_generator)
    embedded *= real
    x = self.linear_before(embedded, **norm)
    for projection, conv in zip(self.projections, self.convs):
      residual = x if projection is None else projection(x, **norm)
      x = conv(x * real, **norm)
      x = residual_scale(x + residual, p["scaling_factor"])
    x = self.linear_after(x, **norm) * real
    outputs = scale_gradient(x, 1.0 / (2.0 * p["att_layer_num"]))
    outputs_b = residual_scale(outputs + embedded, p["scaling_factor"]) * real
    count = tf.maximum(tf.cast(lengths, outputs_b.dtype), tf.ones([], outputs_b.dtype))
    state = tf.reduce_sum(outputs_b, axis=1) / count[:, None]
    return {
        "outputs": outputs,
        "outputs_b": outputs_b,
        "state": state,
        "src_lengths": lengths,
        "inputs_attention_bias": get_padding_bias(lengths, length, self.compute_dtype),
        "encoder_input": ids,
    }
