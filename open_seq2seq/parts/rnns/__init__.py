"""Recurrent building blocks: Keras cells built from OpenSeq2Seq (TF 1) cell configs."""

from open_seq2seq.parts.rnns.cells import make_cell, translate_cell_params

__all__ = ["make_cell", "translate_cell_params"]
