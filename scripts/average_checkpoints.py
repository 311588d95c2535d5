#!/usr/bin/env python
"""Averages the model weights of the last N checkpoints of a run into one checkpoint.

    python scripts/average_checkpoints.py --logdir RUN --last_n 5 --output_dir RUN-avg5
    python scripts/average_checkpoints.py --checkpoints RUN/ckpt-800 RUN/ckpt-1000 \\
        --output_dir RUN-avg
    python run.py --config_file=CONFIG --mode=eval --logdir=RUN-avg

Floating-point model variables (and the moving averages of a run trained with
moving_average_decay) are averaged (in float64); everything else (optimizer state,
step counters, data position, integer tensors) comes from the newest checkpoint, whose name
the result keeps. OUT gets the run's resolved config (config.txt, config.yaml) and
averaged.json (which checkpoints went in). Exit status: 0, or 2 with one line on errors.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# pylint: disable-next=wrong-import-position
from open_seq2seq.errors import OpenSeq2SeqError  # noqa: E402

EXIT_USER_ERROR = 2


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      description="Average the model weights of several checkpoints of one run.")
  which = parser.add_mutually_exclusive_group(required=True)
  which.add_argument("--last_n", type=int,
                     help="Average the newest N checkpoints of --logdir.")
  which.add_argument("--checkpoints", nargs="+", metavar="PATH",
                     help="Average these checkpoints (prefixes such as RUN/ckpt-1000, or their "
                          ".index files); the one with the highest step counts as the newest.")
  parser.add_argument("--logdir", help="Run directory (with --last_n).")
  parser.add_argument("--output_dir", required=True,
                      help="New directory for the averaged checkpoint (a run directory that "
                           "--mode=eval/infer --logdir=OUT reads).")
  return parser


def main(argv: list[str] | None = None) -> int:
  parser = build_parser()
  args = parser.parse_args(argv)
  if args.last_n is not None and not args.logdir:
    parser.error("--last_n needs --logdir")
  if args.checkpoints is not None and args.logdir:
    parser.error("--logdir goes with --last_n; --checkpoints names the checkpoints itself")
  from open_seq2seq.utils.io import exit_if_unwritable  # pylint: disable=import-outside-toplevel
  exit_if_unwritable(args.output_dir, "--output_dir", directory=True)
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()  # after argparse: --help and argument errors need no TensorFlow
  from open_seq2seq.training import averaging  # pylint: disable=import-outside-toplevel
  try:
    if args.last_n is not None:
      checkpoints = averaging.last_checkpoints(args.logdir, args.last_n)
    else:
      checkpoints = averaging.sorted_checkpoints(args.checkpoints)
    result = averaging.average_checkpoints(checkpoints, args.output_dir)
  except OpenSeq2SeqError as e:
    print(f"error: {e}", file=sys.stderr)
    return EXIT_USER_ERROR
  print(f"averaged {len(result.sources)} checkpoint(s): {', '.join(result.sources)}")
  shadows = sum(key.startswith(averaging.AVERAGED_PREFIXES[1]) for key in result.averaged)
  print(f"{len(result.averaged) - shadows} model variables averaged" +
        (f" (and their {shadows} moving averages)" if shadows else "") +
        f", {len(result.copied)} other tensors taken from {result.sources[-1]}")
  print(f"wrote {result.path}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
