"""Encoders."""

from open_seq2seq.encoders.centaur_encoder import CentaurEncoder
from open_seq2seq.encoders.cnn_encoder import CNNEncoder
from open_seq2seq.encoders.conformer_encoder import ConformerEncoder
from open_seq2seq.encoders.convs2s_encoder import ConvS2SEncoder
from open_seq2seq.encoders.ds2_encoder import DeepSpeech2Encoder
from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.encoders.fastpitch_encoder import FastPitchEncoder
from open_seq2seq.encoders.hifigan_encoder import HiFiGANEncoder
from open_seq2seq.encoders.las_encoder import ListenAttendSpellEncoder
from open_seq2seq.encoders.lm_encoders import LMEncoder
from open_seq2seq.encoders.resnet_encoder import ResNetEncoder
from open_seq2seq.encoders.rnn_encoders import (BidirectionalRNNEncoderWithEmbedding,
                                                GNMTLikeEncoderWithEmbedding,
                                                UnidirectionalRNNEncoderWithEmbedding)
from open_seq2seq.encoders.tacotron2_encoder import Tacotron2Encoder
from open_seq2seq.encoders.tdnn_encoder import TDNNEncoder
from open_seq2seq.encoders.transformer_encoder import TransformerEncoder
from open_seq2seq.encoders.wavenet_encoder import WavenetEncoder

__all__ = ["Encoder", "TransformerEncoder", "DeepSpeech2Encoder", "TDNNEncoder", "ResNetEncoder",
           "CNNEncoder", "LMEncoder", "UnidirectionalRNNEncoderWithEmbedding",
           "BidirectionalRNNEncoderWithEmbedding", "GNMTLikeEncoderWithEmbedding", "ConvS2SEncoder",
           "Tacotron2Encoder", "WavenetEncoder", "CentaurEncoder",
           "ListenAttendSpellEncoder", "ConformerEncoder", "HiFiGANEncoder",
           "FastPitchEncoder"]
