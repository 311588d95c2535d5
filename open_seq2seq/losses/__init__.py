"""Losses."""

from open_seq2seq.losses.ctc_loss import CTCLoss
from open_seq2seq.losses.fastpitch_loss import FastPitchLoss
from open_seq2seq.losses.hifigan_loss import HiFiGANLoss
from open_seq2seq.losses.jca_loss import MultiTaskCTCEntropyLoss
from open_seq2seq.losses.loss import Loss
from open_seq2seq.losses.transducer_loss import RNNTLoss, rnnt_loss
from open_seq2seq.losses.sequence_loss import (BasicSampledSequenceLoss, BasicSequenceLoss,
                                               CrossEntropyLoss,
                                               PaddedCrossEntropyLossWithSmoothing)
from open_seq2seq.losses.text2speech_loss import TacotronLoss, Text2SpeechLoss
from open_seq2seq.losses.wavenet_loss import WavenetLoss

__all__ = ["Loss", "CTCLoss", "BasicSequenceLoss", "BasicSampledSequenceLoss", "CrossEntropyLoss",
           "PaddedCrossEntropyLossWithSmoothing", "Text2SpeechLoss", "TacotronLoss", "WavenetLoss",
           "MultiTaskCTCEntropyLoss", "RNNTLoss", "rnnt_loss", "HiFiGANLoss",
           "FastPitchLoss"]
