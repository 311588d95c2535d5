"""FullyConnectedDecoder: one dense layer from features to class logits (classification).

OpenSeq2Seq cut non-sequence models (image classifiers, sentiment analysis) into an encoder
and this decoder at the last fully connected layer; the name and ``output_dim`` are kept.
"""

from __future__ import annotations

import math
from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.decoders.decoder import Decoder
from open_seq2seq.utils.component import resolve_size
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS
from open_seq2seq.utils.params import Param


class FullyConnectedDecoder(Decoder):
  """A linear layer to ``output_dim`` classes.

  Input: ``encoder_output["outputs"]``, features [batch, features] (higher-rank outputs,
  such as unpooled feature maps, are flattened per example). Returns ``logits``
  [batch, output_dim] in float32 (for the loss and for softmax probabilities, also under
  mixed precision) and ``outputs``, the predicted class ids [batch] int32.

  ``output_dim`` is taken from the config if set (OpenSeq2Seq configs set it), else from the
  number of classes the model passes (``num_classes=``, from its data layer's description).
  """

  PARAMS = {
      "output_dim": Param((int, None), None, "Number of classes (default: the data's)."),
      **INITIALIZER_PARAMS,
  }

  def __init__(self, params: dict[str, Any], *, num_classes: int | None = None,
               mode: str = "train", name: str = "decoder", dtype: Any = "float32",
               initializer: Any = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    self.output_dim = resolve_size(self.params, "output_dim", num_classes, "decoder_params")
    self.fc = keras.layers.Dense(self.output_dim, kernel_initializer=self.kernel_initializer(),
                                 dtype=self.dtype_policy, name="fully_connected")

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    features = input_dict["encoder_output"]["outputs"]
    if len(features.shape) > 2:
      features = tf.reshape(features, [-1, math.prod(features.shape[1:])])
    logits = tf.cast(self.fc(features), tf.float32)
    return {"logits": logits, "outputs": tf.argmax(logits, axis=-1, output_type=tf.int32)}
