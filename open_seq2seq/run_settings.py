"""A run remembers how it was made: its overrides are saved beside its checkpoints and applied
again when it is evaluated, inferred from, exported or resumed.

A run is its config file plus the overrides it was started with (``--a/b=v`` and
``--overrides_file``). The chief writes those overrides into ``<logdir>/overrides.yaml`` when
training starts (resumed runs add theirs); ``eval``, ``infer``, ``interactive_infer``,
``export`` and ``--continue_learning`` read them back and apply them before the command
line's own, which still win, each displaced value named in a notice. So
``--mode=eval --logdir=runs/deeper`` evaluates the 3-layer encoder ``runs/deeper`` was trained
with, without repeating ``--encoder_params/encoder_layers=3``.

What is not remembered: ``logdir`` (it is where the file is), the devices the run used
(``num_gpus``, ``gpu_ids``, ``use_horovod``, ``allreduce_dtype``: an eval may run elsewhere)
and ``graph_optimizations`` (a smoke run's choice of start-up speed, not the run's).
Eval, infer and export also leave out what says which data to read and how much at once (the
data layer's files and folders, vocabularies excepted, the batch sizes and ``eval_batches``):
they read the config's data for their mode, or the command line's. ``--continue_learning``
applies everything else, so the resumed run reads the same data in the same batches.

The resolved config the run trained with (``config.yaml``) is compared with the one this
command resolves. Keys of the model that differ (the config file was edited since, or an
override changes them) are named with both values (:class:`ModelChanges`): a vocabulary of
other contents or another dtype of the variables is refused before anything is built; other
keys apply (one notice line) as long as the checkpoint's weights fit the model they build,
else the restore's ``ModelMismatch`` becomes one line naming them. ``--allow_model_changes``
says the change is deliberate: what fits is loaded.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Mapping, NamedTuple

from open_seq2seq.errors import ConfigError
from open_seq2seq.overrides import Parsed
from open_seq2seq.utils.io import atomic_write_text

OVERRIDES_FILE = "overrides.yaml"
#: Keys a later command decides for itself.
NOT_REMEMBERED = ("logdir", "num_gpus", "gpu_ids", "use_horovod", "allreduce_dtype",
                  "allow_model_changes", "graph_optimizations")
#: Model keys whose values may differ between the run and a later command without changing
#: the model: how much data it reads at once and its seed.
_NOT_COMPARED = ("batch_size_per_gpu", "eval_batch_size_per_gpu", "random_seed")


#: Keys eval, infer and export take from their own config, not from the run (a smoke run's
#: ``--eval_batches=N`` does not truncate a later ``--mode=eval`` of it).
_DATA_CHOICE = ("batch_size_per_gpu", "eval_batch_size_per_gpu", "eval_batches")
_DATA_SUFFIXES = ("file", "files", "_dir", "location", "folder", "path", "root")


def _remembered(path: str) -> bool:
  return path.split("/", 1)[0] not in NOT_REMEMBERED


def _chooses_data(path: str) -> bool:
  """A key that says which data to read or how much at once (vocabularies shape the model:
  not these)."""
  top, _, rest = path.partition("/")
  if top in _DATA_CHOICE:
    return True
  key = rest.split("/", 1)[0]
  return top == "data_layer_params" and key.endswith(_DATA_SUFFIXES) and "vocab" not in key


def applicable(saved: list[tuple[str, Any]], resuming: bool) -> list[tuple[str, Any]]:
  """The run's overrides that a command applies again: all of them to resume the run; to
  evaluate, infer or export from it, those that do not choose the data."""
  return [(path, value) for path, value in saved
          if _remembered(path) and (resuming or not _chooses_data(path))]


def read_overrides(logdir: str) -> list[tuple[str, Any]] | None:
  """The overrides the run in ``logdir`` was made with (None: it saved none).

  Raises:
    ConfigError: the file exists but cannot be read as the list this module writes.
  """
  import yaml
  path = os.path.join(logdir, OVERRIDES_FILE)
  if not os.path.isfile(path):
    return None
  try:
    with open(path, encoding="utf-8") as f:
      entries = yaml.safe_load(f)
  except (OSError, yaml.YAMLError) as e:
    reason = " ".join(str(e).split())
    raise ConfigError(f"{path}: cannot read the run's overrides ({reason}); remove the file "
                      f"to use only this command's settings") from None
  if entries is None:
    return []
  if not isinstance(entries, list) or not all(
      isinstance(e, dict) and isinstance(e.get("key"), str) and ("text" in e or "value" in e)
      for e in entries):
    raise ConfigError(f"{path}: not a list of {{key, text|value}} entries; remove the file to "
                      f"use only this command's settings")
  return [(e["key"], str(e["text"]) if "text" in e else Parsed(e["value"])) for e in entries]


def write_overrides(logdir: str, overrides: list[tuple[str, Any]]) -> None:
  """Writes ``overrides`` (later entries win; one entry per key is kept, the last) into
  ``<logdir>/overrides.yaml``, atomically."""
  import yaml
  last: dict[str, Any] = {}
  for path, value in overrides:
    if _remembered(path):
      last.pop(path, None)
      last[path] = value
  entries = [{"key": path, "value": value.value} if isinstance(value, Parsed)
             else {"key": path, "text": value} for path, value in last.items()]
  text = ("# The overrides this run was made with, applied again by eval, infer, export and\n"
          "# --continue_learning before the command line's own (open_seq2seq/run_settings.py).\n"
          + yaml.safe_dump(entries, sort_keys=False, allow_unicode=True, width=100))
  os.makedirs(logdir, exist_ok=True)
  atomic_write_text(os.path.join(logdir, OVERRIDES_FILE), text)


def displaced(saved: list[tuple[str, Any]], given: list[tuple[str, Any]]) -> list[str]:
  """Notices for the run's overrides that this command's overrides change."""
  run_values = {path: value for path, value in saved}
  lines = []
  for path, value in given:
    if path in run_values and _shown(run_values[path]) != _shown(value):
      lines.append(f"--{path}={_shown(value)} replaces the run's {path}="
                   f"{_shown(run_values[path])}")
  return lines


def applied_notice(logdir: str, saved: list[tuple[str, Any]]) -> str | None:
  """One line naming the run's overrides applied again (None when there are none)."""
  kept = [(path, value) for path, value in saved if _remembered(path)]
  if not kept:
    return None
  return (f"the settings {logdir} was made with apply ({OVERRIDES_FILE}): " +
          " ".join(f"--{path}={_shown(value)}" for path, value in kept))


