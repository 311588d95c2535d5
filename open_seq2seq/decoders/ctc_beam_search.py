"""CTC beam search fused with a word n-gram LM (pyctcdecode + KenLM).

Decoding runs pyctcdecode's prefix beam search; our :class:`KenLMScorer` plugs into it as
its language model, so a hypothesis scores

    ln P_ctc(text) + alpha * ln P_lm(words, </s>) + beta * #words
                   + unk_score_offset * (#words the LM does not know)

which is what OpenSeq2Seq's decoders (Baidu's ``ctc_decoders`` in ``decode.py``, the
DeepSpeech op in the model) computed: KenLM returns log10, converted to natural log before
alpha multiplies it, so tuned alpha/beta values keep their meaning. A word enters the LM when
a space follows it; the last word and ``</s>`` when the hypothesis ends. A partial word that
no LM word starts with also gets ``unk_score_offset`` (ARPA files only: the vocabulary is read
from them; a binary LM checks complete words only). OpenSeq2Seq's trie made unknown words
impossible; ``unk_score_offset`` is the soft version (0 allows them at the LM's <unk> cost).

A batch is decoded in worker processes forked once per decoder (the LM is shared with
them, not copied) and stopped when the decoder is closed, garbage-collected, or its process
exits in any way (the workers ask the kernel to end them with their parent).

pyctcdecode 0.5.0 pins ``numpy<2`` (TensorFlow 2.21 needs numpy 2) but runs on numpy 2:
install it with ``pip install --no-deps pyctcdecode==0.5.0 pygtrie``.
"""

from __future__ import annotations

import bisect
import ctypes
import math
import multiprocessing
import os
import signal
import weakref
from typing import Any, Mapping, Sequence

import numpy as np

from open_seq2seq.errors import ConfigError, DataError

LN10 = math.log(10.0)
_PR_SET_PDEATHSIG = 1
_INSTALL = "pip install kenlm pygtrie && pip install --no-deps pyctcdecode==0.5.0"


def _require_libraries() -> tuple[Any, Any]:
  """(pyctcdecode, kenlm) modules, or a one-line ConfigError saying how to install them."""
  try:
    import kenlm  # pylint: disable=import-outside-toplevel
    import pyctcdecode  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ConfigError(f"decoder_params/use_language_model: LM decoding needs {e.name}: "
                      f"{_INSTALL}") from None
  return pyctcdecode, kenlm


def read_arpa_vocabulary(path: str) -> list[str]:
  """Sorted words of an ARPA file's 1-gram section (without <s>, </s>, <unk>)."""
  words, in_unigrams = [], False
  with open(path, encoding="utf-8", errors="replace") as f:
    for line in f:
      line = line.strip()
      if line == "\\1-grams:":
        in_unigrams = True
      elif line.startswith("\\") and in_unigrams:
        break
      elif in_unigrams and line:
        parts = line.split()
        if len(parts) >= 2 and parts[1] not in ("<s>", "</s>", "<unk>"):
          words.append(parts[1])
  return sorted(words)


