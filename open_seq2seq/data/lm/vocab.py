"""Word vocabularies, the processed-data files of the language-model family, and batches of
rows of word ids.

File formats (OpenSeq2Seq's, so that a folder built by either toolkit reads in the other):

* ``vocab.txt``: one line per word, ``id<TAB>word<TAB>count``; id 0 is ``<unk>`` (count 0),
  then the words by descending training count; the last line is the number of words
  (OpenSeq2Seq left it out when no word was rare: it is always written here and tolerated
  missing on reading).
* a language model's ``<split>.ids``: every id of the split, tab-separated, on one line.
* a classifier's ``<split>.ids`` and ``<split>.rat``: one text per line (tab-separated ids)
  and, on the same line of the ``.rat`` file, its label.

Every file is written under a temporary name and renamed into place, so concurrent workers
or a crash never leave half a file.
"""

from __future__ import annotations

import os
import warnings
from typing import Callable, Iterable, Sequence

import numpy as np
import tensorflow as tf

from open_seq2seq.errors import DataError
from open_seq2seq.utils.io import atomic_open

UNK = "<unk>"
EOS = "<eos>"
VOCAB_FILE = "vocab.txt"


class Vocabulary:
  """Words and their ids (``<unk>`` and ``<eos>`` always included).

  Args:
    words: the word of each id.
    counts: training count of each word (0 where unknown).
  """

  def __init__(self, words: Sequence[str], counts: Sequence[int] | None = None):
    self.idx2word = tuple(words)
    self.counts = tuple(counts) if counts is not None else (0,) * len(self.idx2word)
    self.word2idx = {word: i for i, word in enumerate(self.idx2word)}
    if len(self.word2idx) != len(self.idx2word) or UNK not in self.word2idx or (
        EOS not in self.word2idx):
      raise ValueError(f"a vocabulary lists each word once, {UNK} and {EOS} included")
    self.unk_id = self.word2idx[UNK]
    self.eos_id = self.word2idx[EOS]

  def __len__(self) -> int:
    return len(self.idx2word)

  def __contains__(self, word: str) -> bool:
    return word in self.word2idx

  def encode(self, words: Iterable[str]) -> np.ndarray:
    """int32 ids of ``words`` (``<unk>``'s for words outside the vocabulary)."""
    get, unk = self.word2idx.get, self.unk_id
    return np.fromiter((get(w, unk) for w in words), dtype=np.int32)

  def decode(self, ids: Iterable[int]) -> list[str]:
    """The words of ``ids``; an id outside the vocabulary is a bug of the caller."""
    words = []
    for i in ids:
      i = int(i)
      if not 0 <= i < len(self.idx2word):
        raise ValueError(f"id {i} is outside the vocabulary of {len(self.idx2word)} words")
      words.append(self.idx2word[i])
    return words

  def padded_to_eight(self) -> Vocabulary:
    """This vocabulary with filler words ``<unused0>``... (never in the data) appended so
    that its size is a multiple of 8 (half-precision matmuls)."""
    words, counts, filler = list(self.idx2word), list(self.counts), 0
    while len(words) % 8:
      name = f"<unused{filler}>"
      filler += 1
      if name not in self.word2idx:
        words.append(name)
        counts.append(0)
    return Vocabulary(words, counts)


def build_vocab(token_lines: Iterable[Sequence[str]], min_count: int) -> Vocabulary:
  """The vocabulary of the training lines' tokens (``<eos>`` ends every line).

  Words seen fewer than ``min_count`` times are left out (they become ``<unk>``); the rest
  follow ``<unk>`` by descending count, ties in order of first appearance.
  """
  counts: dict[str, int] = {}
  for tokens in token_lines:
    for word in tokens:
      counts[word] = counts.get(word, 0) + 1
    counts[EOS] = counts.get(EOS, 0) + 1
  counts.pop(UNK, None)  # literal <unk>s of the corpus are id 0's occurrences
  kept = [(w, c) for w, c in counts.items() if c >= min_count or w == EOS]
  kept.sort(key=lambda item: -item[1])  # stable: ties keep their first appearance
  return Vocabulary([UNK] + [w for w, _ in kept], [0] + [c for _, c in kept])


def write_vocab(path: str, vocab: Vocabulary) -> None:
  """``vocab.txt``: ``id<TAB>word<TAB>count`` lines, then the number of words."""
  with atomic_open(path) as f:
    for i, (word, count) in enumerate(zip(vocab.idx2word, vocab.counts)):
      f.write(f"{i}\t{word}\t{count}\n")
    f.write(f"{len(vocab)}\n")


