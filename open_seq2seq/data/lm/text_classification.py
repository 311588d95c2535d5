"""Text classification on a pretrained language model's vocabulary: IMDB and SST.

The raw data (``data_root``) is read once into ``processed_data_folder``: per split
(``train``, ``valid``, ``test``) a ``.ids`` file (one text per line, tab-separated ids of the
LM's ``vocab.txt``, ``lm_vocab_file``) and a ``.rat`` file (one label per line), the formats
of OpenSeq2Seq. Texts are tokenized with :func:`open_seq2seq.data.lm.tokenizer.tokenize`; a
token outside the vocabulary is retried lower-cased before it becomes ``<unk>``.
"""

from __future__ import annotations

import collections
import csv
import os
import re
from typing import Any, Iterable

import numpy as np
import tensorflow as tf

from open_seq2seq.data import transforms
from open_seq2seq.data.data_layer import DataLayer
from open_seq2seq.data.description import LMDescription
from open_seq2seq.data.lm.tokenizer import tokenize
from open_seq2seq.data.lm.vocab import (IdRows, Vocabulary, end_padded_inputs, missing_files,
                                        read_id_rows, read_labels, read_text, read_vocab,
                                        rows_dataset, write_id_rows, write_labels)
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.utils.io import atomic_open, atomic_write_text
from open_seq2seq.utils.params import Param

SPLITS = ("train", "valid", "test")
MODE_SPLIT = {"train": "train", "eval": "valid", "infer": "test"}
BINARY_NAMES = ("negative", "positive")
#: (text, label, where it comes from) of one raw example.
Example = tuple[str, int, str]


def encode_text(text: str, vocab: Vocabulary) -> tuple[np.ndarray, list[str]]:
  """Ids of a raw text and its tokens outside the vocabulary (HTML line breaks are spaces;
  an unknown token is retried lower-cased)."""
  words, unseen = [], []
  for token in tokenize(text.replace("<br />", " ")):
    if token not in vocab and token.lower() in vocab:
      token = token.lower()
    elif token not in vocab:
      unseen.append(token)
    words.append(token)
  return vocab.encode(words), unseen


