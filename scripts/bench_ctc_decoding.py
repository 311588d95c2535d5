#!/usr/bin/env python
"""Utterances/s of CTC beam search with a 3-gram LM: the former pure-Python decoder vs the
toolkit's numpy prefix beam search + KenLM (one process, and one worker per core).

    python scripts/bench_ctc_decoding.py [--beam_width 128] [--utterances 16]

Logits are synthetic but shaped like an acoustic model's: 2-4 s utterances at 50 frames/s
over OpenSeq2Seq's 29 classes, spelling held-out sentences of the LM's text with blanks
between characters, noisy, with a plausible rival character in 15 % of the frames. The LM is
a 3-gram (scripts/build_lm.py's estimator) of ``--lm_text`` (default: the Austen novels of
scripts/get_lm_data.sh when present, else random digit sentences like the synthetic speech
corpus). The baseline, kept here only for this comparison, is the prefix beam search that
decoded with an LM first (a Python loop over utterances and symbols, in one process).
"""

from __future__ import annotations

# pylint: disable=import-outside-toplevel
import argparse
import collections
import math
import os
import random
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
AUSTEN = os.path.join(ROOT, "data", "austen", "wiki.train.tokens")
ALPHABET = [" "] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["'"]


class LegacyPrefixBeamSearch:
  """The former decoder: prefix beam search in Python, LM via ``lm.score`` (log10) with
  ``alpha * ln P + beta * words``, characters below ``prune`` (natural log) skipped."""

  def __init__(self, beam_width: int, lm, alpha: float, beta: float, prune: float = -12.0):
    self.beam_width, self.lm, self.alpha, self.beta, self.prune = (
        beam_width, lm, alpha, beta, prune)
    self.cache: dict = {}

  def _bonus(self, text: str, final: bool) -> float:
    if not final:
      text = text[:max(text.rfind(" "), 0)]
    if (text, final) not in self.cache:
      words = text.split()
      lm = self.lm.score(" ".join(words), bos=True, eos=final) * math.log(10) if (
          words or final) else 0.0
      self.cache[(text, final)] = self.alpha * lm + self.beta * len(words)
    return self.cache[(text, final)]

  def decode(self, log_probs: np.ndarray) -> str:
    blank = log_probs.shape[-1] - 1
    beams = {"": (0.0, -math.inf)}
    for frame in log_probs:
      candidates = [int(c) for c in np.nonzero(frame > self.prune)[0] if c != blank]
      following = collections.defaultdict(lambda: [-math.inf, -math.inf])
      for prefix, (p_blank, p_char) in beams.items():
        total = np.logaddexp(p_blank, p_char)
        entry = following[prefix]
        entry[0] = np.logaddexp(entry[0], total + frame[blank])
        for c in candidates:
          char, extended = ALPHABET[c], following[prefix + ALPHABET[c]]
          if prefix and prefix[-1] == char:  # a repeat extends only across a blank
            entry[1] = np.logaddexp(entry[1], p_char + frame[c])
            extended[1] = np.logaddexp(extended[1], p_blank + frame[c])
          else:
            extended[1] = np.logaddexp(extended[1], total + frame[c])
      ranked = sorted(following.items(),
                      key=lambda kv: -(np.logaddexp(*kv[1]) + self._bonus(kv[0], False)))
      beams = {k: tuple(v) for k, v in ranked[:self.beam_width]}
    best = max(beams, key=lambda k: np.logaddexp(*beams[k]) + self._bonus(k, True))
    return " ".join(best.split())


def corpus(lm_text: str | None, count: int) -> tuple[list[str], str]:
  """Normalized sentences (at most ``count``) and a description of their source."""
  from build_lm import Normalizer
  normalize = Normalizer(ALPHABET)
  path = lm_text or (AUSTEN if os.path.isfile(AUSTEN) else None)
  if path is None:
    rng = random.Random(0)
    digits = "zero one two three four five six seven eight nine".split()
    return ([" ".join(rng.choice(digits) for _ in range(rng.randint(2, 8)))
             for _ in range(count)], "random digit sentences")
  sentences = []
  with open(path, encoding="utf-8", errors="replace") as f:
    for line in f:
      sentence = normalize(line)
      if len(sentence.split()) >= 3:
        sentences.append(sentence)
      if len(sentences) == count:
        break
  return sentences, os.path.relpath(path, ROOT)