def _shown(value: Any) -> str:
  return repr(value.value) if isinstance(value, Parsed) else str(value)


class Difference(NamedTuple):
  """A model key whose value differs between the run and this command."""
  path: str
  run: Any
  now: Any

  def __str__(self) -> str:
    return f"{self.path}: run {self.run!r}, now {self.now!r}"


def model_differences(saved: Mapping[str, Any], current: Mapping[str, Any],
                      model_keys: list[str]) -> list[Difference]:
  """Each leaf under ``model_keys`` that differs between the run's resolved train config
  (``saved``, from its config.yaml) and this command's (``current``, as plain YAML data).
  Data files may differ: of ``data_layer_params`` only the vocabulary keys are compared, and
  two vocabulary paths to files of the same contents do not differ."""
  found: list[Difference] = []

  def walk(a: Any, b: Any, path: str) -> None:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
      for key in sorted(set(a) | set(b)):
        sub = f"{path}/{key}"
        if path == "data_layer_params" and "vocab" not in str(key):
          continue
        walk(a.get(key), b.get(key), sub)
    elif a != b and not ("vocab" in path and _same_file(a, b)):
      found.append(Difference(path, a, b))

  for key in model_keys:
    if key not in _NOT_COMPARED and (key in saved or key in current):
      walk(saved.get(key), current.get(key), key)
  return found


def _same_file(a: Any, b: Any) -> bool:
  if not (isinstance(a, str) and isinstance(b, str) and os.path.isfile(a) and
          os.path.isfile(b)):
    return False
  with open(a, "rb") as fa, open(b, "rb") as fb:
    return fa.read() == fb.read()


def _weights_dtype(value: Any) -> str:
  """The variables' dtype under a config's ``dtype`` as config.yaml shows it."""
  from open_seq2seq.utils import precision
  found = re.search(r"mixed\w*|b?float\d+", str(value))
  try:
    return precision.variable_dtype(found.group(0) if found else value).name
  except (TypeError, ValueError):
    return str(value)


