"""Writes a trained Text2Text Transformer as a CTranslate2 model, and translates text with it.

``run.py --mode=export --export_format=ctranslate2 --export_dir=DIR`` (see
:mod:`open_seq2seq.cli`) restores the checkpoint and calls :func:`export`: the weights are
mapped onto CTranslate2's ``TransformerSpec`` (its Python spec API: the package is only
needed to export and to run the result) and saved, with the source and target vocabularies,
as ``model.bin``, ``config.json`` and ``*_vocabulary.json``; ``open_seq2seq.json`` beside
them says how this project tokenizes text and bounds decoding, and the source SentencePiece
model (if any) is copied as ``source.model``. :class:`TextTranslator` reads it all back and
translates raw lines as ``--mode=infer`` does.

What is mapped, and why it gives our outputs:

* Dense kernels are [in, out] here and [out, in] in CTranslate2 (transposed). The fused
  query/key/value projection splits its output as [q | k | v], heads contiguous inside each:
  CTranslate2's fused layout. Attention projections have no bias; queries are scaled by
  depth^-0.5 in both.
* Position encodings: ours are sines then cosines of positions 0, 1, ...; CTranslate2's
  built-in table starts at position 1, so ours is written explicitly
  (:data:`MAX_SOURCE_POSITIONS` rows for the encoder, that plus ``extra_decode_length`` for
  the decoder).
* Embeddings are scaled by sqrt(hidden_size) (``scale_embeddings``, both), rows padded to a
  multiple of eight are dropped, the tied softmax is the embedding matrix.
* Layer norms (``layernorm_L2``) keep their epsilon (``layer_norm_epsilon``); pre-norm has
  the final stack norm, post-norm none.
* Tokens: ``<PAD> <UNK> <S> </S>`` (ids 0-3). The decoder starts from GO_SYMBOL's token,
  stops at ``</S>``; sources get ``</S>`` appended (and ``<S>`` prepended with
  ``use_start_token``). Our searches never emit PAD or GO: :class:`TextTranslator` suppresses
  them too.

Not convertible (one-line :class:`ConfigError`): other models or encoder/decoder classes,
``layernorm_L1`` or ``batch_norm``, encoder and decoder norms with different epsilons (one
value in CTranslate2), an END_SYMBOL other than ``</S>``'s id. The searches differ a little
(docs/translation.md): CTranslate2's length penalty is ``score / length ** p``, not GNMT's
(compare with ``alpha: 0``); it renormalises over the tokens it does not suppress; it ends a
hypothesis only when ``</S>`` is among a step's ``beam_size`` best extensions.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any, Sequence

import numpy as np

from open_seq2seq.data.text2text.sentencepiece_model import SentencePieceVocab
from open_seq2seq.data.text2text.corpus_ids import split_tokens
from open_seq2seq.data.text2text.vocab import SpecialTextTokens
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.models.text2text import Text2Text, detokenize
from open_seq2seq.serving.export import check_export_dir

__all__ = ["QUANTIZATIONS", "MAX_SOURCE_POSITIONS", "METADATA_FILE", "check_convertible",
           "build_spec", "save", "export", "TextTranslator"]

#: Weight types an export may store (CTranslate2's names; ``float32``: no quantization).
QUANTIZATIONS = ("float32", "int8", "float16")
#: Source positions the encoder's table holds (CTranslate2's default ``max_input_length``).
MAX_SOURCE_POSITIONS = 1024
#: This project's description of the export, beside CTranslate2's files.
METADATA_FILE = "open_seq2seq.json"
SOURCE_SENTENCEPIECE = "source.model"

_EOS = SpecialTextTokens.EOS_ID.value
_TOKENS = {i: SpecialTextTokens.to_string(i) for i in range(4)}
_INSTALL = "pip install ctranslate2"


def _ctranslate2():
  try:
    import ctranslate2  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise ConfigError(f"the ctranslate2 package is missing (--export_format=ctranslate2 and "
                      f"TextTranslator need it): {_INSTALL}") from None
  return ctranslate2


# ----------------------------------------------------------------------------- checks
def check_convertible(model: Any) -> None:
  """Raises a one-line :class:`ConfigError` if ``model`` cannot be written for CTranslate2."""
  # pylint: disable=import-outside-toplevel
  from open_seq2seq.decoders.transformer_decoder import TransformerDecoder
  from open_seq2seq.encoders.transformer_encoder import TransformerEncoder
  what = "--export_format=ctranslate2"
  if not isinstance(model, Text2Text):
    raise ConfigError(f"{what}: converts Text2Text Transformer models only, not "
                      f"{type(model).__name__}; use --export_format=saved_model")
  for slot, cls in (("encoder", TransformerEncoder), ("decoder", TransformerDecoder)):
    component = getattr(model, slot)
    if type(component) is not cls:  # a subclass may compute something else
      raise ConfigError(f"{what}: {slot} {type(component).__name__} is not a {cls.__name__}; "
                        f"only the Transformer converts (use --export_format=saved_model)")
  epsilons = set()
  for slot in ("encoder", "decoder"):
    if getattr(model, slot).params["max_relative_positions"]:
      raise ConfigError(f"{what}: {slot}_params/max_relative_positions is not converted yet "
                        f"(sinusoidal positions only); use --export_format=saved_model")
    norm = getattr(model, slot).params["norm_params"]
    norm_type = norm.get("type", "layernorm_L2")
    if norm_type != "layernorm_L2":
      raise ConfigError(f"{what}: {slot}_params/norm_params/type {norm_type} has no "
                        f"CTranslate2 equivalent (only layernorm_L2 converts)")
    epsilons.add(norm.get("epsilon") or 1e-6)
  if len(epsilons) > 1:
    raise ConfigError(f"{what}: encoder and decoder norm_params/epsilon differ "
                      f"({sorted(epsilons)}); CTranslate2 takes one layer norm epsilon")
  end = model.decoder.params["END_SYMBOL"]
  if end != _EOS:
    raise ConfigError(f"{what}: decoder_params/END_SYMBOL {end} is not the id of </S> "
                      f"({_EOS}), which ends the sources CTranslate2 reads")


# ----------------------------------------------------------------------------- weights
def _array(variable: Any) -> np.ndarray:
  return np.ascontiguousarray(np.asarray(variable.numpy() if hasattr(variable, "numpy")
                                         else variable, dtype=np.float32))


def _linear(spec: Any, dense: Any, rows: int | None = None) -> None:
  """A Keras Dense ([in, out] kernel) into a LinearSpec ([out, in]); ``rows``: keep the
  first outputs only (a vocabulary padded to a multiple of eight)."""
  spec.weight = _array(dense.kernel).T[:rows].copy()
  if getattr(dense, "use_bias", False):
    spec.bias = _array(dense.bias)[:rows].copy()


def _norm(spec: Any, layer: Any) -> None:
  spec.gamma = _array(layer.gamma)
  spec.beta = _array(layer.beta)


def _attention(spec: Any, attention: Any, residual: Any) -> None:
  if hasattr(attention, "qkv_dense"):  # self-attention: one fused [q | k | v] projection
    _linear(spec.linear[0], attention.qkv_dense)
  else:
    _linear(spec.linear[0], attention.q_dense)
    _linear(spec.linear[1], attention.kv_dense)
  _linear(spec.linear[-1], attention.output_dense)
  _norm(spec.layer_norm, residual.norm)


def _ffn(spec: Any, layer: Any) -> None:
  _linear(spec.linear_0, layer.ffn.filter_dense)
  _linear(spec.linear_1, layer.ffn.output_dense)
  _norm(spec.layer_norm, layer.ffn_norm.norm)


def _positions(length: int, hidden_size: int) -> np.ndarray:
  # pylint: disable=import-outside-toplevel
  from open_seq2seq.parts.transformer.utils import get_position_encoding
  return _array(get_position_encoding(length, hidden_size))


def _embedding(spec: Any, embedding: Any) -> None:
  spec.weight = _array(embedding.embeddings)[:embedding.vocab_size].copy()


def vocabulary(idx2seq: dict[int, str], size: int) -> list[str]:
  """Tokens of ids ``0 .. size - 1`` (CTranslate2's vocabulary: a token's index is its id)."""
  missing = [i for i in range(size) if i not in idx2seq]
  if missing:
    raise ConfigError(f"vocabulary has no token of id {missing[0]} (size {size})")
  return [idx2seq[i] for i in range(size)]


def build_spec(model: Text2Text) -> Any:
  """The ``ctranslate2.specs.TransformerSpec`` of ``model`` (variables created), validated."""
  check_convertible(model)
  specs = _ctranslate2().specs
  encoder, decoder = model.encoder, model.decoder
  ep, dp = encoder.params, decoder.params
  spec = specs.TransformerSpec(
      specs.TransformerEncoderSpec(ep["encoder_layers"], ep["num_heads"],
                                   pre_norm=ep["norm_placement"] == "pre"),
      specs.TransformerDecoderSpec(dp["num_hidden_layers"], dp["num_heads"],
                                   pre_norm=dp["norm_placement"] == "pre"))
  source, target = spec.encoder, spec.decoder
  _embedding(source.embeddings[0], encoder.embedding_softmax_layer)
  source.scale_embeddings = bool(encoder.embedding_softmax_layer.scale_embeddings)
  source.position_encodings.encodings = _positions(MAX_SOURCE_POSITIONS, ep["hidden_size"])
  for layer_spec, layer in zip(source.layer, encoder.encoder_layers):
    _attention(layer_spec.self_attention, layer.self_attention, layer.self_attention_norm)
    _ffn(layer_spec.ffn, layer)
  if encoder.output_normalization is not None:
    _norm(source.layer_norm, encoder.output_normalization)

  embedding = decoder.embedding  # the encoder's with shared_embed
  _embedding(target.embeddings, embedding)
  target.scale_embeddings = bool(embedding.scale_embeddings)
  target.position_encodings.encodings = _positions(
      MAX_SOURCE_POSITIONS + dp["extra_decode_length"] + 2, dp["hidden_size"])
  for layer_spec, layer in zip(target.layer, decoder.decoder_layers):
    _attention(layer_spec.self_attention, layer.self_attention, layer.self_attention_norm)
    _attention(layer_spec.attention, layer.encdec_attention, layer.encdec_attention_norm)
    _ffn(layer_spec.ffn, layer)
  if decoder.output_normalization is not None:
    _norm(target.layer_norm, decoder.output_normalization)
  if decoder.output_projection is None:  # tie_weights: logits = x @ E^T
    target.projection.weight = target.embeddings.weight
  else:
    _linear(target.projection, decoder.output_projection, decoder.vocab_size)

  description = model.description
  config = spec.config
  config.unk_token = _TOKENS[SpecialTextTokens.UNK_ID.value]
  config.bos_token = _TOKENS[SpecialTextTokens.S_ID.value]
  config.eos_token = _TOKENS[_EOS]
  config.decoder_start_token = vocabulary(description.target_idx2seq,
                                          decoder.vocab_size)[dp["GO_SYMBOL"]]
  config.add_source_bos = bool(model.data_layer.params.get("use_start_token", False))
  config.add_source_eos = True
  config.layer_norm_epsilon = float(ep["norm_params"].get("epsilon") or 1e-6)
  spec.register_source_vocabulary(vocabulary(description.source_idx2seq, encoder.vocab_size))
  spec.register_target_vocabulary(vocabulary(description.target_idx2seq, decoder.vocab_size))
  spec.validate()
  return spec


# ----------------------------------------------------------------------------- writing
def save(model: Text2Text, export_dir: str, quantization: str = "float32",
         metadata: dict[str, Any] | None = None) -> dict[str, Any]:
  """Writes ``model`` (variables created and restored) as a CTranslate2 model directory.

  ``export_dir`` must not exist yet; it is written under a temporary name and renamed into
  place. Returns the metadata written to :data:`METADATA_FILE`.
  """
  if quantization not in QUANTIZATIONS:
    raise ConfigError(f"--export_quantization {quantization}: choose one of "
                      f"{', '.join(QUANTIZATIONS)}")
  export_dir = check_export_dir(export_dir)
  spec = build_spec(model)
  spec.optimize(quantization=quantization)
  params = model.data_layer.params
  dp = model.decoder.params
  spm = params.get("src_sentencepiece_model")
  banned = {dp["PAD_SYMBOL"], dp["GO_SYMBOL"]} - {dp["END_SYMBOL"]}
  target_tokens = vocabulary(model.description.target_idx2seq, model.decoder.vocab_size)
  metadata = dict(metadata or {}, model=type(model).__name__, quantization=quantization,
                  source={"delimiter": model.description.delimiter,
                          "sentencepiece_model": SOURCE_SENTENCEPIECE if spm else None,
                          "start_token": bool(params.get("use_start_token", False))},
                  target={"delimiter": model.description.delimiter},
                  decoding={"beam_size": dp["beam_size"],
                            "extra_decode_length": dp["extra_decode_length"],
                            "min_decode_length": dp["min_decode_length"],
                            "suppressed_tokens": [target_tokens[i] for i in sorted(banned)]},
                  max_source_positions=MAX_SOURCE_POSITIONS)
  partial = f"{export_dir}.partial-{os.getpid()}"
  shutil.rmtree(partial, ignore_errors=True)
  try:
    os.makedirs(partial)
    spec.save(partial)
    if spm:
      shutil.copyfile(spm, os.path.join(partial, SOURCE_SENTENCEPIECE))
    with open(os.path.join(partial, METADATA_FILE), "w", encoding="utf-8") as f:
      json.dump(metadata, f, indent=2)
      f.write("\n")
    os.rename(partial, export_dir)
  finally:
    shutil.rmtree(partial, ignore_errors=True)
  return metadata


def export(model: Text2Text, evaluator: Any, checkpoint: str, export_dir: str,
           quantization: str | None, metadata: dict[str, Any]) -> dict[str, Any]:
  """``--mode=export --export_format=ctranslate2``: checks, restores ``checkpoint`` through
  ``evaluator`` (an :class:`~open_seq2seq.training.evaluator.Evaluator`) and saves."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  _ctranslate2()
  check_convertible(model)  # before the restore: a model that cannot convert fails at once
  evaluator.ensure_variables({"source_tensors": (tf.constant([[_EOS]], tf.int32),
                                                 tf.constant([1], tf.int32))})
  evaluator.restore(checkpoint)
  return save(model, export_dir, quantization or "float32",
              dict(metadata, step=evaluator.restored_step))


