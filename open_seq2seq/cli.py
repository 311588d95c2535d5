"""Command line of ``run.py``: parse, resolve the config, and run one mode.

Every user error (:class:`open_seq2seq.errors.OpenSeq2SeqError`) is printed as one line and
exits with status 2. SIGINT (Ctrl-C) or SIGTERM during training saves a checkpoint (every
worker stops after the same step) and exits with 128 + the signal's number: 130 or 143.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import sys
from typing import TYPE_CHECKING

from open_seq2seq.cli_args import parse_args
from open_seq2seq.errors import (CheckpointError, ConfigError, OpenSeq2SeqError, damaged_data,
                                 embedded_error, out_of_memory, write_failure)

if TYPE_CHECKING:  # imported for annotations only: run.py --help stays fast without them
  from open_seq2seq.distributed.backend import Backend
  from open_seq2seq.models.model import Model
  from open_seq2seq.training.evaluator import Evaluator

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


def main(argv: list[str] | None = None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  # Before anything imports TensorFlow (a config file does): its C++ start-up lines would
  # otherwise come before every message of ours, and its Python warnings (e.g. about a
  # checkpoint left half-restored by an error) after the error line.
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  logging.getLogger("tensorflow").setLevel(logging.ERROR)
  try:
    return run(argv)
  except OpenSeq2SeqError as e:
    print(f"error: {e}", file=sys.stderr)
    return EXIT_USER_ERROR
  except Exception as e:  # pylint: disable=broad-except
    # a project error raised inside the input pipeline, a failed write, out of memory, or a
    # damaged input file
    wrapped = embedded_error(e) or write_failure(e) or out_of_memory(e) or damaged_data(e)
    if wrapped is None:
      raise
    print(f"error: {wrapped}", file=sys.stderr)
    return EXIT_USER_ERROR
  except KeyboardInterrupt as e:
    # TrainingStopped (SIGINT or SIGTERM while signals are handled) knows its status
    status = getattr(e, "exit_status", EXIT_INTERRUPTED)
    print(f"stopped by {e.args[0]}" if e.args else "interrupted", file=sys.stderr)
    return status


def run(argv: list[str]) -> int:
  args, overrides = parse_args(argv)
  # Without TensorFlow first: --help_params and config mistakes answer from the parameter
  # index when that is certain (the same text, the same ConfigError); else None.
  from open_seq2seq.config_static import static_answer
  help_text = static_answer(args, overrides)
  if help_text is not None:
    print(help_text)
    return 0
  # after argparse: --help stays fast; before the config file, which imports TensorFlow
  from open_seq2seq.utils.quiet_start import import_tensorflow_quietly
  import_tensorflow_quietly()
  from open_seq2seq.run_settings import load_with_the_runs_settings
  # An export is built like interactive inference: the infer settings, no data files read.
  config_mode = "interactive_infer" if args.mode == "export" else args.mode
  base_model, configs, notices, changes, args.run_overrides = load_with_the_runs_settings(
      args.config_file, config_mode, overrides, args.overrides_file, args.continue_learning)
  if args.help_params:
    from open_seq2seq.slots import help_params
    print(help_params(base_model, next(iter(configs.values()))))
    return 0
  _silence_tensorflow()
  from open_seq2seq.distributed.factory import make_backend

  main_cfg = configs.get("train") or next(iter(configs.values()))
  if args.mode in ("train", "train_eval"):
    # Every process checks before the backend starts: joining it waits for all of them, so
    # the chief's writes below cannot make another worker see "already holds a run".
    _check_train_logdir(main_cfg["logdir"], args)
  allow_changes = main_cfg["allow_model_changes"]
  # a model built with other settings than the run's: checkpoint variables it lacks count
  args.model_changed = changes is not None and bool(changes.differences)
  if changes is not None and changes.refused() and not allow_changes:
    raise ConfigError(changes.refusal())
  if args.mode == "export":  # a taken or unwritable --export_dir: before anything else
    from open_seq2seq.serving.export import check_export_dir
    args.export_dir = check_export_dir(args.export_dir)
    if args.export_quantization and args.export_format != "ctranslate2":
      raise ConfigError("--export_quantization: only for --export_format=ctranslate2")
    _check_output_path(args.export_dir, "--export_dir", directory=True)
  from open_seq2seq.training import graph_optimizations
  from open_seq2seq.training.run_params import run_settings
  graph_optimizations.apply(main_cfg["graph_optimizations"])
  backend = make_backend(run_settings(main_cfg), cpu_towers=args.cpu_towers)
  from open_seq2seq.utils.quiet_start import consume_onednn_dtype_notice
  consume_onednn_dtype_notice()  # devices are set up: TensorFlow's informational ERROR line
  if backend.is_chief:
    for line in notices:
      print(f"notice: {line}", file=sys.stderr, flush=True)
    if changes is not None and changes.differences:
      print(f"{'warning' if allow_changes else 'notice'}: {changes.notice()}", file=sys.stderr,
            flush=True)
  if main_cfg["random_seed"] is not None:
    import keras
    # Each worker gets its own seed (dropout, shuffling of its shard); initial weights are
    # made identical by the backend (broadcast from the chief).
    keras.utils.set_random_seed(main_cfg["random_seed"] + backend.worker_index)
  from open_seq2seq.training import logdir_lock, stopping
  try:  # training's chief holds the logdir's lock for the whole run
    with stopping.handling_signals(), logdir_lock.for_run(
        main_cfg["logdir"], args.mode, backend.is_chief, benchmark=args.benchmark):
      if args.mode in ("train", "train_eval"):
        return _train(args, base_model, configs, backend)
      return _run_trained(args, base_model, configs[config_mode], backend)
  except Exception as e:  # pylint: disable=broad-except
    from open_seq2seq.training.restoring import ModelMismatch
    if isinstance(e, ModelMismatch) and changes is not None:  # name the keys that made it
      raise CheckpointError(changes.mismatch(e)) from None
    error = backend.translate_error(e)  # e.g. a lost worker: one line instead of a traceback
    if error is None:
      raise
    raise error from None
  finally:
    backend.shutdown()


def _build_model(base_model: type[Model], config: dict, mode: str, backend: Backend) -> Model:
  # Under the backend's scope: components that create variables in __init__ get
  # distributed (mirrored) variables.
  with backend.strategy.scope():
    return base_model(config, mode, num_workers=backend.num_workers,
                      worker_id=backend.worker_index)


def _train(args: argparse.Namespace, base_model: type[Model], configs: dict[str, dict],
           backend: Backend) -> int:
  """``train`` and ``train_eval`` (and ``--benchmark``)."""
  from open_seq2seq.training import reporting
  from open_seq2seq.training.trainer import Trainer
  logdir = configs["train"]["logdir"]
  model = _build_model(base_model, configs["train"], "train", backend)
  eval_layer = None
  if args.mode == "train_eval":
    eval_layer = model.make_data_layer(configs["eval"], "eval", backend.num_workers,
                                       backend.worker_index)
  trainer = Trainer(model, configs["train"], backend, logdir)
  if args.benchmark:
    result = trainer.train(model.data_layer, benchmark_steps=args.bench_steps,
                           summaries=reporting.Summaries(None))
    if backend.is_chief:
      print(benchmark_table(result, configs["train"]))
    return 0
  if backend.is_chief and args.enable_logs:
    # From here on the console is copied into logdir/logs/ (a record of this attempt, which
    # does not count as a run: logdir_holds_run)
    _record_run(args, logdir, configs)

  def write_config() -> None:
    # Written only once the model, its data and the checkpoint it resumes from are loaded:
    # a run that failed to start leaves nothing behind that would count as a run, and a
    # failed --continue_learning leaves the old run's config.txt as it was.
    if backend.is_chief:
      _write_config(logdir, configs)
      from open_seq2seq.run_settings import write_overrides
      write_overrides(logdir, args.run_overrides)

  trainer.train(model.data_layer, eval_layer, continue_learning=args.continue_learning,
                on_start=write_config)
  return 0


def _run_trained(args: argparse.Namespace, base_model: type[Model], config: dict,
                 backend: Backend) -> int:
  """``eval``, ``infer``, ``interactive_infer`` and ``export`` from the run's checkpoint."""
  from open_seq2seq.training import reporting
  from open_seq2seq.training.checkpoints import checkpoint_for_eval
  from open_seq2seq.training.evaluator import Evaluator
  from open_seq2seq.utils import precision
  if args.mode == "infer":
    _check_output_path(args.infer_output_file)
    if backend.is_chief and os.path.exists(args.infer_output_file):
      reporting.log(f"notice: --infer_output_file {args.infer_output_file} exists: inference "
                    f"overwrites it")
  if args.no_dir_check and backend.is_chief:
    reporting.log(f"notice: --no_dir_check has no effect with --mode={args.mode}: it needs "
                  f"the checkpoint in {config['logdir']}")
  if args.mode == "export":
    if backend.num_workers > 1:
      raise ConfigError("--mode=export runs in one process; start it without mpiexec")
  checkpoint = checkpoint_for_eval(config["logdir"], config["restore_best_checkpoint"],
                                   announce=backend.is_chief)
  model_mode = "interactive_infer" if args.mode == "export" else args.mode
  model = _build_model(base_model, config, model_mode, backend)
  if backend.is_chief:
    if args.enable_logs:
      _record_run(args, config["logdir"], {args.mode: config})
    reporting.log(precision.describe(config["dtype"]))
  evaluator = Evaluator(model, backend, eval_batches=config["eval_batches"],
                        allow_model_changes=config["allow_model_changes"],
                        count_unused=args.model_changed,
                        moving_average_decay=config["moving_average_decay"])
  if args.mode == "export":
    _export(args, evaluator, model, checkpoint, config)
    return 0
  if args.mode == "interactive_infer":
    _interactive_infer(evaluator, model, checkpoint, config["logdir"])
    return 0
  evaluator.restore_for(model.data_layer, checkpoint)
  if args.mode == "eval":
    evaluator.evaluate(model.data_layer)
  else:
    _infer(args, evaluator, model, backend, config["logdir"])
  return 0


