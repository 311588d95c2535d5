"""Language-model family data: WikiText language modelling, IMDB and SST classification."""

from open_seq2seq.data.lm.text_classification import (IMDBDataLayer, SSTDataLayer,
                                                      TextClassificationDataLayer)
from open_seq2seq.data.lm.vocab import Vocabulary, build_vocab, read_vocab, write_vocab
from open_seq2seq.data.lm.wkt import WKTDataLayer

__all__ = ["WKTDataLayer", "TextClassificationDataLayer", "IMDBDataLayer", "SSTDataLayer",
           "Vocabulary", "build_vocab", "read_vocab", "write_vocab"]
