"""Losses."""

from open_seq2seq.losses.ctc_loss import CTCLoss
from open_seq2seq.losses.loss import Loss
from open_seq2seq.losses.sequence_loss import (BasicSampledSequenceLoss, BasicSequenceLoss,
                                               CrossEntropyLoss,
                                               PaddedCrossEntropyLossWithSmoothing)
from open_seq2seq.losses.text2speech_loss import TacotronLoss, Text2SpeechLoss

__all__ = ["Loss", "CTCLoss", "BasicSequenceLoss", "BasicSampledSequenceLoss", "CrossEntropyLoss",
           "PaddedCrossEntropyLossWithSmoothing", "Text2SpeechLoss", "TacotronLoss"]
