#!/usr/bin/env python
"""Runs a model exported by ``run.py --mode=export`` on a file of inputs, with TensorFlow
alone (this script never imports open_seq2seq: it is what a server does with the export).

    python scripts/run_export.py EXPORT_DIR INPUTS [--output FILE] [--output_dir DIR]
                                 [--batch_size N] [--json]

INPUTS holds one input per line: a sentence for a text input, the path of a WAV file for a
waveform input, the path of an image file for an image input, the path of a ``.npy`` file of
mel frames for a vocoder (``mel`` input: a float array ``[frames, num_mels]`` in the layout
of the vocoder's training data, e.g. a Tacotron export's ``spectrogram`` of one sentence cut
to its length, saved with ``numpy.save``). Each output line is the
signature's first output (text, class name) for one input, in input order, or with
``--json`` every output of that input as one JSON object; ``--output`` defaults to stdout.

An export whose metadata names audio outputs (``audio_outputs``: a speech synthesizer or a
vocoder) writes
one 16-bit WAV file per input into ``--output_dir`` (``<line>.wav``: the input's line number,
zero-padded to the widest) and prints one line per file, ``<path> (<seconds> s)``; with
``--json`` the audio output's value is the WAV's path. ``--json`` without ``--output_dir``
gives the raw samples instead.

The export's metadata names the Python packages whose ops its graph uses (``tensorflow_text``
for in-graph SentencePiece); only packages of :data:`KNOWN_OPS_LIBRARIES` are imported, so an
export cannot make this script import code of its choosing.

Errors: a problem with the whole run (a missing or broken export, a missing inputs file, an
output that cannot be written) is one ``error:`` line on stderr and exit status 2, checked
before the slow work where possible. An input that cannot be served (a missing or unreadable
file it names, another sample rate) is one ``error:`` line naming its line; the other inputs
are still served, its output line is empty (``--json``: ``{"error": ...}``; audio: no file)
and the exit status is 1.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
import tempfile

METADATA_FILE = os.path.join("assets.extra", "open_seq2seq.json")
#: Packages an export may ask to import (they register the custom ops its graph uses), and
#: how to get each one.
KNOWN_OPS_LIBRARIES = {"tensorflow_text": "pip install tensorflow-text"}
#: Exit statuses: every input served; some inputs failed (the others served); nothing done.
EXIT_OK, EXIT_SOME_INPUTS_FAILED, EXIT_ERROR = 0, 1, 2
#: Lines TensorFlow's native libraries write to stderr while they load, before its logging is
#: set up (TF_CPP_MIN_LOG_LEVEL cannot silence them): absl lines (severity, date, time, thread,
#: file:line]), their preamble, the CPU-feature notice's second line; and the ERROR line that
#: only informs, said at the first float16 op: oneDNN falls back to Eigen's kernel.
_ABSL_LINE = re.compile(r"^([IWEF])\d{4} \d+:\d+:\d+\.\d+ +\d+ [^\]]+\] ")
_LOADING_NOTICES = ("WARNING: All log messages before absl::InitializeLog() is called",
                    "To enable the following instructions: ")
_ONEDNN_FALLBACK = re.compile(r"oneDNN supports DT_\w+ only on platforms with AVX-512")


class ExportError(Exception):
  """What the user did wrong, in one line (printed as ``error: ...``, exit status 2)."""


class InputError(Exception):
  """One input cannot be served (one ``error:`` line; the others are still served)."""


def first_line(error: BaseException) -> str:
  lines = [line.strip() for line in str(error).splitlines() if line.strip()]
  return lines[0][:300] if lines else type(error).__name__


def parse_args(argv: list[str]) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("export_dir", help="directory written by run.py --mode=export")
  parser.add_argument("inputs", help="one input per line (sentence, or WAV, image or .npy path)")
  parser.add_argument("--output", help="output file (default: stdout)")
  parser.add_argument("--output_dir",
                      help="directory for the WAV files of an export whose output is audio "
                           "(one per input; created if missing)")
  parser.add_argument("--batch_size", type=int, default=32, help="inputs per call")
  parser.add_argument("--json", action="store_true",
                      help="one JSON object per input with every output")
  args = parser.parse_args(argv)
  if args.batch_size < 1:
    parser.error(f"--batch_size must be at least 1, got {args.batch_size}")
  return args


# ----------------------------------------------------------------------------- output files
def unwritable(path: str, directory: bool) -> str | None:
  """Why a file (``directory``: a directory) could not be written at ``path``, or None.
  Missing folders are created when writing, so the nearest existing one must be writable."""
  path = os.path.abspath(path)
  if os.path.exists(path):
    if directory != os.path.isdir(path):
      return "is a regular file, not a directory" if directory else \
          "is a directory, not a file"
    where = path if directory else os.path.dirname(path)
  else:
    where = os.path.dirname(path)
    while not os.path.lexists(where):
      where = os.path.dirname(where)
    if not os.path.isdir(where):
      return f"{where} is a regular file, not a directory"
  try:  # a probe file tells what permission bits do not (read-only filesystems, root)
    fd, probe = tempfile.mkstemp(prefix=".write-check-", dir=where)
  except OSError as e:
    return f"{where} cannot be written ({e.strerror})"
  os.close(fd)
  os.remove(probe)
  return None


def check_outputs(args: argparse.Namespace) -> None:
  """A one-line error for an output path that cannot be written, before any work."""
  for flag, path, directory in (("--output", args.output, False),
                                ("--output_dir", args.output_dir, True)):
    problem = path and unwritable(path, directory)
    if problem:
      raise ExportError(f"{flag} {path}: {problem}; choose another {flag}")


def write_atomically(path: str, data: bytes, flag: str) -> None:
  """Writes ``data`` to a temporary file next to ``path`` and renames it into place, so a
  crash never leaves a half-written file."""
  directory = os.path.dirname(os.path.abspath(path))
  tmp = None
  try:
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp",
                               dir=directory)
    with os.fdopen(fd, "wb") as f:
      f.write(data)
    umask = os.umask(0o022)  # mkstemp's 0600 -> what open() would give
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, path)
  except OSError as e:
    if tmp is not None and os.path.exists(tmp):
      os.remove(tmp)
    raise ExportError(f"{flag}: {path} cannot be written ({e.strerror})") from None


# ----------------------------------------------------------------------------- the export
def read_metadata(export_dir: str) -> dict:
  """The serving signature's description from the export's metadata file."""
  path = os.path.join(export_dir, METADATA_FILE)
  try:
    with open(path, encoding="utf-8") as f:
      metadata = json.load(f)
    signature = metadata["signatures"]["serving_default"]
    inputs = [n for n in signature["inputs"] if n not in length_inputs(signature)]
    if len(inputs) != 1 or not signature["outputs"]:
      raise ValueError("expected one input and at least one output")
    imports = list(signature.get("required_imports", []))
    for name, audio in dict(signature.get("audio_outputs", {})).items():
      if name not in signature["outputs"] or audio["length"] not in signature["outputs"] \
          or int(audio["sample_rate"]) <= 0:
        raise ValueError(f"audio output {name!r} is not one of the outputs")
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


def check_audio_flags(signature: dict, args: argparse.Namespace) -> None:
  """--output_dir is given exactly when the export's outputs are audio (or --json asks for
  the raw samples)."""
  audio = signature.get("audio_outputs", {})
  if audio and not args.output_dir and not args.json:
    raise ExportError(f"this export's output {next(iter(audio))!r} is audio: give "
                      f"--output_dir=DIR for its WAV files (one per input), or --json for "
                      f"the raw samples")
  if args.output_dir and not audio:
    raise ExportError(f"--output_dir: this export's outputs are not audio "
                      f"({', '.join(signature['outputs'])}); leave it out")


def import_ops_libraries(signature: dict) -> None:
  """Imports the known packages whose ops the saved graph uses (registering them)."""
  for module in signature.get("required_imports", []):
    try:
      importlib.import_module(module)
    except ImportError as e:
      raise ExportError(f"the export's graph uses ops of {module}, which cannot be imported "
                        f"({first_line(e)}): {KNOWN_OPS_LIBRARIES[module]}") from None


def _start_up_noise(line: str, level: int) -> bool:
  """Whether ``line`` is one of TensorFlow's start-up lines that ``TF_CPP_MIN_LOG_LEVEL=level``
  would hide (1: INFO, 2: also WARNING and the informational ERROR line)."""
  if level < 1:
    return False
  absl = _ABSL_LINE.match(line)
  return line.startswith(_LOADING_NOTICES) or bool(absl) and (
      "IWEF".index(absl.group(1)) < level or level >= 2 and bool(_ONEDNN_FALLBACK.search(line)))


def import_tensorflow_quietly(signature: dict):
  """TensorFlow and the export's ops libraries, imported (and one float16 op run, to have
  oneDNN's notice said) with file descriptor 2 captured; then every captured line that is not
  start-up noise goes to stderr as it came. open_seq2seq/utils/quiet_start.py does the same
  for the toolkit, which this script does not import."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  level = int(os.environ["TF_CPP_MIN_LOG_LEVEL"]) if \
      os.environ["TF_CPP_MIN_LOG_LEVEL"].isdigit() else 0
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as captured:
    os.dup2(captured.fileno(), 2)
    try:
      import_ops_libraries(signature)
      import tensorflow as tf  # pylint: disable=import-outside-toplevel
      with tf.device("/CPU:0"):
        tf.matmul(tf.ones([1, 1], tf.float16), tf.ones([1, 1], tf.float16))
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      captured.seek(0)
      kept = [line for line in captured.read().decode("utf-8", "replace").splitlines()
              if not _start_up_noise(line, level)]
      if kept:
        sys.stderr.write("\n".join(kept) + "\n")
        sys.stderr.flush()
  return tf


