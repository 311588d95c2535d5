"""Building blocks of the Conformer (Gulati et al. 2020): convolutional subsampling,
relative-position self-attention, the feed-forward and convolution modules and the block;
chunked limited-context attention for streaming (``streaming``) and the streaming
recognizer (``recognizer``: encoder and greedy decoding with carried state)."""

from open_seq2seq.parts.conformer.attention import (RelPositionMultiHeadAttention, rel_shift,
                                                    relative_position_encoding)
from open_seq2seq.parts.conformer.modules import (ConformerBlock, ConformerConvolution,
                                                  ConformerFeedForward, stochastic_depth_probs)
from open_seq2seq.parts.conformer.streaming import chunk_visibility
from open_seq2seq.parts.conformer.subsampling import ConvSubsampling, subsampled_lengths

__all__ = ["RelPositionMultiHeadAttention", "rel_shift", "relative_position_encoding",
           "ConformerBlock", "ConformerConvolution", "ConformerFeedForward",
           "stochastic_depth_probs", "ConvSubsampling", "subsampled_lengths",
           "chunk_visibility"]
