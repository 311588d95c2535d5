"""CentaurEncoder: symbol embeddings, residual convolution blocks and a linear projection."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.centaur.conv_block import CONV_PARAMS, ConvBlock, check_conv_layer
from open_seq2seq.parts.cnns.conv_blocks import sequence_mask
from open_seq2seq.parts.transformer.embedding_layer import EmbeddingSharedWeights
from open_seq2seq.utils.component import resolve_size
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS, fresh
from open_seq2seq.utils.params import Param, list_of


def _encoder_conv(layer: dict, path: str) -> dict:
  return check_conv_layer(layer, path, causal_default=False)


def check_dropout(params: dict, keys: tuple[str, ...], where: str) -> None:
  """Each of ``keys`` is a probability in [0, 1); raises a one-line ConfigError."""
  for key in keys:
    if not 0.0 <= params[key] < 1.0:
      raise ConfigError(f"{where}/{key}: must be in [0, 1), got {params[key]}")


class CentaurEncoder(Encoder):
  """Centaur's text encoder (OpenSeq2Seq's ``CentaurEncoder``).

  Symbol ids [B, N] are embedded (``embedding_size``, scaled by its square root as the
  Transformer's), go through ``conv_layers`` (conv + batch norm + activation + dropout,
  residual by default, "SAME" length; padding is never read) and a linear projection to
  ``output_size`` without bias. Returns ``outputs`` [B, N, output_size] (zero past each
  length) and ``src_lengths``; the decoder builds its attention mask from
  the lengths (OpenSeq2Seq passed an ``inputs_attention_bias`` instead).
  """

  PARAMS = {
      "src_vocab_size": Param((int, None), None,
                              "Symbols (default: the data layer's vocabulary)."),
      "embedding_size": Param(int, doc="Symbol embedding size (the conv blocks' width)."),
      "output_size": Param(int, doc="Width of the encoder outputs (linear projection)."),
      "conv_layers": Param(list_of(CONV_PARAMS, "a conv_layers entry", _encoder_conv),
                           doc="Convolution blocks after the embedding (non-causal, 'SAME')."),
      "pad_embeddings_2_eight": Param(bool, False, "Pad the embedding matrix's vocabulary to a "
                                      "multiple of 8."),
      "bn_momentum": Param(float, 0.95, "Batch-norm moving-average momentum."),
      "bn_epsilon": Param(float, 1e-8, "Batch-norm epsilon (OpenSeq2Seq's documented 1e-8)."),
      "cnn_dropout_prob": Param(float, 0.5, "Dropout after each conv block (training)."),
      "norm_type": Param((str, None), None, "Ignored: OpenSeq2Seq declared it but never read "
                         "it; the conv blocks always use batch norm."),
      **INITIALIZER_PARAMS,
  }

  def __init__(self, params: dict[str, Any], *, mode: str = "train", name: str = "encoder",
               dtype: Any = "float32", initializer: Any = None,
               src_vocab_size: int | None = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    policy = self.dtype_policy
    init = self.kernel_initializer()
    vocab = resolve_size(p, "src_vocab_size", src_vocab_size, self.PARAMS_KEY)
    for key in ("embedding_size", "output_size"):
      if p[key] <= 0:
        raise ConfigError(f"encoder_params/{key}: must be positive, got {p[key]}")
    check_dropout(p, ("cnn_dropout_prob",), "encoder_params")
    self.embedding = EmbeddingSharedWeights(vocab, p["embedding_size"],
                                            p["pad_embeddings_2_eight"], dtype=policy,
                                            name="embedding")
    self.convs = []
    channels = p["embedding_size"]
    for i, spec in enumerate(p["conv_layers"]):
      if spec["is_causal"]:
        raise ConfigError(f"encoder_params/conv_layers/{i}/is_causal: the encoder reads the "
                          f"whole text; use non-causal convolutions")
      filters = channels if spec["num_channels"] == -1 else spec["num_channels"]
      try:
        self.convs.append(ConvBlock(filters, spec["kernel_size"][0], channels,
                                    spec["activation_fn"], p["cnn_dropout_prob"],
                                    p["bn_momentum"], p["bn_epsilon"], spec["is_residual"],
                                    False, init, dtype=policy, name=f"conv_{i}"))
      except ConfigError as e:
        raise ConfigError(f"encoder_params/conv_layers/{i}/{e}") from None
      channels = filters
    self.channels = channels
    self.linear_projection = keras.layers.Dense(p["output_size"], use_bias=False,
                                                kernel_initializer=fresh(init), dtype=policy,
                                                name="linear_projection")

  def build(self, input_shape: Any = None) -> None:
    self.embedding.build()
    for conv in self.convs:
      conv.build()
    self.linear_projection.build((None, self.channels))
    self.built = True

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    ids, lengths = input_dict["source_tensors"]
    lengths = tf.cast(lengths, tf.int32)
    x = self.embedding(ids)
    for conv in self.convs:
      x = conv(x, lengths, training=training)
    x = self.linear_projection(x)
    x = x * tf.cast(sequence_mask(lengths, tf.shape(x)[1]), x.dtype)[:, :, None]
    return {"outputs": x, "src_lengths": lengths}