class TextClassificationDataLayer(DataLayer):
  """Base of the text classification layers: one label per text (not used in configs).

  Batches: ``{"source_tensors": (ids [B, T] int32 padded with <eos>, lengths [B]),
  "target_tensors": (labels [B] int32,), "id": index in the split [B] int64}``; infer reads
  the labelled test split, so it has targets too (texts from :meth:`dataset_from_inputs` have
  none). Train reads ``train``, eval ``valid``, infer ``test``; texts longer than
  ``max_length`` keep their last ``max_length`` tokens. Subclasses read their raw format in
  :meth:`read_raw` and name their classes.
  """

  PARAMS = {
      "lm_vocab_file": Param((str, None), None, "vocab.txt of the pretrained language model "
                             "(its processed_data_folder's), so that ids match its embedding "
                             "(required; LSTMLM also takes it from the top level)."),
      "processed_data_folder": Param((str, None), None, "Folder of {train,valid,test}.{ids,rat},"
                                     " built from data_root the first time and reused after "
                                     "(required; LSTMLM also takes it from the top level)."),
      "data_root": Param((str, None), None, "Folder of the raw dataset: read only to build "
                         "processed_data_folder."),
      "max_length": Param(int, doc="Longer texts keep their last max_length tokens."),
      "binary": Param(bool, True, "Two classes (negative, positive); IMDB: False for 10 "
                      "rating classes."),
      "num_classes": Param((int, None), None, "Number of classes (None: derived from the "
                           "dataset and binary; another value is an error)."),
      "shuffle": Param(bool, True, "Training: shuffle the texts."),
      "shuffle_buffer_size": Param(int, -1, "Texts in the shuffle buffer (-1: all)."),
      "repeat": Param(bool, True, "Training: repeat forever (eval/infer: one pass)."),
      "small": Param(bool, False, "Keep only batch_size*4 texts (eval: batch_size*2)."),
      "train_examples": Param((int, None), None, "Training: keep only this many training "
                              "texts, the first of a permutation by subset_seed (a smaller "
                              "count's texts are among a larger one's); None: all. For "
                              "low-label experiments."),
      "subset_seed": Param(int, 0, "Seed of the permutation train_examples draws from."),
      "get_stats": Param(bool, False, "Write statistics.txt (lengths, unseen-token rate) and, "
                         "when the folder is built, <split>_unseen.txt into "
                         "processed_data_folder."),
      "delimiter": Param(str, " ", "What joins words when ids are printed."),
      "pad_vocab_to_eight": Param(bool, False, "Pad the vocabulary with filler words to a "
                                  "multiple of 8 (as the pretrained LM was)."),
      "pad_lengths_to_eight": Param(bool, False, "Pad batches' time dimension to a multiple "
                                    "of 8."),
      "map_parallel_calls": Param((int, None), None, "Parallel map calls (None: autotune)."),
      "prefetch_buffer_size": Param((int, None), None, "Batches prefetched (None: autotune)."),
      "rand_start": Param(bool, False, "Ignored: texts are whole examples."),
      "use_targets": Param(bool, True, "Ignored: every split has labels; typed texts have "
                           "none."),
  }

  def __init__(self, params: dict[str, Any], mode: str = "train", batch_size: int = 32,
               num_workers: int = 1, worker_id: int = 0, random_seed: int | None = None):
    super().__init__(params, mode, batch_size, num_workers, worker_id, random_seed)
    p = self.params
    for key in ("lm_vocab_file", "processed_data_folder"):
      if p[key] is None:
        raise ConfigError(f"data_layer_params/{key}: required by {type(self).__name__} (set it "
                          f"there or at the top level of the config)")
    if p["max_length"] < 1:
      raise ConfigError(f"data_layer_params/max_length: must be at least 1, got "
                        f"{p['max_length']}")
    if p["shuffle_buffer_size"] == 0 or p["shuffle_buffer_size"] < -1:
      raise ConfigError("data_layer_params/shuffle_buffer_size: must be -1 (all) or at least "
                        f"1, got {p['shuffle_buffer_size']}")
    self.num_classes = self.derived_num_classes()
    if p["num_classes"] is not None and p["num_classes"] != self.num_classes:
      raise ConfigError(f"data_layer_params/num_classes: {p['num_classes']} does not match the "
                        f"{self.num_classes} classes of {type(self).__name__} with binary="
                        f"{p['binary']}; leave it out")
    self.vocab = read_vocab(p["lm_vocab_file"], "lm_vocab_file")
    if p["pad_vocab_to_eight"]:
      self.vocab = self.vocab.padded_to_eight()
    self.texts: list[str] | None = None  # typed inputs (interactive)
    self.rows, self.labels = IdRows([]), np.zeros([0], np.int32)
    if mode in MODE_SPLIT:  # interactive_infer needs the vocabulary only
      folder = p["processed_data_folder"]
      missing = missing_files(folder, [f"{s}.{e}" for s in SPLITS for e in ("ids", "rat")])
      if missing and p["data_root"] is None:
        raise DataError(f"{folder}: {', '.join(missing)} not found and no data_root to build "
                        "it from; set data_layer_params/data_root to the raw dataset folder")
      if missing:
        self._build(folder)
      if p["get_stats"]:
        self._write_statistics(folder)
      self.rows, self.labels = self._load(MODE_SPLIT[mode])

  # ----------------------------------------------------------------- subclass hooks
  def derived_num_classes(self) -> int:
    """Classes of this dataset (under ``binary``)."""
    return 2

  @property
  def class_names(self) -> tuple[str, ...] | None:
    return BINARY_NAMES if self.num_classes == 2 else None

  def read_raw(self) -> dict[str, list[Example]]:
    """Every raw example of each split (``train``, ``valid``, ``test``) of ``data_root``."""
    raise NotImplementedError

  # ----------------------------------------------------------------- files
  def _build(self, folder: str) -> None:
    for split, examples in self.read_raw().items():
      rows, labels, unseen = [], [], collections.Counter()
      for text, label, where in examples:
        ids, oov = encode_text(text, self.vocab)
        if not len(ids):
          raise DataError(f"{where}: the text has no word")
        rows.append(ids)
        labels.append(label)
        unseen.update(oov)
      if self.params["get_stats"]:
        with atomic_open(os.path.join(folder, f"{split}_unseen.txt")) as f:
          f.writelines(f"{word}\t{count}\n" for word, count in unseen.most_common())
      write_id_rows(os.path.join(folder, f"{split}.ids"), rows)
      write_labels(os.path.join(folder, f"{split}.rat"), labels)

  def _load(self, split: str) -> tuple[IdRows, np.ndarray]:
    folder = self.params["processed_data_folder"]
    path = os.path.join(folder, f"{split}.ids")
    rows = read_id_rows(path, len(self.vocab))
    hint = (f"; was {folder} built with binary={not self.params['binary']}? delete it to "
            "rebuild it")
    labels = read_labels(os.path.join(folder, f"{split}.rat"), self.num_classes, hint)
    if self.num_classes > 2 and len(labels) >= 10 and labels.max() <= 1:
      raise DataError(f"{os.path.join(folder, split)}.rat has only labels 0 and 1{hint}")
    if len(labels) != len(rows):
      raise DataError(f"{path} has {len(rows)} texts but its .rat file {len(labels)} labels; "
                      "delete the folder to rebuild it")
    if not len(rows):
      raise DataError(f"{path}: empty split (no text); rebuild the folder from a data_root "
                      "with texts in this split")
    if self.mode == "train" and self.params["train_examples"] is not None:
      rows, labels = self._subset(rows, labels, self.params["train_examples"])
    if self.params["small"]:
      keep = self.batch_size * (2 if self.mode == "eval" else 4)
      rows, labels = rows.head(keep), labels[:keep]
    return rows, labels

  def _subset(self, rows: IdRows, labels: np.ndarray, count: int
              ) -> tuple[IdRows, np.ndarray]:
    """The first ``count`` texts of a fixed permutation (``subset_seed``), in file order."""
    if not 1 <= count <= len(rows):
      raise ConfigError(f"data_layer_params/train_examples: {count} texts asked for, the "
                        f"training split has {len(rows)}; give 1..{len(rows)} or None (all)")
    order = np.random.default_rng(self.params["subset_seed"]).permutation(len(rows))
    chosen = np.sort(order[:count])
    return IdRows([rows.row(i) for i in chosen]), labels[chosen]

  def _write_statistics(self, folder: str) -> None:
    """Length statistics and the rate of <unk> ids of every split, in statistics.txt."""
    max_length = self.params["max_length"]
    lines = []
    for split in SPLITS:
      rows = read_id_rows(os.path.join(folder, f"{split}.ids"), len(self.vocab))
      lengths = rows.lengths if len(rows) else np.zeros([1], np.int64)
      unseen = int(np.sum(rows.values == self.vocab.unk_id))
      lines += [split, f"Min\tMax\tMean\tMedian\tSTD\tTotal\t<={max_length}",
                "\t".join(str(v) for v in (
                    lengths.min(), lengths.max(), round(float(lengths.mean()), 2),
                    float(np.median(lengths)), round(float(lengths.std()), 2), len(rows),
                    int(np.sum(rows.lengths <= max_length)))),
                f"Total {unseen} unseen out of {len(rows.values)} tokens: rate "
                f"{unseen / max(len(rows.values), 1):.4f}", ""]
    atomic_write_text(os.path.join(folder, "statistics.txt"), "\n".join(lines))

  # ----------------------------------------------------------------- description, helpers
  @property
  def description(self) -> LMDescription:
    return LMDescription(vocab_size=len(self.vocab), idx2word=self.vocab.idx2word,
                         end_token=self.vocab.eos_id, unk_token=self.vocab.unk_id,
                         delimiter=self.params["delimiter"], num_classes=self.num_classes,
                         class_names=self.class_names)

  def ids_to_text(self, ids: Iterable[int]) -> str:
    """The words of ``ids`` joined by the delimiter."""
    return self.params["delimiter"].join(self.vocab.decode(ids))

  def text_of(self, example_id: int) -> str:
    """The typed text, or the words of text ``example_id`` of the split (whole)."""
    if self.texts is not None:
      return self.texts[int(example_id)]
    return self.ids_to_text(self.rows.row(int(example_id)))

  def label(self, example_id: int) -> int | None:
    """The true label of text ``example_id`` (None for typed texts)."""
    if self.texts is not None or not 0 <= int(example_id) < len(self.labels):
      return None
    return int(self.labels[int(example_id)])

  @property
  def throughput_unit(self) -> str:
    return "tokens"

  def count_units(self, batch: dict) -> tf.Tensor:
    return tf.reduce_sum(tf.cast(batch["source_tensors"][1], tf.int64))

  # ----------------------------------------------------------------- datasets
  def get_size_in_samples(self) -> int:
    return len(range(self.worker_id, len(self.rows), self.num_workers))

  def _dataset(self, rows: IdRows, labels: np.ndarray | None, sharded: bool
               ) -> tf.data.Dataset:
    p = self.params
    ids, process = rows_dataset(rows, labels, keep_last=p["max_length"],
                                num_parallel_calls=p["map_parallel_calls"])
    batching = transforms.Batching(self.batch_size, pad_multiple=8 if p["pad_lengths_to_eight"]
                                   else 1, length_keys=("source_length",),
                                   pad_keys=("source",))
    common = dict(num_shards=self.num_workers if sharded else 1,
                  shard_index=self.worker_id if sharded else 0, process_fn=process,
                  map_fn=end_padded_inputs(self.vocab.eos_id),
                  prefetch_buffer_size=p["prefetch_buffer_size"])
    if self.mode != "train":
      return transforms.inference_pipeline(ids, batching, **common)
    size = self.get_size_in_samples()
    if not size:
      raise DataError(f"{p['processed_data_folder']}: {len(rows)} training texts leave worker "
                      f"{self.worker_id} of {self.num_workers} none")
    buffer = None
    if p["shuffle"]:
      buffer = size if p["shuffle_buffer_size"] == -1 else p["shuffle_buffer_size"]
    return transforms.training_pipeline(ids, batching, shuffle_buffer_size=buffer,
                                        seed=self.random_seed, repeat=p["repeat"], **common)

  def build_dataset(self) -> tf.data.Dataset:
    if self.mode == "interactive_infer":
      raise ConfigError("interactive_infer classifies typed texts (dataset_from_inputs), "
                        "not a split")
    return self._dataset(self.rows, self.labels, sharded=True)

  def dataset_from_inputs(self, inputs: Iterable[str]) -> tf.data.Dataset:
    """Batches of typed texts to classify (ids 0..n-1 in input order), no targets."""
    texts = [str(t).strip() for t in inputs]
    rows = [encode_text(t, self.vocab)[0] for t in texts]
    if not rows or not all(len(r) for r in rows):
      raise DataError("interactive input is empty; type a text to classify")
    self.texts = texts
    return self._dataset(IdRows(rows), None, sharded=False)


