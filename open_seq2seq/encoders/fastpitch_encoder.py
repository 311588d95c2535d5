"""FastPitchEncoder: symbol embeddings + sinusoidal positions through FFT blocks."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.parts.fastpitch.layers import (FFT_PARAMS, check_fft_params, fft_stack,
                                                 masked)
from open_seq2seq.parts.transformer.embedding_layer import EmbeddingSharedWeights
from open_seq2seq.utils.component import resolve_size
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS
from open_seq2seq.utils.params import Param

class FastPitchEncoder(Encoder):
  """FastPitch's text encoder (Łańcucki 2021): symbol ids [B, N] are embedded (unit
  variance), get sinusoidal positions and go through ``num_layers`` FFT blocks
  (``parts/fastpitch/layers.py``: self-attention and a convolutional feed-forward network,
  post-norm residuals, dropout).

  Returns ``outputs`` [B, N, d_model] (zero past each length), ``src_lengths`` and
  ``embeddings`` (the symbol embeddings before the blocks, which the decoder's aligner reads,
  as in Badlani et al.).
  """

  PARAMS = {
      "src_vocab_size": Param((int, None), None, "Symbols (default: the data layer's "
                              "vocabulary)."),
      **FFT_PARAMS,
      **INITIALIZER_PARAMS,
  }

  def __init__(self, params: dict[str, Any], *, mode: str = "train", name: str = "encoder",
               dtype: Any = "float32", initializer: Any = None,
               src_vocab_size: int | None = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    check_fft_params(p, self.PARAMS_KEY)
    vocab = resolve_size(p, "src_vocab_size", src_vocab_size, self.PARAMS_KEY)
    self.embedding = EmbeddingSharedWeights(vocab, p["d_model"], dtype=self.dtype_policy,
                                            name="embedding")
    self.stack = fft_stack(p, self.dtype_policy, self.kernel_initializer(), "fft")

  def build(self, input_shape=None):
    self.embedding.build()
    self.stack.build()

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    ids, lengths = input_dict["source_tensors"][:2]
    lengths = tf.cast(lengths, tf.int32)
    mask = tf.sequence_mask(lengths, tf.shape(ids)[1])
    embeddings = masked(self.embedding(ids), mask)
    outputs = self.stack(embeddings, mask, training=training)
    return {"outputs": outputs, "src_lengths": lengths, "embeddings": embeddings}
