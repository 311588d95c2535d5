#!/usr/bin/env python
"""Ports an OpenSeq2Seq (TF 1) config by renaming its TF 1 names.

    python scripts/port_config.py IN.py -o OUT.py     # write the ported config
    python scripts/port_config.py IN.py               # print it
    python scripts/port_config.py --table             # the renaming table (docs/porting.md)

Every ``tf.contrib.*``, ``tf.layers.*``, ``tf.nn.rnn_cell.*``, TF 1 initializer and
``tf.train.*Optimizer`` name becomes its TF 2 / Keras 3 equivalent
(``open_seq2seq.porting.RENAMES``), ``open_seq2seq`` imports whose path differs here are
rewritten, and the imports the new names need are added; every other byte stays as written.
One note per rename and one warning per untranslatable name (with its line numbers) go to
stderr. Exit status: 0, or 1 with --strict when there were warnings, 2 on errors.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tokenize

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from open_seq2seq import porting  # noqa: E402  pylint: disable=wrong-import-position
from open_seq2seq.errors import WriteError  # noqa: E402  pylint: disable=wrong-import-position
from open_seq2seq.utils.io import atomic_open  # noqa: E402  pylint: disable=wrong-import-position


def write_atomically(path: str, data: bytes) -> None:
  """Writes ``data`` under a temporary name beside ``path``, then renames it into place.

  The file keeps the mode of the one it replaces (0644 for a new one).
  """
  mode = os.stat(path).st_mode & 0o7777 if os.path.exists(path) else 0o644
  with atomic_open(path, binary=True) as f:
    f.write(data)
  os.chmod(path, mode)


def port_file(path: str, check_imports: bool = True) -> tuple[porting.PortResult, str]:
  """Ports the config at ``path``; returns the result and the file's text encoding."""
  with open(path, "rb") as f:
    raw = f.read()
  # porting looks names up in TensorFlow and the project's modules (which import it)
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly(first_op=False)
  # The declared (or default) source encoding; "utf-8-sig" keeps a byte-order mark.
  encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
  result = porting.port_source(raw.decode(encoding),
                               resolve=porting.resolve_import if check_imports else None)
  return result, encoding


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("config", nargs="?", help="the OpenSeq2Seq config to port")
  parser.add_argument("-o", "--output", help="where to write the ported config "
                      "(default: stdout); may be the input itself")
  parser.add_argument("--no-import-check", action="store_true",
                      help="do not check the open_seq2seq imports against this project")
  parser.add_argument("--strict", action="store_true",
                      help="exit with status 1 when a name could not be translated")
  parser.add_argument("--table", action="store_true",
                      help="print the renaming table (Markdown) and exit")
  args = parser.parse_args(argv)
  if args.table:
    print(porting.markdown_table())
    return 0
  if not args.config:
    parser.error("give the config to port (or --table)")
  try:
    result, encoding = port_file(args.config, check_imports=not args.no_import_check)
  except OSError as e:
    print(f"error: {args.config}: {e.strerror}", file=sys.stderr)
    return 2
  except (SyntaxError, UnicodeDecodeError) as e:
    print(f"error: {args.config}: not a Python config: {e}", file=sys.stderr)
    return 2
  for note in result.notes:
    print(f"{args.config}: {note}", file=sys.stderr)
  for warning in result.warnings:
    print(f"{args.config}: warning: {warning}", file=sys.stderr)
  if args.output:
    try:
      write_atomically(args.output, result.text.encode(encoding))
    except OSError as e:
      print(f"error: {args.output}: {e.strerror}", file=sys.stderr)
      return 2
    except WriteError as e:  # a full disk, a file-size limit ... named as such
      print(f"error: {e}", file=sys.stderr)
      return 2
  else:
    sys.stdout.write(result.text)
  return 1 if args.strict and result.warnings else 0


if __name__ == "__main__":
  sys.exit(main())
