"""Maps the config's ``dtype`` to a Keras dtype policy."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.errors import ConfigError

DTYPE_CHOICES = ("float32", "float16", "mixed", "mixed_float16", "mixed_bfloat16")


def normalize_dtype(dtype: Any) -> str:
  """``tf.float32``/``"float32"``/``"mixed"``/... -> one of :data:`DTYPE_CHOICES`."""
  if isinstance(dtype, tf.DType):
    dtype = dtype.name
  if dtype not in DTYPE_CHOICES:
    raise ConfigError(f"dtype: {dtype!r} is not one of {', '.join(DTYPE_CHOICES)}")
  return dtype


def resolve_mixed() -> str:
  """Half type that ``"mixed"`` means on this host: float16 on GPUs, bfloat16 on CPUs."""
  return "mixed_float16" if tf.config.list_physical_devices("GPU") else "mixed_bfloat16"


def dtype_policy(dtype: Any) -> keras.DTypePolicy:
  name = normalize_dtype(dtype)
  if name == "mixed":
    name = resolve_mixed()
  return keras.DTypePolicy(name)
