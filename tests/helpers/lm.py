"""Tiny language-model and text-classification datasets in their upstream on-disk layouts.

* WikiText (``wikitext-2/wiki.{train,valid,test}.tokens``): one paragraph per line, headings
  `` = Title = ``, blank lines between, space-separated tokens, in-word hyphens as ``@-@``.
* aclImdb: ``{train,test}/{pos,neg}/<id>_<rating>.txt``, one review per file, ``<br />``
  line breaks; ratings 7-10 are positive, 1-4 negative.
* SST (NVIDIA sentiment-discovery's binary_sst): ``{train,val,test}.csv`` with the header
  ``sentence,label``, quoted when a sentence holds a comma or a quote.
* ``vocab.txt`` as OpenSeq2Seq wrote it: ``id<TAB>word<TAB>count`` lines, then the count.
"""

from __future__ import annotations

import csv
import os

import numpy as np

WORDS = ("the", "cat", "sat", "on", "a", "mat", "dog", "ran", "to", "park", "and", "was",
         "happy", "red", "ball")


def wikitext_lines(num_paragraphs: int, seed: int = 0, title: str = "Cats") -> list[str]:
  """Lines of a WikiText file: a heading, then paragraphs of common words with a hyphenated
  word, a contraction, a literal <unk> and one word seen once (``rare<seed>_<i>``)."""
  rng = np.random.default_rng(seed)
  lines = [" \n", f" = {title} = \n", " \n"]
  for i in range(num_paragraphs):
    words = list(rng.choice(WORDS, size=int(rng.integers(8, 16))))
    words[2:2] = ["well", "@-@", "known"]
    words += ["but", "it", "didn", "'t", "<unk>", f"rare{seed}_{i}", "."]
    lines += [" " + " ".join(words) + " \n", " \n"]
  return lines


def write_wikitext(root: str, num_paragraphs: tuple[int, int, int] = (40, 12, 6),
                   scheme: str = "wiki.{}.tokens") -> str:
  """A WikiText folder (``scheme``: ``wiki.{}.tokens``, ``wiki.{}.raw`` or ``{}.txt``)."""
  os.makedirs(root, exist_ok=True)
  for seed, (split, n) in enumerate(zip(("train", "valid", "test"), num_paragraphs)):
    with open(os.path.join(root, scheme.format(split)), "w", encoding="utf-8") as f:
      f.writelines(wikitext_lines(n, seed))
  return root


def write_vocab_txt(path: str, words: list[str], counts: list[int] | None = None,
                    count_line: bool = True) -> str:
  """An OpenSeq2Seq ``vocab.txt`` listing ``words`` in id order."""
  counts = counts if counts is not None else [0] * len(words)
  with open(path, "w", encoding="utf-8") as f:
    for i, (word, count) in enumerate(zip(words, counts)):
      f.write(f"{i}\t{word}\t{count}\n")
    if count_line:
      f.write(f"{len(words)}\n")
  return path


def write_aclimdb(root: str, reviews: dict[tuple[str, str], list[tuple[int, int, str]]]
                  ) -> str:
  """An aclImdb tree: ``reviews[(split, "pos"|"neg")]`` = ``[(id, rating, text), ...]``."""
  for (split, sentiment), items in reviews.items():
    folder = os.path.join(root, split, sentiment)
    os.makedirs(folder, exist_ok=True)
    for review_id, rating, text in items:
      with open(os.path.join(folder, f"{review_id}_{rating}.txt"), "w", encoding="utf-8") as f:
        f.write(text)
  return root


def imdb_reviews(per_folder: int = 6) -> dict[tuple[str, str], list[tuple[int, int, str]]]:
  """``per_folder`` reviews in each of train/test x pos/neg; the rating is in the text."""
  reviews = {}
  for split in ("train", "test"):
    for sentiment, ratings in (("pos", (7, 8, 9, 10)), ("neg", (1, 2, 3, 4))):
      items = []
      for i in range(per_folder):
        rating = ratings[i % 4]
        mood = "happy" if sentiment == "pos" else "sad"
        text = (f"The {mood} dog ran.<br /><br />It was a {mood} film, rated {rating} "
                f"({split} {i}).")
        items.append((i, rating, text))
      reviews[(split, sentiment)] = items
  return reviews


