"""Exceptions for mistakes a user can make (config, data, paths, command line).

``run.py`` prints any :class:`OpenSeq2SeqError` as one line and exits non-zero, without a
TensorFlow traceback. Anything else is a bug and keeps its traceback.
"""


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
