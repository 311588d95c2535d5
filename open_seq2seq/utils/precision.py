"""Maps the config's ``dtype`` to a Keras dtype policy, and says what ``"mixed"`` means here.

``dtype`` values (OpenSeq2Seq's, plus two that force the half type):

* ``tf.float32`` / ``"float32"``: everything in float32.
* ``tf.float16`` / ``"float16"``: everything in float16, variables included (no master copy;
  kept for parity with OpenSeq2Seq).
* ``"mixed"``: float32 variables and optimizer state, half-precision compute. The half type is
  float16 on GPUs and bfloat16 on CPUs, where TensorFlow's kernels emulate float16 and it is
  slower than float32, even on CPUs with AVX512-FP16 (see :func:`resolve_mixed`).
* ``"mixed_float16"`` / ``"mixed_bfloat16"``: ``"mixed"`` with the half type forced.
"""

from __future__ import annotations

import functools
import platform
from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.errors import ConfigError

DTYPE_CHOICES = ("float32", "float16", "mixed", "mixed_float16", "mixed_bfloat16")
_ALIASES = {"fp32": "float32", "fp16": "float16", "half": "float16"}


def normalize_dtype(dtype: Any) -> str:
  """``tf.float32``/``"float32"``/``"mixed"``/... -> one of :data:`DTYPE_CHOICES`."""
  if isinstance(dtype, tf.DType):
    dtype = dtype.name
  elif isinstance(dtype, str):
    dtype = _ALIASES.get(dtype.strip().lower(), dtype.strip().lower())
  if dtype not in DTYPE_CHOICES:
    raise ConfigError(f"dtype: {dtype!r} is not one of {', '.join(DTYPE_CHOICES)} "
                      f"(or tf.float32 / tf.float16)")
  return dtype


def cpu_flags() -> frozenset[str]:
  """Instruction-set flags of this CPU (empty where they cannot be read)."""
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        if line.startswith("flags") or line.startswith("Features"):
          return frozenset(line.split(":", 1)[1].split())
  except OSError:
    pass
  return frozenset()


@functools.lru_cache(maxsize=None)
def resolve_mixed() -> tuple[str, str]:
  """The policy ``"mixed"`` stands for on this host, and why.

  Returns:
    ``("mixed_float16" | "mixed_bfloat16", reason)``.
  """
  gpus = tf.config.list_physical_devices("GPU")
  if gpus:
    return "mixed_float16", f"{len(gpus)} GPU(s): float16 runs on tensor cores"
  # Not float16 on CPUs with AVX512-FP16 either: the stock TensorFlow build's CPU kernels do
  # not use it (on a Xeon with AVX512-FP16 and AMX-BF16, a 1-D convolution forward + backward
  # took 305x float32's time in float16 and 0.16x in bfloat16: scripts/bench_half_types.py,
  # docs/mixed-precision.md).
  flags = cpu_flags()
  machine = platform.machine() or "CPU"
  if flags & {"avx512_bf16", "amx_bf16"}:
    why = "native bfloat16 (AVX512-BF16/AMX) matmuls and convolutions through oneDNN"
  else:
    why = "no native half type; bfloat16 at least halves activation memory"
  return "mixed_bfloat16", f"{machine} CPU (float16 would be emulated): {why}"


def policy_name(dtype: Any) -> str:
  """The Keras policy name for a config ``dtype`` (``"mixed"`` resolved for this host)."""
  name = normalize_dtype(dtype)
  return resolve_mixed()[0] if name == "mixed" else name


def dtype_policy(dtype: Any) -> keras.DTypePolicy:
  return keras.DTypePolicy(policy_name(dtype))


def compute_dtype(dtype: Any) -> tf.DType:
  """Dtype of activations and matmuls under ``dtype``."""
  return tf.as_dtype(dtype_policy(dtype).compute_dtype)


def variable_dtype(dtype: Any) -> tf.DType:
  """Dtype of the weights (and optimizer slots) under ``dtype``."""
  return tf.as_dtype(dtype_policy(dtype).variable_dtype)


def is_half(dtype: Any) -> bool:
  """Whether activations are float16 or bfloat16 under ``dtype``."""
  return compute_dtype(dtype) in (tf.float16, tf.bfloat16)


def pad_multiple(dtype: Any) -> int:
  """Multiple to round batch and length dimensions to: 8 under half precision, else 1.

  Half-precision matmul kernels (tensor cores, oneDNN AMX/AVX512 blocks) run fastest when
  the sizes they see are multiples of 8.
  """
  return 8 if is_half(dtype) else 1


def round_up(value: int, multiple: int) -> int:
  """``value`` rounded up to a multiple of ``multiple``."""
  return -(-int(value) // multiple) * multiple


def describe(dtype: Any) -> str:
  """One log line on the precision of a run, e.g. ``"mixed -> mixed_bfloat16 (...)"``."""
  name = normalize_dtype(dtype)
  if name == "mixed":
    resolved, why = resolve_mixed()
    return f"dtype mixed -> {resolved} ({why})"
  if name == "float16":
    return "dtype float16: float16 weights and compute, no float32 master copy"
  return f"dtype {name}"

