"""open_seq2seq: config-driven sequence-to-sequence training on TensorFlow 2 / Keras 3."""

__version__ = "0.1.0"
