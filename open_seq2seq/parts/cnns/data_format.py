"""The memory layout image convolutions run in.

OpenSeq2Seq's image configs ask for ``data_format: "channels_first"`` (NCHW), cuDNN's fast
layout in 2018. TensorFlow's CPU convolutions and poolings only run NHWC, so on a host
without GPUs the layers run ``channels_last`` whatever the config says. Kernel and
batch-norm variables have the same shapes in both layouts, so checkpoints move freely
between them and the outputs agree.
"""

from __future__ import annotations

import functools

import tensorflow as tf

DATA_FORMATS = ("channels_first", "channels_last")


@functools.lru_cache(maxsize=None)
def _has_gpu() -> bool:
  return bool(tf.config.list_physical_devices("GPU"))


def internal_data_format(requested: str) -> str:
  """``requested`` where it can run, else ``"channels_last"`` (CPU hosts)."""
  if requested == "channels_first" and _has_gpu():
    return "channels_first"
  return "channels_last"


def channel_axis(data_format: str) -> int:
  return 1 if data_format == "channels_first" else -1


def to_layout(images: tf.Tensor, data_format: str) -> tf.Tensor:
  """NHWC images (as data layers give them) in ``data_format``."""
  return tf.transpose(images, [0, 3, 1, 2]) if data_format == "channels_first" else images


def from_layout(images: tf.Tensor, data_format: str) -> tf.Tensor:
  """Images in ``data_format`` back to NHWC."""
  return tf.transpose(images, [0, 2, 3, 1]) if data_format == "channels_first" else images
