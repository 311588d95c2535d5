"""Base class of every encoder."""

from __future__ import annotations

from open_seq2seq.utils.component import LayerComponent


class Encoder(LayerComponent):
  """An encoder maps the data layer's source tensors to representations for the decoder.

  Subclasses declare their keys in ``PARAMS`` and implement :meth:`call`, which takes
  ``{"source_tensors": (inputs, lengths)}`` and returns a dict with at least ``"outputs"``
  ([batch, time, dim]) and ``"src_lengths"`` ([batch] int32).

  What the model knows from the data (vocabulary sizes, alphabets ...) arrives as extra
  keyword arguments a subclass names in its constructor (``vocab_size=``): the model passes
  every keyword its family offers that the constructor accepts.
  """

  PARAMS_KEY = "encoder_params"
  DEFAULT_NAME = "encoder"