class IMDBDataLayer(TextClassificationDataLayer):
  """IMDB movie reviews (aclImdb): ``data_root/{train,test}/{pos,neg}/<id>_<rating>.txt``.

  Binary labels: pos 1, neg 0; else 10 classes, class = rating - 1 (named by rating).
  ``valid_size`` training reviews, drawn with a fixed seed, are held out as ``valid``.
  """

  PARAMS = {
      "valid_size": Param(int, 1000, "Training reviews held out for validation when the "
                          "folder is built (at most all but one)."),
  }

  def derived_num_classes(self) -> int:
    return 2 if self.params["binary"] else 10

  @property
  def class_names(self) -> tuple[str, ...]:
    return BINARY_NAMES if self.params["binary"] else tuple(str(r) for r in range(1, 11))

  def _read_split(self, split: str) -> list[Example]:
    examples = []
    for sentiment in ("pos", "neg"):
      folder = os.path.join(self.params["data_root"], split, sentiment)
      if not os.path.isdir(folder):
        raise DataError(f"{folder} not found; data_root must be the aclImdb folder (train/ "
                        "and test/, each with pos/ and neg/)")
      named = []
      for name in os.listdir(folder):
        match = re.fullmatch(r"(\d+)_(\d+)\.txt", name)
        path = os.path.join(folder, name)
        if not match:
          raise DataError(f"{path}: expected a review file named <id>_<rating>.txt")
        rating = int(match[2])
        if not 1 <= rating <= 10:
          raise DataError(f"{path}: rating {rating} (the label) is not in 1..10")
        named.append((int(match[1]), path, rating))
      for _, path, rating in sorted(named):
        label = int(sentiment == "pos") if self.params["binary"] else rating - 1
        examples.append((read_text(path, "data_root"), label, path))
    if not examples:
      raise DataError(f"{os.path.join(self.params['data_root'], split)}: no review files")
    return examples

  def read_raw(self) -> dict[str, list[Example]]:
    if self.params["valid_size"] < 0:
      raise ConfigError(f"data_layer_params/valid_size: must be at least 0, got "
                        f"{self.params['valid_size']}")
    train = self._read_split("train")
    order = np.random.default_rng(0).permutation(len(train))  # fixed: same split every run
    held_out = min(self.params["valid_size"], len(train) - 1)
    return {"train": [train[i] for i in order[held_out:]],
            "valid": [train[i] for i in order[:held_out]], "test": self._read_split("test")}


