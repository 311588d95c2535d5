#!/usr/bin/env python
"""Runs a model exported by ``run.py --mode=export`` on a file of inputs, with TensorFlow
alone (this script never imports open_seq2seq: it is what a server does with the export).

    python scripts/run_export.py EXPORT_DIR INPUTS [--output FILE] [--batch_size N]

INPUTS holds one input per line: a sentence for a text input, the path of a WAV file for a
waveform input, the path of an image file for an image input. Each output line is the
signature's first output (text, class name) for one input, in input order, or with
``--json`` every output of that input as one JSON object; ``--output`` defaults to stdout.

The export's metadata names the Python packages whose ops its graph uses (``tensorflow_text``
for in-graph SentencePiece); only packages of :data:`KNOWN_OPS_LIBRARIES` are imported, so an
export cannot make this script import code of its choosing. An error (a missing or broken
export, an unreadable input) is one ``error:`` line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

METADATA_FILE = os.path.join("assets.extra", "open_seq2seq.json")
#: Packages an export may ask to import (they register the custom ops its graph uses), and
#: how to get each one.
KNOWN_OPS_LIBRARIES = {"tensorflow_text": "pip install tensorflow-text"}


class ExportError(Exception):
  """What the user did wrong, in one line (printed as ``error: ...``, exit status 2)."""


def first_line(error: BaseException) -> str:
  lines = [line.strip() for line in str(error).splitlines() if line.strip()]
  return lines[0][:300] if lines else type(error).__name__


def parse_args(argv: list[str]) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("export_dir", help="directory written by run.py --mode=export")
  parser.add_argument("inputs", help="one input per line (sentence, or WAV path)")
  parser.add_argument("--output", help="output file (default: stdout)")
  parser.add_argument("--batch_size", type=int, default=32, help="inputs per call")
  parser.add_argument("--json", action="store_true",
                      help="one JSON object per input with every output")
  args = parser.parse_args(argv)
  if args.batch_size < 1:
    parser.error(f"--batch_size must be at least 1, got {args.batch_size}")
  return args


def read_metadata(export_dir: str) -> dict:
  """The serving signature's description from the export's metadata file."""
  path = os.path.join(export_dir, METADATA_FILE)
  try:
    with open(path, encoding="utf-8") as f:
      metadata = json.load(f)
    signature = metadata["signatures"]["serving_default"]
    inputs = [n for n in signature["inputs"] if n != "length"]
    if len(inputs) != 1 or not signature["outputs"]:
      raise ValueError("expected one input and at least one output")
    imports = list(signature.get("required_imports", []))
  except FileNotFoundError:
    raise ExportError(f"{path} does not exist: {export_dir} was not written by "
                      f"run.py --mode=export") from None
  except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
    raise ExportError(f"{path} is unreadable or not open_seq2seq's export metadata "
                      f"({type(e).__name__}: {first_line(e)}); export the model again") from None
  unknown = [m for m in imports if m not in KNOWN_OPS_LIBRARIES]
  if unknown:
    raise ExportError(f"{path} asks to import {', '.join(map(str, unknown))}, which is not a "
                      f"known ops library ({', '.join(KNOWN_OPS_LIBRARIES)}); this script "
                      f"imports nothing else")
  return signature


def import_ops_libraries(signature: dict) -> None:
  """Imports the known packages whose ops the saved graph uses (registering them)."""
  for module in signature.get("required_imports", []):
    try:
      importlib.import_module(module)
    except ImportError as e:
      raise ExportError(f"the export's graph uses ops of {module}, which cannot be imported "
                        f"({first_line(e)}): {KNOWN_OPS_LIBRARIES[module]}") from None


def load_serving(tf, export_dir: str):
  """The export's ``serving_default`` function."""
  try:
    return tf.saved_model.load(export_dir).signatures["serving_default"]
  except Exception as e:  # pylint: disable=broad-except  (a broken file raises many kinds)
    raise ExportError(f"{export_dir}: the SavedModel cannot be loaded ({type(e).__name__}: "
                      f"{first_line(e)}); it is incomplete or corrupt: export the model again"
                      ) from None