def read_text(path: str, what: str) -> str:
  """A UTF-8 file's text (``what``: the config key naming it, for a one-line DataError)."""
  try:
    with open(path, encoding="utf-8") as f:
      return f.read()
  except FileNotFoundError:
    raise DataError(f"{path} does not exist; check data_layer_params/{what}") from None
  except UnicodeDecodeError as e:
    raise DataError(f"{path}: not UTF-8 (bad byte at offset {e.start}); re-encode it") from None
  except OSError as e:
    raise DataError(f"{path} cannot be read ({e.strerror}); check data_layer_params/"
                    f"{what}") from None


def read_vocab(path: str, what: str = "vocab_file") -> Vocabulary:
  """Reads a ``vocab.txt`` (``what``: the config key naming it, for error messages).

  ``<unk>`` and ``<eos>`` are appended if the file lacks them (as OpenSeq2Seq did).

  Raises:
    DataError: missing file, malformed line, ids out of order, wrong count line.
  """
  lines = read_text(path, what).split("\n")
  while lines and not lines[-1].strip():
    lines.pop()
  stated = None
  if lines and "\t" not in lines[-1] and lines[-1].strip().isdigit():
    stated = int(lines.pop())
  words, counts, seen = [], [], {}
  for number, line in enumerate(lines, start=1):
    fields = line.rstrip("\r").split("\t")
    if (len(fields) != 3 or not fields[1] or not fields[0].isdigit()
        or not fields[2].isdigit()):
      shown = line if len(line) <= 60 else line[:57] + "..."
      raise DataError(f"{path}:{number}: expected 'id<TAB>word<TAB>count', got {shown!r}")
    if int(fields[0]) != len(words):
      raise DataError(f"{path}:{number}: id {fields[0]} out of order (expected "
                      f"{len(words)}); ids must be 0, 1, 2 ... line by line")
    if fields[1] in seen:
      raise DataError(f"{path}:{number}: the word {fields[1]!r} is listed twice (first on "
                      f"line {seen[fields[1]]})")
    seen[fields[1]] = number
    words.append(fields[1])
    counts.append(int(fields[2]))
  if not words:
    raise DataError(f"{path}: empty vocabulary; check data_layer_params/{what}")
  if stated is not None and stated != len(words):
    raise DataError(f"{path}: the last line says {stated} words but the file lists "
                    f"{len(words)}")
  for special in (UNK, EOS):
    if special not in words:
      words.append(special)
      counts.append(0)
  return Vocabulary(words, counts)


# ---------------------------------------------------------------------- processed files
def missing_files(folder: str, names: Iterable[str]) -> list[str]:
  """The ``names`` that are not files in ``folder``."""
  return [n for n in names if not os.path.isfile(os.path.join(folder, n))]


def write_ids_line(path: str, ids: np.ndarray) -> None:
  """A language-model split: every id, tab-separated, on one line."""
  with atomic_open(path) as f:
    for start in range(0, len(ids), 1 << 20):  # bounded memory for big corpora
      if start:
        f.write("\t")
      f.write("\t".join(map(str, ids[start:start + (1 << 20)].tolist())))
    f.write("\n")


def _check_range(ids: np.ndarray, vocab_size: int, path: str) -> None:
  if len(ids) and (ids.min() < 0 or ids.max() >= vocab_size):
    bad = int(ids[(ids < 0) | (ids >= vocab_size)][0])
    raise DataError(f"{path}: id {bad} is outside the vocabulary of {vocab_size} words; the "
                    f"file was made with another vocabulary: delete its folder to rebuild it")


def parse_ids(text: str, path: str, line: int | None = None) -> np.ndarray:
  """Tab-separated ids -> int32 array (DataError naming ``path`` if malformed)."""
  text = text.strip()
  if not text:
    return np.zeros([0], np.int32)
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # numpy only warns when it stops at a bad field
    try:
      ids = np.fromstring(text, dtype=np.int64, sep="\t")
    except (ValueError, DeprecationWarning):
      ids = None
  if ids is None or len(ids) != text.count("\t") + 1:
    where = path if line is None else f"{path}:{line}"
    raise DataError(f"{where}: expected tab-separated integer ids; delete the folder to "
                    "rebuild it")
  return ids.astype(np.int32)


def read_ids_line(path: str, vocab_size: int) -> np.ndarray:
  """A language-model split written by :func:`write_ids_line`."""
  ids = parse_ids(read_text(path, "processed_data_folder"), path)
  if not len(ids):
    raise DataError(f"{path}: empty split (no ids); rebuild the folder from a data_root "
                    "whose split has text")
  _check_range(ids, vocab_size, path)
  return ids


