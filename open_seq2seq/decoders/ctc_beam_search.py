"""CTC prefix beam search fused with a word n-gram LM (KenLM).

A hypothesis scores

    ln P_ctc(text) + alpha * ln P_lm(words, </s>) + beta * #words
                   + unk_score_offset * (#words the LM does not know) + hotword_weight * #hotwords

which is what OpenSeq2Seq's decoders (Baidu's ``ctc_decoders`` in ``decode.py``, the
DeepSpeech op in the model) computed: KenLM returns log10, converted to natural log before
alpha multiplies it, so tuned alpha/beta values keep their meaning. A word enters the LM when
a space follows it; the last word and ``</s>`` when the hypothesis ends. A partial word that
no LM word starts with also gets ``unk_score_offset`` (ARPA files only: the vocabulary is read
from them; a binary LM checks complete words only), one that starts a hotword a share of
``hotword_weight``. Without an LM only hotwords add to ln P_ctc.

The search (:class:`open_seq2seq.utils.ctc_prefix_search.PrefixBeamSearch`) is the textbook
CTC prefix beam search with that score, pruning nothing within the beam width: without LM
influence (no LM, or alpha = beta = unk_score_offset = 0, no hotwords) it does as well as a
plain beam search of the same width (TensorFlow's ``ctc_beam_search_decoder``) whatever the
outputs look like. ``token_min_logp`` and ``beam_prune_logp`` prune more, if asked to.

A batch is decoded in worker processes forked once per decoder (the LM is shared with
them, not copied) and stopped when the decoder is closed, garbage-collected, or its process
exits in any way (the workers ask the kernel to end them with their parent).
"""

from __future__ import annotations

import ctypes
import itertools
import multiprocessing
import os
import signal
import weakref
from typing import Any, Mapping, Sequence

import numpy as np

from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.utils.ctc_prefix_search import PrefixBeamSearch, WordScorer
_PR_SET_PDEATHSIG = 1


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
  try:
    import kenlm  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise ConfigError("decoder_params/use_language_model: LM decoding needs kenlm: "
                      "pip install kenlm") from None
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


_SEARCHES: dict[int, PrefixBeamSearch] = {}  # of this process's decoders: forked workers
_TOKENS = itertools.count()  # find theirs here


def _decode_in_worker(task: tuple[int, np.ndarray, int]) -> list[tuple[str, float, float]]:
  token, log_probs, top_n = task
  return _SEARCHES[token].decode(log_probs, top_n)


class CTCBeamSearchDecoder:
  """Batched CTC beam search with optional KenLM fusion, parallel over utterances.

  Args:
    idx2char: symbol of each non-blank class ``0..n-1``; the blank is class ``n`` (last).
      A space separates words; pieces starting with "▁" (SentencePiece) start words.
    beam_width: prefixes kept per frame.
    lm_path: ARPA or KenLM binary model (None: no LM).
    alpha, beta, unk_score_offset: see the module docstring.
    beam_prune_logp, token_min_logp: optional pruning, see :class:`PrefixBeamSearch`.
    hotwords, hotword_weight: words to favour and the score per occurrence.
    num_workers: processes for a batch (None: one per core, at most the batch size; 0 or
      1: decode in this process).
  """

  def __init__(self, idx2char: Mapping[int, str], beam_width: int = 16,
               lm_path: str | None = None, alpha: float = 0.5, beta: float = 1.0, *,
               unk_score_offset: float = -10.0, beam_prune_logp: float | None = None,
               token_min_logp: float | None = None, hotwords: Sequence[str] | None = None,
               hotword_weight: float = 10.0, num_workers: int | None = None):
    lm, vocabulary = None, None
    if lm_path:
      lm = load_kenlm(lm_path)
      with open(lm_path, "rb") as f:
        if b"\\data\\" in f.read(4096):
          vocabulary = read_arpa_vocabulary(lm_path)
    self.scorer = WordScorer(lm, vocabulary, alpha, beta, unk_score_offset,
                             list(hotwords or []), hotword_weight)
    labels = [idx2char[i] for i in range(len(idx2char))]
    self.search = PrefixBeamSearch(labels, self.scorer, beam_width, token_min_logp,
                                   beam_prune_logp)
    self.num_classes, self.num_workers = len(labels) + 1, num_workers
    self._token = next(_TOKENS)
    _SEARCHES[self._token] = self.search
    self._forget = weakref.finalize(self, _SEARCHES.pop, self._token, None)
    self._pool, self._pool_size, self._finalizer = None, 0, None

  def set_weights(self, alpha: float, beta: float) -> None:
    """New LM weights (workers are restarted: they hold a copy of the scorer)."""
    self.scorer.alpha, self.scorer.beta = float(alpha), float(beta)
    self.close_pool()

  # ------------------------------------------------------------------ worker processes
  def _pool_for(self, batch_size: int):
    workers = available_cores() if self.num_workers is None else self.num_workers
    workers = min(workers, batch_size)
    if workers < 2:
      return None
    if self._pool is None or self._pool_size < workers:
      self.close_pool()
      try:  # fork shares the loaded LM with the workers
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
    self._forget()

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
      row = np.asarray(row[:int(n)], np.float64)
      if row.ndim != 2 or row.shape[-1] != self.num_classes:
        raise DataError(f"CTC decoding: logits of shape {row.shape}, expected "
                        f"[time, {self.num_classes}] (the vocabulary plus the blank)")
      shifted = row - row.max(axis=-1, keepdims=True)
      items.append(shifted - np.log(np.exp(shifted).sum(-1, keepdims=True)))
    results: list = [[("", 0.0, 0.0)] for _ in items]
    todo = [i for i, item in enumerate(items) if len(item)]
    tasks = [(self._token, items[i], top_n) for i in todo]
    pool = self._pool_for(len(todo))
    for i, beams in zip(todo, pool.map(_decode_in_worker, tasks) if pool else
                        map(_decode_in_worker, tasks)):
      results[i] = [(text, float(ctc), float(total)) for text, ctc, total in beams]
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