def write_sst(root: str, splits: dict[str, list[tuple[str, int]]]) -> str:
  """SST csv files: ``splits[name]`` = ``[(sentence, label), ...]``, name in train/val/test."""
  os.makedirs(root, exist_ok=True)
  for name, rows in splits.items():
    with open(os.path.join(root, f"{name}.csv"), "w", encoding="utf-8", newline="") as f:
      writer = csv.writer(f)
      writer.writerow(["sentence", "label"])
      writer.writerows(rows)
  return root


#: Prompts (infer), test reviews and test sentences each shipped config reads in the
#: every-config test: OpenSeq2Seq's "something The only game" is four one-word prompts.
EXAMPLES = 4


def example_config_overrides(directory: str) -> tuple[list[str], int]:
  """LSTMLM family (language models and transfer classifiers): one folder that is at once a
  WikiText folder, an aclImdb tree and an SST folder, plus a language model's ``vocab.txt``,
  as run.py overrides for a shipped config.

  The WikiText splits are long enough for the configs' own ``bptt`` (96) with batches of two;
  ``load_model`` is cleared (the transfer configs name a pretrained run that does not exist
  here; transfer itself is tested by the learning tests).

  Returns:
    The overrides, and the number of examples every infer writes (:data:`EXAMPLES`).
  """
  # imported here: the helpers module stays importable without TensorFlow
  from open_seq2seq.data.lm.wkt import build_processed_folder  # pylint: disable=import-outside-toplevel
  write_wikitext(directory, num_paragraphs=(80, 40, 10))
  build_processed_folder(directory, os.path.join(directory, "lm-processed"), min_count=1)
  reviews = imdb_reviews(per_folder=6)
  for sentiment in ("pos", "neg"):
    reviews[("test", sentiment)] = reviews[("test", sentiment)][:EXAMPLES // 2]
  write_aclimdb(directory, reviews)
  sentences = [("a happy dog , and a red ball", 1), ("the sad cat sat on a mat", 0)]
  write_sst(directory, {"train": sentences * 4, "val": sentences * 2,
                        "test": sentences * (EXAMPLES // 2)})
  return ([f"--data_layer_params/data_root={directory}",
           f"--data_layer_params/processed_data_folder={os.path.join(directory, 'processed')}",
           f"--lm_vocab_file={os.path.join(directory, 'lm-processed', 'vocab.txt')}",
           "--load_model=None", "--batch_size_per_gpu=2", "--eval_batch_size_per_gpu=2"],
          EXAMPLES)


#: The polar corpus of :func:`polar_texts` (the transfer learning test's): per class, this
#: many class-specific words; each word of a text is one of its class's with this probability,
#: otherwise one of the filler words (Zipf-distributed, the same for both classes).
POLAR_WORDS, POLAR_RATE, FILLERS, TEXT_LENGTHS = 200, 0.4, 150, (10, 20)


def _filler_probabilities() -> np.ndarray:
  weights = 1.0 / np.arange(1, FILLERS + 1)
  return weights / weights.sum()


def polar_texts(count: int, seed: int) -> list[tuple[str, int]]:
  """``count`` labelled texts whose class is carried by many rare words, scattered.

  Label 1 texts draw their class words from ``pos0 .. pos199``, label 0 from ``neg0 ..``;
  between them, fillers ``w0 .. w149`` that say nothing of the class. The word before a
  class word is mostly a filler, so a language model that predicts class words well must
  remember the text's class across fillers: its final state carries the class. A classifier
  that learns from a few dozen labels alone has never seen most class words (each is 1/200
  of its class's)."""
  rng = np.random.default_rng(seed)
  fillers = _filler_probabilities()
  rows = []
  for _ in range(count):
    label = int(rng.integers(2))
    words = []
    for _ in range(int(rng.integers(TEXT_LENGTHS[0], TEXT_LENGTHS[1] + 1))):
      if rng.random() < POLAR_RATE:
        words.append(("pos" if label else "neg") + str(int(rng.integers(POLAR_WORDS))))
      else:
        words.append("w" + str(int(rng.choice(FILLERS, p=fillers))))
    rows.append((" ".join(words), label))
  return rows

