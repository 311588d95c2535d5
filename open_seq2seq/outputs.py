"""What a model hands back to the toolkit: inference outputs and sample summaries.

A model *formats* (text lines, CSV rows, arrays of logits, WAV files, an image for
TensorBoard); the toolkit *writes*. Inference scales with the processes:

* each process formats its own share of the inputs, a chunk at a time
  (``model.finalize_inference`` on a few batches' results), and sends the formatted
  outputs to the chief only;
* the chief's ``OutputStream`` (:mod:`open_seq2seq.output_sink`) writes them as they arrive:
  a per-example file (:class:`WavFile`, :class:`PngFile`) at once, and the records of a line file
  (:class:`TextLines`, :class:`CsvRows`) in input order through an ``OrderRestorer``,
  each line as soon as every earlier example is finished. A line file is written under a
  temporary name and renamed into place at the end of the pass, so a crash never leaves
  half a file. An output that cannot stream (:class:`NpzArrays`, e.g. every utterance's
  logits, or a :class:`PickledObject`) is merged on the chief and written at the end.

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
import zipfile
from typing import Any, Callable, Sequence

import numpy as np

from open_seq2seq.errors import DataError
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
class NpzArrays:
  """Named arrays of one dtype and trailing shape (``{wav_filename: logits [T, V]}``), saved
  as a NumPy ``.npz`` that holds no Python object: :func:`read_npz_arrays` loads it with
  ``allow_pickle=False``, so reading it cannot run code (a pickle can).

  The file holds ``names`` [N] (unicode), ``lengths`` [N] int64 (each array's first
  dimension) and ``values`` [sum of lengths, ...], the arrays one after the other. Like a
  :class:`PickledObject` it cannot stream: the chief merges the chunks of a pass (dicts with
  the same path are united) and writes the result at the end.
  """

  arrays: dict[str, np.ndarray]
  path: str

  def write(self, path: str) -> int:
    names = list(self.arrays)
    values = [np.asarray(self.arrays[name]) for name in names]
    with atomic_open(path, binary=True) as f:
      np.savez(f, names=np.array(names, dtype=str),
               lengths=np.array([len(v) for v in values], np.int64),
               values=np.concatenate(values) if values else np.zeros([0], np.float32))
    return len(names)


def read_npz_arrays(path: str) -> dict[str, np.ndarray]:
  """The ``{name: array}`` an :class:`NpzArrays` wrote (never unpickles anything).

  Raises:
    DataError: ``path`` is not such a file (not an .npz, truncated, other arrays).
  """
  try:
    with np.load(path, allow_pickle=False) as data:
      if not isinstance(data, np.lib.npyio.NpzFile):
        raise DataError(f"{path}: a single .npy array, not an .npz of named arrays")
      missing = {"names", "lengths", "values"} - set(data.files)
      if missing:
        raise DataError(f"{path}: an .npz without {', '.join(sorted(missing))}: not written "
                        f"by open_seq2seq's inference")
      names, lengths, values = data["names"], data["lengths"], data["values"]
  except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
    # ValueError: object arrays (allow_pickle=False refuses them) or a broken .npy header
    raise DataError(f"{path}: not a readable .npz of arrays ({str(e).splitlines()[0]})"
                    ) from None
  if (names.ndim != 1 or names.dtype.kind != "U" or lengths.shape != names.shape
      or lengths.dtype.kind not in "iu" or (lengths < 0).any() or values.ndim < 1
      or int(lengths.sum()) != len(values)):
    raise DataError(f"{path}: its names, lengths and values do not agree; re-create it")
  ends = np.cumsum(lengths)
  return {str(name): values[end - length:end]
          for name, length, end in zip(names, lengths, ends)}


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


InferenceOutput = TextLines | CsvRows | PickledObject | NpzArrays | WavFile | PngFile


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