def load_kenlm(path: str) -> Any:
  """KenLM model of an ARPA or binary file; ConfigError when missing or unreadable."""
  _, kenlm = _require_libraries()
  if not os.path.isfile(path):
    raise ConfigError(f"decoder_params/lm_path: {path} does not exist; build one with "
                      f"scripts/build_lm.py")
  config = kenlm.Config()
  config.show_progress = False
  from open_seq2seq.utils.quiet_start import filtered_native_stderr
  try:
    # KenLM's advice on every ARPA load ("... faster if you build a binary file") would come
    # before our own lines; anything else it prints is kept
    with filtered_native_stderr(lambda line: "build a binary file" in line):
      return kenlm.Model(path, config)
  except (OSError, RuntimeError, UnicodeDecodeError) as e:
    raise ConfigError(f"decoder_params/lm_path: KenLM cannot read {path} "
                      f"({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None


class KenLMScorer:
  """Word scores for pyctcdecode's beam search (its language-model interface).

  Args:
    lm: a ``kenlm.Model``.
    vocabulary: the LM's words, for the partial-word check (None: no check).
    alpha: weight of the natural-log LM probability; beta: bonus per word.
    unk_score_offset: natural-log score of a word (or partial word) outside the LM.
  """

  def __init__(self, lm: Any, vocabulary: Sequence[str] | None, alpha: float, beta: float,
               unk_score_offset: float):
    import kenlm  # pylint: disable=import-outside-toplevel
    self._kenlm, self._model = kenlm, lm
    self._words = sorted(vocabulary) if vocabulary else None
    self.alpha, self.beta, self.unk_score_offset = alpha, beta, unk_score_offset

  @property
  def order(self) -> int:
    return self._model.order

  def get_start_state(self) -> Any:
    state = self._kenlm.State()
    self._model.BeginSentenceWrite(state)
    return state

  def score_partial_token(self, partial: str) -> float:
    if self._words is None:
      return 0.0
    i = bisect.bisect_left(self._words, partial)
    known = i < len(self._words) and self._words[i].startswith(partial)
    return 0.0 if known else self.unk_score_offset

  def score(self, prev_state: Any, word: str, is_last_word: bool = False) -> tuple[float, Any]:
    """(score of ``word`` after ``prev_state`` [and of </s>], the state after ``word``)."""
    if not word:  # pyctcdecode's final call for a hypothesis ending in a space, or empty
      if not is_last_word:
        return 0.0, prev_state
      log10_p = self._model.BaseScore(prev_state, "</s>", self._kenlm.State())
      return self.alpha * LN10 * log10_p, prev_state
    state = self._kenlm.State()
    log10_p = self._model.BaseScore(prev_state, word, state)
    if is_last_word:
      log10_p += self._model.BaseScore(state, "</s>", self._kenlm.State())
    score = self.alpha * LN10 * log10_p + self.beta
    if word not in self._model:
      score += self.unk_score_offset
    return score, state

  def reset_params(self, **params: Any) -> None:
    for key in ("alpha", "beta", "unk_score_offset"):
      if params.get(key) is not None:
        setattr(self, key, float(params[key]))


def available_cores() -> int:
  return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _end_with_parent(parent_pid: int) -> None:
  """Pool worker initializer: the kernel sends SIGTERM when the parent dies (Linux), so
  workers never outlive a process that exits without cleanup (os._exit, SIGKILL)."""
  try:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
  except (OSError, AttributeError):
    pass
  if os.getppid() != parent_pid:  # the parent died before prctl took effect
    os._exit(0)  # pylint: disable=protected-access


def _stop_pool(pool: Any) -> None:
  pool.terminate()
  pool.join()


class CTCBeamSearchDecoder:
  """Batched CTC beam search with optional KenLM fusion, parallel over utterances.

  Args:
    idx2char: symbol of each non-blank class ``0..n-1``; the blank is class ``n`` (last).
      A space separates words; pieces starting with "▁" (SentencePiece) start words.
    beam_width: beams kept per frame.
    lm_path: ARPA or KenLM binary model (None: no LM).
    alpha, beta, unk_score_offset: see the module docstring.
    beam_prune_logp: beams this far (natural log) below the best are dropped each frame.
    token_min_logp: symbols below this log-probability in a frame are not tried, unless best.
    hotwords, hotword_weight: words to favour and the score per occurrence.
    num_workers: processes for a batch (None: one per core, at most the batch size; 0 or
      1: decode in this process).
  """

  def __init__(self, idx2char: Mapping[int, str], beam_width: int = 16,
               lm_path: str | None = None, alpha: float = 0.5, beta: float = 1.0, *,
               unk_score_offset: float = -10.0, beam_prune_logp: float = -10.0,
               token_min_logp: float = -5.0, hotwords: Sequence[str] | None = None,
               hotword_weight: float = 10.0, num_workers: int | None = None):
    pyctcdecode, _ = _require_libraries()
    labels = [idx2char[i] for i in range(len(idx2char))]
    is_bpe = any(label.startswith("\u2581") for label in labels)
    if is_bpe:  # SentencePiece control pieces (<unk>, <s>, </s>) never reach the text
      labels = ["" if label.startswith("<") and label.endswith(">") else label
                for label in labels]
    self.scorer = None
    if lm_path:
      lm, vocabulary = load_kenlm(lm_path), None
      with open(lm_path, "rb") as f:
        if b"\\data\\" in f.read(4096):
          vocabulary = read_arpa_vocabulary(lm_path)
      self.scorer = KenLMScorer(lm, vocabulary, alpha, beta, unk_score_offset)
    self._decoder = pyctcdecode.BeamSearchDecoderCTC(
        pyctcdecode.Alphabet(labels + [""], is_bpe), self.scorer)
    self.num_classes = len(labels) + 1
    self.options = {"beam_width": max(1, int(beam_width)), "beam_prune_logp": beam_prune_logp,
                    "token_min_logp": token_min_logp, "hotwords": list(hotwords or []),
                    "hotword_weight": hotword_weight, "prune_history": False}
    self.num_workers = num_workers
    self._pool, self._pool_size, self._finalizer = None, 0, None
    self._cleanup = weakref.finalize(self, self._decoder.cleanup)

  def set_weights(self, alpha: float, beta: float) -> None:
    """New LM weights (workers are restarted: they hold a copy of the scorer)."""
    if self.scorer is not None:
      self.scorer.reset_params(alpha=alpha, beta=beta)
      self.close_pool()

  # ------------------------------------------------------------------ worker processes
  def _pool_for(self, batch_size: int):
    workers = available_cores() if self.num_workers is None else self.num_workers
    workers = min(workers, batch_size)
    if workers < 2:
      return None
    if self._pool is None or self._pool_size < workers:
      self.close_pool()
      try:  # fork shares the loaded LM; pyctcdecode's workers cannot use spawn
        context = multiprocessing.get_context("fork")
      except ValueError:
        return None
      self._pool = context.Pool(workers, initializer=_end_with_parent, initargs=(os.getpid(),))
      self._pool_size = workers
      self._finalizer = weakref.finalize(self, _stop_pool, self._pool)
    return self._pool

  def close_pool(self) -> None:
    if self._finalizer is not None:
      self._finalizer()
    self._pool, self._pool_size, self._finalizer = None, 0, None

  def close(self) -> None:
    """Stops the workers and releases the LM."""
    self.close_pool()
    self._cleanup()

  def __enter__(self) -> "CTCBeamSearchDecoder":
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()

  # ------------------------------------------------------------------ decoding
  def decode_beams_batch(self, logits: Sequence[np.ndarray], lengths: Sequence[int],
                         top_n: int = 1) -> list[list[tuple[str, float, float]]]:
    """Up to ``top_n`` beams per utterance: (text, CTC log-prob, total score), best first.

    Args:
      logits: [batch, time, classes] (or a list of [time, classes]); unnormalized logits or
        log-probabilities.
      lengths: valid frames of each utterance.
    """
    items = []
    for row, n in zip(logits, lengths):
      row = np.asarray(row[:int(n)], np.float32)
      if row.ndim != 2 or row.shape[-1] != self.num_classes:
        raise DataError(f"CTC decoding: logits of shape {row.shape}, expected "
                        f"[time, {self.num_classes}] (the vocabulary plus the blank)")
      # log-probabilities: pyctcdecode would take rows that sum to 1 for probabilities
      shifted = row - row.max(axis=-1, keepdims=True)
      items.append(shifted - np.log(np.exp(shifted).sum(-1, keepdims=True)))
    results: list = [[("", 0.0, 0.0)] for _ in items]
    todo = [i for i, item in enumerate(items) if len(item)]  # pyctcdecode needs a frame
    beams = self._decoder.decode_beams_batch(self._pool_for(len(todo)),
                                             [items[i] for i in todo], **self.options)
    for i, found in zip(todo, beams):
      results[i] = [(text, float(ctc), float(total)) for text, _, ctc, total in found[:top_n]]
    return results

  def decode_batch(self, logits: Sequence[np.ndarray], lengths: Sequence[int]) -> list[str]:
    """The best transcript of each utterance."""
    return [beams[0][0] for beams in self.decode_beams_batch(logits, lengths)]


def ctc_greedy_decode(logits: np.ndarray, length: int | None = None,
                      blank: int | None = None) -> list[int]:
  """Best path: argmax per frame, merge repeats, drop blanks (default blank: last class)."""
  blank = logits.shape[-1] - 1 if blank is None else blank
  best = np.argmax(logits[:length], axis=-1)
  out, previous = [], None
  for token in best:
    if token != previous and token != blank:
      out.append(int(token))
    previous = token
  return out
