"""Losses."""

from open_seq2seq.losses.ctc_loss import CTCLoss
from open_seq2seq.losses.loss import Loss
from open_seq2seq.losses.sequence_loss import (BasicSampledSequenceLoss, BasicSequenceLoss,
                                               CrossEntropyLoss,
                                               PaddedCrossEntropyLossWithSmoothing)

__all__ = ["Loss", "CTCLoss", "BasicSequenceLoss", "BasicSampledSequenceLoss", "CrossEntropyLoss",
           "PaddedCrossEntropyLossWithSmoothing"]
