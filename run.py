#!/usr/bin/env python
"""Entry point: python run.py --config_file=CONFIG --mode=train_eval [--key/sub_key=value ...]"""

import sys

from open_seq2seq.cli import main

if __name__ == "__main__":
  sys.exit(main())
