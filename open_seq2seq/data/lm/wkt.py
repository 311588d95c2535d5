"""WKTDataLayer: WikiText (or any whitespace-tokenized corpus) for word language models.

The raw corpus (``data_root``) is read once into ``processed_data_folder`` (``vocab.txt``,
``{train,valid,test}.ids``, see :mod:`open_seq2seq.data.lm.vocab`); later runs, and eval or
infer configs that give no ``data_root``, read that folder. Raw lines are normalised as
OpenSeq2Seq did (``@-@`` -> ``-``, hyphens split off, ``n 't`` -> `` n't``) and split on
whitespace: WikiText is already tokenized. ``<eos>`` ends every line.
"""

from __future__ import annotations

import array
import os
from typing import Any, Iterable, Iterator

import numpy as np
import tensorflow as tf

from open_seq2seq.data import transforms
from open_seq2seq.data.data_layer import DataLayer
from open_seq2seq.data.description import LMDescription
from open_seq2seq.data.lm.tokenizer import tokenize
from open_seq2seq.data.lm.vocab import (VOCAB_FILE, IdRows, Vocabulary, build_vocab,
                                        end_padded_inputs, missing_files, read_ids_line,
                                        read_text, read_vocab, rows_dataset, write_ids_line,
                                        write_vocab)
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.utils.params import Param

SPLITS = ("train", "valid", "test")
#: Raw file names, tried in this order: WikiText's tokens and raw releases, then plain names.
RAW_SCHEMES = ("wiki.{}.tokens", "wiki.{}.raw", "{}.txt")
#: ``small``: tokens kept of the split (OpenSeq2Seq's figures).
SMALL_TOKENS = {"train": 9004, "eval": 200}


def normalize_line(line: str) -> str:
  """OpenSeq2Seq's WikiText clean-up: ``@-@`` is a hyphen, hyphens are tokens of their own,
  ``don 't`` becomes the Treebank's ``do n't`` (as :func:`tokenize` splits it)."""
  return line.replace("@-@", "-").replace("-", " - ").replace("n 't", " n't")


def raw_split_files(data_root: str) -> dict[str, str]:
  """The raw train/valid/test files of ``data_root`` (the first naming scheme present)."""
  if not os.path.isdir(data_root):
    raise DataError(f"data_root {data_root} is not a directory; check data_layer_params/"
                    "data_root")
  for scheme in RAW_SCHEMES:
    paths = {split: os.path.join(data_root, scheme.format(split)) for split in SPLITS}
    if os.path.isfile(paths["train"]):
      for path in paths.values():
        if not os.path.isfile(path):
          raise DataError(f"{path} not found (next to {paths['train']}); the corpus needs "
                          "train, valid and test files")
      return paths
  raise DataError(f"{data_root}: no WikiText files (wiki.train.tokens, wiki.train.raw or "
                  "train.txt); check data_layer_params/data_root")


def read_token_lines(path: str) -> Iterator[list[str]]:
  """The normalised whitespace tokens of each line of a raw corpus file."""
  try:
    with open(path, encoding="utf-8") as f:
      for line in f:
        yield normalize_line(line).split()
  except UnicodeDecodeError as e:
    raise DataError(f"{path}: not UTF-8 (bad byte at offset {e.start}); re-encode it") from None


def encode_file(path: str, vocab: Vocabulary) -> np.ndarray:
  """The ids of a raw corpus file, ``<eos>`` after every line."""
  ids = array.array("i")
  get, unk, eos = vocab.word2idx.get, vocab.unk_id, vocab.eos_id
  for tokens in read_token_lines(path):
    ids.extend(get(w, unk) for w in tokens)
    ids.append(eos)
  if not ids:
    raise DataError(f"{path}: empty split (no line of text)")
  return np.frombuffer(ids, dtype=np.int32)


