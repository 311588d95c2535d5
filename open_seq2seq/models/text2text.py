"""Text-to-text models (machine translation, toy reversal): samples, BLEU, inference lines."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from open_seq2seq.data.description import DataDescription, TextDescription
from open_seq2seq.data.text2text.corpus_ids import split_tokens
from open_seq2seq.data.text2text.vocab import (NUM_SPECIAL_TOKENS, SpecialTextTokens,
                                               load_vocab, read_vocab_tokens)
from open_seq2seq.errors import ConfigError
from open_seq2seq.models.model import Model
from open_seq2seq.outputs import TextLines
from open_seq2seq.utils.metrics import corpus_bleu

_PAD = SpecialTextTokens.PAD_ID.value
_S = SpecialTextTokens.S_ID.value
_EOS = SpecialTextTokens.EOS_ID.value
_SENTENCEPIECE_SPACE = "\u2581"  # "▁" marks a word start in SentencePiece pieces
_BPE_JOINER = "@@"  # subword-nmt marks a piece continued by the next one


def ids_to_tokens(ids: Iterable[int], idx2seq: Mapping[int, str]) -> list[str]:
  """Tokens of an id sequence: stops at the first EOS and skips PAD and GO (<S>)."""
  tokens = []
  for idx in ids:
    idx = int(idx)
    if idx == _EOS:
      break
    if idx in (_PAD, _S):
      continue
    tokens.append(idx2seq.get(idx, SpecialTextTokens.to_string(SpecialTextTokens.UNK_ID.value)))
  return tokens


def detokenize(tokens: list[str], delimiter: str = " ") -> str:
  """Plain text of tokens: SentencePiece pieces and subword-nmt ``@@`` pieces are merged."""
  if any(_SENTENCEPIECE_SPACE in t for t in tokens):
    return "".join(tokens).replace(_SENTENCEPIECE_SPACE, " ").strip()
  words: list[str] = []
  continued = False
  for token in tokens:
    piece = token[:-len(_BPE_JOINER)] if token.endswith(_BPE_JOINER) else token
    if continued and words:
      words[-1] += piece
    else:
      words.append(piece)
    continued = token.endswith(_BPE_JOINER)
  return delimiter.join(words)


def nbest_line(index: int, score: float, text: str) -> str:
  """One line of an n-best output file: ``index<TAB>score<TAB>hypothesis``."""
  return f"{index}\t{score:.6f}\t{text}"


def ids_to_text(ids: Iterable[int], idx2seq: Mapping[int, str], delimiter: str = " ") -> str:
  """Detokenized text of an id sequence (see :func:`ids_to_tokens`, :func:`detokenize`)."""
  return detokenize(ids_to_tokens(ids, idx2seq), delimiter)


class Text2Text(Model):
  """Sequence-to-sequence model over text, scored by corpus BLEU (sacrebleu, 13a).

  Works with :class:`~open_seq2seq.data.text2text.ParallelTextDataLayer` (or any data layer
  whose ``description`` is a :class:`~open_seq2seq.data.description.TextDescription`): the
  encoder is offered ``vocab_size`` = the source vocabulary size, the decoder and the loss
  the target's, and with ``decoder_params/shared_embed`` the decoder reuses the encoder's
  embedding. The decoder's ``"outputs"`` are predicted ids [batch, time]; decoding stops at the first EOS.
  BLEU compares detokenized hypotheses with the raw reference lines of the target file, so
  out-of-vocabulary reference words count as they should.

  With ``decoder_params/n_best`` > 1 (the decoder's ``"nbest_*"`` outputs) inference writes
  ``n_best`` lines per input, best first, each ``index<TAB>score<TAB>hypothesis`` (0-based
  input line number, as fairseq's ``H-`` lines; :func:`nbest_line`), and BLEU scores the
  best hypotheses.
  """

  best_metric = ("BLEU", True)
  chance_level = 0.0
  description: TextDescription
  #: The vocabulary of each role of the components' ``VOCAB_INDEXED`` variables: their rows
  #: follow the tokens when ``load_model`` loads a run of other vocabularies.
  VOCABULARY_ROLES = {"encoder": {"input": "source"},
                      "decoder": {"input": "target", "output": "target"}}

  # ----------------------------------------------------------------- vocabularies
  def vocabularies(self) -> dict[str, list[str]]:
    """The token of every id of the source and target vocabularies (special tokens and
    fillers included)."""
    d = self.description
    return {"source": [d.source_idx2seq.get(i, "") for i in range(d.src_vocab_size)],
            "target": [d.target_idx2seq.get(i, "") for i in range(d.tgt_vocab_size)]}

  @staticmethod
  def vocabulary_files(train_config: Mapping[str, Any]) -> dict[str, str]:
    """The vocabulary files a resolved train config names (a side read with a SentencePiece
    model alone names none)."""
    layer = train_config.get("data_layer_params") or {}
    files = {"source": layer.get("src_vocab_file"), "target": layer.get("tgt_vocab_file")}
    return {name: path for name, path in files.items() if isinstance(path, str)}

  @staticmethod
  def read_vocabulary_file(path: str) -> list[str]:
    """The token of every id of a vocabulary file, as the data layer reads it (the special
    tokens first, from the file when it lists them there)."""
    head = [token for _, token in read_vocab_tokens(path)[:NUM_SPECIAL_TOKENS]]
    in_file = head == [SpecialTextTokens.to_string(i) for i in range(NUM_SPECIAL_TOKENS)]
    return list(load_vocab(path, special_tokens_in_file=in_file))

  # ----------------------------------------------------------------- wiring
  def component_kwargs(self, slot: str, description: DataDescription) -> dict[str, Any]:
    """The encoder gets the source vocabulary size; the decoder and the loss the target's."""
    if not isinstance(description, TextDescription):
      raise ConfigError(f"data_layer: Text2Text needs a data layer describing a text corpus "
                        f"(TextDescription), got {type(description).__name__}")
    if slot == "encoder":
      return {"vocab_size": description.src_vocab_size}
    # Targets carry no start symbol here (the decoders feed GO themselves), so a loss never
    # shifts them (OpenSeq2Seq's RNN configs ask it to, for targets that began with <S>).
    offered = {"vocab_size": description.tgt_vocab_size, "targets_start_with_go": False}
    if slot == "decoder":  # the seed of sampled translations
      offered["random_seed"] = self.params["random_seed"]
    return offered

  @classmethod
  def ignored_combinations(cls, config: Mapping[str, Any]) -> list[str]:
    """``loss_params/offset_target_by_one`` changes nothing (targets have no start symbol)."""
    if (config.get("loss_params") or {}).get("offset_target_by_one"):
      return ["loss_params/offset_target_by_one: ignored: Text2Text's targets carry no start "
              "symbol and its decoders return logits aligned with them"]
    return []

  def connect_components(self) -> None:
    """With ``decoder_params/shared_embed`` the decoder reuses the encoder's embedding."""
    if self.decoder.params.get("shared_embed"):
      self.decoder.reuse_embeddings(getattr(self.encoder, "embedding_softmax_layer", None))

  def forward(self, batch: dict, training: bool) -> dict:
    """Encoder then decoder; the decoder also gets the ``source_tensors`` (sampled
    translations follow from the source sentence, :mod:`open_seq2seq.parts.sampling`)."""
    encoder_output = self.encoder({"source_tensors": batch["source_tensors"]},
                                  training=training)
    decoder_input = {"encoder_output": encoder_output, "source_tensors": batch["source_tensors"]}
    if "target_tensors" in batch:
      decoder_input["target_tensors"] = batch["target_tensors"]
    return self.decoder(decoder_input, training=training)

  # ----------------------------------------------------------------- decoding
  @property
  def _delimiter(self) -> str:
    return self.description.delimiter

  def source_text(self, ids: Iterable[int]) -> str:
    return ids_to_text(ids, self.description.source_idx2seq, self._delimiter)

  def target_text(self, ids: Iterable[int]) -> str:
    return ids_to_text(ids, self.description.target_idx2seq, self._delimiter)

  @staticmethod
  def predicted_ids(outputs: Mapping[str, np.ndarray]) -> np.ndarray:
    """Predicted ids [batch, time]: the decoder's ``outputs``, else the argmax of ``logits``."""
    if outputs.get("outputs") is not None:
      return np.asarray(outputs["outputs"])
    return np.argmax(np.asarray(outputs["logits"]), axis=-1)

  def reference(self, batch: Mapping[str, np.ndarray], index: int) -> str:
    """Reference text of example ``index`` of a batch: the raw target line when known."""
    raw = None
    lookup = getattr(self.data_layer, "reference_text", None)
    if lookup is not None and "id" in batch:
      raw = lookup(int(batch["id"][index]))
    if raw is not None:
      return detokenize(split_tokens(raw, self._delimiter), self._delimiter)
    targets, lengths = batch["target_tensors"]
    return self.target_text(targets[index][:lengths[index]])

  # ----------------------------------------------------------------- hooks
  def format_samples(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                     max_samples: int = 1) -> list[str]:
    sources, source_lengths = batch["source_tensors"]
    predictions = self.predicted_ids(outputs)
    lines = []
    for i in range(min(max_samples, len(sources))):
      lines.append(f"Source[{i}]:     {self.source_text(sources[i][:source_lengths[i]])}")
      if "target_tensors" in batch:
        lines.append(f"Target[{i}]:     {self.reference(batch, i)}")
      lines.append(f"Prediction[{i}]: {self.target_text(predictions[i])}")
    return lines

  def evaluate(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> list:
    """``[(id, (reference_text, hypothesis_text)), ...]`` for the batch."""
    predictions = self.predicted_ids(outputs)
    return [(int(batch["id"][i]), (self.reference(batch, i), self.target_text(predictions[i])))
            for i in range(len(predictions))]

  def finalize_evaluation(self, results: list) -> dict[str, float]:
    references = [ref for _, (ref, _) in results]
    hypotheses = [hyp for _, (_, hyp) in results]
    return {"BLEU": corpus_bleu(hypotheses, references)}

  def infer(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> list:
    """``[(id, hypothesis_text), ...]`` for the batch; with n-best outputs ``[(id,
    [(score, hypothesis_text), ...]), ...]``, best first."""
    ids = [int(i) for i in batch["id"]]
    if outputs.get("nbest_outputs") is not None:
      hypotheses, scores = np.asarray(outputs["nbest_outputs"]), outputs["nbest_scores"]
      return [(index, [(float(score), self.target_text(row))
                       for row, score in zip(hypotheses[i], scores[i])])
              for i, index in enumerate(ids)]
    predictions = self.predicted_ids(outputs)
    return [(index, self.target_text(predictions[i])) for i, index in enumerate(ids)]

  @staticmethod
  def _best(result: Any) -> str:
    """The (best) hypothesis of an :meth:`infer` result."""
    return result if isinstance(result, str) else result[0][1]

  def score_inference(self, results: list) -> dict[str, float]:
    """BLEU of the (best) translations when the infer data layer was given a
    ``target_file``."""
    lookup = getattr(self.data_layer, "reference_text", None)
    if lookup is None or not results or lookup(results[0][0]) is None:
      return {}
    references = [detokenize(split_tokens(lookup(i), self._delimiter), self._delimiter)
                  for i, _ in results]
    return {"BLEU": corpus_bleu([self._best(result) for _, result in results], references)}

  def interactive_lines(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                        resolve=str) -> list[str]:
    """A translation per input; with n-best outputs, ``score<TAB>hypothesis`` lines."""
    lines = []
    for _, result in sorted(self.infer(batch, outputs), key=lambda r: r[0]):
      lines.append(result if isinstance(result, str) else
                   "\n".join(f"{score:.6f}\t{text}" for score, text in result))
    return lines

  def serving_adapter(self):
    """Exported models take raw source text and return detokenized text (the ``n_best``
    best of each input, with their scores, when the decoder returns more than one)."""
    from open_seq2seq.serving.text import TextToTextServing  # pylint: disable=import-outside-toplevel
    return TextToTextServing(self.data_layer.source_tokenization(),
                             self.description.target_idx2seq, self._delimiter,
                             n_best=self.decoder.params.get("n_best", 1))

  def finalize_inference(self, results: list) -> list[TextLines]:
    """One translation per line, in input order, no header; with n-best results, each
    input's hypotheses on consecutive lines (:func:`nbest_line`)."""
    if results and not isinstance(results[0][1], str):
      results = [(index, nbest_line(index, score, text))
                 for index, hypotheses in results for score, text in hypotheses]
    return [TextLines(results)]
