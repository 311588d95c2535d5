"""Exported image classifiers: encoded image files in, class names and probabilities out."""

from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf

from open_seq2seq.serving.adapter import ServingAdapter

__all__ = ["ImageClassificationServing"]


class ImageClassificationServing(ServingAdapter):
  """``image`` [batch] (the bytes of PNG, JPEG, GIF or BMP files) -> ``label`` (class
  name), ``class_id``, ``probability`` (of that class) and ``probabilities`` [batch,
  classes]; each image decoded and preprocessed as the data layer does at eval.

  Args:
    preprocess: decoded uint8 image [H, W, C] -> the model's float input (TF ops).
    channels: channels images are decoded to.
    class_names: the name of each class id.
    example_side: height and width of the blank example image variables are built on.
  """

  inputs = {"image": (tf.TensorSpec([None], tf.string),
                      "encoded image files (PNG, JPEG, GIF, BMP), one per element")}
  outputs = {"label": "the predicted class's name",
             "class_id": "the predicted class id",
             "probability": "the predicted class's probability",
             "probabilities": "every class's probability [batch, classes]"}

  def __init__(self, preprocess: Callable[[tf.Tensor], tf.Tensor], channels: int,
               class_names: Sequence[str], example_side: int):
    super().__init__(name="image_classification")
    self._preprocess = preprocess
    self.channels = channels
    self.class_names = tf.constant([n.encode("utf-8") for n in class_names], tf.string)
    self.example_side = example_side
    # the preprocessed shape, once (eagerly): map_fn's output signature
    self._image_shape = self._decode(self.example_inputs()["image"][0]).shape

  def example_inputs(self) -> dict[str, tf.Tensor]:
    blank = tf.zeros([self.example_side, self.example_side, self.channels], tf.uint8)
    return {"image": tf.expand_dims(tf.io.encode_png(blank), 0)}

  def _decode(self, encoded: tf.Tensor) -> tf.Tensor:
    image = tf.io.decode_image(encoded, channels=self.channels, expand_animations=False)
    return tf.cast(self._preprocess(image), tf.float32)

  def to_batch(self, inputs):
    images = tf.map_fn(self._decode, inputs["image"],
                       fn_output_signature=tf.TensorSpec(self._image_shape, tf.float32))
    return {"source_tensors": (images,)}

  def to_outputs(self, inputs, batch, predictions):
    probabilities = tf.nn.softmax(tf.cast(predictions["logits"], tf.float32), axis=-1)
    class_id = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
    return {"label": tf.gather(self.class_names, class_id), "class_id": class_id,
            "probability": tf.reduce_max(probabilities, axis=-1),
            "probabilities": probabilities}