def build_processed_folder(data_root: str, folder: str, min_count: int,
                           vocab: Vocabulary | None = None) -> Vocabulary:
  """Writes ``folder``'s ids of every split and its ``vocab.txt`` (built from the training
  split unless ``vocab`` is given); ``vocab.txt`` comes last and marks a complete folder."""
  paths = raw_split_files(data_root)
  if not any(read_token_lines(paths["train"])):  # stops at the first line with a word
    raise DataError(f"{paths['train']}: the training split holds no words (the vocabulary "
                    "is built from it); check data_layer_params/data_root")
  if vocab is None:
    vocab = build_vocab(read_token_lines(paths["train"]), min_count)
  for split in SPLITS:
    write_ids_line(os.path.join(folder, f"{split}.ids"), encode_file(paths[split], vocab))
  write_vocab(os.path.join(folder, VOCAB_FILE), vocab)
  return vocab


def prompt_words(text: str, vocab: Vocabulary) -> list[str]:
  """A prompt's words: whitespace tokens normalised as the corpus, and a token outside the
  vocabulary split by the tokenizer (``Hello,`` -> ``Hello ,``)."""
  words = []
  for token in normalize_line(text).split():
    words.extend([token] if token in vocab else (tokenize(token) or [token]))
  return words


#: OpenSeq2Seq's default processed folder (relative to the working directory).
DEFAULT_FOLDER = "wkt-processed_data"