class IdRows:
  """Rows of ids of different lengths, stored flat: ``values[splits[i]:splits[i + 1]]``."""

  def __init__(self, rows: Sequence[np.ndarray]):
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    self.splits = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    self.values = (np.concatenate(rows).astype(np.int32) if len(rows)
                   else np.zeros([0], np.int32))

  def __len__(self) -> int:
    return len(self.splits) - 1

  @property
  def lengths(self) -> np.ndarray:
    return np.diff(self.splits)

  def row(self, i: int) -> np.ndarray:
    return self.values[self.splits[i]:self.splits[i + 1]]

  def head(self, n: int) -> IdRows:
    """The first ``n`` rows."""
    return IdRows([self.row(i) for i in range(min(n, len(self)))])


def write_id_rows(path: str, rows: Iterable[np.ndarray]) -> None:
  """A classifier split: one row of tab-separated ids per line."""
  with atomic_open(path) as f:
    for row in rows:
      f.write("\t".join(map(str, np.asarray(row).tolist())) + "\n")


def read_id_rows(path: str, vocab_size: int) -> IdRows:
  """Rows written by :func:`write_id_rows` (an empty line is a DataError)."""
  lines = read_text(path, "processed_data_folder").split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  rows = []
  for number, line in enumerate(lines, start=1):
    row = parse_ids(line, path, number)
    if not len(row):
      raise DataError(f"{path}:{number}: empty text; delete the folder to rebuild it")
    rows.append(row)
  result = IdRows(rows)
  _check_range(result.values, vocab_size, path)
  return result


def write_labels(path: str, labels: Iterable[int]) -> None:
  with atomic_open(path) as f:
    f.write("".join(f"{int(label)}\n" for label in labels))


def read_labels(path: str, num_classes: int, hint: str = "") -> np.ndarray:
  """One label per line, each in ``[0, num_classes)`` (``hint``: what to do otherwise)."""
  lines = read_text(path, "processed_data_folder").split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  labels = []
  for number, line in enumerate(lines, start=1):
    text = line.strip()
    if not (text.isdigit() and int(text) < num_classes):
      raise DataError(f"{path}:{number}: label {text!r} is not a class id in [0, "
                      f"{num_classes}){hint}")
    labels.append(int(text))
  return np.asarray(labels, np.int32)


# ---------------------------------------------------------------------- batches of rows
def rows_dataset(rows: IdRows, labels: np.ndarray | None = None,
                 keep_last: int | None = None, num_parallel_calls: int | None = None
                 ) -> tuple[tf.data.Dataset, Callable[[tf.data.Dataset], tf.data.Dataset]]:
  """``{"id"}`` elements, one per row, and the ``process_fn`` (for the pipelines of
  :mod:`open_seq2seq.data.transforms`) that turns them into ``{"source", "source_length",
  ["target"], "id"}``: shuffling ids rather than rows keeps shuffle buffers and iterator
  checkpoints small. ``keep_last`` keeps the last that many ids of longer rows.
  """
  values = tf.constant(rows.values)
  splits = tf.constant(rows.splits)
  targets = None if labels is None else tf.constant(np.asarray(labels, np.int32))

  def lookup(element):
    i = element["id"]
    start, end = splits[i], splits[i + 1]
    if keep_last is not None:
      start = tf.maximum(start, end - keep_last)
    out = {"source": values[start:end], "source_length": tf.cast(end - start, tf.int32),
           "id": i}
    if targets is not None:
      out["target"] = targets[i]
    return out

  def process(dataset):
    return dataset.map(lookup, num_parallel_calls=num_parallel_calls or tf.data.AUTOTUNE,
                       deterministic=True)

  ids = tf.data.Dataset.range(len(rows)).map(lambda i: {"id": i})
  return ids, process


def end_padded_inputs(end_token: int):
  """batch -> model inputs, with padding (zeros from ``padded_batch``) set to ``end_token``:
  ``{"source_tensors": (ids, lengths), ["target_tensors": (labels,)], "id"}``."""

  def inputs(batch):
    x, lengths = batch["source"], batch["source_length"]
    x = tf.where(tf.sequence_mask(lengths, tf.shape(x)[1]), x, tf.constant(end_token, x.dtype))
    out = {"source_tensors": (x, lengths), "id": batch["id"]}
    if "target" in batch:
      out["target_tensors"] = (batch["target"],)
    return out

  return inputs
