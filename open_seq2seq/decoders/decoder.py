"""Base class of every decoder, and of those that can share the encoder's embedding."""

from __future__ import annotations

from typing import Any

from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.beam_search import FINISH_RULES, STOP_RULES
from open_seq2seq.parts.transformer.embedding_layer import EmbeddingSharedWeights
from open_seq2seq.utils import keras_compat
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
#: ``decoder_params/beam_finish`` of every decoder with a beam search.
BEAM_FINISH = Param(str, "any", "Which end-symbol extensions a beam search finishes: 'any' "
                    "(exact) or 'top_k' (as OpenNMT-tf/CTranslate2: only one among the step's "
                    "beam_width best). Each rescues a different weak model (docs/translation.md).",
                    choices=FINISH_RULES)


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


class EmbeddingSharingDecoder(Decoder):
  """A decoder that, with ``shared_embed``, uses the encoder's ``embedding_softmax_layer``
  as its target embedding (and, tied, as its output projection).

  The model hands that layer over through :meth:`reuse_embeddings` after building both
  components; :attr:`embedding` is the layer to use either way. Subclasses declare the
  ``shared_embed`` param, set ``self.vocab_size`` and ``self.embedding_softmax_layer`` (their
  own embedding, None when they have none), name the param that holds their embedding width
  in ``EMBEDDING_WIDTH_KEY`` and may override :meth:`missing_shared_embedding`.
  """

  #: The decoder param that must equal the shared embedding's width.
  EMBEDDING_WIDTH_KEY = "hidden_size"
  #: The shared layer; set by reuse_embeddings outside Keras attribute tracking.
  _shared_embedding = None

  def reuse_embeddings(self, embedding: Any) -> None:
    """Uses ``embedding`` (the encoder's ``embedding_softmax_layer``, None if it has none).

    Raises:
      ConfigError: if ``shared_embed`` is off, there is no embedding to share (and the
        decoder has no fallback), or its vocabulary size or width differs from the target's.
    """
    p = self.params
    if not p["shared_embed"]:
      raise ConfigError("decoder_params/shared_embed: is False, so the decoder has its own "
                        "target embedding and cannot reuse the encoder's")
    if not isinstance(embedding, EmbeddingSharedWeights):
      embedding = self.missing_shared_embedding()
    if embedding.vocab_size != self.vocab_size:
      raise ConfigError(f"decoder_params/shared_embed: source ({embedding.vocab_size}) and "
                        f"target ({self.vocab_size}) vocabulary sizes differ; use a joint "
                        f"vocabulary or shared_embed=False")
    key = self.EMBEDDING_WIDTH_KEY
    if embedding.hidden_size != p[key]:
      raise ConfigError(f"decoder_params/{key}: {p[key]} differs from the shared encoder "
                        f"embedding's width {embedding.hidden_size}; make them equal")
    # Untracked: the encoder owns the shared layer, and tracking it here too would list its
    # variables twice in the model's variables.
    keras_compat.set_untracked(self, "_shared_embedding", embedding)

  def missing_shared_embedding(self) -> EmbeddingSharedWeights:
    """The embedding to use when the encoder has none to share; by default an error."""
    raise ConfigError("decoder_params/shared_embed: the model's encoder has no "
                      "embedding_softmax_layer to share (use a TransformerEncoder or "
                      "ConvS2SEncoder, or shared_embed=False)")

  @property
  def embedding(self) -> EmbeddingSharedWeights:
    """Target embedding: the decoder's own or, with ``shared_embed``, the shared one."""
    if not self.params["shared_embed"]:
      return self.embedding_softmax_layer
    if self._shared_embedding is None:
      raise ConfigError("decoder_params/shared_embed: no embedding to share was handed "
                        "over; call decoder.reuse_embeddings(encoder.embedding_softmax_layer)")
    return self._shared_embedding


class MemoryDepthDecoder(Decoder):
  """A decoder whose variables need the depth of the encoder outputs it attends to (cells
  with attention over them: RNN and LAS decoders).

  They are created by :meth:`build_for_memory` at the first call, before any while_loop
  (where no variable may be created); the subclass calls :meth:`_ensure_built` with the
  memory's static depth first thing in every call, and another depth later is an error.
  """

  #: The depth the variables were created for (None until the first call).
  _memory_depth = None

  def _ensure_built(self, memory_depth: int | None) -> None:
    """Creates the variables for this memory depth, once."""
    if memory_depth is None:
      raise ValueError("the encoder's outputs need a static last dimension")
    if self._memory_depth is not None:
      if memory_depth != self._memory_depth:
        raise ValueError(f"encoder outputs of depth {memory_depth}; this decoder was built "
                         f"for {self._memory_depth}")
      return
    self.build_for_memory(memory_depth)
    self._memory_depth = memory_depth

  def build_for_memory(self, memory_depth: int) -> None:
    """Creates the cells', attention's and projection's variables for this memory depth."""
    raise NotImplementedError