def _infer(args: argparse.Namespace, evaluator: Evaluator, model: Model,
           backend: Backend, logdir: str) -> None:
  """Infers the data layer's inputs: each process formats its share, the chief writes the
  outputs as they arrive (``--infer_output_file``; other files under ``logdir``)."""
  from open_seq2seq.output_sink import OutputSink
  from open_seq2seq.training import reporting
  sink = OutputSink(args.infer_output_file, directory=logdir, write=backend.is_chief)
  written, metrics = evaluator.infer_to(model.data_layer, sink)
  per_input: dict[str, list[str]] = {}  # a file per input (audio, figures): a line per folder
  for path, count in written:
    if count == 1 and path != args.infer_output_file:
      per_input.setdefault(os.path.dirname(path), []).append(path)
      continue
    what = "prediction" if path == args.infer_output_file else "record"
    reporting.log(f"wrote {reporting.counted(count, what)} to {path}")
  for folder, paths in per_input.items():
    kinds = [os.path.splitext(p)[1] or "other" for p in paths]
    counts = ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds))
    reporting.log(f"wrote {len(paths)} files to {folder} ({counts})" if len(paths) > 1 else
                  f"wrote 1 record to {paths[0]}")
  if backend.is_chief:
    for name, value in metrics.items():
      reporting.log(f"{name} {reporting.format_metric(value)}")


