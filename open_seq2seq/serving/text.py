"""Text <-> ids inside an exported graph, equal to what the text data layers and models do
in Python.

:class:`TextToIds` tokenizes raw lines as
:class:`~open_seq2seq.data.text2text.ParallelTextDataLayer` does (split by the delimiter and
looked up in the vocabulary, or encoded by its SentencePiece model; ``<S>`` and EOS added);
:class:`IdsToText` turns predicted ids into text as
:func:`open_seq2seq.models.text2text.ids_to_text` does (stop at EOS, skip PAD and ``<S>``,
merge SentencePiece and ``@@`` pieces). Both are ``tf.Module``s: their lookup tables are
saved with the model.

In-graph SentencePiece needs the ``tensorflow_text`` package (its op library must also be
imported by whoever loads the SavedModel).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import tensorflow as tf

from open_seq2seq.data.text2text.tokenization import TextTokenization
from open_seq2seq.data.text2text.vocab import SpecialTextTokens
from open_seq2seq.errors import ConfigError
from open_seq2seq.serving.adapter import ServingAdapter

__all__ = ["TextToIds", "IdsToText", "TextToTextServing", "import_tensorflow_text"]

_PAD = SpecialTextTokens.PAD_ID.value
_UNK = SpecialTextTokens.UNK_ID.value
_S = SpecialTextTokens.S_ID.value
_EOS = SpecialTextTokens.EOS_ID.value
_SENTENCEPIECE_SPACE = "\u2581"
_BPE_JOINER = "@@"


def import_tensorflow_text():
  """The ``tensorflow_text`` module, or a one-line error saying how to install it."""
  try:
    import tensorflow_text  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise ConfigError(
        "exporting a model that tokenizes with SentencePiece needs the tensorflow_text "
        "package: pip install --no-deps tensorflow-text (its version must match "
        "TensorFlow's; --no-deps keeps it from pulling the full tensorflow wheel)") from None
  return tensorflow_text


def _literal(text: str) -> str:
  """``text`` as an RE2 pattern matching it literally (Python's re.escape also escapes
  spaces, which RE2 rejects)."""
  return "".join("\\" + ch if ch in "\\.^$|?*+()[]{}" else ch for ch in text)


def _split(lines: tf.Tensor, delimiter: str) -> tf.RaggedTensor:
  """Tokens of each line, as :func:`open_seq2seq.data.text2text.corpus_ids.split_tokens`."""
  if delimiter == "":
    return tf.strings.unicode_split(tf.strings.strip(lines), "UTF-8")
  if delimiter.isspace():
    # str.split(): any run of whitespace separates, none at either end
    return tf.strings.split(tf.strings.strip(
        tf.strings.regex_replace(lines, r"\s+", " ")), sep=" ")
  tokens = tf.strings.split(tf.strings.strip(lines), sep=delimiter)
  return tf.ragged.boolean_mask(tokens, tf.strings.length(tokens) > 0)


class TextToIds(tf.Module):
  """Raw lines [batch] (tf.string) -> ``(ids [batch, time] int32 padded with PAD, lengths
  [batch] int32)``, EOS appended and ``<S>`` prepended when the data layer does."""

  def __init__(self, tokenization: TextTokenization, name: str = "text_to_ids"):
    super().__init__(name=name)
    self.delimiter = tokenization.delimiter
    self.start_token = tokenization.start_token
    self.sentencepiece = None
    if tokenization.sentencepiece_model is not None:
      text = import_tensorflow_text()
      self.sentencepiece = text.SentencepieceTokenizer(
          model=tokenization.sentencepiece_model, out_type=tf.int32)
      self.model_to_ids = tf.constant(np.asarray(tokenization.sentencepiece_ids, np.int32))
    else:
      tokens = list(tokenization.seq2idx)
      ids = [int(tokenization.seq2idx[t]) for t in tokens]
      self.table = tf.lookup.StaticHashTable(
          tf.lookup.KeyValueTensorInitializer(tf.constant(tokens, tf.string),
                                              tf.constant(ids, tf.int32)),
          default_value=_UNK)

  def __call__(self, lines: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    if self.sentencepiece is not None:
      pieces = self.sentencepiece.tokenize(lines)
      ids = tf.ragged.map_flat_values(tf.gather, self.model_to_ids, pieces)
    else:
      ids = tf.ragged.map_flat_values(self.table.lookup, _split(lines, self.delimiter))
    rows = tf.shape(lines, out_type=tf.int64)[:1]
    eos = tf.RaggedTensor.from_tensor(tf.fill(tf.concat([rows, [1]], 0), _EOS))
    parts = [ids, eos]
    if self.start_token:
      parts.insert(0, tf.RaggedTensor.from_tensor(tf.fill(tf.concat([rows, [1]], 0), _S)))
    ids = tf.concat(parts, axis=1)
    return ids.to_tensor(default_value=_PAD), tf.cast(ids.row_lengths(), tf.int32)


class IdsToText(tf.Module):
  """Predicted ids [batch, time] -> text [batch] (tf.string), as ``ids_to_text``: ids after
  the first EOS are dropped, PAD and ``<S>`` skipped, unknown ids printed as ``<UNK>``;
  lines holding a SentencePiece piece are joined as SentencePiece text, the others with the
  delimiter, ``@@``-continued pieces merged."""

  def __init__(self, idx2seq: Mapping[int, str], delimiter: str = " ",
               name: str = "ids_to_text"):
    super().__init__(name=name)
    size = max(idx2seq) + 1 if idx2seq else 1
    unk = SpecialTextTokens.to_string(_UNK)
    tokens = [idx2seq.get(i, unk).encode("utf-8") for i in range(size)] + [unk.encode()]
    self.tokens = tf.constant(tokens, dtype=tf.string)
    self.delimiter = delimiter

  def __call__(self, ids: tf.Tensor) -> tf.Tensor:
    ids = tf.cast(ids, tf.int32)
    before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, _EOS), tf.int32), axis=1), 0)
    keep = before_eos & tf.not_equal(ids, _PAD) & tf.not_equal(ids, _S)
    last = tf.shape(self.tokens)[0] - 1  # the <UNK> after the vocabulary: ids out of range
    safe = tf.where((ids >= 0) & (ids < last), ids, last)
    tokens = tf.ragged.boolean_mask(tf.gather(self.tokens, safe), keep)

    has_piece = tf.reduce_any(tf.strings.regex_full_match(
        tokens, f".*{_SENTENCEPIECE_SPACE}.*"), axis=1)
    sentencepiece = tf.strings.strip(tf.strings.regex_replace(
        tf.strings.reduce_join(tokens, axis=1), _SENTENCEPIECE_SPACE, " "))
    joined = tf.strings.reduce_join(tokens, axis=1, separator=self.delimiter)
    merged = tf.strings.regex_replace(joined, _literal(_BPE_JOINER + self.delimiter), "")
    merged = tf.strings.regex_replace(merged, _literal(_BPE_JOINER) + "$", "")
    return tf.where(has_piece, sentencepiece, merged)


class TextToTextServing(ServingAdapter):
  """Translation: ``text`` [batch] (raw source lines) -> ``text`` [batch] (detokenized
  output lines) and ``ids`` [batch, time] (the predicted ids, PAD after EOS).

  With ``n_best`` > 1 (a decoder returning its ``"nbest_*"`` outputs): ``text`` [batch,
  n_best] and ``scores`` [batch, n_best], best first, and ``ids`` [batch, n_best, time].
  """

  inputs = {"text": (tf.TensorSpec([None], tf.string),
                     "raw source sentences, one per element (untokenized)")}
  outputs = {"text": "the output sentence of each input, detokenized",
             "ids": "the predicted target ids [batch, time] (EOS, then PAD)"}

  def __init__(self, source: TextTokenization, target_idx2seq: Mapping[int, str],
               target_delimiter: str, n_best: int = 1):
    super().__init__(name="text_to_text")
    self.encode = TextToIds(source)
    self.decode = IdsToText(target_idx2seq, target_delimiter)
    self.n_best = n_best
    if n_best > 1:
      self.outputs = {
          "text": "the n_best output sentences of each input [batch, n_best], best first, "
                  "detokenized",
          "scores": "their scores [batch, n_best] (penalised log-probabilities of a beam "
                    "search, log-probabilities of samples)",
          "ids": "their target ids [batch, n_best, time] (EOS, then PAD)"}
    if source.sentencepiece_model is not None:
      self.required_imports = ("tensorflow_text",)

  def example_inputs(self) -> dict[str, tf.Tensor]:
    return {"text": tf.constant(["a b c"])}

  def to_batch(self, inputs):
    return {"source_tensors": self.encode(inputs["text"])}

  def to_outputs(self, inputs, batch, predictions):
    if self.n_best > 1:
      ids = tf.cast(predictions["nbest_outputs"], tf.int32)
      shape = tf.shape(ids)
      text = tf.reshape(self.decode(tf.reshape(ids, [-1, shape[2]])), shape[:2])
      return {"text": text, "scores": predictions["nbest_scores"], "ids": ids}
    if predictions.get("outputs") is not None:
      ids = tf.cast(predictions["outputs"], tf.int32)
    else:
      ids = tf.argmax(predictions["logits"], axis=-1, output_type=tf.int32)
    return {"text": self.decode(ids), "ids": ids}
