"""Base class of every decoder."""

from __future__ import annotations

from open_seq2seq.parts.beam_search import STOP_RULES
from open_seq2seq.utils.component import LayerComponent
from open_seq2seq.utils.params import Param

#: ``decoder_params/min_decode_length`` of every decoder that searches (greedy or beam).
MIN_DECODE_LENGTH = Param(int, 0, "Inference: no hypothesis ends before this many tokens "
                          "(0: no minimum; e.g. to time decoding at one length).")
#: ``decoder_params/beam_stop`` of every decoder with a beam search.
BEAM_STOP = Param(str, "bound", "When a beam search stops before the length limit: 'bound' "
                  "(exact: no alive hypothesis can still win) or 'current' (as fairseq/"
                  "OpenNMT-tf: the best alive one does not win at its current length).",
                  choices=STOP_RULES)


class Decoder(LayerComponent):
  """A decoder turns the encoder's output into logits (training) or predictions (inference).

  :meth:`call` takes ``{"encoder_output": dict, "target_tensors": (ids, lengths)}`` —
  targets absent at inference — and returns a dict with ``"logits"`` (training/eval,
  [batch, time, vocab]) and ``"outputs"`` (predicted ids [batch, time], any mode) and
  ``"final_sequence_lengths"`` where it can.

  What the model knows from the data (vocabulary sizes, alphabets ...) arrives as extra
  keyword arguments a subclass names in its constructor (``vocab_size=``): the model passes
  every keyword its family offers that the constructor accepts.
  """

  PARAMS_KEY = "decoder_params"
  DEFAULT_NAME = "decoder"
