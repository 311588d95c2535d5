"""Word timestamps from a recognizer's frame alignment (numpy, no TensorFlow).

A decoder says when it emitted each output token, in encoder frames: CTC by the run of frames
its best path spends on the token (the greedy path, or :func:`ctc_forced_path` for the result
of a beam search), a transducer by the frame on which its search emitted it. Here those token
spans become words and seconds:

1. tokens -> token spans ``[start, end)`` in frames (:func:`ctc_path_spans`,
   :func:`transducer_spans`);
2. token spans -> word spans (:func:`word_spans`): a token that starts a word (the space of a
   character vocabulary, a SentencePiece piece starting with ``▁``) closes the word before;
   separators (the space, a lone ``▁``) belong to no word; a word starts where its first
   token starts and ends where its last token ends;
3. frames -> seconds (:func:`word_times`): ``frame * frame_seconds * scale + offset``, the
   offsets (one for starts, one for ends) and the scale fitted on speech with known word
   boundaries (``scripts/calibrate_timestamps.py``): CTC and transducer outputs are peaky, a
   token fires on one frame somewhere in its sound, so the raw times are biased. The encoder
   frame lasts ``window_stride`` times the encoder's time reduction
   (:func:`subsampling_factor`).

The text form of a transcript's words (the infer CSV's ``words`` column) is
``word:start-end`` per word, times in seconds with two decimals, separated by spaces:
``one:0.21-0.52 two:0.70-1.02`` (:func:`format_words`, :func:`parse_words`).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np

#: SentencePiece's word-start marker.
WORD_MARK = "\u2581"


@dataclasses.dataclass(frozen=True)
class TokenSpan:
  """One output token and the encoder frames ``[start, end)`` it was emitted on."""

  token: int
  start: int
  end: int


@dataclasses.dataclass(frozen=True)
class WordSpan:
  """A word's tokens and its frames ``[start, end)``."""

  tokens: tuple[int, ...]
  start: int
  end: int


def ctc_path_spans(path: Sequence[int], blank: int) -> list[TokenSpan]:
  """The tokens of a CTC frame path (one class per frame) with the frames of each token's run.

  A token is a run of equal non-blank classes (a repeated token needs a blank between its
  runs); its span is the run, ``[first frame, last frame + 1)``.
  """
  path = np.asarray(path, np.int64).reshape(-1)
  if path.size == 0:
    return []
  starts = np.flatnonzero(np.concatenate([[True], path[1:] != path[:-1]]))
  ends = np.concatenate([starts[1:], [path.size]])
  return [TokenSpan(int(path[s]), int(s), int(e)) for s, e in zip(starts, ends)
          if path[s] != blank]


def transducer_spans(tokens: Sequence[int], frames: Sequence[int]) -> list[TokenSpan]:
  """A transducer's tokens and the frame each was emitted on: spans of one frame."""
  if len(tokens) != len(frames):
    raise ValueError(f"{len(tokens)} tokens but {len(frames)} emission frames")
  return [TokenSpan(int(t), int(f), int(f) + 1) for t, f in zip(tokens, frames)]


def ctc_forced_path(log_probs: np.ndarray, labels: Sequence[int], blank: int
                    ) -> np.ndarray | None:
  """The most likely CTC frame path of ``labels`` (Viterbi), one class per frame.

  Args:
    log_probs: [T, V] log-probabilities (or logits: the best path is the same for any
      per-frame normalization).
    labels: the token ids the path must spell (no blanks).
    blank: the blank's class id.

  Returns:
    int64 [T], or None when ``labels`` cannot be spelled in T frames (a repeated token needs
    a blank between its copies). Ties go to the path that stays longest in a state.
  """
  log_probs = np.asarray(log_probs, np.float64)
  labels = np.asarray(labels, np.int64).reshape(-1)
  steps = len(log_probs)
  if labels.size == 0:
    return np.full(steps, blank, np.int64)
  if steps == 0:
    return None
  states = np.full(2 * labels.size + 1, blank, np.int64)  # blank, l1, blank, l2, ..., blank
  states[1::2] = labels
  size = states.size
  # a jump of two states (over a blank) is allowed onto a label unlike the one before it
  skip = np.zeros(size, bool)
  skip[3::2] = labels[1:] != labels[:-1]
  delta = np.full(size, -np.inf)
  delta[:2] = log_probs[0, states[:2]]
  back = np.zeros((steps, size), np.int8)
  columns = np.arange(size)
  for t in range(1, steps):
    candidates = np.full((3, size), -np.inf)
    candidates[0] = delta
    candidates[1, 1:] = delta[:-1]
    candidates[2, 2:] = np.where(skip[2:], delta[:-2], -np.inf)
    back[t] = np.argmax(candidates, axis=0)
    delta = candidates[back[t], columns] + log_probs[t, states]
  last = size - 1 if delta[-1] >= delta[-2] else size - 2
  if not np.isfinite(delta[last]):
    return None
  path = np.empty(steps, np.int64)
  for t in range(steps - 1, -1, -1):
    path[t] = states[last]
    last -= back[t, last]
  return path


