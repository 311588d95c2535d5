#!/usr/bin/env python
"""Tunes CTC + n-gram LM decoding offline: a WER table over alpha, beta and beam width.

    python run.py --config_file=... --mode=infer --infer_output_file=out.csv \\
        --decoder_params/infer_logits_to_pickle=True    # writes <logdir>/infer_logits.npz
    python scripts/decode.py --logits experiments/x/infer_logits.npz \\
        --labels data/dev.csv --lm lm/3-gram.arpa \\
        --alpha 0:3:0.5 --beta 0,1,2 --beam_width 64,128 [--dump_all_beams_to beams.csv]

``--logits`` holds every utterance's logits [time, classes] by ``wav_filename``: the ``.npz``
that the CTC decoder's ``infer_logits_to_pickle`` writes, read without unpickling anything
(a data file cannot run code), or, with ``--allow_pickle``, OpenSeq2Seq's pickle of
``{wav_filename: logits}`` (loading a pickle runs the code it holds: only your own files).
``--labels`` is a speech CSV (``wav_filename,wav_filesize,transcript``, the data layer's
format) whose rows are matched to the logits by ``wav_filename``. Transcripts are normalized
as the data layer does (lowercased for a lowercase ``--vocab``, whitespace collapsed).
Values are comma lists or ``start:stop:step`` ranges (stop included). The decoder is the model's
(:class:`open_seq2seq.decoders.ctc_beam_search.CTCBeamSearchDecoder`), so the best alpha and
beta go into ``decoder_params`` as they are. Prints greedy (best-path) WER, one row per grid
point, and the best point; ``--dump_all_beams_to`` writes the best point's n-best list
(``wav_filename,rank,ctc_log_prob,score,transcript``). An error is one ``error:`` line on
stderr and exit status 2.
"""

from __future__ import annotations

# The open_seq2seq imports (which load TensorFlow) wait until the arguments are known.
# pylint: disable=import-outside-toplevel
import argparse
import csv
import math
import os
import pickle
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
DEFAULT_VOCAB = os.path.join(ROOT, "open_seq2seq", "test_utils", "toy_speech_data", "vocab.txt")


def parse_values(text: str, kind: type = float) -> list:
  """``"0.5,1,2"`` or ``"0:2:0.5"`` (stop included) -> a list of ``kind`` values."""
  try:
    if ":" in text:
      start, stop, step = (float(v) for v in text.split(":"))
      if step <= 0:
        raise ValueError
      count = int(math.floor((stop - start) / step + 1e-9)) + 1
      values = [start + i * step for i in range(max(count, 0))]
    else:
      values = [float(v) for v in text.split(",") if v.strip()]
  except ValueError:
    raise SystemExit(f"error: {text!r}: expected a comma list or start:stop:step (step > 0)"
                     ) from None
  if not values:
    raise SystemExit(f"error: {text!r}: no values")
  return [kind(round(v)) if kind is int else round(v, 10) for v in values]


ZIP_MAGIC = b"PK\x03\x04"  # an .npz is a zip of .npy files
PICKLE_PROTOCOL_2_OR_LATER = b"\x80"  # how every pickle since Python 2.3 starts
WRITTEN_BY = "run.py --mode=infer writes it with decoder_params/infer_logits_to_pickle=True"


def load_logits(path: str, allow_pickle: bool = False) -> dict:
  """``{wav_filename: logits}`` of an .npz (or, if allowed, of OpenSeq2Seq's pickle)."""
  from open_seq2seq.errors import DataError
  from open_seq2seq.outputs import read_npz_arrays
  try:
    with open(path, "rb") as f:
      start = f.read(4)
  except OSError as e:
    raise SystemExit(f"error: --logits {path}: cannot be read ({e.strerror})") from None
  if start == ZIP_MAGIC:
    try:
      return read_npz_arrays(path)
    except DataError as e:
      raise SystemExit(f"error: --logits {e}; {WRITTEN_BY}") from None
  if not allow_pickle:
    if start.startswith(PICKLE_PROTOCOL_2_OR_LATER):
      raise SystemExit(f"error: --logits {path} is a pickle, and loading a pickle runs the "
                       f"code it holds: pass --allow_pickle only if you wrote it yourself "
                       f"(or re-run infer: it writes an .npz)")
    raise SystemExit(f"error: --logits {path} is not an .npz of logits; {WRITTEN_BY}")
  try:
    with open(path, "rb") as f:
      logits = pickle.load(f)
  except Exception as e:  # pylint: disable=broad-except  (anything a broken pickle raises)
    raise SystemExit(f"error: --logits {path}: not a readable pickle ({type(e).__name__}: "
                     f"{str(e).splitlines()[0] if str(e) else ''})") from None
  if not isinstance(logits, dict):
    raise SystemExit(f"error: --logits {path}: expected a dict {{wav_filename: logits}} "
                     f"(OpenSeq2Seq's infer_logits_to_pickle), got {type(logits).__name__}")
  return logits


