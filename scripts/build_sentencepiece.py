#!/usr/bin/env python
"""Trains a SentencePiece model on raw text and writes it with a vocabulary file.

One call trains one model on every ``--input`` file: give both sides' files for a joint
model (one vocabulary for source and target, what shared embeddings need), or call once per
side for separate models. Outputs:

* ``PREFIX.model``: the SentencePiece model, trained with this project's special ids
  (``<PAD>`` 0, ``<UNK>`` 1, ``<S>`` 2, ``</S>`` 3), so its ids are the data layer's ids;
* ``PREFIX.vocab`` (or ``--vocab_file``): the pieces of ids 4.. one per line, in id order:
  the vocabulary-file format of ``ParallelTextDataLayer`` (``special_tokens_already_in_vocab``
  False), read back with the model's ids;
* for each ``--encode IN OUT``: OUT holds IN's lines as space-separated pieces (for tools, or
  for ``ParallelTextDataLayer`` with the vocabulary file instead of the model);
* for each ``--side_vocab IN OUT``: OUT is the vocabulary file of the pieces IN's lines use,
  most frequent first (ties in the model's order), each with its count. With a joint model,
  give it to the data layer as that side's ``src_vocab_file`` / ``tgt_vocab_file`` beside the
  model: the side's embedding and output layer then hold only the pieces of its language (as
  OpenNMT-tf and fairseq build per-side vocabularies), and the others read as ``<UNK>``.

``ParallelTextDataLayer`` can also read the raw text directly with
``src_sentencepiece_model`` / ``tgt_sentencepiece_model`` = ``PREFIX.model``. Training is
deterministic for a given input, options and ``--seed`` (inputs are read in order; with
``--input_sentence_size`` the sample is drawn with the seed); with ``--num_threads`` above 1
the unigram trainer may differ in the last digits of piece scores between runs.

    python scripts/build_sentencepiece.py --input train.en --input train.es \\
        --model_prefix data/spm --vocab_size 8000 --model_type bpe \\
        --encode train.en train.sp.en --encode train.es train.sp.es \\
        --side_vocab train.en spm.en.vocab --side_vocab train.es spm.es.vocab
    python scripts/build_sentencepiece.py --model data/spm.model --encode dev.en dev.sp.en

Speech recognizers with SentencePiece targets learn the model from the ``transcript`` column
of their CSV files (``--input_csv``, repeatable; ``data_layer_params/vocab_file`` is then the
``.model``):

    python scripts/build_sentencepiece.py --model_prefix data/librispeech/spm_unigram_128 \
        --vocab_size 128 --model_type unigram \
        --input_csv data/librispeech/librivox-train-clean-100.csv  # ... and the other train CSVs
"""

from __future__ import annotations

# The open_seq2seq imports (which load TensorFlow) wait until the arguments are known.
# pylint: disable=import-outside-toplevel
import argparse
import csv
import io
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

MODEL_TYPES = ("bpe", "unigram", "char", "word")


def read_sentences(paths: list[str]) -> list[str]:
  """Non-blank lines of the files, in order (SentencePiece learns from these)."""
  sentences = []
  for path in paths:
    try:
      with open(path, encoding="utf-8") as f:
        sentences.extend(line.rstrip("\r\n") for line in f if line.strip())
    except FileNotFoundError:
      raise SystemExit(f"error: --input {path} does not exist") from None
    except UnicodeDecodeError as e:
      raise SystemExit(f"error: --input {path} is not UTF-8 (byte offset {e.start}); "
                       "re-encode it") from None
  return sentences


def read_transcripts(paths: list[str]) -> list[str]:
  """The non-blank ``transcript`` column of speech CSV files, in order."""
  sentences = []
  for path in paths:
    try:
      with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        if "transcript" not in (reader.fieldnames or []):
          raise SystemExit(f"error: --input_csv {path} has no 'transcript' column (header: "
                           f"{','.join(reader.fieldnames or [])})")
        sentences.extend(row["transcript"].strip() for row in reader
                         if (row["transcript"] or "").strip())
    except FileNotFoundError:
      raise SystemExit(f"error: --input_csv {path} does not exist") from None
    except UnicodeDecodeError as e:
      raise SystemExit(f"error: --input_csv {path} is not UTF-8 (byte offset {e.start}); "
                       "re-encode it") from None
  return sentences


def train(sentences: list[str], vocab_size: int, model_type: str = "bpe",
          character_coverage: float = 1.0, input_sentence_size: int = 0, seed: int = 0,
          num_threads: int = 1) -> bytes:
  """Trains a model with this project's special ids and returns it serialized."""
  import sentencepiece
  from open_seq2seq.data.text2text.sentencepiece_model import SPECIAL_TOKEN_OPTIONS
  sentencepiece.set_random_generator_seed(seed)
  model = io.BytesIO()
  try:
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, vocab_size=vocab_size,
        model_type=model_type, character_coverage=character_coverage,
        input_sentence_size=input_sentence_size,
        shuffle_input_sentence=input_sentence_size > 0, num_threads=num_threads,
        minloglevel=2, **SPECIAL_TOKEN_OPTIONS)
  except RuntimeError as e:
    # e.g. "Vocabulary size too high (9000). Please set it to a value <= 1234."
    reason = str(e).strip().splitlines()[-1].split("] ")[-1]
    raise SystemExit(f"error: SentencePiece training failed: {reason}") from None
  return model.getvalue()


def _usual_mode(path: str) -> None:
  """Gives a file written through a temporary file the mode a plain open() would have."""
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(path, 0o666 & ~umask)


def write_lines(path: str, lines: list[str]) -> None:
  from open_seq2seq.utils.io import atomic_open
  with atomic_open(path) as f:
    f.writelines(line + "\n" for line in lines)
  _usual_mode(path)


