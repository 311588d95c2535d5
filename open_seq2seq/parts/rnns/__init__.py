"""Recurrent building blocks: Keras cells from OpenSeq2Seq (TF 1) cell configs, its weight-drop
LSTM cell, and stacks of recurrent layers."""

from open_seq2seq.parts.rnns.cells import make_cell, translate_cell_params
from open_seq2seq.parts.rnns.stack import RecurrentStack
from open_seq2seq.parts.rnns.weight_drop import (WeightDropLayerNormBasicLSTMCell, WeightDropLSTM,
                                                 awd_initializer)

__all__ = ["make_cell", "translate_cell_params", "RecurrentStack",
           "WeightDropLayerNormBasicLSTMCell", "WeightDropLSTM", "awd_initializer"]
