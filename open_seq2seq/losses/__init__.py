"""Losses."""

from open_seq2seq.losses.loss import Loss
from open_seq2seq.losses.sequence_loss import (BasicSequenceLoss, CrossEntropyLoss,
                                               PaddedCrossEntropyLossWithSmoothing)

__all__ = ["Loss", "BasicSequenceLoss", "CrossEntropyLoss", "PaddedCrossEntropyLossWithSmoothing"]
