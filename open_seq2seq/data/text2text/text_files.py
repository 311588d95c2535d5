"""Reading the text files of a parallel corpus, and what is checked about them at load."""

from __future__ import annotations

import numpy as np

from open_seq2seq.errors import DataError

#: A training pair this many times longer than the others' 99th percentile gets a warning:
#: a batch holding it needs that many times the memory (the square of it in attention).
OUTLIER_FACTOR = 4.0


def outlier_warning(lengths: np.ndarray, source_file: str) -> str | None:
  """The load-time warning for a corpus whose longest pair is far beyond the rest, or None."""
  if len(lengths) < 20:
    return None
  index = int(np.argmax(lengths))
  longest = int(lengths[index])
  typical = float(np.percentile(np.delete(lengths, index), 99))  # of the others
  if longest < 64 or longest <= OUTLIER_FACTOR * typical:
    return None
  line = index + 1
  return (f"{source_file}: the pair on line {line} is {longest:,} ids long, "
          f"{longest / typical:.0f}x the others' 99th percentile ({typical:.0f}): a batch "
          f"holding it may run out of memory; set data_layer_params/max_length to skip such "
          f"pairs")


def read_text_lines(path: str, what: str) -> list[str]:
  """All lines of a UTF-8 text file, without line terminators.

  Raises:
    DataError: naming ``what`` (the config key) if the file is missing, unreadable or not
      UTF-8 (with the line of the bad byte).
  """
  try:
    with open(path, "rb") as f:
      data = f.read()
  except FileNotFoundError:
    raise DataError(f"{what} {path} does not exist; check data_layer_params/{what}") from None
  except OSError as e:
    raise DataError(f"{what} {path} cannot be read ({e.strerror}); check the path and "
                    "its permissions") from None
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as e:
    line = data.count(b"\n", 0, e.start) + 1
    raise DataError(f"{path}:{line}: not valid UTF-8 (byte offset {e.start}); re-encode "
                    "the file as UTF-8") from None
  lines = text.split("\n")
  if lines and lines[-1] == "":
    lines.pop()  # the final newline ends the last line, it does not start a new one
  return [line[:-1] if line.endswith("\r") else line for line in lines]


__all__ = ["OUTLIER_FACTOR", "outlier_warning", "read_text_lines"]