def _export(args: argparse.Namespace, evaluator: Evaluator, model: Model, checkpoint: str,
            config: dict) -> None:
  """Writes the restored model as a SavedModel with the family's serving signature (or, with
  --export_format=ctranslate2, as a CTranslate2 model)."""
  import tensorflow as tf
  from open_seq2seq.serving import export
  from open_seq2seq.training import reporting
  from open_seq2seq.utils import precision
  if args.export_format == "ctranslate2":
    from open_seq2seq.serving import ctranslate2_export
    written = ctranslate2_export.export(
        model, evaluator, checkpoint, args.export_dir, args.export_quantization,
        {"config_file": os.path.abspath(args.config_file),
         "checkpoint": os.path.abspath(checkpoint)})
    reporting.log(f"exported {checkpoint} to {args.export_dir}: CTranslate2 model "
                  f"({written['quantization']})")
    return
  adapter = model.serving_adapter()
  evaluator.ensure_variables(adapter.to_batch(adapter.example_inputs()))
  evaluator.restore(checkpoint)
  metadata = export.save(model, adapter, args.export_dir, {
      "model": type(model).__name__, "config_file": os.path.abspath(args.config_file),
      "checkpoint": os.path.abspath(checkpoint), "step": evaluator.restored_step,
      "dtype": precision.normalize_dtype(config["dtype"]), "tensorflow": tf.__version__},
      extra=model.extra_serving_signatures())
  for name, signature in metadata["signatures"].items():
    reporting.log(f"exported {checkpoint} to {args.export_dir}: {name}("
                  f"{', '.join(signature['inputs'])}) -> {', '.join(signature['outputs'])}")