# ----------------------------------------------------------------------------- running
class TextTranslator:
  """Raw source lines -> detokenized translations with an exported CTranslate2 model,
  tokenized and bounded as ``--mode=infer`` does (beam search without length penalty).

  Args:
    export_dir: written by :func:`save`.
    compute_type: CTranslate2's (``default``: the stored weights' type; ``int8`` quantizes
      a float model as it loads).
    threads: CTranslate2's ``intra_threads`` (0: its default).
  """

  def __init__(self, export_dir: str, compute_type: str = "default", threads: int = 0):
    path = os.path.join(export_dir, METADATA_FILE)
    try:
      with open(path, encoding="utf-8") as f:
        self.metadata = json.load(f)
    except (OSError, ValueError) as e:
      raise DataError(f"{path}: not a CTranslate2 export of open_seq2seq ({e}); write one "
                      f"with run.py --mode=export --export_format=ctranslate2") from None
    self.translator = _ctranslate2().Translator(export_dir, device="cpu",
                                                compute_type=compute_type,
                                                intra_threads=threads)
    source = self.metadata["source"]
    self.spm = None
    if source["sentencepiece_model"]:
      self.spm = SentencePieceVocab(os.path.join(export_dir, source["sentencepiece_model"]))
    # ids the data layer gives a source: the tokens, </S>, and <S> first with start_token
    self.extra_source_ids = 1 + int(source["start_token"])

  def tokenize(self, lines: Sequence[str]) -> list[list[str]]:
    """Source tokens of raw lines, as the data layer reads ``source_file``."""
    if self.spm is not None:
      return self.spm.pieces(lines)
    return [split_tokens(line, self.metadata["source"]["delimiter"]) for line in lines]

  def translate_tokens(self, sources: Sequence[Sequence[str]], beam_size: int | None = None,
                       max_batch_size: int = 64) -> list[tuple[list[str], float]]:
    """Best hypothesis (tokens without ``</S>``) and its score (summed log-probability,
    ``</S>`` included) of each token list, in input order.

    Sources of one length are translated together, so that each decodes at most its
    length (ids, ``</S>`` included) + ``extra_decode_length`` tokens, as our decoder does.
    """
    decoding = self.metadata["decoding"]
    beam_size = beam_size or decoding["beam_size"]
    limit = self.metadata["max_source_positions"]
    by_length: dict[int, list[int]] = {}
    for i, tokens in enumerate(sources):
      length = len(tokens) + self.extra_source_ids
      if length > limit:
        raise DataError(f"source {i}: {length} ids; the export's position table holds "
                        f"{limit}")
      by_length.setdefault(length, []).append(i)
    results: list[Any] = [None] * len(sources)
    for length, indices in sorted(by_length.items()):
      batch = [list(sources[i]) for i in indices]
      limit = length + decoding["extra_decode_length"]
      # a minimum beyond the limit: as ours, the hypotheses stop at the limit without </S>
      outputs = self.translator.translate_batch(
          batch, beam_size=beam_size, max_batch_size=max_batch_size, length_penalty=0.0,
          max_input_length=0, max_decoding_length=limit,
          min_decoding_length=min(decoding["min_decode_length"], limit), return_scores=True,
          suppress_sequences=[[t] for t in decoding["suppressed_tokens"]] or None)
      for i, output in zip(indices, outputs):
        results[i] = (output.hypotheses[0], float(output.scores[0]))
    return results

  def translate(self, lines: Sequence[str], beam_size: int | None = None,
                max_batch_size: int = 64) -> list[str]:
    """Detokenized translations of raw lines, as ``--mode=infer`` writes them."""
    delimiter = self.metadata["target"]["delimiter"]
    return [detokenize(tokens, delimiter) for tokens, _ in
            self.translate_tokens(self.tokenize(lines), beam_size, max_batch_size)]