def load_serving(tf, export_dir: str):
  """The export's ``serving_default`` function."""
  try:
    return tf.saved_model.load(export_dir).signatures["serving_default"]
  except Exception as e:  # pylint: disable=broad-except  (a broken file raises many kinds)
    raise ExportError(f"{export_dir}: the SavedModel cannot be loaded ({type(e).__name__}: "
                      f"{first_line(e)}); it is incomplete or corrupt: export the model again"
                      ) from None


# ----------------------------------------------------------------------------- inputs
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


def length_inputs(signature: dict) -> set[str]:
  """The inputs that give the lengths of another (``length``, ``<input>_length``)."""
  names = signature["inputs"]
  return {n for n in names if n == "length" or (n.endswith("_length") and
                                                  n[:-len("_length")] in names)}


def input_kind(name: str, spec: dict) -> str:
  """How the signature's input is read from a line: "image", "text", "waveform" or
  "mel"."""
  if name == "image":
    return "image"
  if spec["dtype"] == "string":
    return "text"
  if name == "waveform":
    return "waveform"
  if name == "mel" and spec["dtype"] == "float32":
    return "mel"
  raise ExportError(f"this script does not know how to read input {name!r} "
                    f"({spec['dtype']} {spec['shape']})")


def read_file(tf, path: str, what: str, where: str):
  """The bytes of an input file named on line ``where`` of the inputs."""
  try:
    return tf.io.read_file(path)
  except tf.errors.OpError as e:
    raise InputError(f"{where}: {what} file {path!r} cannot be read ({first_line(e)})"
                     ) from None