@dataclasses.dataclass
class ModelChanges:
  """How the model a command builds differs from the one its run was trained with."""
  logdir: str
  differences: list[Difference]

  def refused(self) -> list[Difference]:
    """Changes whose weights would still load but mean something else: a vocabulary of
    other contents (its rows are other tokens) and another dtype of the variables."""
    return [d for d in self.differences if "vocab" in d.path or (
        d.path == "dtype" and _weights_dtype(d.run) != _weights_dtype(d.now))]

  def refusal(self) -> str:
    return (f"{self.logdir} was trained with another model: " +
            "; ".join(map(str, self.refused())) +
            " (its config.yaml); give the run's values, or --allow_model_changes to change "
            "them deliberately (fine-tuning into a new logdir: load_model)")

  def notice(self) -> str:
    return (f"model settings that differ from those {self.logdir} was trained with "
            f"(config.yaml) apply: " + "; ".join(map(str, self.differences)))

  def mismatch(self, error: Exception) -> str:
    """The restore's ModelMismatch, with the keys that made the model differ."""
    named = "; ".join(map(str, self.differences))
    because = f" built with {named}" if named else ""
    return (f"{error.path}: its weights do not fit the model{because} "
            f"({'; '.join(error.problems)}); give the settings {self.logdir} was trained with, "
            f"or --allow_model_changes to load what fits")


def saved_train_config(logdir: str) -> dict | None:
  """The resolved train config in ``<logdir>/config.yaml`` as plain data, or None."""
  import yaml
  path = os.path.join(logdir, "config.yaml")
  try:
    with open(path, encoding="utf-8") as f:
      document = yaml.safe_load(f)
  except (OSError, yaml.YAMLError):
    return None
  train = document.get("train") if isinstance(document, dict) else None
  return train if isinstance(train, dict) else None


def load_with_the_runs_settings(path: str, mode: str, overrides: list[str],
                                overrides_file: str | None, continue_learning: bool
                                ) -> tuple[type, dict[str, dict], list[str], list[str], list]:
  """Loads the config for a command the way :func:`open_seq2seq.config.load_config` does,
  with the overrides of the run in its logdir applied first when the command uses a trained
  run (eval, infer, interactive_infer, export, ``--continue_learning``).

  Returns:
    ``(base_model, configs, notices, changes, overrides to save)``: how the model differs
    from the run's (None: the command uses no run, or the run has no config.yaml), and the
    overrides a training run writes into its logdir (the run's own, then this command's).
  """
  from open_seq2seq.config import load_config, plain
  from open_seq2seq.overrides import parse_overrides, read_overrides_file
  given = (read_overrides_file(overrides_file) if overrides_file else []) + \
      parse_overrides(overrides)
  notices: list[str] = []
  base_model, configs = load_config(path, mode, overrides, overrides_file=overrides_file,
                                    notices=notices)
  uses_a_run = mode not in ("train", "train_eval") or continue_learning
  logdir = next(iter(configs.values()))["logdir"]
  recorded = read_overrides(logdir) if uses_a_run else None
  saved = applicable(recorded, resuming=mode in ("train", "train_eval")) if recorded else None
  changes = None
  if saved:
    notices = [line for line in (applied_notice(logdir, saved),) if line]
    notices += displaced(saved, given)
    base_model, configs = load_config(path, mode, overrides, overrides_file=overrides_file,
                                      notices=notices, run_overrides=saved)
  if uses_a_run:
    run_config = saved_train_config(logdir)
    current = configs.get("train")
    if run_config is not None and current is None:
      try:  # this command's settings as the run's training would have resolved them
        current = load_config(path, "train", overrides, overrides_file=overrides_file,
                              run_overrides=saved)[1]["train"]
      except ConfigError:
        current = None
    if run_config is not None and current is not None:
      changes = ModelChanges(logdir, model_differences(
          run_config, plain(current), list(base_model.declared_params())))
  # a resumed run saves what it was made with (all of it) and what this command adds
  return base_model, configs, notices, changes, \
      ((recorded or []) if continue_learning else []) + given


__all__ = ["load_with_the_runs_settings", "applicable", "ModelChanges", "Difference",
           "OVERRIDES_FILE", "NOT_REMEMBERED",
           "read_overrides", "write_overrides", "displaced", "applied_notice",
           "model_differences", "saved_train_config"]
