"""Building blocks of ConvS2S (Gehring et al. 2017): gated linear units, weight-normalized
linear and conv layers, multi-step attention, token and learned position embeddings."""

from open_seq2seq.parts.convs2s.attention_wn_layer import AttentionLayerNormalized
from open_seq2seq.parts.convs2s.conv_wn_layer import Conv1DNetworkNormalized
from open_seq2seq.parts.convs2s.embedding_layer import ConvS2SEmbedding, PositionEmbedding
from open_seq2seq.parts.convs2s.ffn_wn_layer import (FeedForwardNetworkNormalized,
                                                     FeedFowardNetworkNormalized)
from open_seq2seq.parts.convs2s.utils import gated_linear_units

__all__ = ["AttentionLayerNormalized", "Conv1DNetworkNormalized", "ConvS2SEmbedding",
           "PositionEmbedding", "FeedForwardNetworkNormalized", "FeedFowardNetworkNormalized",
           "gated_linear_units"]
