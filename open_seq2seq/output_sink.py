"""The one writer of inference outputs: the chief's sink, in input order, as outputs arrive.

Each process formats its own share of the inputs (``model.finalize_inference`` on a few
batches' results, :mod:`open_seq2seq.outputs`) and sends the formatted outputs to the chief
only; the chief's :class:`OutputStream` writes them as they arrive: a per-example file
(``WavFile``, ``PngFile``) at once, and the records of a line file (``TextLines``,
``CsvRows``) in input order through an :class:`OrderRestorer`, each line as soon as every
earlier example is finished. A line file is written under a temporary name and renamed into
place at the end of the pass, so a crash never leaves half a file. An output that cannot
stream (``NpzArrays``, e.g. every utterance's logits, or a ``PickledObject``) is merged on
the chief and written at the end. :class:`OutputSink` writes a list of outputs at once (interactive
inference, a single process).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
from typing import Any, Callable, Iterable, Sequence

from open_seq2seq.outputs import CsvRows, InferenceOutput, NpzArrays, PickledObject, TextLines
from open_seq2seq.utils.io import atomic_open


# ----------------------------------------------------------------------------- input order
class Watermark:
  """The first example id not finished yet, as examples finish in any order.

  Ids are example indices in input order (0, 1, ...). Everything below :attr:`low` is
  finished; ids finished above a gap wait in a set of ints.
  """

  def __init__(self, first: int = 0):
    self.low = first
    self._ahead: set[int] = set()

  def finish(self, ids: Iterable[int]) -> int:
    """Marks ``ids`` finished; returns the new :attr:`low`."""
    self._ahead.update(int(i) for i in ids if int(i) >= self.low)
    while self.low in self._ahead:
      self._ahead.remove(self.low)
      self.low += 1
    return self.low


class OrderRestorer:
  """Hands items to ``emit`` in example-id order, each as soon as the ids before it are done.

  Items wait in a heap until :meth:`release` says every id below a bound is finished (all
  their items have arrived); :meth:`flush` hands over the rest at the end of the pass. Only
  the items of ids at or above the first unfinished id are held: :attr:`max_pending` says
  how many there ever were at once.
  """

  def __init__(self, emit: Callable[[Any], None]):
    self.emit = emit
    self._heap: list = []
    self._order = itertools.count()  # keeps items of one id in arrival order
    self._released = 0
    self.max_pending = 0

  @property
  def pending(self) -> int:
    return len(self._heap)

  def add(self, example_id: int, item: Any) -> None:
    if example_id < self._released:  # its id was declared finished: too late to reorder
      self.emit(item)
      return
    heapq.heappush(self._heap, (example_id, next(self._order), item))
    self.max_pending = max(self.max_pending, len(self._heap))

  def release(self, below: int) -> None:
    """Emits the items of every id below ``below``, in order."""
    self._released = max(self._released, below)
    while self._heap and self._heap[0][0] < below:
      self.emit(heapq.heappop(self._heap)[2])

  def flush(self) -> None:
    while self._heap:
      self.emit(heapq.heappop(self._heap)[2])


class _LineFile:
  """A line file written in input order under a temporary name, renamed on :meth:`close`."""

  def __init__(self, path: str, header: str):
    self.path = path
    self.count = 0
    self._stack = contextlib.ExitStack()
    self._file = self._stack.enter_context(atomic_open(path))
    if header:
      self._file.write(header + "\n")
    self.order = OrderRestorer(self._write)

  def _write(self, line: str) -> None:
    self._file.write(line + "\n")
    self.count += 1

  def close(self) -> int:
    self.order.flush()
    self._stack.close()
    return self.count

  def abort(self, error: BaseException) -> None:
    self._stack.__exit__(type(error), error, error.__traceback__)  # removes the temporary


# ----------------------------------------------------------------------------- the writer
class OutputSink:
  """Writes a model's inference outputs: on the chief only, in input order, atomically.

  Args:
    default_path: where outputs without a path of their own go (``--infer_output_file``).
    directory: what relative output paths are relative to (the run's logdir; None: the
      folder of ``default_path``).
    write: False on every process but the chief.
  """

  def __init__(self, default_path: str, directory: str | None = None, write: bool = True):
    self.default_path = default_path
    self.directory = (directory if directory is not None
                      else os.path.dirname(os.path.abspath(default_path)))
    self.enabled = write

  def resolve(self, path: str | None) -> str:
    """Where an output with this ``path`` goes."""
    if path is None:
      return self.default_path
    return path if os.path.isabs(path) else os.path.join(self.directory, path)

  def stream(self) -> OutputStream:
    """A writer for one pass whose outputs arrive in chunks."""
    return OutputStream(self)

  def write(self, outputs: Sequence[InferenceOutput]) -> list[tuple[str, int]]:
    """Writes each output; returns ``(path, number of records)`` per file written."""
    with self.stream() as stream:
      stream.add(outputs)
    return stream.written


class OutputStream:
  """The outputs of one inference pass, written by the chief as the chunks arrive.

  Use it as a context manager (an error removes the temporary line files; per-example files
  already written stay) and call :meth:`add` per chunk; on a disabled sink it writes nothing.
  After the block, :attr:`written` lists ``(path, number of records)`` per file: the
  per-example files in arrival order, then the line files, then the merged outputs.
  """

  def __init__(self, sink: OutputSink):
    self.sink = sink
    self.watermark = Watermark()
    self.written: list[tuple[str, int]] = []
    self._lines: dict[str, _LineFile] = {}
    self._merged: dict[str, tuple[type, Any]] = {}  # path: (output type, merged contents)
    self._closed = False
    self._max_pending = 0  # of the line files already closed

  def __enter__(self) -> OutputStream:
    return self

  def __exit__(self, kind, error, traceback) -> None:
    if error is not None:
      self.abort(error)
    elif not self._closed:
      self.close()

  @property
  def pending(self) -> int:
    """Records waiting for earlier examples, over all line files."""
    return sum(f.order.pending for f in self._lines.values())

  @property
  def max_pending(self) -> int:
    """The most records of one line file that ever waited at once."""
    return max([f.order.max_pending for f in self._lines.values()] + [self._max_pending])

  def add(self, outputs: Sequence[InferenceOutput], finished: Iterable[int] = ()) -> None:
    """Writes or queues one chunk's outputs.

    Args:
      outputs: formatted by one process from some of its examples.
      finished: ids of the examples whose outputs are all in ``outputs`` (every example
        the chunk covered, with or without an output): their lines and the ones before
        them that are also finished are written at once. Records of ids never finished are
        written at :meth:`close`, in order.
    """
    if not self.sink.enabled:
      return
    for output in outputs:
      path = self.sink.resolve(output.path)
      if isinstance(output, (TextLines, CsvRows)):
        header, records = output.lines(self.sink.resolve)
        file = self._lines.get(path)
        if file is None:
          os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
          file = self._lines[path] = _LineFile(path, header)
        for index, line in records:
          file.order.add(int(index), line)
      elif isinstance(output, PickledObject):
        self._merge(path, PickledObject, output.obj)
      elif isinstance(output, NpzArrays):
        self._merge(path, NpzArrays, output.arrays)
      else:  # a file per example: written now
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.written.append((path, output.write(path)))
    low = self.watermark.finish(finished)
    for file in self._lines.values():
      file.order.release(low)

  def _merge(self, path: str, kind: type, obj: Any) -> None:
    if path not in self._merged:
      self._merged[path] = (kind, obj)
      return
    merged_kind, merged = self._merged[path]
    if merged_kind is not kind or not (isinstance(merged, dict) and isinstance(obj, dict)):
      raise TypeError(f"{kind.__name__} {path}: only dicts of one output type merge across "
                      f"chunks, got {type(merged).__name__} and {type(obj).__name__}")
    merged.update(obj)

  def close(self) -> list[tuple[str, int]]:
    """Writes what is left and renames the line files into place."""
    self._closed = True
    try:
      while self._lines:
        path, file = next(iter(self._lines.items()))
        count = file.close()
        self._max_pending = max(self._max_pending, file.order.max_pending)
        del self._lines[path]
        self.written.append((path, count))
      for path, (kind, obj) in self._merged.items():
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.written.append((path, kind(obj, path).write(path)))
      self._merged = {}
    except BaseException as e:
      self.abort(e)
      raise
    return self.written

  def abort(self, error: BaseException) -> None:
    """Removes the temporary line files (the previous files stay as they were)."""
    self._closed = True
    for file in self._lines.values():
      with contextlib.suppress(BaseException):
        file.abort(error)
    self._lines, self._merged = {}, {}