def read_lines(path: str) -> list[str]:
  try:
    with open(path, encoding="utf-8") as f:
      return [line.rstrip("\n") for line in f]
  except FileNotFoundError:
    raise ExportError(f"inputs file {path} does not exist") from None
  except UnicodeDecodeError as e:
    raise ExportError(f"inputs file {path}: not UTF-8 (bad byte at offset {e.start})") from None
  except OSError as e:
    raise ExportError(f"inputs file {path} cannot be read ({e.strerror})") from None


def read_file(tf, path: str, what: str, where: str):
  """The bytes of an input file named on line ``where`` of the inputs."""
  try:
    return tf.io.read_file(path)
  except tf.errors.OpError as e:
    raise ExportError(f"{where}: {what} file {path!r} cannot be read ({first_line(e)})"
                      ) from None


def load_inputs(tf, name: str, spec: dict, lines: list[str], signature: dict, first: int,
                inputs_path: str):
  """One batch of the signature's input ``name`` from input-file lines ``first``, ...."""
  where = [f"{inputs_path}:{first + 1 + i}" for i in range(len(lines))]
  if name == "image":
    return tf.constant([read_file(tf, path, "image", at).numpy()
                        for path, at in zip(lines, where)])
  if spec["dtype"] == "string":
    return tf.constant(lines)
  if name == "waveform":
    waves = []
    for path, at in zip(lines, where):
      try:
        audio, rate = tf.audio.decode_wav(read_file(tf, path, "WAV", at), desired_channels=1)
      except tf.errors.OpError as e:
        raise ExportError(f"{at}: {path} is not a readable WAV file ({first_line(e)})"
                          ) from None
      if int(rate) != signature["sample_rate"]:
        raise ExportError(f"{at}: {path} is sampled at {int(rate)} Hz; the model hears "
                          f"{signature['sample_rate']} Hz (resample it first)")
      waves.append(audio[:, 0])
    return tf.ragged.stack(waves).to_tensor(), tf.constant([len(w) for w in waves], tf.int32)
  raise ExportError(f"this script does not know how to read input {name!r} "
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
  try:
    return serve_inputs(parse_args(sys.argv[1:] if argv is None else argv))
  except ExportError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2


def serve_inputs(args: argparse.Namespace) -> int:
  signature = read_metadata(args.export_dir)
  lines = read_lines(args.inputs)  # before the (slow) load: a wrong path fails at once
  import_ops_libraries(signature)
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  serve = load_serving(tf, args.export_dir)
  (name, spec), = [(n, s) for n, s in signature["inputs"].items() if n != "length"]
  first_output = next(iter(signature["outputs"]))
  results = []
  for start in range(0, len(lines), args.batch_size):
    chunk = lines[start:start + args.batch_size]
    value = load_inputs(tf, name, spec, chunk, signature, start, args.inputs)
    feed = {name: value[0], "length": value[1]} if isinstance(value, tuple) else {name: value}
    try:
      out = {key: value.numpy() for key, value in serve(**feed).items()}
    except tf.errors.OpError as e:  # e.g. bytes that are no image
      raise ExportError(f"{args.inputs}:{start + 1}-{start + len(chunk)}: the model cannot "
                        f"read these inputs ({first_line(e)})") from None
    for i in range(len(chunk)):
      if args.json:
        results.append(json.dumps({key: plain(out[key][i]) for key in signature["outputs"]}))
      else:
        results.append(str(plain(out[first_output][i])))
  text = "".join(r + "\n" for r in results)
  if args.output:
    try:
      with open(args.output, "w", encoding="utf-8") as f:
        f.write(text)
    except OSError as e:
      raise ExportError(f"--output {args.output} cannot be written ({e.strerror})") from None
  else:
    sys.stdout.write(text)
  return 0


if __name__ == "__main__":
  sys.exit(main())