class SSTDataLayer(TextClassificationDataLayer):
  """Stanford Sentiment Treebank, binary: ``data_root/{train,val,test}.csv`` with a header
  and the columns ``sentence,label`` (label 0 or 1)."""

  def derived_num_classes(self) -> int:
    if not self.params["binary"]:
      raise ConfigError("data_layer_params/binary: SST data is binary (labels 0 and 1)")
    return 2

  def _read_csv(self, name: str) -> list[Example]:
    path = os.path.join(self.params["data_root"], f"{name}.csv")
    examples = []
    try:
      with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        if not {"sentence", "label"} <= set(reader.fieldnames or ()):
          raise DataError(f"{path}: needs a header line with the columns sentence,label")
        for row in reader:
          label = (row["label"] or "").strip()
          if label not in ("0", "1"):
            raise DataError(f"{path}:{reader.line_num}: label {label!r} is not 0 or 1")
          examples.append((row["sentence"] or "", int(label), f"{path}:{reader.line_num}"))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
      raise DataError(f"{path} cannot be read ({getattr(e, 'strerror', None) or e}); check "
                      "data_layer_params/data_root") from None
    if not examples:
      raise DataError(f"{path}: no sentence")
    return examples

  def read_raw(self) -> dict[str, list[Example]]:
    return {"train": self._read_csv("train"), "valid": self._read_csv("val"),
            "test": self._read_csv("test")}
