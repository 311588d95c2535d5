"""Exceptions for mistakes a user can make (config, data, paths, command line).

``run.py`` prints any :class:`OpenSeq2SeqError` as one line and exits non-zero, without a
TensorFlow traceback — also one raised inside the input pipeline (``tf.numpy_function``),
which reaches the caller wrapped in a TensorFlow error (:func:`embedded_error`). Anything
else is a bug and keeps its traceback.
"""

import errno
import os
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


class WriteError(OpenSeq2SeqError):
  """A file could not be written: a full disk, a file-size limit, a permission, a read-only
  filesystem."""


#: errno -> (what it means, what to do)
_WRITE_CAUSES = {
    errno.ENOSPC: ("the disk is full", "free space on it or write elsewhere"),
    errno.EDQUOT: ("the disk quota is exceeded", "free space or write elsewhere"),
    errno.EFBIG: ("the file exceeds the file-size limit (ulimit -f) or the filesystem's "
                  "largest file", "raise the limit (ulimit -f unlimited) or write elsewhere"),
    errno.EROFS: ("the filesystem is read-only", "write elsewhere or remount it read-write"),
    errno.EACCES: ("permission denied", "check its permissions (and its folder's) for this "
                   "user, or write elsewhere"),
    errno.EPERM: ("operation not permitted", "check its permissions (and its folder's) for "
                  "this user, or write elsewhere"),
}
#: TensorFlow's I/O errors end their message with "<path>; <strerror>"
_STRERROR = {os.strerror(code): code for code in _WRITE_CAUSES}
_TF_IO = re.compile(r"([^\s;{}]+); (" + "|".join(re.escape(t) for t in _STRERROR) + ")")


def _io_errno(error: BaseException) -> tuple[int, str | None] | None:
  if isinstance(error, OSError):
    return (error.errno, error.filename) if error.errno in _WRITE_CAUSES else None
  match = _TF_IO.search(str(error))
  return (_STRERROR[match.group(2)], match.group(1)) if match else None


def write_cause(error: BaseException) -> str | None:
  """What a failed write met, e.g. "the filesystem is read-only (EROFS)", or None."""
  found = _io_errno(error)
  if found is None:
    return None
  return f"{_WRITE_CAUSES[found[0]][0]} ({errno.errorcode[found[0]]})"


def write_failure(error: BaseException, what: str | None = None,
                  kept: str | None = None) -> WriteError | None:
  """The one-line error for a write that failed on a full disk (ENOSPC, EDQUOT), a file-size
  limit (EFBIG), a read-only filesystem (EROFS) or a permission (EACCES, EPERM) — an OSError
  or a TensorFlow error saying so — or None for any other error.

  Args:
    what: what failed, e.g. "could not write the checkpoint of step 20 in DIR" (default: the
      file the error names).
    kept: what survives, e.g. "the newest checkpoint is still .../ckpt-10".
  """
  found = _io_errno(error)
  if found is None:
    return None
  path = found[1]
  target = what or path or "could not write a file"
  return WriteError(f"{target}: {write_cause(error)}; {_WRITE_CAUSES[found[0]][1]}"
                    + (f"; {kept}" if kept else ""))


_OOM_SHAPE = re.compile(r"OOM when allocating tensor with (shape\[[^\]]*\])")


def out_of_memory(error: BaseException) -> OutOfMemoryError | None:
  """The one-line error for TensorFlow's ResourceExhaustedError (naming the tensor shape it
  could not allocate, and the knobs that bound it), or None for any other error."""
  if type(error).__name__ != "ResourceExhaustedError" or _io_errno(error) is not None:
    return None  # TensorFlow reports a full disk as "resource exhausted" too
  shape = _OOM_SHAPE.search(str(error))
  what = f"could not allocate a tensor of {shape.group(1)}" if shape else "a device is full"
  return OutOfMemoryError(
      f"out of memory: {what}; lower batch_size_per_gpu, bound the example length "
      f"(data_layer_params/max_length), or use mixed precision (dtype 'mixed')")


#: What TensorFlow says when an input file is damaged inside, where no cheap check before
#: reading looks: a TFRecord whose checksum fails, a JPEG whose header or tables are broken.
_DAMAGED = ((re.compile(r"corrupted record at \d+"),
             "a TFRecord file of the data fails its checksum"),
            (re.compile(r"(?:jpeg::Uncompress failed\. )?Invalid JPEG data[\w ]*"),
             "an image of the data does not decode"))


def damaged_data(error: BaseException) -> DataError | None:
  """The one-line error for TensorFlow's report of a damaged input file (pointing to
  ``scripts/check_records.py``, which names each bad record), or None for any other error."""
  for pattern, what in _DAMAGED:
    found = pattern.search(str(error))
    if found:
      return DataError(f"{what} (TensorFlow: {found.group(0).strip()}); find the damaged "
                       f"records with python scripts/check_records.py <data_dir>, then "
                       f"re-create them or leave them out")
  return None


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
