"""TensorFlow imported without its start-up chatter on stderr.

TensorFlow's native libraries log a few lines while they load, before its logging is set up,
so ``TF_CPP_MIN_LOG_LEVEL`` cannot silence them: "All log messages before
absl::InitializeLog() is called are written to STDERR", "oneDNN custom operations are on"
(on CPUs where oneDNN is on by default, e.g. with AVX-512), and the CPU-feature notice. They
would open every command's output, before the project's own first line. The import runs with
the process's stderr (file descriptor 2) sent to a temporary file; afterwards every line that
is not such an informational start-up line is written to stderr as it came, so a real error
while TensorFlow loads is still seen.

One more line comes later, at ERROR level although it only informs: the first time a oneDNN
kernel meets a dtype this CPU's oneDNN build does not take (float16 or int32 on most CPUs,
AVX-512 ones included), TensorFlow logs once per process "oneDNN supports DT_HALF only on
platforms with AVX-512. Falling back to the default Eigen-based implementation" and runs
Eigen's kernel. :func:`consume_onednn_dtype_notice` makes TensorFlow say it once, inside the
filter, as soon as the devices are set up; every other ERROR line still shows.

Scripts call :func:`start_script_quietly` once their arguments are parsed (so ``--help`` and
argument errors answer at once, without TensorFlow) and before anything imports TensorFlow.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
from typing import Callable, Iterator

#: absl's prefix: severity letter, MMDD, time, thread id, file:line]
_ABSL_LINE = re.compile(r"^(?P<severity>[IWEF])\d{4} \d+:\d+:\d+\.\d+ +\d+ [^\]]+\] ")
_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called are written to " \
            "STDERR"
#: The second line of the CPU-feature notice (an INFO line).
_CONTINUATION = re.compile(r"^To enable the following instructions: .* rebuild TensorFlow ")
_LEVELS = {"I": 0, "W": 1, "E": 2, "F": 3}
#: ERROR-level lines that only inform (TensorFlow falls back to another kernel and goes on).
_INFORMATIONAL_ERRORS = re.compile(r"oneDNN supports DT_\w+ only on platforms with AVX-512\. "
                                   r"Falling back to the default Eigen-based implementation")


def start_up_noise(min_log_level: int) -> Callable[[str], bool]:
  """``line -> True`` for a start-up line to drop: the absl preamble, and absl lines below
  ``min_log_level`` (TF_CPP_MIN_LOG_LEVEL: 1 drops INFO, 2 also WARNING, 3 also ERROR)."""
  def is_noise(line: str) -> bool:
    if min_log_level < 1:
      return False
    if line == _PREAMBLE or _CONTINUATION.match(line):
      return True
    match = _ABSL_LINE.match(line)
    if match and min_log_level >= 2 and _INFORMATIONAL_ERRORS.search(line):
      return True  # an INFO in substance: dropped wherever INFO and WARNING lines are
    return bool(match) and _LEVELS[match.group("severity")] < min_log_level
  return is_noise


@contextlib.contextmanager
def filtered_native_stderr(is_noise: Callable[[str], bool]) -> Iterator[None]:
  """Runs the block with file descriptor 2 captured; then writes the captured lines that are
  not ``is_noise`` to stderr (also when the block raises)."""
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as captured:
    os.dup2(captured.fileno(), 2)
    try:
      yield
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      captured.seek(0)
      text = captured.read().decode("utf-8", errors="replace")
      kept = [line for line in text.splitlines() if not is_noise(line)]
      if kept:
        sys.stderr.write("\n".join(kept) + "\n")
        sys.stderr.flush()


def import_tensorflow_quietly() -> None:
  """Imports TensorFlow (once per process) without its informational start-up lines."""
  if "tensorflow" in sys.modules:
    return
  with filtered_native_stderr(start_up_noise(_log_level())):
    import tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import


def _log_level() -> int:
  try:
    return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
  except ValueError:
    return 0


def consume_onednn_dtype_notice() -> None:
  """Runs one float16 matmul on the CPU inside the filter, so that TensorFlow's once-per-
  process oneDNN dtype notice (an ERROR line that only informs) is said here and dropped.

  Call it after the devices are configured (running an op initialises TensorFlow's runtime,
  after which logical devices can no longer be set up).
  """
  with filtered_native_stderr(start_up_noise(_log_level())):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    with tf.device("/CPU:0"):
      tf.matmul(tf.ones([1, 1], tf.float16), tf.ones([1, 1], tf.float16))


def start_script_quietly(first_op: bool = True) -> None:
  """What a script does after parsing its arguments, before anything imports TensorFlow: it
  starts as ``run.py`` does. ``TF_CPP_MIN_LOG_LEVEL`` defaults to 2 (a value the user set
  wins), TensorFlow's Python logger shows errors only, and TensorFlow is imported without its
  start-up lines.

  With ``first_op`` the oneDNN dtype notice is said inside the filter too
  (:func:`consume_onednn_dtype_notice`); that op starts TensorFlow's runtime, so a script that
  sets up devices, or forks worker processes, passes False.
  """
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  logging.getLogger("tensorflow").setLevel(logging.ERROR)
  import_tensorflow_quietly()
  if first_op:
    consume_onednn_dtype_notice()


__all__ = ["start_up_noise", "filtered_native_stderr", "import_tensorflow_quietly",
           "consume_onednn_dtype_notice", "start_script_quietly"]
