"""The command line of ``run.py``: its flags, and the config overrides (``--key=value``) it
passes on. Imports nothing heavy: ``run.py --help`` answers at once."""

from __future__ import annotations

import argparse

from open_seq2seq.errors import ConfigError


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog="run.py", description="Train, evaluate and run sequence-to-sequence models.",
      epilog="Any config value can be overridden as --key=value or --a/b/c=value, e.g. "
             "--encoder_params/encoder_layers=2; overrides win over the mode dicts.")
  parser.add_argument("--config_file", required=True, help="Python config file.")
  parser.add_argument("--mode", default="train",
                      choices=["train", "eval", "train_eval", "infer", "interactive_infer",
                               "export"])
  parser.add_argument("--logdir", help="Run directory (overrides the config's logdir).")
  parser.add_argument("--continue_learning", action="store_true",
                      help="Resume training from the latest checkpoint in logdir.")
  parser.add_argument("--infer_output_file", default="infer-out.txt",
                      help="Where --mode=infer writes its predictions.")
  parser.add_argument("--export_dir",
                      help="Where --mode=export writes the SavedModel (a new directory).")
  parser.add_argument("--export_format", default="saved_model",
                      choices=["saved_model", "ctranslate2"],
                      help="--mode=export: a TensorFlow SavedModel, or a CTranslate2 model "
                           "(Text2Text Transformers; docs/translation.md).")
  parser.add_argument("--export_quantization", choices=["float32", "int8", "float16"],
                      help="--export_format=ctranslate2: the stored weights' type "
                           "(default float32).")
  parser.add_argument("--benchmark", action="store_true",
                      help="Time --bench_steps training steps and print a table; saves nothing.")
  parser.add_argument("--bench_steps", type=int, default=30, help="Steps timed by --benchmark.")
  parser.add_argument("--enable_logs", action="store_true",
                      help="Record the run in logdir/logs/<mode>-<time>/: command line, config "
                           "file and resolved config, package versions, git commit and diff, "
                           "stdout and stderr.")
  parser.add_argument("--overrides_file",
                      help="YAML mapping of config overrides (same keys as --a/b=v; "
                           "command-line overrides win).")
  parser.add_argument("--no_dir_check", action="store_true",
                      help="Train from scratch even if logdir holds a run (its checkpoints "
                           "move to earlier_run-<time>/ first); OpenSeq2Seq's flag.")
  parser.add_argument("--use_xla_jit", action="store_true",
                      help="Compile the train step with XLA (same as use_xla_jit=True in the "
                           "config).")
  parser.add_argument("--num_gpus", type=int, help="Number of local devices (towers).")
  parser.add_argument("--use_horovod", type=_parse_bool, help="Use Horovod (True/False).")
  parser.add_argument("--cpu_towers", type=int, default=0,
                      help="Split the CPU into N logical devices (towers without GPUs).")
  parser.add_argument("--help_params", action="store_true",
                      help="List the parameters of the config's model and components.")
  parser.add_argument("--allow_model_changes", action="store_true",
                      help="Eval, infer, export or resume a run although the model built now "
                           "does not fit its checkpoint (load what fits): a deliberate change.")
  return parser


def _parse_bool(text: str) -> bool:
  if text.lower() in ("true", "1", "yes"):
    return True
  if text.lower() in ("false", "0", "no"):
    return False
  raise argparse.ArgumentTypeError(f"expected True or False, got {text!r}")


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
  parser = build_parser()
  args, rest = parser.parse_known_args(argv)
  _check_unknown_flags(parser, rest)
  overrides = list(rest)
  for key in ("logdir", "num_gpus", "use_horovod"):
    value = getattr(args, key)
    if value is not None:
      overrides.append(f"--{key}={value}")
  for flag in ("use_xla_jit", "allow_model_changes"):
    if getattr(args, flag):
      overrides.append(f"--{flag}=True")
  return args, overrides


def _check_unknown_flags(parser: argparse.ArgumentParser, rest: list[str]) -> None:
  """What argparse left is config overrides (``--key=value``); anything else is a mistyped
  flag or a stray word, reported with the closest flag."""
  import difflib
  from open_seq2seq.utils.params import closest_key
  actions = parser._actions  # pylint: disable=protected-access
  flags = [s for action in actions for s in action.option_strings if s.startswith("--")]
  for arg, value in zip(rest, rest[1:] + ["-"]):
    if arg.startswith("--") and "=" in arg:
      continue
    # "--max_steps 30" is an override without its "=" (unless a typo: "--logidr /tmp/run")
    typo = difflib.get_close_matches(arg, flags, 1, 0.85)
    if arg.startswith("--") and value[:1] != "-" and not typo:
      raise ConfigError(f"{arg} {value}: a config override needs '=': write {arg}={value}")
    hint = closest_key(arg, flags)
    raise ConfigError(f"{arg}: unknown argument" + (f"; did you mean {hint}?" if hint else "")
                      + " (config overrides look like --batch_size_per_gpu=32 or "
                      "--encoder_params/<key>=<value>)")


__all__ = ["build_parser", "parse_args"]
