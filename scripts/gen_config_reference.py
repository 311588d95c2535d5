#!/usr/bin/env python
"""Writes docs/config_reference.md from the components' parameter declarations, then
open_seq2seq/params_index.json (scripts/gen_params_index.py)."""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main(argv: list[str] | None = None) -> int:
  argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0]).parse_args(argv)
  # pylint: disable=import-outside-toplevel
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()
  from open_seq2seq.reference import config_reference
  from open_seq2seq.utils.io import atomic_write_text
  path = os.path.join(ROOT, "docs", "config_reference.md")
  atomic_write_text(path, config_reference())
  print(f"wrote {path}")
  # the declarations' other output: the index run.py reads before TensorFlow (config_static.py)
  from gen_params_index import write_index  # scripts/ is on sys.path: this script runs there
  write_index()
  return 0


if __name__ == "__main__":
  sys.exit(main())
