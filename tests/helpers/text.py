"""Small text datasets for the data-pipeline tests."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def length_dataset(lengths, with_target: bool = True) -> tf.data.Dataset:
  """Unbatched dict elements: ``source`` of each of ``lengths`` (ids 4..), a target one id
  longer (all 5s) unless ``with_target`` is False, their lengths, and ``id`` = position."""
  def gen():
    for i, n in enumerate(lengths):
      element = {"source": np.arange(4, 4 + n, dtype=np.int32), "source_length": np.int32(n),
                 "id": np.int64(i)}
      if with_target:
        element["target"] = np.full(n + 1, 5, np.int32)
        element["target_length"] = np.int32(n + 1)
      yield element
  spec = {"source": tf.TensorSpec([None], tf.int32), "source_length": tf.TensorSpec([], tf.int32),
          "id": tf.TensorSpec([], tf.int64)}
  if with_target:
    spec.update(target=tf.TensorSpec([None], tf.int32),
                target_length=tf.TensorSpec([], tf.int32))
  return tf.data.Dataset.from_generator(gen, output_signature=spec)
