"""TensorFlow imported without its start-up chatter on stderr.

TensorFlow's native libraries log a few lines while they load, before its logging is set up,
so ``TF_CPP_MIN_LOG_LEVEL`` cannot silence them: "All log messages before
absl::InitializeLog() is called are written to STDERR", "oneDNN custom operations are on"
(on CPUs where oneDNN is on by default, e.g. with AVX-512), and the CPU-feature notice. They
would open every command's output, before the project's own first line. The import runs with
the process's stderr (file descriptor 2) sent to a temporary file; afterwards every line that
is not such an informational start-up line is written to stderr as it came, so a real error
while TensorFlow loads is still seen.
"""

from __future__ import annotations

import contextlib
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


def start_up_noise(min_log_level: int) -> Callable[[str], bool]:
  """``line -> True`` for a start-up line to drop: the absl preamble, and absl lines below
  ``min_log_level`` (TF_CPP_MIN_LOG_LEVEL: 1 drops INFO, 2 also WARNING, 3 also ERROR)."""
  def is_noise(line: str) -> bool:
    if min_log_level < 1:
      return False
    if line == _PREAMBLE or _CONTINUATION.match(line):
      return True
    match = _ABSL_LINE.match(line)
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
  try:
    level = int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
  except ValueError:
    level = 0
  with filtered_native_stderr(start_up_noise(level)):
    import tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import


__all__ = ["start_up_noise", "filtered_native_stderr", "import_tensorflow_quietly"]
