"""Text-to-text data: parallel text data layer, vocabularies, special tokens."""

from open_seq2seq.data.text2text.text2text import ParallelTextDataLayer
from open_seq2seq.data.text2text.vocab import SpecialTextTokens, load_vocab, pad_vocab_to_eight

__all__ = ["ParallelTextDataLayer", "SpecialTextTokens", "load_vocab", "pad_vocab_to_eight"]