def load_input(tf, kind: str, line: str, signature: dict, where: str):
  """One input's value from its line (raises :class:`InputError`)."""
  if kind == "text":
    return line
  if kind == "image":
    return read_file(tf, line, "image", where).numpy()
  if kind == "mel":
    return load_mel(line, signature, where)
  try:
    audio, rate = tf.audio.decode_wav(read_file(tf, line, "WAV", where), desired_channels=1)
  except tf.errors.OpError as e:
    raise InputError(f"{where}: {line} is not a readable WAV file ({first_line(e)})") from None
  if int(rate) != signature["sample_rate"]:
    raise InputError(f"{where}: {line} is sampled at {int(rate)} Hz; the model hears "
                     f"{signature['sample_rate']} Hz (resample it first)")
  return audio[:, 0]


def load_mel(path: str, signature: dict, where: str):
  """float32 mel frames ``[frames, num_mels]`` from the ``.npy`` file ``path``."""
  import numpy as np  # pylint: disable=import-outside-toplevel  (TensorFlow's own dependency)
  num_mels = int(signature["num_mels"])
  try:
    mel = np.load(path, allow_pickle=False)
  except FileNotFoundError:
    raise InputError(f"{where}: mel file {path!r} does not exist") from None
  except (OSError, ValueError) as e:
    raise InputError(f"{where}: {path} is not a readable .npy array ({first_line(e)})"
                     ) from None
  if mel.ndim != 2 or mel.shape[1] != num_mels or not len(mel) or \
      not np.issubdtype(mel.dtype, np.floating):
    raise InputError(f"{where}: {path} holds a {mel.dtype} array of shape {mel.shape}; the "
                     f"vocoder takes float mel frames [frames, {num_mels}]")
  return mel.astype(np.float32)


def feed(tf, name: str, kind: str, values: list) -> dict:
  """The serving function's arguments for a batch of loaded inputs."""
  if kind == "waveform":
    return {name: tf.ragged.stack(values).to_tensor(),
            "length": tf.constant([len(w) for w in values], tf.int32)}
  if kind == "mel":  # padded with zeros: the vocoder reads no frame past each length
    return {name: tf.ragged.stack([tf.constant(v) for v in values]).to_tensor(),
            f"{name}_length": tf.constant([len(v) for v in values], tf.int32)}
  return {name: tf.constant(values)}


def plain(value):
  """A numpy output value as JSON-able Python (bytes as UTF-8 text)."""
  if isinstance(value, bytes):
    return value.decode("utf-8")
  if hasattr(value, "tolist"):
    value = value.tolist()
  if isinstance(value, list):
    return [plain(v) for v in value]
  return value


