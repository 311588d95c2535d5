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