def encode_file(vocab, source: str, target: str) -> int:
  """Writes ``source``'s lines as space-separated pieces to ``target``; returns the pieces."""
  from open_seq2seq.data.text2text.text2text import read_text_lines
  lines = read_text_lines(source, "--encode")
  pieces = vocab.pieces(lines)
  write_lines(target, [" ".join(p) for p in pieces])
  return sum(map(len, pieces))


def side_vocab_lines(vocab, source: str) -> list[str]:
  """The vocabulary-file lines (``piece<TAB>count``) of the pieces ``source``'s lines use,
  most frequent first, ties in the model's id order."""
  from open_seq2seq.data.text2text.text2text import read_text_lines
  from open_seq2seq.data.text2text.vocab import NUM_SPECIAL_TOKENS, invert_vocab
  ids, _ = vocab.encode(read_text_lines(source, "--side_vocab"))
  counts = np.bincount(ids, minlength=len(vocab))
  counts[:NUM_SPECIAL_TOKENS] = 0  # <UNK> (characters the model lacks) is always there
  order = sorted(np.flatnonzero(counts), key=lambda i: (-counts[i], i))
  tokens = invert_vocab(vocab.seq2idx)
  return [f"{tokens[int(i)]}\t{counts[i]}" for i in order]


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--input", action="append", default=[],
                      help="raw text file to learn from, one sentence per line (repeatable)")
  parser.add_argument("--input_csv", action="append", default=[],
                      help="speech CSV file whose transcript column to learn from "
                           "(repeatable)")
  parser.add_argument("--model_prefix", help="write PREFIX.model and PREFIX.vocab")
  parser.add_argument("--model", help="use this trained .model instead of training one")
  parser.add_argument("--vocab_file", help="where to write the vocabulary file (default: "
                      "the model's path with .vocab instead of .model)")
  parser.add_argument("--vocab_size", type=int, default=8000,
                      help="pieces in the model, the 4 special tokens included")
  parser.add_argument("--model_type", default="bpe", choices=MODEL_TYPES)
  parser.add_argument("--character_coverage", type=float, default=1.0,
                      help="share of characters the model covers (rarer ones are <UNK>; "
                           "1.0 for alphabetic languages, ~0.9995 for CJK)")
  parser.add_argument("--input_sentence_size", type=int, default=0,
                      help="learn from a random sample of this many sentences (0: all)")
  parser.add_argument("--seed", type=int, default=0, help="seed of SentencePiece's sampling")
  parser.add_argument("--num_threads", type=int, default=1, help="trainer threads")
  parser.add_argument("--encode", nargs=2, action="append", default=[], metavar=("IN", "OUT"),
                      help="write IN's lines as space-separated pieces to OUT (repeatable)")
  parser.add_argument("--side_vocab", nargs=2, action="append", default=[],
                      metavar=("IN", "OUT"),
                      help="write the vocabulary file of the pieces IN's lines use to OUT "
                           "(one language's vocabulary under a joint model; repeatable)")
  args = parser.parse_args(argv)
  if (args.model is None) == (args.model_prefix is None):
    raise SystemExit("error: give either --model_prefix (train a model on --input files) or "
                     "--model (use a trained one)")
  if args.model_prefix is not None and not (args.input or args.input_csv):
    raise SystemExit("error: --model_prefix needs at least one --input or --input_csv file to "
                     "learn from")
  if args.model is not None and (args.input or args.input_csv):
    raise SystemExit("error: --input and --input_csv are for training; drop them when --model "
                     "is given")

  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly(first_op=False)  # open_seq2seq.data imports TensorFlow
  from open_seq2seq.data.text2text.sentencepiece_model import (SentencePieceVocab,
                                                               vocab_file_tokens)
  from open_seq2seq.errors import OpenSeq2SeqError
  from open_seq2seq.utils.io import atomic_open

  model_path = args.model
  if args.model_prefix is not None:
    sentences = read_sentences(args.input) + read_transcripts(args.input_csv)
    if not sentences:
      raise SystemExit(f"error: {', '.join(args.input + args.input_csv)}: no text to learn "
                       "from")
    proto = train(sentences, args.vocab_size, args.model_type, args.character_coverage,
                  args.input_sentence_size, args.seed, args.num_threads)
    model_path = args.model_prefix + ".model"
    with atomic_open(model_path, binary=True) as f:
      f.write(proto)
    _usual_mode(model_path)
    print(f"trained a {args.model_type} model of {args.vocab_size} pieces on "
          f"{len(sentences)} sentences: {model_path}")
  try:
    vocab = SentencePieceVocab(model_path, "--model")
    vocab_path = args.vocab_file
    if vocab_path is None:
      stem = model_path[:-len(".model")] if model_path.endswith(".model") else model_path
      vocab_path = stem + ".vocab"
    if args.model_prefix is not None or args.vocab_file is not None:
      write_lines(vocab_path, vocab_file_tokens(vocab))
      print(f"vocabulary file ({len(vocab)} ids with the 4 special tokens): {vocab_path}")
    for source, target in args.encode:
      count = encode_file(vocab, source, target)
      print(f"encoded {source} -> {target} ({count} pieces)")
    for source, target in args.side_vocab:
      lines = side_vocab_lines(vocab, source)
      write_lines(target, lines)
      print(f"side vocabulary of {source} -> {target} ({len(lines)} of the model's "
            f"{len(vocab_file_tokens(vocab))} pieces)")
  except OpenSeq2SeqError as e:
    raise SystemExit(f"error: {e}") from None
  return 0


if __name__ == "__main__":
  sys.exit(main())
