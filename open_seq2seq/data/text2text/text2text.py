"""Parallel text (machine translation) data layer."""

from __future__ import annotations

import sys
from typing import Any, Iterable

import numpy as np
import tensorflow as tf

from open_seq2seq.data import global_batches, transforms
from open_seq2seq.data.data_layer import DataLayer
from open_seq2seq.data.description import TextDescription
from open_seq2seq.data.text2text.corpus_ids import (UNK_ID, TokenizedSide, assemble,
                                                    line_ids, split_tokens)
from open_seq2seq.data.text2text.sentencepiece_model import SentencePieceVocab
from open_seq2seq.data.text2text.tokenization import TextTokenization
from open_seq2seq.data.text2text.text_files import outlier_warning, read_text_lines
from open_seq2seq.data.text2text.vocab import (SpecialTextTokens, invert_vocab, load_vocab,
                                               pad_vocab_to_eight)
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.utils.params import Param

__all__ = ["ParallelTextDataLayer", "SpecialTextTokens", "read_text_lines", "split_tokens"]

class ParallelTextDataLayer(DataLayer):
  """Pairs of tokenized sentences, line i of ``source_file`` with line i of ``target_file``.

  Each batch is ``{"source_tensors": (ids [B, T] int32, lengths [B] int32),
  "target_tensors": (ids, lengths), "id": line index [B] int64}``; ids are the tokens'
  vocabulary ids followed by EOS (the decoder prepends GO itself); targets are absent in
  infer mode. The vocabularies reach the model through :attr:`description`.

  Modes: *train* shuffles (with TensorFlow's global seed) and repeats if ``repeat``; *eval*
  and *infer* (and *interactive_infer*, which reads its files as infer does) make exactly one
  deterministic pass (``repeat`` and ``shuffle`` are ignored). ``max_length`` filters pairs
  in train and eval (an eval pass then skips long pairs: set it to None to score every line)
  but never in infer. Workers read disjoint shards: worker k keeps the lines whose index
  modulo the number of workers is k; a worker's shard may be empty (``balanced_workers``:
  training shares global batches instead, :mod:`~open_seq2seq.data.global_batches`).
  Throughput is counted in real (non-padding) source + target tokens.

  **SentencePiece.** With ``src_sentencepiece_model`` (``tgt_sentencepiece_model``) that
  side's files are raw text: the layer encodes every line with the model when it is built
  (in C++, all lines at once: ~2 s per 30k sentences on 2 busy cores), so the tf.data pipeline
  holds ids only, stays as fast as with pre-tokenized files and its iterator remains
  checkpointable. The model's pieces are that side's vocabulary (ids as in
  :mod:`~open_seq2seq.data.text2text.sentencepiece_model`) and ``delimiter`` does not apply
  to it. A vocabulary file given as well sets the side's ids: it lists model pieces, all of
  them or the ones that side uses (``scripts/build_sentencepiece.py --side_vocab`` writes
  those, so a joint model's embedding and output layer hold only one language's pieces), and
  the model's other pieces read as ``<UNK>``; a token that is not a piece stops the layer
  with a ``DataError``. ``pad_vocab_to_eight`` still applies. Inputs of ``interactive_infer`` are
  raw text encoded the same way. With a model on both sides the description's delimiter is
  ``""``: pieces are joined as they are and "▁" becomes a space, which is SentencePiece's
  own detokenization, and BLEU compares it with the raw reference lines.
  """

  PARAMS = {
      "src_vocab_file": Param((str, None), None,
                              "Source vocabulary: one token per line (+ optional count); "
                              "with src_sentencepiece_model optional: all or some of "
                              "its pieces (the others read as <UNK>)."),
      "tgt_vocab_file": Param((str, None), None,
                              "Target vocabulary: one token per line (+ optional count); "
                              "with tgt_sentencepiece_model optional: all or some of "
                              "its pieces (the others read as <UNK>)."),
      "src_sentencepiece_model": Param((str, None), None,
                                       "SentencePiece .model: source_file is raw text, "
                                       "encoded with it; its pieces are the vocabulary."),
      "tgt_sentencepiece_model": Param((str, None), None,
                                       "SentencePiece .model: target_file is raw text, "
                                       "encoded with it; its pieces are the vocabulary."),
      "source_file": Param(str, doc="Source sentences, one per line: tokenized, or raw text "
                           "with src_sentencepiece_model."),
      "target_file": Param((str, None), None,
                           "Target sentences (raw text with tgt_sentencepiece_model), "
                           "line-aligned with source_file "
                           "(required in train and eval, ignored in infer)."),
      "use_targets": Param(bool, True, "Read target_file (False: batches carry no targets)."),
      "delimiter": Param(str, " ", "Token separator (' ': any whitespace; '': characters)."),
      "shuffle": Param(bool, True, "Shuffle training examples (never in eval/infer)."),
      "repeat": Param(bool, True, "Repeat training data forever (eval/infer: one pass)."),
      "max_length": Param((int, None), None,
                          "Drop pairs with a side longer than this many ids incl. EOS "
                          "(train/eval; None: keep all)."),
      "batching": Param(str, "examples", "'examples': batch_size sentences per batch; "
                        "'tokens': batch_size tokens (padding included) per batch.",
                        choices=("examples", "tokens")),
      "bucket_width": Param((int, None), None,
                            "Batch sentences whose lengths fall in the same bucket of this "
                            "width (None: no bucketing with 'examples'; with 'tokens', exact "
                            "lengths, or multiples of 8 with pad_lengths_to_eight)."),
      "pad_vocab_to_eight": Param(bool, False, "Pad vocabulary sizes to a multiple of 8."),
      "pad_lengths_to_eight": Param(bool, False,
                                    "Pad time dims of batches to multiples of 8 (half precision)."),
      "special_tokens_already_in_vocab": Param(
          bool, False, "Vocab files start with <PAD> <UNK> <S> </S> (else ids 0-3 are added)."),
      "use_start_token": Param(bool, False, "Prepend <S> to source ids (targets never get it)."),
      "map_parallel_calls": Param((int, None), None, "Parallel map calls (None: autotune)."),
      "prefetch_buffer_size": Param((int, None), None, "Batches prefetched (None: autotune)."),
      "shuffle_buffer_size": Param(int, -1, "Shuffle buffer in examples (-1: the whole shard)."),
      global_batches.KEY: global_batches.PARAM,
  }

  def __init__(self, params: dict[str, Any], mode: str = "train", batch_size: int = 32,
               num_workers: int = 1, worker_id: int = 0, random_seed: int | None = None):
    super().__init__(params, mode, batch_size, num_workers, worker_id, random_seed)
    p = self.params
    if p["bucket_width"] is not None and p["bucket_width"] < 1:
      raise ConfigError(f"data_layer_params/bucket_width: must be at least 1, got "
                        f"{p['bucket_width']}")
    if p["max_length"] is not None and p["max_length"] < 2:
      raise ConfigError(f"data_layer_params/max_length: must be at least 2 (a token and EOS), "
                        f"got {p['max_length']}")
    global_batches.check(p, mode, num_workers, random_seed)
    self._use_targets = p["use_targets"] and not self.inference
    if self._use_targets and p["target_file"] is None:
      raise ConfigError(f"data_layer_params/target_file: required in {mode} mode (or set "
                        "use_targets to False)")

    self._src_spm = self._load_sentencepiece("src")
    self._tgt_spm = self._load_sentencepiece("tgt")
    self.src_seq2idx = self._load_vocab("src", self._src_spm)
    self.tgt_seq2idx = self._load_vocab("tgt", self._tgt_spm)
    self.src_idx2seq = invert_vocab(self.src_seq2idx)
    self.tgt_idx2seq = invert_vocab(self.tgt_seq2idx)
    self._target_lines = None
    if self.mode != "interactive_infer":  # what the user types is its only input
      self._read_corpus()

  # ----------------------------------------------------------------- reading
  def _load_sentencepiece(self, side: str) -> SentencePieceVocab | None:
    key = f"{side}_sentencepiece_model"
    path = self.params[key]
    return None if path is None else SentencePieceVocab(path, key)

  def _load_vocab(self, side: str, model: SentencePieceVocab | None) -> dict[str, int]:
    key = f"{side}_vocab_file"
    path = self.params[key]
    if model is None and path is None:
      raise ConfigError(f"data_layer_params/{key}: required (or set "
                        f"{side}_sentencepiece_model to read raw text with a SentencePiece "
                        "model)")
    seq2idx = model.seq2idx if model is not None else None
    if path is not None:
      seq2idx = load_vocab(path, self.params["special_tokens_already_in_vocab"])
      if model is not None:
        model.restrict_to(seq2idx, path)
    return pad_vocab_to_eight(seq2idx) if self.params["pad_vocab_to_eight"] else seq2idx

  def _line_ids(self, lines: list[str], source: bool) -> tuple[np.ndarray, np.ndarray]:
    """A side's lines -> (token ids concatenated, tokens per line); see corpus_ids.line_ids."""
    if source:
      return line_ids(lines, self._src_spm, self.params["delimiter"], self.src_seq2idx)
    return line_ids(lines, self._tgt_spm, self.params["delimiter"], self.tgt_seq2idx)

  def _tokenize_file(self, path: str, key: str, source: bool,
                     other_path: str | None) -> tuple[TokenizedSide, list[str]]:
    lines = read_text_lines(path, key)
    if not lines:
      raise DataError(f"{key} {path} is empty; it needs one sentence per line")
    token_ids, counts = self._line_ids(lines, source)
    empty = np.flatnonzero(counts == 0)
    if len(empty):
      i = int(empty[0])
      fix = (f"remove it here and line {i + 1} of {other_path}" if other_path
             else "remove it or put text on it")
      raise DataError(f"{path}:{i + 1}: empty line; {fix}")
    return assemble(token_ids, counts, source and self.params["use_start_token"]), lines

  def _read_corpus(self) -> None:
    p = self.params
    target_path = p["target_file"] if self._use_targets else None
    self._source, _ = self._tokenize_file(p["source_file"], "source_file", True, target_path)
    self._target = None
    self._target_lines: list[str] | None = None
    if target_path is not None:
      self._target, target_lines = self._tokenize_file(target_path, "target_file", False,
                                                       p["source_file"])
      if len(target_lines) != len(self._source.lengths):
        raise DataError(
            f"source_file {p['source_file']} has {len(self._source.lengths)} lines but "
            f"target_file {target_path} has {len(target_lines)}; parallel files need one "
            "sentence pair per line, aligned")
      if self.mode != "train":
        self._target_lines = target_lines  # references for BLEU keep out-of-vocabulary words
    elif self.inference and p["target_file"] is not None:
      # infer never feeds targets to the model, but scores its output against them (BLEU)
      self._target_lines = read_text_lines(p["target_file"], "target_file")
      if len(self._target_lines) != len(self._source.lengths):
        raise DataError(
            f"source_file {p['source_file']} has {len(self._source.lengths)} lines but "
            f"target_file {p['target_file']} has {len(self._target_lines)}; parallel files "
            "need one sentence pair per line, aligned")
    # An element's length, as buckets and filters see it: the longer of its sides.
    self._lengths = (self._source.lengths if self._target is None
                     else np.maximum(self._source.lengths, self._target.lengths))
    # The max_length filter of build_dataset, over the whole corpus: every shard is cut from
    # it, and an empty shard (fewer pairs than workers) is fine where an empty corpus is not.
    self._fits = np.ones(len(self._lengths), bool)
    if self._max_length is not None:
      self._fits = self._lengths <= self._max_length
      if not self._fits.any():
        raise DataError(f"no sentence pair of {p['source_file']} is at most max_length="
                        f"{p['max_length']} ids long (EOS included); raise "
                        "data_layer_params/max_length")
    self._longest = int(self._lengths.max())
    if self._max_length is not None:
      self._longest = min(self._longest, self._max_length)
    if self.mode == "train" and self.worker_id == 0 and self._max_length is None:
      warning = outlier_warning(self._lengths, p["source_file"])
      if warning:
        print(f"warning: {warning}", file=sys.stderr, flush=True)

  @property
  def _max_length(self) -> int | None:
    """Pairs longer than this are skipped (train and eval; infer reads every line)."""
    return None if self.inference else self.params["max_length"]

  @property
  def _kept(self) -> np.ndarray:
    """Which lines this worker's dataset yields: its shard of the pairs that fit."""
    lines = np.arange(len(self._fits))
    return self._fits & (lines % self.num_workers == self.worker_id)

  @property
  def description(self) -> TextDescription:
    """Vocabularies and delimiter, for the model to hand to its components."""
    return TextDescription(
        src_vocab_size=len(self.src_seq2idx), tgt_vocab_size=len(self.tgt_seq2idx),
        source_seq2idx=self.src_seq2idx, target_seq2idx=self.tgt_seq2idx,
        source_idx2seq=self.src_idx2seq, target_idx2seq=self.tgt_idx2seq,
        delimiter=self._printed_delimiter)

  @property
  def _printed_delimiter(self) -> str:
    """What joins tokens when ids become text: "" when both sides are SentencePiece pieces
    (they concatenate, "▁" marks the spaces), else the files' delimiter."""
    if self._src_spm is not None and self._tgt_spm is not None:
      return ""
    return self.params["delimiter"]

  # ----------------------------------------------------------------- datasets
  def get_size_in_samples(self) -> int:
    self._check_corpus()
    return int(self._kept.sum())

  def _check_corpus(self) -> None:
    if self.mode == "interactive_infer":
      raise ConfigError("interactive_infer translates what the user types: its data layer "
                        "reads no source_file (use dataset_from_inputs)")

  def reference_text(self, example_id: int) -> str | None:
    """Raw target line ``example_id`` (eval, and infer with a target_file): BLEU's reference."""
    if self._target_lines is None:
      return None
    return self._target_lines[int(example_id)]

  def _examples(self, source: TokenizedSide, target: TokenizedSide | None, table: bool = False):
    """Unbatched dict elements ``source``/``source_length``/(``target``...)/``id`` (``table``:
    the columns they are sliced from)."""
    features = {"source": source.ragged(), "source_length": source.lengths,
                "id": np.arange(len(source.lengths), dtype=np.int64)}
    if target is not None:
      features["target"] = target.ragged()
      features["target_length"] = target.lengths
    return features if table else transforms.slices(features, self.params["map_parallel_calls"])

  def _batching(self, longest: int) -> transforms.Batching:
    """How the pipeline batches elements at most ``longest`` ids long."""
    p = self.params
    pad_multiple = 8 if p["pad_lengths_to_eight"] else 1
    by_tokens = p["batching"] == "tokens"
    # Token batches default to one bucket per (padded) length: a batch then holds ~95 % real
    # tokens on the Bible data, against ~86 % with buckets 8 wide.
    width = p["bucket_width"] or (pad_multiple if by_tokens else None)
    boundaries = transforms.bucket_boundaries(longest, width) if width else ()
    return transforms.Batching(self.batch_size, by_tokens, tuple(boundaries), longest,
                               pad_multiple, batch_multiple=pad_multiple)

  def build_dataset(self) -> tf.data.Dataset:
    self._check_corpus()
    p = self.params
    if global_batches.enabled(p, self.mode):  # every worker's share of the same global batch
      return global_batches.for_layer(self, np.flatnonzero(self._fits), self._batching(
          self._longest), self._examples(self._source, self._target, table=True))
    dataset = self._examples(self._source, self._target)
    common = dict(num_shards=self.num_workers, shard_index=self.worker_id,
                  max_length=self._max_length, prefetch_buffer_size=p["prefetch_buffer_size"])
    if self.mode != "train":
      return transforms.inference_pipeline(dataset, self._batching(self._longest), **common)
    buffer = None
    if p["shuffle"]:
      size = self.get_size_in_samples()
      buffer = max(1, size if p["shuffle_buffer_size"] < 1 else p["shuffle_buffer_size"])
    return transforms.training_pipeline(dataset, self._batching(self._longest),
                                        shuffle_buffer_size=buffer, repeat=p["repeat"],
                                        **common)

  def batches_per_epoch(self) -> int:
    """Batches of one pass over this worker's shard (balanced: over the global batches)."""
    if global_batches.enabled(self.params, self.mode):
      return global_batches.count_steps(self._lengths[self._fits], self._batching(
          self._longest), self.num_workers, self.params["repeat"])
    return self._batching(self._longest).count_batches(self._lengths[self._kept])

  @property
  def throughput_unit(self) -> str:
    return "tokens"

  def count_units(self, batch: dict) -> tf.Tensor:
    """Real (non-padding) source + target tokens of a batch, EOS (and <S>) included."""
    total = tf.reduce_sum(tf.cast(batch["source_tensors"][1], tf.int64))
    if "target_tensors" in batch:
      total += tf.reduce_sum(tf.cast(batch["target_tensors"][1], tf.int64))
    return total

  def source_tokenization(self) -> TextTokenization:
    """How a raw source line becomes ids here, for an exported model to do the same."""
    spm = self._src_spm
    return TextTokenization(
        seq2idx=dict(self.src_seq2idx), delimiter=self.params["delimiter"],
        sentencepiece_model=spm.proto if spm is not None else None,
        sentencepiece_ids=spm.model_to_ids if spm is not None else None,
        start_token=self.params["use_start_token"])

  def dataset_from_inputs(self, inputs: Iterable[str]) -> tf.data.Dataset:
    """Batches of raw source strings (ids 0..n-1 in input order), no targets: tokenized as
    source_file is (split by ``delimiter``, or encoded by ``src_sentencepiece_model``)."""
    lines = list(inputs)
    if not lines:
      raise DataError("interactive input is empty; give at least one sentence")
    token_ids, counts = self._line_ids(lines, True)
    if self._src_spm is None and (token_ids == UNK_ID).any():
      # typed tokens the model never saw read as <UNK>: its answer then means nothing
      tokens = [t for line in lines for t in split_tokens(line, self.params["delimiter"])]
      unknown = list(dict.fromkeys(t for t, i in zip(tokens, token_ids) if i == UNK_ID))
      print(f"warning: {int((token_ids == UNK_ID).sum())} of {len(tokens)} input tokens are not "
            f"in the source vocabulary ({', '.join(map(repr, unknown[:5]))}"
            f"{', ...' if len(unknown) > 5 else ''}): they read as <UNK>; the vocabulary is "
            f"{self.params['src_vocab_file']}", file=sys.stderr, flush=True)
    source = assemble(token_ids, counts, self.params["use_start_token"])
    return transforms.inference_pipeline(
        self._examples(source, None), self._batching(int(source.lengths.max())),
        prefetch_buffer_size=self.params["prefetch_buffer_size"])