def synthetic_logits(sentence: str, rng: np.random.Generator, frames: int) -> np.ndarray:
  """[frames, 29] logits spelling (a prefix of) ``sentence``: each character 1-3 frames,
  blanks between and around, Gaussian noise, a rival character in 15 % of the frames."""
  blank = len(ALPHABET)
  text = sentence[:frames // 3].rstrip()
  path = []
  for char in text:
    path += [ALPHABET.index(char)] * int(rng.integers(1, 3)) + [blank]
  pad = frames - len(path)
  path = [blank] * (pad // 2) + path + [blank] * (pad - pad // 2)
  logits = rng.normal(0.0, 1.0, size=(frames, blank + 1))
  logits[np.arange(frames), path] += 7.0
  rivals = rng.random(frames) < 0.15
  logits[rivals, rng.integers(0, blank, size=frames)[rivals]] += 6.0
  return logits.astype(np.float32)


def cpu_name() -> str:
  try:
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    return next(l.split(":", 1)[1].strip() for l in out.splitlines() if "Model name" in l)
  except (OSError, StopIteration):
    return "unknown CPU"


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
  parser.add_argument("--beam_width", type=int, default=128)
  parser.add_argument("--utterances", type=int, default=64, help="for the prefix beam search")
  parser.add_argument("--legacy_utterances", type=int, default=6,
                      help="for the slow decoders (the baseline, ours with its pruning); the "
                      "WER column is over these")
  parser.add_argument("--lm_text", help="text for the 3-gram (default: see above)")
  parser.add_argument("--lm_sentences", type=int, default=20000)
  parser.add_argument("--alpha", type=float, default=0.5)
  parser.add_argument("--beta", type=float, default=1.0)
  args = parser.parse_args(argv)

  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly(first_op=False)  # the decoder forks its workers
  import kenlm
  from open_seq2seq.decoders.ctc_beam_search import CTCBeamSearchDecoder, available_cores
  from open_seq2seq.utils.metrics import edit_distance
  sentences, source = corpus(args.lm_text, args.lm_sentences + args.utterances)
  rng = np.random.default_rng(0)
  held_out = sentences[-args.utterances:]
  logits = [synthetic_logits(s, rng, int(rng.integers(100, 201))) for s in held_out]
  references = [s[:len(l) // 3].rstrip() for s, l in zip(held_out, logits)]
  with tempfile.TemporaryDirectory() as tmp:
    lm_path, text_path = os.path.join(tmp, "3-gram.arpa"), os.path.join(tmp, "text.txt")
    with open(text_path, "w", encoding="utf-8") as f:
      f.write("\n".join(sentences[:-args.utterances]) + "\n")
    # built in another process, as a decoding process would find it: the estimator's
    # garbage left in this one would make the forked workers copy pages as they allocate
    built = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "build_lm.py"),
                            "--text", text_path, "--order", "3", "--output", lm_path],
                           capture_output=True, text=True, check=True).stdout.strip()
    print(f"CPU: {cpu_name()} ({available_cores()} cores); LM of {source}: {built}; "
          f"{len(logits)} utterances of "
          f"{min(map(len, logits))}-{max(map(len, logits))} frames x 29 classes; "
          f"beam {args.beam_width}, alpha {args.alpha}, beta {args.beta}")
    rows = []
    subset = logits[:args.legacy_utterances]

    def wer(hypotheses):
      refs = references[:len(subset)]
      return sum(edit_distance(r.split(), h.split()) for r, h in zip(refs, hypotheses)) / \
          sum(len(r.split()) for r in refs)

    config = kenlm.Config()
    config.show_progress = False
    legacy = LegacyPrefixBeamSearch(args.beam_width, kenlm.Model(lm_path, config), args.alpha,
                                    args.beta)
    start = time.monotonic()
    texts = []
    for l in subset:
      shifted = l - l.max(-1, keepdims=True)
      texts.append(legacy.decode(shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))))
    rows.append(("former pure-Python prefix beam (skips symbols below -12)", 1, len(subset),
                 len(subset) / (time.monotonic() - start), wer(texts)))
    runs = [("prefix beam search + KenLM, as configured by default", 1, logits, {}),
            ("prefix beam search + KenLM, as configured by default", available_cores(), logits,
             {}),
            ("prefix beam search + KenLM, pruning like the former", 1, subset,
             {"token_min_logp": -12.0, "beam_prune_logp": -1000.0})]
    for name, workers, batch, options in runs:
      with CTCBeamSearchDecoder(dict(enumerate(ALPHABET)), args.beam_width, lm_path,
                                args.alpha, args.beta, num_workers=workers, **options) as decoder:
        if workers > 1:
          decoder.decode_batch(batch[:2], [len(l) for l in batch[:2]])  # forks the workers
        start = time.monotonic()
        texts = decoder.decode_batch(batch, [len(l) for l in batch])
        rows.append((name, workers, len(batch), len(batch) / (time.monotonic() - start),
                     wer(texts[:len(subset)])))
  print(f"\n| decoder | processes | utterances | utterances/s | WER (first "
        f"{args.legacy_utterances}) |\n|---|---|---|---|---|")
  for name, workers, count, speed, error in rows:
    print(f"| {name} | {workers} | {count} | {speed:.2f} | {error:.3f} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
