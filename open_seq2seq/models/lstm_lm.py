"""LSTMLM: OpenSeq2Seq's language-model family — an LSTM language model, and the same network
fine-tuned as a text classifier (sentiment) from the language model's weights.

As in OpenSeq2Seq, one model class serves both: a language-model data layer (WKTDataLayer)
makes it a language model, a text-classification one (IMDBDataLayer, SSTDataLayer) a
classifier whose encoder ends in class logits; ``load_model`` then starts it from the language
model's embedding and recurrent weights (matched by name and shape).
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from open_seq2seq.data.description import DataDescription, LMDescription
from open_seq2seq.data.lm.vocab import VOCAB_FILE, read_vocab
from open_seq2seq.decoders.fake_decoder import FakeDecoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.losses.sequence_loss import BasicSampledSequenceLoss
from open_seq2seq.models.classification import accuracy_against_labels, predicted_classes
from open_seq2seq.models.model import Model
from open_seq2seq.outputs import CsvRows, InferenceOutput, TextLines
from open_seq2seq.utils.params import Param

#: Top-level keys OpenSeq2Seq copied into the data layer's params.
_DATA_KEYS = ("lm_vocab_file", "processed_data_folder")


def _is_fake(decoder: Any) -> bool:
  return isinstance(decoder, type) and issubclass(decoder, FakeDecoder)


def class_report(labels: np.ndarray, predictions: np.ndarray, names: list[str]
                 ) -> dict[str, float]:
  """Accuracy, and precision / recall / F1 of every class (0 where undefined)."""
  metrics = {"accuracy": float(np.mean(labels == predictions)) if len(labels) else 0.0}
  f1s = []
  for c, name in enumerate(names):
    true_pos = float(np.sum((predictions == c) & (labels == c)))
    predicted, actual = float(np.sum(predictions == c)), float(np.sum(labels == c))
    precision = true_pos / predicted if predicted else 0.0
    recall = true_pos / actual if actual else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    metrics.update({f"precision_{name}": precision, f"recall_{name}": recall,
                    f"f1_{name}": f1})
    f1s.append(f1)
  metrics["macro_f1"] = float(np.mean(f1s)) if f1s else 0.0
  return metrics


class LSTMLM(Model):
  """Language model or text classifier, chosen by the data layer (see the module doc).

  Language model: eval reports ``perplexity`` (per word, full softmax) — the best checkpoint
  is the lowest —; infer writes ``prompt<TAB>continuation`` lines; ``interactive_infer``
  continues each typed line. Classifier: eval reports ``accuracy``, per-class precision,
  recall and F1 and ``macro_f1`` — the best checkpoint is the highest accuracy —; infer writes
  ``text,prediction,probability,label`` rows and prints the accuracy;
  ``interactive_infer`` classifies each typed line.
  """

  PARAMS = {
      "lm_vocab_file": Param((str, None), None,
                             "The language model's vocabulary, for a classifier's data layer "
                             "(used when data_layer_params set none, as in OpenSeq2Seq)."),
      "processed_data_folder": Param((str, None), None,
                                     "Folder of the processed data (used when "
                                     "data_layer_params set none, as in OpenSeq2Seq)."),
  }

  # ------------------------------------------------------------------ wiring
  def make_data_layer(self, params: dict[str, Any], mode: str, num_workers: int = 1,
                      worker_id: int = 0):
    layer_params = dict(params["data_layer_params"])
    declared = params["data_layer"].declared_params()
    for key in _DATA_KEYS:
      if params.get(key) is not None and key in declared and layer_params.get(key) is None:
        layer_params[key] = params[key]
    return super().make_data_layer({**params, "data_layer_params": layer_params}, mode,
                                   num_workers, worker_id)

  @property
  def is_lm(self) -> bool:
    return self.description.num_classes is None

  @property
  def best_metric(self) -> tuple[str, bool]:
    return ("perplexity", False) if self.is_lm else ("accuracy", True)

  def component_kwargs(self, slot: str, description: DataDescription) -> dict[str, Any]:
    if not isinstance(description, LMDescription):
      raise ConfigError(f"data_layer: LSTMLM needs a language-model or text-classification "
                        f"data layer (LMDescription), got {type(description).__name__}")
    if slot == "encoder":
      return {"vocab_size": description.vocab_size, "num_classes": description.num_classes,
              # with FakeDecoder the encoder makes the class logits itself (OpenSeq2Seq)
              "classify": _is_fake(self.params["decoder"]),
              "carry_state": description.stream_batches and self.mode == "train",
              "end_token": description.end_token}
    if slot == "decoder":
      return {"num_classes": description.num_classes}
    return {}

  def connect_components(self) -> None:
    sampled = getattr(self.encoder, "sampled", False)
    if sampled and self.loss is not None and not isinstance(self.loss,
                                                            BasicSampledSequenceLoss):
      raise ConfigError("encoder_params/num_sampled: a sampled softmax needs "
                        "loss: BasicSampledSequenceLoss")
    if not self.is_lm and _is_fake(self.params["decoder"]) and \
        getattr(self.encoder, "classifier", None) is None:
      raise ConfigError("encoder: with FakeDecoder the encoder must make the class logits "
                        "(LMEncoder does)")

  # ------------------------------------------------------------------ vocabulary
  #: The vocabulary of each role of the encoder's ``VOCAB_INDEXED`` variables: their rows
  #: follow the words when ``load_model`` loads a run of another vocabulary.
  VOCABULARY_ROLES = {"encoder": {"input": "word", "output": "word"}}

  def vocabularies(self) -> dict[str, list[str]]:
    """The word of every id (fillers included)."""
    return {"word": list(self.description.idx2word)}

  @staticmethod
  def vocabulary_files(train_config: dict[str, Any]) -> dict[str, str]:
    """The vocab.txt a resolved train config names (given, or the processed folder's)."""
    layer = train_config.get("data_layer_params") or {}
    path = layer.get("vocab_file") or layer.get("lm_vocab_file") or \
        train_config.get("lm_vocab_file")
    folder = layer.get("processed_data_folder") or train_config.get("processed_data_folder")
    if not path and folder:
      path = os.path.join(folder, VOCAB_FILE)
    return {"word": path} if isinstance(path, str) else {}

  @staticmethod
  def read_vocabulary_file(path: str) -> list[str]:
    """The word of every id of a ``vocab.txt``."""
    return list(read_vocab(path, "load_model_vocab_files").idx2word)

  # ------------------------------------------------------------------ computation
  predictions_from_loss_pass = True

  def eval_outputs(self, batch: dict) -> dict:
    """One teacher-forced pass gives the loss and the predictions; a language model's
    predictions are then each row's negative log-likelihood of its target words (``nll``
    over ``tokens``, for the perplexity) and its most likely next words."""
    out = super().eval_outputs(batch)
    if self.is_lm and "loss_sum" in out:
      outputs = out["predictions"]
      targets, lengths = batch["target_tensors"][:2]
      logits = tf.cast(outputs["logits"], tf.float32)
      steps = tf.minimum(tf.shape(logits)[1], tf.shape(targets)[1])
      xentropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels=tf.cast(targets[:, :steps], tf.int32), logits=logits[:, :steps])
      mask = tf.sequence_mask(lengths, steps, dtype=tf.float32)
      out["predictions"] = {"outputs": outputs["outputs"],
                            "nll": tf.reduce_sum(xentropy * mask, 1),
                            "tokens": tf.reduce_sum(mask, 1)}
    return out

  # ------------------------------------------------------------------ helpers
  def _words(self, ids: np.ndarray, length: int | None = None) -> str:
    ids = np.asarray(ids).reshape(-1)
    if length is not None:
      ids = ids[:int(length)]
    words = self.description.idx2word
    return self.description.delimiter.join(words[i] if 0 <= i < len(words) else "<?>"
                                           for i in ids)

  def _classes(self, outputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    return predicted_classes(outputs["logits"])

  def _name(self, label: int) -> str:
    return self.description.class_name(int(label))

  # ------------------------------------------------------------------ family hooks
  def format_samples(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                     max_samples: int = 1) -> list[str]:
    ids, lengths = batch["source_tensors"][:2]
    lines = []
    for i in range(min(max_samples, len(ids))):
      lines.append(f"Sample source:     {self._words(ids[i], lengths[i])}")
      if self.is_lm:
        if "target_tensors" in batch:
          targets, target_lengths = batch["target_tensors"][:2]
          lines.append(f"Sample target:     {self._words(targets[i], target_lengths[i])}")
        if "outputs" in outputs:
          length = outputs.get("final_sequence_lengths", [None] * len(ids))[i]
          lines.append(f"Sample prediction: {self._words(outputs['outputs'][i], length)}")
      elif "logits" in outputs:
        predicted, probability = self._classes(outputs)
        if "target_tensors" in batch:
          lines.append(f"Sample label:      {self._name(batch['target_tensors'][0][i])}")
        lines.append(f"Sample prediction: {self._name(predicted[i])} "
                     f"(probability {probability[i]:.3f})")
    return lines

  def evaluate(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> list:
    """Language model: per row (id, (nll, tokens)); classifier: (id, (label, predicted))."""
    if self.is_lm:
      if "nll" not in outputs:
        return []
      return [(int(i), (float(n), float(t))) for i, n, t in
              zip(batch["id"], outputs["nll"], outputs["tokens"])]
    labels = np.asarray(batch["target_tensors"][0]).reshape(-1)
    predicted, _ = self._classes(outputs)
    return [(int(i), (int(l), int(p))) for i, l, p in zip(batch["id"], labels, predicted)]

  def finalize_evaluation(self, results: list) -> dict[str, float]:
    if not results:
      return {}
    values = np.array([r for _, r in results], np.float64)
    if self.is_lm:
      tokens = values[:, 1].sum()
      mean_nll = values[:, 0].sum() / max(tokens, 1.0)
      # eval_tokens is a count: an int, printed as one
      return {"perplexity": float(math.exp(min(mean_nll, 700.0))), "eval_tokens": int(tokens)}
    names = [self._name(c) for c in range(self.description.num_classes)]
    return class_report(values[:, 0].astype(int), values[:, 1].astype(int), names)

  def infer(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> list:
    """Language model: (id, generated text); classifier: (id, (class, probability))."""
    if self.is_lm:
      return [(int(i), self._words(words, length)) for i, words, length in
              zip(batch["id"], outputs["outputs"], outputs["final_sequence_lengths"])]
    predicted, probability = self._classes(outputs)
    return [(int(i), (int(c), float(p))) for i, c, p in zip(batch["id"], predicted,
                                                             probability)]

  def interactive_lines(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                        resolve: Callable[[str], str] = str) -> list[str]:
    results = sorted(self.infer(batch, outputs), key=lambda r: r[0])
    if self.is_lm:
      return [text for _, text in results]
    return [f"{self._name(c)} {p:.4f}" for _, (c, p) in results]

  def score_inference(self, results: list) -> dict[str, float]:
    """A classifier's accuracy when the data layer knows the labels."""
    if self.is_lm:
      return {}
    return accuracy_against_labels(results, self.data_layer.label)

  def finalize_inference(self, results: list) -> list[InferenceOutput]:
    layer = self.data_layer
    if self.is_lm:
      return [TextLines([(i, f"{layer.text_of(i)}\t{text}") for i, text in results],
                        header="prompt\tcontinuation")]
    rows = []
    for i, (c, p) in results:
      label = layer.label(i)
      rows.append((i, (layer.text_of(i), self._name(c), f"{p:.6f}",
                       "" if label is None else self._name(label))))
    return [CsvRows(rows, columns=("text", "prediction", "probability", "label"))]


__all__ = ["LSTMLM", "class_report"]