def load_utterances(logits_path: str, labels_path: str, normalize, allow_pickle: bool = False
                    ) -> tuple[list[str], list[np.ndarray], list[str]]:
  """(wav filenames, logits, normalized transcripts) of the CSV rows, in CSV order."""
  for flag, path in (("--logits", logits_path), ("--labels", labels_path)):
    if not os.path.isfile(path):
      raise SystemExit(f"error: {flag} {path} does not exist")
  logits = load_logits(logits_path, allow_pickle)
  names, rows, references, missing = [], [], [], []
  with open(labels_path, encoding="utf-8", newline="") as f:
    reader = csv.DictReader(f)
    if not {"wav_filename", "transcript"} <= set(reader.fieldnames or []):
      raise SystemExit(f"error: --labels {labels_path}: header must be "
                       f"wav_filename,wav_filesize,transcript")
    for row in reader:
      name = (row["wav_filename"] or "").strip()
      if name not in logits:
        missing.append(name)
        continue
      names.append(name)
      try:
        rows.append(np.asarray(logits[name], np.float32))
      except (TypeError, ValueError):
        raise SystemExit(f"error: --logits {logits_path}: the logits of {name} are not an "
                         f"array of numbers") from None
      references.append(normalize(row["transcript"] or ""))
  if missing:
    raise SystemExit(f"error: {len(missing)} of {len(missing) + len(names)} rows of "
                     f"{labels_path} have no logits in {logits_path} (first: {missing[0]}); "
                     f"give the CSV the infer run read")
  if not names:
    raise SystemExit(f"error: --labels {labels_path} has no rows")
  return names, rows, references


def error_rates(references: list[str], hypotheses: list[str]) -> tuple[float, float]:
  """(WER, CER) over the whole set."""
  from open_seq2seq.utils.metrics import edit_distance
  words = chars = word_edits = char_edits = 0
  for ref, hyp in zip(references, hypotheses):
    ref_words, hyp_words = ref.split(), hyp.split()
    word_edits += edit_distance(ref_words, hyp_words)
    char_edits += edit_distance(" ".join(ref_words), " ".join(hyp_words))
    words, chars = words + len(ref_words), chars + len(" ".join(ref_words))
  return word_edits / max(words, 1), char_edits / max(chars, 1)


def tune(logits: list[np.ndarray], references: list[str], idx2char: dict[int, str],
         lm_path: str, alphas: list[float], betas: list[float], beam_widths: list[int],
         top_n: int = 1, log=print, **decoder_options) -> dict:
  """Decodes every utterance at every grid point; returns the rows and the best point.

  Returns:
    ``{"rows": [(beam_width, alpha, beta, wer, cer)], "best": that row with the lowest WER
    (then CER), "beams": the best point's n-best lists [(text, ctc log-prob, score)]}``.
  """
  from open_seq2seq.decoders.ctc_beam_search import CTCBeamSearchDecoder
  lengths = [len(l) for l in logits]
  rows, best, best_beams = [], None, None
  for beam_width in beam_widths:
    with CTCBeamSearchDecoder(idx2char, beam_width, lm_path, alphas[0], betas[0],
                              **decoder_options) as decoder:
      for alpha in alphas:
        for beta in betas:
          start = time.monotonic()
          decoder.set_weights(alpha, beta)
          beams = decoder.decode_beams_batch(logits, lengths, top_n=top_n)
          wer, cer = error_rates(references, [b[0][0] for b in beams])
          row = (beam_width, alpha, beta, wer, cer)
          rows.append(row)
          log(f"{beam_width:>6} {alpha:>7.3f} {beta:>7.3f} {wer:>8.4f} {cer:>8.4f} "
              f"{len(logits) / (time.monotonic() - start):>10.1f}")
          if best is None or (wer, cer) < (best[3], best[4]):
            best, best_beams = row, beams
  return {"rows": rows, "best": best, "beams": best_beams}