# ----------------------------------------------------------------------------- serving
def main(argv: list[str] | None = None) -> int:
  try:
    return serve_inputs(parse_args(sys.argv[1:] if argv is None else argv))
  except ExportError as e:
    print(f"error: {e}", file=sys.stderr)
    return EXIT_ERROR


def report(error: InputError) -> None:
  print(f"error: {error}", file=sys.stderr, flush=True)


def serve_inputs(args: argparse.Namespace) -> int:
  check_outputs(args)
  signature = read_metadata(args.export_dir)
  check_audio_flags(signature, args)
  lines = read_lines(args.inputs)  # before the (slow) load: a wrong path fails at once
  (name, spec), = [(n, s) for n, s in signature["inputs"].items()
                   if n not in length_inputs(signature)]
  kind = input_kind(name, spec)
  tf = import_tensorflow_quietly(signature)
  serve = load_serving(tf, args.export_dir)
  writer = OutputWriter(tf, signature, args, len(lines))
  results, failed = [], 0
  for start in range(0, len(lines), args.batch_size):
    chunk = range(start, min(start + args.batch_size, len(lines)))
    values, errors = {}, {}  # line index -> loaded input, or why it cannot be loaded
    for i in chunk:
      try:
        values[i] = load_input(tf, kind, lines[i], signature, f"{args.inputs}:{i + 1}")
      except InputError as e:
        report(e)
        errors[i] = e
    served = serve_batch(tf, serve, name, kind, values, args.inputs)
    for i in chunk:
      outcome = served.get(i, errors.get(i))
      if isinstance(outcome, InputError):
        failed += 1
        results.extend(writer.failure(outcome))
      else:
        results.extend(writer.format(i, outcome))
  text = "".join(r + "\n" for r in results)
  if args.output:
    write_atomically(args.output, text.encode("utf-8"), "--output")
  else:
    sys.stdout.write(text)
  return EXIT_SOME_INPUTS_FAILED if failed else EXIT_OK


def serve_batch(tf, serve, name: str, kind: str, values: dict, inputs_path: str) -> dict:
  """``{line index: {output: value}}`` of the loaded inputs, or an :class:`InputError` for
  an input the model cannot take (a batch that fails is served again one input at a time,
  so that one bad input does not cost the others)."""
  if not values:
    return {}
  indices = sorted(values)
  try:
    out = serve(**feed(tf, name, kind, [values[i] for i in indices]))
    out = {key: value.numpy() for key, value in out.items()}
    return {i: {key: value[row] for key, value in out.items()}
            for row, i in enumerate(indices)}
  except tf.errors.OpError as e:  # e.g. bytes that are no image
    if len(indices) > 1:
      served = {}
      for i in indices:
        served.update(serve_batch(tf, serve, name, kind, {i: values[i]}, inputs_path))
      return served
    error = InputError(f"{inputs_path}:{indices[0] + 1}: the model cannot read this input "
                       f"({first_line(e)})")
    report(error)
    return {indices[0]: error}


class OutputWriter:
  """Output lines of served inputs, and the WAV files of audio outputs."""

  def __init__(self, tf, signature: dict, args: argparse.Namespace, num_lines: int):
    self.tf = tf
    self.outputs = list(signature["outputs"])
    self.audio = dict(signature.get("audio_outputs", {})) if args.output_dir else {}
    self.args = args
    self.width = len(str(max(num_lines, 1)))

  def format(self, index: int, out: dict) -> list[str]:
    """The output lines of input ``index`` (0-based line number); writes its WAV files."""
    written = {key: self._write_wav(index, key, out) for key in self.audio}
    if self.args.json:
      return [json.dumps({key: written[key][0] if key in written else plain(out[key])
                          for key in self.outputs})]
    if written:
      return [f"{path} ({seconds:.2f} s)" for path, seconds in written.values()]
    return [str(plain(out[self.outputs[0]]))]

  def failure(self, error: InputError) -> list[str]:
    """The output lines of an input that was not served (its error is already reported)."""
    if self.args.json:
      return [json.dumps({"error": str(error)})]
    return [] if self.audio else [""]  # lines stay in input order; audio lines name files

  def _write_wav(self, index: int, key: str, out: dict) -> tuple[str, float]:
    tf, audio = self.tf, self.audio[key]
    samples = out[key][:int(out[audio["length"]])]
    suffix = "" if len(self.audio) == 1 else f"_{key}"
    path = os.path.join(self.args.output_dir, f"{index + 1:0{self.width}d}{suffix}.wav")
    wav = tf.audio.encode_wav(tf.clip_by_value(tf.constant(samples, tf.float32), -1.0, 1.0)
                              [:, None], int(audio["sample_rate"]))
    write_atomically(path, wav.numpy(), "--output_dir")
    return path, len(samples) / int(audio["sample_rate"])


if __name__ == "__main__":
  sys.exit(main())
