"""What a model hands back to the toolkit: inference outputs and sample summaries.

A model *formats* (text lines, CSV rows, a pickle of logits, WAV files, an image for
TensorBoard); the toolkit *writes*. Inference scales with the processes:

* each process formats its own share of the inputs, a chunk at a time
  (``model.finalize_inference`` on a few batches' results), and sends the formatted
  outputs to the chief only;
* the chief's ``OutputStream`` (:mod:`open_seq2seq.output_sink`) writes them as they arrive: a per-example file
  (:class:`WavFile`, :class:`PngFile`) at once, and the records of a line file
  (:class:`TextLines`, :class:`CsvRows`) in input order through an ``OrderRestorer``,
  each line as soon as every earlier example is finished. A line file is written under a
  temporary name and renamed into place at the end of the pass, so a crash never leaves
  half a file. An output that cannot stream (a :class:`PickledObject`, e.g. every
  utterance's logits) is merged on the chief and written at the end.

Paths: an output without a path goes to the run's ``--infer_output_file``; a relative path
is relative to the output directory the toolkit chooses (the run's logdir), so models never
choose where a run's files go. Sample summaries (images, audio, text) go to TensorBoard
through ``training.reporting.Summaries.samples``.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import pickle
from typing import Any, Callable, Sequence

import numpy as np

from open_seq2seq.utils.io import atomic_open


# ----------------------------------------------------------------------------- inference outputs
#: Folders (relative to the run's directory) of the audio that infer and interactive_infer
#: write, one file per input.
INFER_AUDIO, INTERACTIVE_AUDIO = "infer_audio", "interactive_audio"


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

  def lines(self, resolve: Callable[[str], str] = str) -> tuple[str, list[tuple[int, str]]]:
    """(header, ``(id, line)`` records); ``resolve`` maps output-relative paths (unused)."""
    return self.header, list(self.records)

  def write(self, path: str) -> int:
    from open_seq2seq.output_sink import OutputSink  # the writer sits above the outputs
    return OutputSink(path).write([dataclasses.replace(self, path=None)])[0][1]


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
    path_columns: columns holding paths of other outputs (relative to the output
      directory): the file gets them as written, e.g. ``<logdir>/infer_audio/a.wav``.
  """

  records: Sequence[tuple[int, Sequence[str]]]
  columns: Sequence[str] = ()
  path: str | None = None
  path_columns: Sequence[str] = ()

  def lines(self, resolve: Callable[[str], str] = str) -> tuple[str, list[tuple[int, str]]]:
    """(header, ``(id, CSV line)`` records), path columns resolved by ``resolve``."""
    positions = [list(self.columns).index(name) for name in self.path_columns]
    records = []
    for index, fields in self.records:
      fields = list(fields)
      for p in positions:
        fields[p] = resolve(fields[p])
      records.append((index, csv_line(*fields)))
    return (csv_line(*self.columns) if self.columns else ""), records

  def write(self, path: str) -> int:
    from open_seq2seq.output_sink import OutputSink  # the writer sits above the outputs
    return OutputSink(path).write([dataclasses.replace(self, path=None)])[0][1]


@dataclasses.dataclass
class PickledObject:
  """Any picklable object (e.g. ``{wav_filename: logits}`` for offline decoding).

  It cannot stream: the chief merges the chunks of a pass (dicts with the same path are
  united) and writes the result at the end.
  """

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