def dump_beams(path: str, names: list[str], beams: list) -> None:
  from open_seq2seq.utils.io import atomic_open
  with atomic_open(path) as f:
    writer = csv.writer(f, lineterminator="\n")
    writer.writerow(["wav_filename", "rank", "ctc_log_prob", "score", "transcript"])
    for name, found in zip(names, beams):
      for rank, (text, ctc, score) in enumerate(found, 1):
        writer.writerow([name, rank, f"{ctc:.4f}", f"{score:.4f}", text])


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
  parser.add_argument("--logits", required=True,
                      help="the .npz of logits that infer writes (infer_logits_to_pickle)")
  parser.add_argument("--allow_pickle", action="store_true",
                      help="also read OpenSeq2Seq's pickle of {wav_filename: logits}; loading "
                           "a pickle runs any code it holds: load only files you wrote")
  parser.add_argument("--labels", required=True, help="CSV with wav_filename and transcript")
  parser.add_argument("--lm", required=True, help="ARPA or KenLM binary language model")
  parser.add_argument("--vocab", default=DEFAULT_VOCAB,
                      help="the model's character vocabulary (default: OpenSeq2Seq's)")
  parser.add_argument("--alpha", default="0.5", help="LM weights (default 0.5)")
  parser.add_argument("--beta", default="1.0", help="word insertion bonuses (default 1.0)")
  parser.add_argument("--beam_width", default="128", help="beam widths (default 128)")
  parser.add_argument("--unk_score_offset", type=float, default=-10.0)
  # None, as the model's decoder (decoder_params): no pruning inside the beam width
  parser.add_argument("--beam_prune_logp", type=float, default=None)
  parser.add_argument("--token_min_logp", type=float, default=None)
  parser.add_argument("--num_workers", type=int, default=None,
                      help="decoding processes (default: one per core)")
  parser.add_argument("--dump_all_beams_to", help="CSV of the best point's n-best lists")
  parser.add_argument("--top_n", type=int, default=10, help="beams per utterance to dump")
  args = parser.parse_args(argv)
  if not os.path.isfile(args.lm):
    raise SystemExit(f"error: --lm {args.lm} does not exist; build one with "
                     f"scripts/build_lm.py")
  alphas, betas = parse_values(args.alpha), parse_values(args.beta)
  beam_widths = parse_values(args.beam_width, int)

  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly(first_op=False)  # the beam search forks its workers
  from open_seq2seq.data.speech2text.targets import TargetEncoder
  from open_seq2seq.decoders.ctc_beam_search import ctc_greedy_decode
  from open_seq2seq.errors import OpenSeq2SeqError
  try:
    targets = TargetEncoder(args.vocab)
  except OpenSeq2SeqError as e:
    raise SystemExit(f"error: --vocab: {e}") from None
  names, logits, references = load_utterances(args.logits, args.labels, targets.normalize,
                                              args.allow_pickle)
  bad = [n for n, l in zip(names, logits) if l.ndim != 2 or l.shape[1] != targets.vocab_size]
  if bad:
    raise SystemExit(f"error: logits of {bad[0]} have shape "
                     f"{logits[names.index(bad[0])].shape}; --vocab {args.vocab} gives "
                     f"{targets.vocab_size} classes (symbols + blank): pass the model's vocab")
  greedy = [targets.decode(ctc_greedy_decode(l)) for l in logits]
  wer, cer = error_rates(references, greedy)
  print(f"{len(names)} utterances; greedy (no LM): WER {wer:.4f}, CER {cer:.4f}")
  print(f"{'beam':>6} {'alpha':>7} {'beta':>7} {'WER':>8} {'CER':>8} {'utt/s':>10}", flush=True)
  try:
    result = tune(logits, references, targets.idx2char, args.lm, alphas, betas, beam_widths,
                  top_n=args.top_n if args.dump_all_beams_to else 1,
                  log=lambda line: print(line, flush=True),
                  unk_score_offset=args.unk_score_offset, beam_prune_logp=args.beam_prune_logp,
                  token_min_logp=args.token_min_logp, num_workers=args.num_workers)
  except OpenSeq2SeqError as e:
    raise SystemExit(f"error: {e}") from None
  beam_width, alpha, beta, wer, cer = result["best"]
  print(f"best: alpha={alpha:g} beta={beta:g} beam_width={beam_width}: "
        f"WER {wer:.4f}, CER {cer:.4f}")
  if args.dump_all_beams_to:
    dump_beams(args.dump_all_beams_to, names, result["beams"])
    print(f"wrote the best point's beams to {args.dump_all_beams_to}")
  return 0


def run(argv: list[str] | None = None) -> int:
  """:func:`main` with its errors (``SystemExit("error: ...")``) as one line and status 2."""
  try:
    return main(argv)
  except SystemExit as e:
    if isinstance(e.code, str):
      print(e.code, file=sys.stderr)
      return 2
    raise


if __name__ == "__main__":
  sys.exit(run())
