"""Building blocks of Centaur (OpenSeq2Seq's convolutional + attention speech synthesis): the
convolution block (causal in the decoder, runnable frame by frame), the attention block with
its position encodings, and the decoder prenet."""

from open_seq2seq.parts.centaur.attention import (AttentionBlock, CentaurAttention,
                                                  position_encoding, window_mask)
from open_seq2seq.parts.centaur.conv_block import CONV_PARAMS, ConvBlock, check_conv_layer
from open_seq2seq.parts.centaur.prenet import Prenet

__all__ = ["AttentionBlock", "CentaurAttention", "ConvBlock", "Prenet", "CONV_PARAMS",
           "check_conv_layer", "position_encoding", "window_mask"]