class WKTDataLayer(DataLayer):
  """Word language-model data (OpenSeq2Seq's parameter names).

  Train and eval batches: ``{"source_tensors": (ids [B, bptt] int32, lengths [B]),
  "target_tensors": (the next ids [B, bptt], lengths), "id": position of each row's first
  token in the split [B] int64}``. Infer: ``{"source_tensors": (prompt ids [B, T] padded
  with <eos>, lengths), "id": prompt index}``.

  Training layouts: ``shuffle: False`` streams this worker's contiguous part of the tokens as
  B rows, batch k+1 continuing batch k row by row (a recurrent state may be carried over:
  ``description.stream_batches``); ``shuffle: True`` (OpenSeq2Seq's) shuffles consecutive
  bptt chunks, dealt round robin to workers. ``rand_start`` starts each pass at a random
  offset below bptt. Eval reads the validation split's chunks in order, once. Training
  datasets are pure tf.data ops, so iterators checkpoint (exact resume).
  """

  PARAMS = {
      "data_root": Param((str, None), None, "Raw corpus folder (wiki.{train,valid,test}.tokens, "
                         "wiki.*.raw or {train,valid,test}.txt): read only to build "
                         "processed_data_folder."),
      "processed_data_folder": Param((str, None), None,
                                     "Folder of vocab.txt and {train,valid,test}.ids, built "
                                     "from data_root the first time and reused after (None: "
                                     "LSTMLM's top-level one, else wkt-processed_data)."),
      "vocab_file": Param((str, None), None, "Use this vocab.txt instead of building one from "
                          "the training split (infer needs nothing else)."),
      "min_count": Param(int, 3, "Training words seen fewer times become <unk>."),
      "bptt": Param(int, doc="Tokens per row (back-propagation through time)."),
      "rand_start": Param(bool, False, "Training: start every pass at a random offset below "
                          "bptt."),
      "shuffle": Param(bool, True, "Training: shuffle bptt chunks (False: stream layout, rows "
                       "continue from batch to batch)."),
      "shuffle_buffer_size": Param(int, -1, "Chunks in the shuffle buffer (-1: a full "
                                   "permutation every pass)."),
      "repeat": Param(bool, True, "Training: repeat forever (eval/infer: one pass)."),
      "small": Param(bool, False, "Keep only the first 9004 training / 200 eval tokens."),
      "seed_tokens": Param(str, "The", "Infer: each whitespace-separated word is a one-word "
                           "prompt."),
      "seed_file": Param((str, None), None, "Infer: one prompt per line (replaces "
                         "seed_tokens)."),
      "delimiter": Param(str, " ", "What joins words when ids are printed."),
      "pad_vocab_to_eight": Param(bool, False, "Pad the vocabulary with filler words to a "
                                  "multiple of 8."),
      "pad_lengths_to_eight": Param(bool, False, "Pad prompt batches' time dimension to a "
                                    "multiple of 8 (train/eval: bptt must be one)."),
      "map_parallel_calls": Param((int, None), None, "Parallel map calls (None: autotune)."),
      "prefetch_buffer_size": Param((int, None), None, "Batches prefetched (None: autotune)."),
      "use_targets": Param(bool, True, "Ignored: train and eval targets are always the next "
                           "tokens; infer has none."),
  }

  def __init__(self, params: dict[str, Any], mode: str = "train", batch_size: int = 32,
               num_workers: int = 1, worker_id: int = 0, random_seed: int | None = None):
    super().__init__(params, mode, batch_size, num_workers, worker_id, random_seed)
    p = self.params
    for key in ("bptt", "min_count"):
      if p[key] < 1:
        raise ConfigError(f"data_layer_params/{key}: must be at least 1, got {p[key]}")
    if p["shuffle_buffer_size"] == 0 or p["shuffle_buffer_size"] < -1:
      raise ConfigError("data_layer_params/shuffle_buffer_size: must be -1 (all) or at least "
                        f"1, got {p['shuffle_buffer_size']}")
    if p["pad_lengths_to_eight"] and not self.inference and p["bptt"] % 8:
      raise ConfigError(f"data_layer_params/bptt: {p['bptt']} is not a multiple of 8, which "
                        "pad_lengths_to_eight needs in train and eval")
    # stateless randomness needs a seed: an unseeded run draws one
    self._seed = (random_seed if random_seed is not None
                  else int(np.random.SeedSequence().entropy % (1 << 31)))
    self.split_path: str | None = None
    self.tokens = np.zeros([0], np.int32)
    self.vocab = self._prepare()
    if p["pad_vocab_to_eight"]:
      self.vocab = self.vocab.padded_to_eight()
    self.texts: list[str] = []
    self.prompts = IdRows([])
    if self.inference:
      self._read_prompts()

  # ----------------------------------------------------------------- reading
  def _prepare(self) -> Vocabulary:
    """The vocabulary, and this mode's split (built from data_root when missing)."""
    p = self.params
    folder, vocab_file = p["processed_data_folder"] or DEFAULT_FOLDER, p["vocab_file"]
    split = {"train": "train", "eval": "valid"}.get(self.mode)
    needed = [] if self.inference and vocab_file else [VOCAB_FILE]
    needed += [f"{split}.ids"] if split else []
    given = read_vocab(vocab_file, "vocab_file") if vocab_file else None
    missing = missing_files(folder, needed)
    if missing and p["data_root"] is None:
      raise DataError(f"{folder}: {', '.join(missing)} not found and no data_root to build "
                      "it from; set data_layer_params/data_root to the raw corpus folder")
    if missing:
      vocab = build_processed_folder(p["data_root"], folder, p["min_count"], given)
    elif given is not None and self.inference:
      vocab = given
    else:
      vocab = read_vocab(os.path.join(folder, VOCAB_FILE), "processed_data_folder")
      if given is not None and given.idx2word != vocab.idx2word:
        raise DataError(f"{os.path.join(folder, VOCAB_FILE)} differs from vocab_file "
                        f"{vocab_file}: the folder's ids use another vocabulary; set "
                        "processed_data_folder to a new folder")
    if split:
      self.split_path = os.path.join(folder, f"{split}.ids")
      tokens = read_ids_line(self.split_path, len(vocab))
      self.tokens = tokens[:SMALL_TOKENS[self.mode]] if p["small"] else tokens
      if len(self.tokens) - 1 < p["bptt"] + self._max_offset:
        raise DataError(f"{self.split_path}: {len(self.tokens)} tokens are too few for one "
                        f"row of bptt={p['bptt']} tokens and its targets; lower bptt")
    return vocab

  def _read_prompts(self) -> None:
    p = self.params
    if p["seed_file"]:
      texts = [line.strip() for line in read_text(p["seed_file"], "seed_file").split("\n")
               if line.strip()]
      if not texts:
        raise DataError(f"seed_file {p['seed_file']}: no prompt; write one per line")
      rows = [self.vocab.encode(prompt_words(t, self.vocab)) for t in texts]
    else:
      texts = p["seed_tokens"].split()
      if not texts:
        raise ConfigError("data_layer_params/seed_tokens: empty; give at least one word")
      rows = [self.vocab.encode([t]) for t in texts]
    self.texts, self.prompts = texts, IdRows(rows)

  # ----------------------------------------------------------------- description, helpers
  @property
  def description(self) -> LMDescription:
    return LMDescription(vocab_size=len(self.vocab), idx2word=self.vocab.idx2word,
                         end_token=self.vocab.eos_id, unk_token=self.vocab.unk_id,
                         delimiter=self.params["delimiter"],
                         stream_batches=self._stream_layout)

  def ids_to_text(self, ids: Iterable[int]) -> str:
    """The words of ``ids`` joined by the delimiter."""
    return self.params["delimiter"].join(self.vocab.decode(ids))

  def text_of(self, example_id: int) -> str:
    """The prompt of an infer row, or the words of a train/eval row."""
    if self.inference:
      return self.texts[int(example_id)]
    start = int(example_id)
    return self.ids_to_text(self.tokens[start:start + self.params["bptt"]])

  @property
  def throughput_unit(self) -> str:
    return "tokens"

  def count_units(self, batch: dict) -> tf.Tensor:
    return tf.reduce_sum(tf.cast(batch["source_tensors"][1], tf.int64))

  # ----------------------------------------------------------------- geometry
  @property
  def _stream_layout(self) -> bool:
    return self.mode == "train" and not self.params["shuffle"]

  @property
  def _max_offset(self) -> int:
    """Largest start offset of a pass (a constant batch count whatever the offset)."""
    return self.params["bptt"] - 1 if self.mode == "train" and self.params["rand_start"] else 0

  def _stream_geometry(self) -> tuple[int, int, int]:
    """(tokens per worker part, tokens per row, batches per pass) of the stream layout."""
    part = (len(self.tokens) - 1) // self.num_workers  # positions that have a target
    row = max(part - self._max_offset, 0) // self.batch_size
    return part, row, row // self.params["bptt"]

  def _num_chunks(self) -> int:
    """bptt chunks of a pass over the whole split (before dealing them to workers)."""
    return (len(self.tokens) - 1 - self._max_offset) // self.params["bptt"]

  def get_size_in_samples(self) -> int:
    """Rows of one pass over this worker's shard (prompts in infer)."""
    if self.inference:
      return len(range(self.worker_id, len(self.prompts), self.num_workers))
    if self._stream_layout:
      return self._stream_geometry()[2] * self.batch_size
    return len(range(self.worker_id, self._num_chunks(), self.num_workers))

  def batches_per_epoch(self) -> int:
    if self._stream_layout:
      return self._stream_geometry()[2]
    return -(-self.get_size_in_samples() // self.batch_size)

  # ----------------------------------------------------------------- datasets
  def _offset(self, key: int, pass_index: tf.Tensor) -> tf.Tensor:
    if not self._max_offset:
      return tf.constant(0, tf.int64)
    seed = tf.stack([tf.constant(key, tf.int64), 2 * pass_index])
    return tf.random.stateless_uniform([], seed, 0, self.params["bptt"], tf.int64)

  def _rows(self, starts: tf.data.Dataset, tokens: np.ndarray, id_offset: int):
    """Batches of row start positions [b] -> model inputs (rows and next-token targets)."""
    tokens = tf.constant(tokens)
    bptt = self.params["bptt"]
    steps = tf.range(bptt, dtype=tf.int64)

    def gather(start):
      positions = start[:, None] + steps[None, :]
      lengths = tf.fill(tf.shape(start), tf.constant(bptt, tf.int32))
      return {"source_tensors": (tf.gather(tokens, positions), lengths),
              "target_tensors": (tf.gather(tokens, positions + 1), lengths),
              "id": start + id_offset}

    dataset = starts.map(gather, num_parallel_calls=self.params["map_parallel_calls"]
                         or tf.data.AUTOTUNE, deterministic=True)
    return dataset.prefetch(self.params["prefetch_buffer_size"] or tf.data.AUTOTUNE)

  def build_dataset(self) -> tf.data.Dataset:
    if self.inference:
      return self._prompt_dataset(self.prompts)
    if self.mode == "train" and self.batches_per_epoch() == 0:  # else an endless empty loop
      raise DataError(f"{self.split_path}: {len(self.tokens)} tokens give worker "
                      f"{self.worker_id} of {self.num_workers} no batch of {self.batch_size} "
                      f"rows x bptt={self.params['bptt']}; lower batch_size or bptt")
    p, workers, worker = self.params, self.num_workers, self.worker_id
    bptt, batch = p["bptt"], self.batch_size
    key = self._seed * 1_000_003 + worker
    passes = (tf.data.Dataset.counter() if self.mode == "train" and p["repeat"]
              else tf.data.Dataset.range(1))
    if self._stream_layout:
      part, row, num_batches = self._stream_geometry()
      row_starts = tf.range(batch, dtype=tf.int64) * row

      def stream_pass(pass_index):
        offset = self._offset(key, pass_index)
        return tf.data.Dataset.range(num_batches).map(
            lambda k: offset + row_starts + k * bptt)

      tokens = self.tokens[worker * part:(worker + 1) * part + 1]
      return self._rows(passes.flat_map(stream_pass), tokens, worker * part)

    num = len(range(worker, self._num_chunks(), workers))
    buffer = p["shuffle_buffer_size"]
    permute = self.mode == "train" and p["shuffle"] and (buffer == -1 or buffer >= num)

    def chunk_pass(pass_index):
      offset = self._offset(key, pass_index)
      seed = tf.stack([tf.constant(key, tf.int64), 2 * pass_index + 1])
      chunks = tf.data.Dataset.range(num)
      if permute:  # a stateless permutation: nothing to hold in a buffer or checkpoint
        chunks = chunks.map(lambda j: tf.random.experimental.index_shuffle(j, seed, num - 1))
      return chunks.map(lambda j: offset + (worker + j * workers) * bptt)

    starts = passes.flat_map(chunk_pass)
    if self.mode == "train" and p["shuffle"] and not permute:
      starts = starts.shuffle(buffer, seed=key % (1 << 31))
    return self._rows(starts.batch(batch), self.tokens, 0)

  def _prompt_dataset(self, rows: IdRows, sharded: bool = True) -> tf.data.Dataset:
    p = self.params
    ids, process = rows_dataset(rows, num_parallel_calls=p["map_parallel_calls"])
    batching = transforms.Batching(self.batch_size, pad_multiple=8 if p["pad_lengths_to_eight"]
                                   else 1, length_keys=("source_length",),
                                   pad_keys=("source",))
    return transforms.inference_pipeline(
        ids, batching, num_shards=self.num_workers if sharded else 1,
        shard_index=self.worker_id if sharded else 0,
        process_fn=process, map_fn=end_padded_inputs(self.vocab.eos_id),
        prefetch_buffer_size=p["prefetch_buffer_size"])

  def dataset_from_inputs(self, inputs: Iterable[str]) -> tf.data.Dataset:
    """Batches of prompts typed by the user (one per input; ids 0..n-1 in input order)."""
    texts = [str(t).strip() for t in inputs]
    if not texts or not all(texts):
      raise DataError("interactive input is empty; type a few words to continue")
    self.texts = texts
    rows = IdRows([self.vocab.encode(prompt_words(t, self.vocab)) for t in texts])
    return self._prompt_dataset(rows, sharded=False)
