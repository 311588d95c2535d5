#!/usr/bin/env python
"""Runs a model exported by ``run.py --mode=export`` on a file of inputs, with TensorFlow
alone (this script never imports open_seq2seq: it is what a server does with the export).

    python scripts/run_export.py EXPORT_DIR INPUTS [--output FILE] [--batch_size N]

INPUTS holds one input per line: a sentence for a text input, the path of a WAV file for a
waveform input, the path of an image file for an image input. Each output line is the
signature's first output (text, class name) for one input, in input order, or with
``--json`` every output of that input as one JSON object; ``--output`` defaults to stdout.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

METADATA_FILE = os.path.join("assets.extra", "open_seq2seq.json")


def parse_args(argv: list[str]) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("export_dir", help="directory written by run.py --mode=export")
  parser.add_argument("inputs", help="one input per line (sentence, or WAV path)")
  parser.add_argument("--output", help="output file (default: stdout)")
  parser.add_argument("--batch_size", type=int, default=32, help="inputs per call")
  parser.add_argument("--json", action="store_true",
                      help="one JSON object per input with every output")
  return parser.parse_args(argv)


def read_metadata(export_dir: str) -> dict:
  path = os.path.join(export_dir, METADATA_FILE)
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except FileNotFoundError:
    sys.exit(f"error: {path} does not exist: {export_dir} was not written by "
             f"run.py --mode=export")


def batches(items: list, size: int):
  for start in range(0, len(items), size):
    yield items[start:start + size]


def load_inputs(tf, name: str, spec: dict, lines: list[str], signature: dict):
  """One batch of the signature's input ``name`` from input-file lines."""
  if name == "image":
    return tf.constant([tf.io.read_file(path).numpy() for path in lines])
  if spec["dtype"] == "string":
    return tf.constant(lines)
  if name == "waveform":
    waves = []
    for path in lines:
      audio, rate = tf.audio.decode_wav(tf.io.read_file(path), desired_channels=1)
      if int(rate) != signature["sample_rate"]:
        sys.exit(f"error: {path} is sampled at {int(rate)} Hz; the model hears "
                 f"{signature['sample_rate']} Hz (resample it first)")
      waves.append(audio[:, 0])
    return tf.ragged.stack(waves).to_tensor(), tf.constant([len(w) for w in waves], tf.int32)
  sys.exit(f"error: this script does not know how to read input {name!r} "
           f"({spec['dtype']} {spec['shape']})")


def plain(value):
  """A numpy output value as JSON-able Python (bytes as UTF-8 text)."""
  if isinstance(value, bytes):
    return value.decode("utf-8")
  if hasattr(value, "tolist"):
    value = value.tolist()
  if isinstance(value, list):
    return [plain(v) for v in value]
  return value


def main(argv: list[str] | None = None) -> int:
  args = parse_args(sys.argv[1:] if argv is None else argv)
  metadata = read_metadata(args.export_dir)
  signature = metadata["signatures"]["serving_default"]
  for module in signature["required_imports"]:
    importlib.import_module(module)  # registers the custom ops the graph uses
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  serve = tf.saved_model.load(args.export_dir).signatures["serving_default"]
  with open(args.inputs, encoding="utf-8") as f:
    lines = [line.rstrip("\n") for line in f]
  (name, spec), = [(n, s) for n, s in signature["inputs"].items() if n != "length"]
  first_output = next(iter(signature["outputs"]))
  results = []
  for chunk in batches(lines, args.batch_size):
    value = load_inputs(tf, name, spec, chunk, signature)
    feed = {name: value[0], "length": value[1]} if isinstance(value, tuple) else {name: value}
    out = {key: value.numpy() for key, value in serve(**feed).items()}
    for i in range(len(chunk)):
      if args.json:
        results.append(json.dumps({key: plain(out[key][i]) for key in signature["outputs"]}))
      else:
        results.append(str(plain(out[first_output][i])))
  text = "".join(r + "\n" for r in results)
  if args.output:
    with open(args.output, "w", encoding="utf-8") as f:
      f.write(text)
  else:
    sys.stdout.write(text)
  return 0


if __name__ == "__main__":
  sys.exit(main())
