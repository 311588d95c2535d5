"""Encoders."""

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.encoders.transformer_encoder import TransformerEncoder

__all__ = ["Encoder", "TransformerEncoder"]
