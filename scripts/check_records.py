#!/usr/bin/env python
"""Finds the damaged records of TFRecord files: checksums that fail, images that do not decode.

    python scripts/check_records.py DATA_DIR            # every *-of-* file in it
    python scripts/check_records.py FILE [FILE ...] [--image_feature image/encoded]

Training stops with one line when TensorFlow meets a damaged record ("a TFRecord file of the
data fails its checksum", "an image of the data does not decode"), but TensorFlow's error
does not say which record it was. This reads every record of every file and prints one line
per damaged one, ``FILE:RECORD: what is wrong`` (records numbered from 0, as the ImageNet data
layer's errors number them), then a summary. A failed checksum ends what can be read of that
file. Exit status: 0 when every record is whole, 1 when some are damaged, 2 with one line on
errors (no such file).
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

EXIT_DAMAGED, EXIT_USER_ERROR = 1, 2


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      description="List the damaged records (bad checksums, undecodable images) of TFRecord "
                  "files.")
  parser.add_argument("paths", nargs="+", metavar="PATH",
                      help="TFRecord files, or directories whose *-of-* files are checked.")
  parser.add_argument("--image_feature", default="image/encoded",
                      help="tf.train.Example feature holding an encoded image (JPEG, PNG), "
                           "decoded to check it; records without it are only read.")
  return parser


def record_files(paths: list[str]) -> list[str]:
  """The files to check: each file given, and the sharded files (``*-of-*``) of each
  directory, sorted."""
  files = []
  for path in paths:
    if os.path.isdir(path):
      found = sorted(glob.glob(os.path.join(path, "*-of-*")))
      if not found:
        raise FileNotFoundError(f"{path}: no sharded TFRecord files (*-of-*) in it")
      files += found
    elif os.path.isfile(path):
      files.append(path)
    else:
      raise FileNotFoundError(f"{path}: no such file or directory")
  return files


def check_file(path: str, image_feature: str) -> tuple[int, list[str]]:
  """Reads every record of ``path``: (records read, one line per damaged record)."""
  import tensorflow as tf
  problems, index = [], 0
  records = iter(tf.data.TFRecordDataset(path))
  while True:
    try:
      record = next(records)
    except StopIteration:
      break
    except tf.errors.DataLossError:
      problems.append(f"{path}:{index}: fails its checksum (or the file is truncated there); "
                      f"the records after it cannot be read")
      break
    problem = _image_problem(record, image_feature)
    if problem:
      problems.append(f"{path}:{index}: {problem}")
    index += 1
  return index, problems


def _image_problem(record, image_feature: str) -> str | None:
  import tensorflow as tf
  example = tf.train.Example()
  try:
    example.ParseFromString(record.numpy())
  except Exception:  # pylint: disable=broad-except  (protobuf's DecodeError)
    return "not a tf.train.Example"
  feature = example.features.feature.get(image_feature)
  if feature is None or not feature.bytes_list.value:
    return None
  try:
    tf.io.decode_image(feature.bytes_list.value[0], expand_animations=False)
  except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError) as e:
    reason = str(e).strip().splitlines()[0]
    reason = reason.split("}}", 1)[-1].split("[Op:", 1)[0].strip()
    return f"{image_feature} does not decode ({reason})"
  return None


def main(argv: list[str] | None = None) -> int:
  args = build_parser().parse_args(argv)
  try:
    files = record_files(args.paths)
  except FileNotFoundError as e:
    print(f"error: {e}", file=sys.stderr)
    return EXIT_USER_ERROR
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()
  total, damaged = 0, 0
  for path in files:
    count, problems = check_file(path, args.image_feature)
    total += count
    damaged += len(problems)
    for line in problems:
      print(line)
  print(f"checked {total} record{'s' * (total != 1)} in {len(files)} "
        f"file{'s' * (len(files) != 1)}: {damaged} damaged")
  return EXIT_DAMAGED if damaged else 0


if __name__ == "__main__":
  sys.exit(main())
