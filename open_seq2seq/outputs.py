"""What a model hands back to the toolkit: inference outputs and sample summaries.

A model *formats* (text lines, CSV rows, a pickle of logits, WAV files, an image for
TensorBoard); the toolkit *writes*. :class:`OutputSink` is the one writer of inference
outputs: it puts records back in input order, writes on the chief only, and writes every
file under a temporary name renamed into place, so a crash never leaves half a file.
Sample summaries (images, audio, text) go to TensorBoard through
``training.reporting.Summaries.samples``.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import pickle
from typing import Any, Sequence

import numpy as np

from open_seq2seq.utils.io import atomic_open


# ----------------------------------------------------------------------------- inference outputs
@dataclasses.dataclass
class TextLines:
  """One line per example, written in input order.

  Attributes:
    records: ``(example id, line)`` pairs in any order; ids give the input order.
    header: first line of the file ("" for none).
    path: where to write; None means the run's ``--infer_output_file``.
  """

  records: Sequence[tuple[int, str]]
  header: str = ""
  path: str | None = None

  def write(self, path: str) -> int:
    with atomic_open(path) as f:
      if self.header:
        f.write(self.header + "\n")
      for _, line in sorted(self.records, key=lambda record: record[0]):
        f.write(line + "\n")
    return len(self.records)


def csv_line(*fields: str) -> str:
  """One CSV row (quoted as needed), without the line terminator."""
  buffer = io.StringIO()
  csv.writer(buffer, lineterminator="").writerow(fields)
  return buffer.getvalue()


@dataclasses.dataclass
class CsvRows:
  """CSV rows in input order.

  Attributes:
    records: ``(example id, (field, ...))`` pairs in any order.
    columns: the header row (empty: none).
    path: where to write; None means the run's ``--infer_output_file``.
  """

  records: Sequence[tuple[int, Sequence[str]]]
  columns: Sequence[str] = ()
  path: str | None = None

  def write(self, path: str) -> int:
    lines = TextLines([(i, csv_line(*fields)) for i, fields in self.records],
                      csv_line(*self.columns) if self.columns else "")
    return lines.write(path)


@dataclasses.dataclass
class PickledObject:
  """Any picklable object (e.g. ``{wav_filename: logits}`` for offline decoding)."""

  obj: Any
  path: str

  def write(self, path: str) -> int:
    with atomic_open(path, binary=True) as f:
      pickle.dump(self.obj, f, protocol=pickle.HIGHEST_PROTOCOL)
    return len(self.obj) if hasattr(self.obj, "__len__") else 1


@dataclasses.dataclass
class WavFile:
  """Mono audio samples in [-1, 1] written as 16-bit PCM WAV."""

  samples: np.ndarray
  sample_rate: int
  path: str

  def write(self, path: str) -> int:
    import soundfile  # lazily: only processes that write audio need libsndfile
    with atomic_open(path, binary=True) as f:
      soundfile.write(f, np.clip(np.asarray(self.samples, np.float32), -1.0, 1.0),
                      self.sample_rate, subtype="PCM_16", format="WAV")
    return 1


@dataclasses.dataclass
class PngFile:
  """An image ([height, width] or [height, width, channels], values in [0, 1]) as PNG."""

  image: np.ndarray
  path: str

  def write(self, path: str) -> int:
    import tensorflow as tf  # lazily: only models that draw need the encoder
    image = np.asarray(self.image, np.float32)
    image = image[..., None] if image.ndim == 2 else image
    pixels = np.round(np.clip(image, 0.0, 1.0) * 255.0).astype(np.uint8)
    with atomic_open(path, binary=True) as f:
      f.write(tf.io.encode_png(pixels).numpy())
    return 1


InferenceOutput = TextLines | CsvRows | PickledObject | WavFile | PngFile


class OutputSink:
  """Writes a model's inference outputs: on the chief only, in input order, atomically.

  Args:
    default_path: where outputs without a path of their own go (``--infer_output_file``).
    write: False on every process but the chief.
  """

  def __init__(self, default_path: str, write: bool = True):
    self.default_path = default_path
    self.enabled = write

  def write(self, outputs: Sequence[InferenceOutput]) -> list[tuple[str, int]]:
    """Writes each output; returns ``(path, number of records)`` per file written."""
    if not self.enabled:
      return []
    written = []
    for output in outputs:
      path = output.path or self.default_path
      directory = os.path.dirname(os.path.abspath(path))
      os.makedirs(directory, exist_ok=True)
      written.append((path, output.write(path)))
    return written


# ----------------------------------------------------------------------------- sample summaries
@dataclasses.dataclass
class ImageSample:
  """An image for TensorBoard: ``image`` is [height, width] or [height, width, channels]
  with values in [0, 1]."""

  name: str
  image: np.ndarray


@dataclasses.dataclass
class AudioSample:
  """A mono clip for TensorBoard (samples in [-1, 1])."""

  name: str
  samples: np.ndarray
  sample_rate: int


@dataclasses.dataclass
class TextSample:
  """A piece of text for TensorBoard's text dashboard."""

  name: str
  text: str


SampleSummary = ImageSample | AudioSample | TextSample