def word_spans(spans: Sequence[TokenSpan], starts_word: Sequence[bool],
               separator: Sequence[bool]) -> list[WordSpan]:
  """Groups token spans into words.

  Args:
    spans: the tokens in output order.
    starts_word: per token id, whether the token begins a new word.
    separator: per token id, whether the token belongs to no word (the space).
  """
  words: list[WordSpan] = []
  open_word = False
  for span in spans:
    if starts_word[span.token]:
      open_word = False
    if separator[span.token]:
      continue
    if open_word:
      last = words[-1]
      words[-1] = WordSpan(last.tokens + (span.token,), last.start, max(last.end, span.end))
    else:
      words.append(WordSpan((span.token,), span.start, span.end))
      open_word = True
  return words


def token_tables(idx2char: Mapping[int, str], num_classes: int, bpe: bool
                 ) -> tuple[np.ndarray, np.ndarray]:
  """``(starts_word, separator)`` bool [num_classes] of an alphabet (see :func:`word_spans`).

  Characters: the space starts a word and is a separator. SentencePiece pieces: a piece
  starting with ``▁`` starts a word; a lone ``▁`` is also a separator. Other classes (the
  blank, ``<S>``) neither.
  """
  starts_word = np.zeros(num_classes, bool)
  separator = np.zeros(num_classes, bool)
  for index, symbol in idx2char.items():
    if 0 <= index < num_classes:
      mark = WORD_MARK if bpe else " "
      starts_word[index] = symbol.startswith(mark)
      separator[index] = symbol == mark
  return starts_word, separator


def subsampling_factor(input_lengths: Sequence[int], output_lengths: Sequence[int]) -> int:
  """The encoder's time reduction: input frames per output frame over a batch, rounded
  (convolutions round lengths up or trim their edges, so one short utterance alone may not
  tell; a batch's totals do)."""
  total_out = int(np.sum(output_lengths))
  if total_out <= 0:
    return 1
  return max(1, int(round(float(np.sum(input_lengths)) / total_out)))


def word_times(words: Sequence[WordSpan], frame_seconds: float, start_offset: float = 0.0,
               end_offset: float = 0.0, scale: float = 1.0,
               duration: float | None = None) -> list[tuple[float, float]]:
  """``(start, end)`` seconds of each word: ``frame * frame_seconds * scale + offset``,
  within ``[0, duration]`` and with ``end >= start``."""
  times = []
  upper = np.inf if duration is None else duration
  for word in words:
    start = word.start * frame_seconds * scale + start_offset
    end = word.end * frame_seconds * scale + end_offset
    start = min(max(start, 0.0), upper)
    end = min(max(end, start), upper)
    times.append((float(start), float(end)))
  return times


def format_words(words: Sequence[tuple[str, float, float]]) -> str:
  """``word:start-end`` for each ``(word, start, end)``, space-separated (module doc)."""
  return " ".join(f"{word}:{start:.2f}-{end:.2f}" for word, start, end in words)


def parse_words(text: str) -> list[tuple[str, float, float]]:
  """The ``(word, start, end)`` triples of :func:`format_words`'s text.

  Raises:
    ValueError: an item that is not ``word:start-end`` with numbers and start <= end.
  """
  words = []
  for item in text.split():
    word, colon, times = item.rpartition(":")
    start, dash, end = times.partition("-")
    try:
      if not (word and colon and dash):
        raise ValueError
      start_s, end_s = float(start), float(end)
    except ValueError:
      raise ValueError(f"{item!r} is not word:start-end (seconds)") from None
    if not 0.0 <= start_s <= end_s:
      raise ValueError(f"{item!r}: times must satisfy 0 <= start <= end")
    words.append((word, start_s, end_s))
  return words


def match_words(reference: Sequence[str], hypothesis: Sequence[str]) -> list[tuple[int, int]]:
  """``(reference index, hypothesis index)`` of the equal words of a minimum edit-distance
  alignment of the two word sequences (the words whose timestamps can be compared)."""
  rows, cols = len(reference), len(hypothesis)
  cost = np.zeros((rows + 1, cols + 1), np.int64)
  cost[:, 0], cost[0, :] = np.arange(rows + 1), np.arange(cols + 1)
  for i in range(1, rows + 1):
    for j in range(1, cols + 1):
      cost[i, j] = min(cost[i - 1, j] + 1, cost[i, j - 1] + 1,
                       cost[i - 1, j - 1] + (reference[i - 1] != hypothesis[j - 1]))
  pairs, i, j = [], rows, cols
  while i > 0 and j > 0:  # back from the end, preferring the diagonal
    same = reference[i - 1] == hypothesis[j - 1]
    if cost[i, j] == cost[i - 1, j - 1] + (not same):
      if same:
        pairs.append((i - 1, j - 1))
      i, j = i - 1, j - 1
    elif cost[i, j] == cost[i - 1, j] + 1:
      i -= 1
    else:
      j -= 1
  return pairs[::-1]


__all__ = ["TokenSpan", "WordSpan", "ctc_path_spans", "transducer_spans", "ctc_forced_path",
           "word_spans", "token_tables", "subsampling_factor", "word_times", "format_words",
           "parse_words", "match_words"]
