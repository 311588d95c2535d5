"""Decoders."""

from open_seq2seq.decoders.centaur_decoder import CentaurDecoder
from open_seq2seq.decoders.convs2s_decoder import ConvS2SDecoder
from open_seq2seq.decoders.decoder import Decoder
from open_seq2seq.decoders.fake_decoder import FakeDecoder
from open_seq2seq.decoders.fastpitch_decoder import FastPitchDecoder
from open_seq2seq.decoders.fc_classifier import FullyConnectedDecoder
from open_seq2seq.decoders.fc_decoders import FullyConnectedCTCDecoder, FullyConnectedSCDecoder
from open_seq2seq.decoders.jca_decoder import JointCTCAttentionDecoder
from open_seq2seq.decoders.las_decoder import ListenAttendSpellDecoder
from open_seq2seq.decoders.rnn_decoders import (BeamSearchRNNDecoderWithAttention,
                                                RNNDecoderWithAttention)
from open_seq2seq.decoders.tacotron2_decoder import Tacotron2Decoder
from open_seq2seq.decoders.transformer_decoder import TransformerDecoder
from open_seq2seq.decoders.transducer_decoder import TransducerDecoder

__all__ = ["Decoder", "TransformerDecoder", "FullyConnectedCTCDecoder",
           "FullyConnectedDecoder", "FullyConnectedSCDecoder", "FakeDecoder", "ConvS2SDecoder",
           "RNNDecoderWithAttention", "BeamSearchRNNDecoderWithAttention",
           "Tacotron2Decoder", "CentaurDecoder",
           "ListenAttendSpellDecoder", "JointCTCAttentionDecoder", "TransducerDecoder",
           "FastPitchDecoder"]
