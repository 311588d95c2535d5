#!/usr/bin/env python
"""Writes docs/config_reference.md from the components' parameter declarations."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from open_seq2seq.utils.io import atomic_write_text  # noqa: E402
from open_seq2seq.reference import config_reference  # noqa: E402

if __name__ == "__main__":
  path = os.path.join(ROOT, "docs", "config_reference.md")
  atomic_write_text(path, config_reference())
  print(f"wrote {path}")
  # the declarations' other output: the index run.py reads before TensorFlow (config_static.py)
  from gen_params_index import write_index  # scripts/ is on sys.path: this script runs there
  write_index()