def _silence_tensorflow() -> None:
  import absl.logging
  absl.logging.set_verbosity(absl.logging.ERROR)


def _record_run(args: argparse.Namespace, logdir: str, configs: dict[str, dict]) -> None:
  from open_seq2seq.training import reporting
  from open_seq2seq.run_record import write_run_record
  folder = write_run_record(logdir, args.mode, [sys.executable] + sys.argv, args.config_file,
                            configs)
  reporting.log(f"run record: {folder}")


def _check_train_logdir(logdir: str, args: argparse.Namespace) -> None:
  from open_seq2seq.training.logdir_lock import check_before_training
  if not args.benchmark:
    check_before_training(logdir, args.continue_learning, args.no_dir_check)


def _check_output_path(path: str, flag: str = "--infer_output_file",
                       directory: bool = False) -> None:
  from open_seq2seq.utils.io import check_writable
  check_writable(path, flag, directory)


def _write_config(logdir: str, configs: dict[str, dict]) -> None:
  """The resolved config beside the checkpoints, as readable text and as YAML."""
  from open_seq2seq.config import config_to_text, config_to_yaml
  from open_seq2seq.utils.io import atomic_write_text
  os.makedirs(logdir, exist_ok=True)
  text = "".join(f"# mode: {mode}\n{config_to_text(cfg)}\n" for mode, cfg in configs.items())
  atomic_write_text(os.path.join(logdir, "config.txt"), text)
  atomic_write_text(os.path.join(logdir, "config.yaml"), config_to_yaml(configs))


def _interactive_infer(evaluator: Evaluator, model: Model, checkpoint: str,
                       logdir: str) -> None:
  """Reads one input per line from stdin and prints the model's output for it (files it
  writes, such as audio, go under ``logdir``)."""
  from open_seq2seq.output_sink import OutputSink
  from open_seq2seq.training.evaluator import to_numpy
  tty = sys.stdin.isatty()
  restored = False
  sink = OutputSink(os.devnull, directory=logdir)
  while True:
    if tty:
      sys.stdout.write("> ")
      sys.stdout.flush()
    line = sys.stdin.readline()
    if not line:
      break
    line = line.strip()
    if not line:
      continue
    try:
      batch = next(iter(model.data_layer.dataset_from_inputs([line])))
    except OpenSeq2SeqError as e:
      print(f"error: {e}", file=sys.stderr)
      continue
    if not restored:
      evaluator.ensure_variables(batch)
      evaluator.restore(checkpoint)
      restored = True
    numpy_batch, outputs = to_numpy(batch), evaluator.predict(batch)
    sink.write(model.interactive_outputs(numpy_batch, outputs))
    for text in model.interactive_lines(numpy_batch, outputs, resolve=sink.resolve):
      print(text)
    sys.stdout.flush()


def benchmark_table(result: dict, params: dict) -> str:
  from open_seq2seq.utils import precision
  peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  rows = [("steps timed", f"{result['steps_measured']}"),
          ("median time/step (s)", f"{result['median_step_time']:.4f}"),
          (f"median {result['unit']}/s", f"{result['units_per_s']:,.0f}"),
          ("peak memory (MB)", f"{peak_mb:,.0f}"),
          ("dtype", precision.normalize_dtype(params["dtype"])),
          ("batch_size_per_gpu", str(params["batch_size_per_gpu"]))]
  width = max(len(r[0]) for r in rows)
  lines = ["| metric | value |", "|---|---|"]
  lines += [f"| {name.ljust(width)} | {value} |" for name, value in rows]
  return "\n".join(lines)
