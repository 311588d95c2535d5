"""Image2Label: image classification (ResNet, plain CNNs) on ImageNet- or CIFAR-style data."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from open_seq2seq.data.description import DataDescription, ImageDescription
from open_seq2seq.errors import ConfigError
from open_seq2seq.models.classification import accuracy_against_labels, predicted_classes
from open_seq2seq.models.model import Model
from open_seq2seq.outputs import CsvRows, ImageSample, InferenceOutput, SampleSummary, TextSample


def top_k_hits(logits: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
  """bool [batch]: the label is among the ``k`` highest logits.

  Ties rank as ``argmax`` breaks them (lower class first), so top-1 equals argmax; a row with
  a NaN or infinite logit is a miss.
  """
  logits = np.asarray(logits, np.float64)
  k = min(k, logits.shape[-1])
  true_logit = np.take_along_axis(logits, labels[:, None].astype(np.int64), axis=-1)
  ranked_above = np.sum(logits > true_logit, axis=-1) + np.sum(
      (logits == true_logit) & (np.arange(logits.shape[-1]) < labels[:, None]), axis=-1)
  return (ranked_above < k) & np.all(np.isfinite(logits), axis=-1)


def displayable(image: np.ndarray) -> np.ndarray:
  """A normalized image rescaled to [0, 1] for TensorBoard (min-max per image)."""
  image = np.asarray(image, np.float32)
  low, high = float(image.min()), float(image.max())
  return (image - low) / (high - low) if high > low else np.zeros_like(image)


class Image2Label(Model):
  """Image classification family: images in, one class per image out.

  Eval reports ``accuracy`` (top-1) and ``top5_accuracy`` over the whole eval set (from the
  decoder's logits); the best checkpoint is the highest accuracy. Samples print the true and
  predicted classes and go to TensorBoard as the image with a text line of both. Infer writes
  ``file,label,probability`` rows in input order (the predicted class and its softmax
  probability; ``file`` is the data layer's name of the image), scored when the layer knows
  the labels; ``interactive_infer`` classifies image files given by path.

  The data layer's description must be an
  :class:`~open_seq2seq.data.description.ImageDescription`: the decoder is offered
  ``num_classes``, and class names (when the data gives them) label the outputs.
  """

  best_metric = ("accuracy", True)
  predictions_from_loss_pass = True

  # ------------------------------------------------------------------ wiring
  def component_kwargs(self, slot: str, description: DataDescription) -> dict[str, Any]:
    """The decoder gets the number of classes."""
    if not isinstance(description, ImageDescription):
      raise ConfigError(f"data_layer: Image2Label needs a data layer describing images "
                        f"(ImageDescription), got {type(description).__name__}")
    if slot == "decoder":
      return {"num_classes": description.num_classes}
    return {}

  def connect_components(self) -> None:
    """Checks that the decoder has a logit for every class of the data."""
    classes = self.description.num_classes
    output_dim = getattr(self.decoder, "output_dim", None)
    if output_dim is not None and output_dim < classes:
      raise ConfigError(f"decoder_params/output_dim: {output_dim} logits for "
                        f"data_layer_params/num_classes={classes} classes; make them match")

  # ------------------------------------------------------------------ helpers
  def _name(self, label: int) -> str:
    return self.description.class_name(int(label))

  @staticmethod
  def _labels(batch: dict[str, np.ndarray]) -> np.ndarray:
    return np.asarray(batch["target_tensors"][0]).reshape(-1)

  def _predictions(self, outputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(predicted class [batch], its probability [batch])."""
    return predicted_classes(outputs["logits"])

  # ------------------------------------------------------------------ family hooks
  def format_samples(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                     max_samples: int = 1) -> list[str]:
    predicted, probability = self._predictions(outputs)
    lines = []
    for i in range(min(max_samples, len(predicted))):
      if "target_tensors" in batch:
        lines.append(f"Sample target:     {self._name(self._labels(batch)[i])}")
      lines.append(f"Sample prediction: {self._name(predicted[i])} "
                   f"(probability {probability[i]:.3f})")
    return lines

  def sample_summaries(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]
                       ) -> list[SampleSummary]:
    """The first image of the batch and a line with its true and predicted classes."""
    predicted, probability = self._predictions(outputs)
    text = f"predicted: {self._name(predicted[0])} ({probability[0]:.3f})"
    if "target_tensors" in batch:
      text = f"true: {self._name(self._labels(batch)[0])}, " + text
    return [ImageSample("image", displayable(batch["source_tensors"][0][0])),
            TextSample("labels", text)]

  def evaluate(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> list:
    """Per image: (id, (top-1 hit, top-5 hit))."""
    labels = self._labels(batch)
    top1 = top_k_hits(outputs["logits"], labels, 1)
    top5 = top_k_hits(outputs["logits"], labels, 5)
    return [(int(index), (bool(a), bool(b))) for index, a, b in zip(batch["id"], top1, top5)]

  def finalize_evaluation(self, results: list) -> dict[str, float]:
    if not results:
      return {}
    hits = np.array([r for _, r in results], np.float64)
    return {"accuracy": float(hits[:, 0].mean()), "top5_accuracy": float(hits[:, 1].mean())}

  def infer(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> list:
    """Per image: (id, (predicted class, its probability))."""
    predicted, probability = self._predictions(outputs)
    return [(int(index), (int(c), float(p))) for index, c, p in
            zip(batch["id"], predicted, probability)]

  def interactive_lines(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                        resolve: Callable[[str], str] = str) -> list[str]:
    """``<class> <probability>`` for each image file given."""
    predicted, probability = self._predictions(outputs)
    return [f"{self._name(c)} {p:.4f}" for c, p in zip(predicted, probability)]

  def score_inference(self, results: list) -> dict[str, float]:
    """Top-1 accuracy of the predictions when the data layer knows the labels (CIFAR)."""
    if self.data_layer.interactive_inputs:
      return {}
    return accuracy_against_labels(results, self.data_layer.label)

  def serving_adapter(self):
    """Exported classifiers take encoded image files and return class names."""
    from open_seq2seq.serving.image import ImageClassificationServing  # pylint: disable=import-outside-toplevel
    if not hasattr(self.data_layer, "preprocess_eval"):
      raise ConfigError(f"--mode=export: {type(self.data_layer).__name__} has no in-graph "
                        f"eval preprocessing; Image2Label exports image data layers only")
    description = self.description
    classes = max(description.num_classes, getattr(self.decoder, "output_dim", None) or 0)
    return ImageClassificationServing(
        self.data_layer.preprocess_eval, description.num_channels,
        [description.class_name(i) for i in range(classes)], description.image_size)

  def finalize_inference(self, results: list) -> list[InferenceOutput]:
    """``file,label,probability`` rows in input order."""
    layer = self.data_layer
    return [CsvRows([(i, (layer.image_name(i), self._name(c), f"{p:.6f}"))
                     for i, (c, p) in results], columns=("file", "label", "probability"))]
