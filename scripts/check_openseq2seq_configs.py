#!/usr/bin/env python
"""Checks the renaming promise on OpenSeq2Seq's own configs: port each, then validate it.

    python scripts/check_openseq2seq_configs.py OPENSEQ2SEQ/example_configs [--keep DIR]

For every ``*.py`` under the directory (OpenSeq2Seq's ``example_configs``, read from its
sources; nothing is copied into this repository), the script ports the config with
``open_seq2seq.porting`` (as ``scripts/port_config.py`` does), loads the ported copy and
validates it for every mode it defines (``train`` always; ``eval``, ``infer``,
``interactive_infer`` when it has their dicts) with this project's loader. Validation reads
no data files, so the data need not exist. Each config gets one result:

* ``loads``: every mode validates;
* ``missing: <family>``: it imports a class this project does not have yet (the family
  issue that brings it);
* ``untranslated``: a TF 1 name the porting table cannot translate stops it;
* ``original error``: the config does not run as written in OpenSeq2Seq either;
* ``gap``: a key or value is rejected that should work -- every rejected key is listed
  (the check removes it and validates again, to find the next one).

The output is a Markdown table (the one in docs/porting.md) followed by the list of gaps and
the notices; what a config prints or warns while it is loaded and built (e.g. a component's
``warning:`` line about a key it ignores) is collected into the notices of that config.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import logging
import os
import re
import shutil
import sys
import tempfile
import warnings
from typing import Any, Iterator

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from open_seq2seq import config as config_lib  # noqa: E402  pylint: disable=wrong-import-position
from open_seq2seq import slots  # noqa: E402  pylint: disable=wrong-import-position
from open_seq2seq.errors import ConfigError  # noqa: E402  pylint: disable=wrong-import-position
from open_seq2seq import porting  # noqa: E402  pylint: disable=wrong-import-position

#: Which issue brings each OpenSeq2Seq class (or module) this project does not have yet.
FAMILIES = {
    "translation RNN/ConvS2S (issue 11)": ("GNMTLikeEncoderWithEmbedding_cuDNN",),
    "TTS (issue 12)": ("Text2SpeechWavenet", "WavenetEncoder", "WavenetDataLayer",
                       "WavenetLoss"),
    "LM (issue 13)": (
        "LSTMLM", "LMEncoder", "WKTDataLayer", "IMDBDataLayer", "SSTDataLayer",
        "WeightDropLayerNormBasicLSTMCell", "BasicSampledSequenceLoss",
        "open_seq2seq.parts.rnns"),
    "image (issue 14)": (
        "Image2Label", "ResNetEncoder", "CNNEncoder", "ImagenetDataLayer", "CifarDataLayer",
        "FullyConnectedDecoder"),
    "attention ASR / speech commands (issue 15)": (
        "ListenAttendSpellEncoder", "ListenAttendSpellDecoder", "JointCTCAttentionDecoder",
        "MultiTaskCTCEntropyLoss", "SpeechCommandsDataLayer", "FullyConnectedSCDecoder"),
}

#: Classes more than one family uses: charged to the family of the config's model.
_MODEL_FAMILY = {"Text2Text": "translation RNN/ConvS2S (issue 11)",
                 "Text2Speech": "TTS (issue 12)", "LSTMLM": "LM (issue 13)",
                 "Image2Label": "image (issue 14)", "Speech2Text": "attention ASR / speech commands (issue 15)"}

_MODES = (("train", "base_params"), ("eval", "eval_params"), ("infer", "infer_params"),
          ("interactive_infer", "interactive_infer_params"))
_MAX_GAPS = 40  # per mode: a config with more has a structural problem, not gaps


def family_of(name: str, module: str, base_model: str | None) -> str:
  for family, names in FAMILIES.items():
    if name in names or any(module.startswith(m) for m in names if "." in m):
      return family
  for prefix, family in _MODEL_FAMILY.items():
    if base_model and base_model.startswith(prefix):
      return family
  return "unknown family"


def defined_modes(text: str) -> list[str]:
  """The modes a config defines: train always, the others when their dict is assigned."""
  names = {t.id for node in ast.parse(text).body if isinstance(node, ast.Assign)
           for t in node.targets if isinstance(t, ast.Name)}
  return [mode for mode, key in _MODES if key in names]


def _base_model_name(text: str) -> str | None:
  for node in ast.parse(text).body:
    if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "base_model"
                                             for t in node.targets)
        and isinstance(node.value, ast.Name)):
      return node.value.id
  return None


def _delete(config: dict, path: str) -> bool:
  """Removes ``a/b/0/c`` from ``config``; False if the path is not there."""
  *parents, last = path.split("/")
  target: Any = config
  for key in parents:
    if isinstance(target, list) and key.isdigit() and int(key) < len(target):
      target = target[int(key)]
    elif isinstance(target, dict) and key in target:
      target = target[key]
    else:
      return False
  if isinstance(target, dict) and last in target:
    del target[last]
    return True
  return False


class _Collect(logging.Handler):
  def __init__(self):
    super().__init__(logging.WARNING)
    self.messages: list[str] = []

  def emit(self, record: logging.LogRecord) -> None:
    self.messages.append(record.getMessage())


def validation_errors(module: Any, mode: str) -> tuple[list[str], list[str]]:
  """Every key ``mode``'s config rejects (each removed in turn, then what fails to build
  without data), and the warnings logged meanwhile."""
  merged = config_lib.mode_config(module, mode)
  errors: list[str] = []
  handler = _Collect()
  logging.getLogger().addHandler(handler)
  try:
    for _ in range(_MAX_GAPS):
      try:
        params = config_lib.resolve_config(module.base_model, merged, mode)
        errors += build_errors(params, mode)
        ignored = getattr(slots, "ignored_settings", None)  # keys accepted but unused
        if ignored is not None:
          handler.messages += ignored(module.base_model, merged)
        break
      except ConfigError as e:
        message = str(e)
        errors.append(message)
        path = message.split(":", 1)[0].strip()
        if not re.fullmatch(r"[\w./-]+", path) or not _delete(merged, path):
          break
      except Exception as e:  # pylint: disable=broad-except
        errors.append(f"{type(e).__name__} during validation: {e}")
        break
  finally:
    logging.getLogger().removeHandler(handler)
  return errors, handler.messages


#: Stand-ins for the sizes a model reads from its data layer, to build components without data.
_DUMMY_SIZES = {"vocab_size": 32, "num_classes": 10,
                "idx2char": {i: chr(ord("a") + i) for i in range(26)},
                # speech synthesis: symbols, mel and magnitude features
                "src_vocab_size": 64, "num_mel_features": 80, "num_magnitude_features": 513,
                "exp_mag": True,
                # attention ASR: <S> and </S> after the characters (autoregressive targets)
                "go_symbol": 30, "end_symbol": 31}


def build_errors(params: dict, mode: str) -> list[str]:
  """Builds what needs no data (initializers, regularizer, optimizer, lr schedule, loss
  scaler, encoder, decoder, loss) as the model and the train step would; returns the errors.
  """
  # pylint: disable=import-outside-toplevel
  from open_seq2seq.optimizers import get_optimizer
  from open_seq2seq.training.loss_scaling import make_loss_scaler
  from open_seq2seq.training.train_step import learning_rate
  from open_seq2seq.utils.component import accepted_kwargs
  from open_seq2seq.utils.initializers import make_initializer
  from open_seq2seq.utils.regularizers import make_regularizer

  errors = []

  def attempt(what: str, build: Any) -> Any:
    try:
      return build()
    except ConfigError as e:
      errors.append(str(e))
    except Exception as e:  # pylint: disable=broad-except
      errors.append(f"{what}: {type(e).__name__}: {e}".split("\n")[0])
    return None

  initializer = attempt("initializer", lambda: make_initializer(
      params["initializer"], params["initializer_params"]))
  if mode == "train":
    attempt("regularizer", lambda: make_regularizer(params["regularizer"],
                                                    params["regularizer_params"]))
    attempt("loss_scaling", lambda: make_loss_scaler(params["loss_scaling"],
                                                     params["loss_scaling_params"]))
    last_step = params["max_steps"] or 1000
    attempt("optimizer", lambda: get_optimizer(
        params["optimizer"], params["optimizer_params"],
        learning_rate(params, last_step, 100)))
  component_mode = "infer" if mode == "interactive_infer" else mode
  for slot in ("encoder", "decoder", "loss"):
    component = params.get(slot)
    if component is None:
      continue
    kwargs = accepted_kwargs(component, _DUMMY_SIZES)
    if slot != "loss":
      kwargs.update(mode=component_mode, dtype=params["dtype"])
      if initializer is not None:
        kwargs["initializer"] = initializer
    attempt(f"{slot} ({component.__name__})",
            lambda c=component, k=kwargs, s=slot: c(params[f"{s}_params"], **k))
  return errors


@contextlib.contextmanager
def _collected_output(lines: list[str]) -> Iterator[None]:
  """Appends to ``lines`` what the block prints (stdout, stderr, logging's last-resort
  handler) and the Python warnings it raises, instead of letting them come before the
  report."""
  printed = io.StringIO()
  with warnings.catch_warnings(record=True) as caught, \
      contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
    try:
      yield
    finally:
      lines += [line.strip() for line in printed.getvalue().splitlines() if line.strip()]
      lines += [f"{w.category.__name__}: {w.message}" for w in caught]


def check_config(original: str, ported_path: str) -> dict[str, Any]:
  """Ports ``original`` to ``ported_path`` and validates it; returns the findings (what it
  printed or warned meanwhile is in ``logged``)."""
  printed: list[str] = []
  with _collected_output(printed):
    found = _check_config(original, ported_path)
  found["logged"] += [line for line in printed if line not in found["logged"]]
  return found


def _check_config(original: str, ported_path: str) -> dict[str, Any]:
  with open(original, encoding="utf-8") as f:
    text = f.read()
  found: dict[str, Any] = {"modes": [], "notes": [], "warnings": [], "missing": [],
                           "errors": {}, "logged": []}
  try:
    found["modes"] = defined_modes(text)
    result = porting.port_source(text)
  except SyntaxError as e:
    found.update(result="original error", detail=f"syntax error line {e.lineno}: {e.msg}")
    return found
  found.update(notes=result.notes, warnings=result.warnings, missing=result.missing)
  os.makedirs(os.path.dirname(ported_path), exist_ok=True)
  with open(ported_path, "w", encoding="utf-8") as f:
    f.write(result.text)
  if result.missing:
    base_model = _base_model_name(text)
    families = sorted({family_of(name, module, base_model) for module, name in result.missing})
    names = ", ".join(dict.fromkeys(name for _, name in result.missing))
    found.update(result="missing: " + "; ".join(families), detail=names)
    return found
  try:
    module = config_lib.load_config_module(ported_path)
  except ConfigError as e:
    message = str(e).replace(ported_path, os.path.basename(original))
    untranslated = [w for w in result.warnings if "equivalent" in w]
    if untranslated:
      found.update(result="untranslated", detail=untranslated[0])
    else:
      found.update(result="original error", detail=message)
    return found
  for mode in found["modes"]:
    errors, logged = validation_errors(module, mode)
    if errors:
      found["errors"][mode] = errors
    found["logged"] += [m for m in logged if m not in found["logged"]]
  if found["errors"]:
    first_mode = next(iter(found["errors"]))
    found.update(result="gap", detail=found["errors"][first_mode][0])
  else:
    renames = [note for note in result.notes if not note.startswith("added")]
    found.update(result="loads", detail=f"{len(renames)} rename{'s' * (len(renames) != 1)}")
  return found


def _cell(text: str) -> str:
  return text.replace("|", "\\|").replace("\n", " ")


def report(results: dict[str, dict[str, Any]]) -> str:
  """The Markdown table and the gap list."""
  lines = ["| config | modes | result | detail |", "|---|---|---|---|"]
  for name, found in results.items():
    lines.append(f"| `{name}` | {', '.join(found['modes'])} | {found['result']} | "
                 f"{_cell(found['detail'])} |")
  counts: dict[str, int] = {}
  for found in results.values():
    key = found["result"].split(":")[0]
    counts[key] = counts.get(key, 0) + 1
  lines += ["", "Totals: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), ""]
  gaps = [(name, found) for name, found in results.items() if found["errors"]]
  if gaps:
    lines.append("### Gaps: keys and values rejected after renaming")
    lines.append("")
    for name, found in gaps:
      seen: dict[str, list[str]] = {}
      for mode, errors in found["errors"].items():
        for error in errors:
          seen.setdefault(error, []).append(mode)
      lines.append(f"* `{name}`")
      for error, modes in seen.items():
        lines.append(f"  * ({', '.join(modes)}) `{_cell(error)}`")
  logged = [(name, found["logged"]) for name, found in results.items() if found["logged"]]
  if logged:
    lines += ["", "### Notices: keys accepted but ignored, and warnings logged", ""]
    for name, messages in logged:
      for message in messages:
        lines.append(f"* `{name}`: {_cell(message)}")
  untranslated = [(name, found["warnings"]) for name, found in results.items()
                  if any("equivalent" in w for w in found["warnings"])]
  if untranslated:
    lines += ["", "### Names the porting table could not translate", ""]
    for name, warnings in untranslated:
      for warning in warnings:
        if "equivalent" in warning:
          lines.append(f"* `{name}` {_cell(warning)}")
  return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("configs", help="directory of OpenSeq2Seq configs (searched recursively)")
  parser.add_argument("--keep", metavar="DIR",
                      help="write the ported configs here (default: a temporary directory)")
  args = parser.parse_args(argv)
  if not os.path.isdir(args.configs):
    print(f"error: {args.configs} is not a directory", file=sys.stderr)
    return 2
  paths = sorted(os.path.relpath(os.path.join(root, f), args.configs)
                 for root, _, files in os.walk(args.configs) for f in files if f.endswith(".py"))
  if not paths:
    print(f"error: no *.py configs under {args.configs}", file=sys.stderr)
    return 2
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()  # the configs import TensorFlow
  out_dir = args.keep or tempfile.mkdtemp(prefix="ported_configs_")
  try:
    results = {rel: check_config(os.path.join(args.configs, rel), os.path.join(out_dir, rel))
               for rel in paths}
  finally:
    if not args.keep:
      shutil.rmtree(out_dir, ignore_errors=True)
  sys.stdout.write(report(results))
  return 0


if __name__ == "__main__":
  sys.exit(main())
