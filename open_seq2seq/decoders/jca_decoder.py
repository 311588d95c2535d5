"""JointCTCAttentionDecoder: an attention decoder and a CTC decoder over one encoder.

Joint CTC-attention training (Kim, Hori and Watanabe, 2017), as OpenSeq2Seq built it: both
decoders read the same encoder outputs; :class:`~open_seq2seq.losses.jca_loss.MultiTaskCTCEntropyLoss`
mixes their losses. Transcripts come from the attention decoder alone (OpenSeq2Seq's
choice: "use only outputs from the attention decoder during inference"); the CTC branch
regularizes the encoder and its alignment in training, and its own outputs stay available
(``ctc_outputs``).

Vocabularies: the attention decoder has ``tgt_vocab_size`` classes (the characters, ``<S>``
and ``</S>``); the CTC decoder one less (the characters and the blank, which takes ``<S>``'s
id and never meets it).
"""

from __future__ import annotations

from typing import Any, Mapping

from open_seq2seq.decoders.decoder import Decoder
from open_seq2seq.decoders.fc_decoders import FullyConnectedCTCDecoder
from open_seq2seq.decoders.las_decoder import ListenAttendSpellDecoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.component import accepted_kwargs, resolve_size
from open_seq2seq.utils.params import Param, callable_or_class


class JointCTCAttentionDecoder(Decoder):
  """Attention decoder + CTC decoder; the attention decoder's transcripts (module doc).

  Returns ``outputs`` and ``final_sequence_lengths`` of the attention decoder, plus both
  decoders' whole outputs as ``seq_outputs`` and ``ctc_outputs`` (what the loss reads).
  """

  PARAMS = {
      "attn_decoder": Param(callable_or_class, ListenAttendSpellDecoder,
                            "Attention decoder class."),
      "attn_decoder_params": Param(dict, {}, "Parameters of the attention decoder."),
      "ctc_decoder": Param(callable_or_class, FullyConnectedCTCDecoder, "CTC decoder class."),
      "ctc_decoder_params": Param(dict, {}, "Parameters of the CTC decoder."),
      "beam_search_params": Param(dict, {}, "Merged into attn_decoder_params (beam_width, "
                                  "beam_stop, beam_finish)."),
      "language_model_params": Param(dict, {}, "Merged into attn_decoder_params "
                                     "(use_language_model)."),
      "GO_SYMBOL": Param((int, None), None, "Id fed first (default: the data layer's <S>)."),
      "END_SYMBOL": Param((int, None), None, "Id ending a transcript (default: the data "
                          "layer's </S>)."),
      "tgt_vocab_size": Param((int, None), None, "Attention decoder classes (default: the "
                              "data layer's); the CTC decoder gets one less."),
  }

  def __init__(self, params: dict[str, Any], *, vocab_size: int | None = None,
               idx2char: Mapping[int, str] | None = None, go_symbol: int | None = None,
               end_symbol: int | None = None, mode: str = "train",
               name: str = "jca_decoder", dtype: Any = "float32", initializer: Any = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    where = self.PARAMS_KEY
    vocab_size = resolve_size(p, "tgt_vocab_size", vocab_size, where)
    if vocab_size < 3:
      raise ConfigError(f"{where}/tgt_vocab_size: needs the characters, <S> and </S>; got "
                        f"{vocab_size}")
    attn_params = {**p["attn_decoder_params"], **p["beam_search_params"],
                   **p["language_model_params"]}
    for key, value in (("GO_SYMBOL", p["GO_SYMBOL"]), ("END_SYMBOL", p["END_SYMBOL"])):
      if value is not None:
        attn_params[key] = value
    # Passed as is (a sub-decoder that cannot take one fails naming it); sizes are offers.
    common = {"mode": mode, "dtype": p["dtype"] or dtype}
    if initializer is not None:
      common["initializer"] = initializer
    ctc_alphabet = None
    if idx2char is not None:
      ctc_alphabet = {i: c for i, c in idx2char.items() if i < vocab_size - 2}
    self.attn_decoder = self._sub_decoder(
        "attn_decoder", attn_params,
        {"vocab_size": vocab_size, "go_symbol": go_symbol, "end_symbol": end_symbol},
        name="attn_decoder", **common)
    self.ctc_decoder = self._sub_decoder(
        "ctc_decoder", dict(p["ctc_decoder_params"]),
        {"vocab_size": vocab_size - 1, "idx2char": ctc_alphabet}, name="ctc_decoder", **common)

  def _sub_decoder(self, key: str, params: dict, offered: Mapping[str, Any],
                   **kwargs: Any) -> Decoder:
    """``offered`` sizes go to a sub-decoder that names them; ``kwargs`` always go."""
    klass = self.params[key]
    if hasattr(klass, "validate_params"):  # errors name the full key path
      params = klass.validate_params(params, prefix=f"{self.PARAMS_KEY}/{key}_params")
    return klass(params, **kwargs, **accepted_kwargs(klass, offered))

  def build(self, input_shape: Any = None) -> None:
    self.built = True

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    seq_outputs = self.attn_decoder(input_dict, training=training)
    ctc_outputs = self.ctc_decoder({"encoder_output": input_dict["encoder_output"]},
                                   training=training)
    return {"outputs": seq_outputs["outputs"],
            "final_sequence_lengths": seq_outputs["final_sequence_lengths"],
            "seq_outputs": seq_outputs, "ctc_outputs": ctc_outputs}


__all__ = ["JointCTCAttentionDecoder"]
