#!/usr/bin/env python
"""Entry point: python run.py --config_file=CONFIG --mode=train_eval [--key/sub_key=value ...]"""

import sys

from open_seq2seq.process_defaults import apply_process_defaults

apply_process_defaults()  # before TensorFlow is imported: see open_seq2seq/process_defaults.py

from open_seq2seq.cli import main  # noqa: E402  pylint: disable=wrong-import-position

if __name__ == "__main__":
  sys.exit(main())
