"""Exceptions for mistakes a user can make (config, data, paths, command line).

``run.py`` prints any :class:`OpenSeq2SeqError` as one line and exits non-zero, without a
TensorFlow traceback — also one raised inside the input pipeline (``tf.numpy_function``),
which reaches the caller wrapped in a TensorFlow error (:func:`embedded_error`). Anything
else is a bug and keeps its traceback.
"""

import re


class OpenSeq2SeqError(Exception):
  """Base class of every user-facing error: the message is the whole story."""


class ConfigError(OpenSeq2SeqError):
  """The config file, a mode dict or a command-line override is wrong."""


class DataError(OpenSeq2SeqError):
  """A data, vocabulary or audio file is missing, unreadable or malformed."""


class CheckpointError(OpenSeq2SeqError):
  """A checkpoint or log directory is missing or would be overwritten."""


class WorkerLostError(OpenSeq2SeqError):
  """A worker of a multi-process job died or became unreachable; the job was stopped."""


class DivergenceError(OpenSeq2SeqError):
  """Training diverged (non-finite loss, or non-finite gradients step after step)."""


class OutOfMemoryError(OpenSeq2SeqError):
  """A device ran out of memory: a batch (or a model) too large for it."""


_OOM_SHAPE = re.compile(r"OOM when allocating tensor with (shape\[[^\]]*\])")


def out_of_memory(error: BaseException) -> OutOfMemoryError | None:
  """The one-line error for TensorFlow's ResourceExhaustedError (naming the tensor shape it
  could not allocate, and the knobs that bound it), or None for any other error."""
  if type(error).__name__ != "ResourceExhaustedError":
    return None
  shape = _OOM_SHAPE.search(str(error))
  what = f"could not allocate a tensor of {shape.group(1)}" if shape else "a device is full"
  return OutOfMemoryError(
      f"out of memory: {what}; lower batch_size_per_gpu, bound the example length "
      f"(data_layer_params/max_length), or use mixed precision (dtype 'mixed')")


_EMBEDDED = re.compile(r"open_seq2seq\.errors\.(\w+): (.*)")


def embedded_error(error: BaseException) -> OpenSeq2SeqError | None:
  """The project error a TensorFlow error carries in its message (raised in Python code that
  ``tf.numpy_function`` / ``tf.py_function`` ran, e.g. reading a corrupt audio file while
  training), or None. The innermost one is the cause."""
  found = _EMBEDDED.findall(str(error))
  if not found:
    return None
  name, message = found[-1]
  kind = globals().get(name)
  if not (isinstance(kind, type) and issubclass(kind, OpenSeq2SeqError)):
    return None
  return kind(message.strip())
