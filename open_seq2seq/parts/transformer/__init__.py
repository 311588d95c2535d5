"""Building blocks of the Transformer (Vaswani et al. 2017): attention, feed-forward network,
shared embedding/softmax weights, position encodings and masks."""

from open_seq2seq.parts.transformer.attention import Attention, SelfAttention
from open_seq2seq.parts.transformer.embedding_layer import EmbeddingSharedWeights
from open_seq2seq.parts.transformer.ffn_layer import FeedForwardNetwork, FeedFowardNetwork
from open_seq2seq.parts.transformer.utils import (ResidualNorm, get_decoder_self_attention_bias,
                                                  get_padding_bias, get_position_encoding)

__all__ = ["Attention", "SelfAttention", "EmbeddingSharedWeights", "FeedForwardNetwork",
           "FeedFowardNetwork", "ResidualNorm", "get_decoder_self_attention_bias",
           "get_padding_bias", "get_position_encoding"]
