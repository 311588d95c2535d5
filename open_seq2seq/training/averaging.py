"""Checkpoint averaging: one checkpoint whose model weights are the mean of several.

Averaging the weights of the last few checkpoints of a run (as fairseq, OpenNMT and Sockeye
do) usually gives a little BLEU for free. The result is an ordinary checkpoint of the run:

* every floating-point variable of the model (keys under ``model/``, see
  ``training/checkpoints.py``) is averaged in float64 and cast back to its saved dtype, and
  so are the moving averages of the weights of a run trained with ``moving_average_decay``
  (``moving_average/``, see ``training/moving_average.py``): eval of the result with the
  run's config reads the mean of the checkpoints' moving averages;
* everything else (optimizer slots and step counter, loss-scale state, data position,
  dropout seed states and other integer tensors) and the object graph come from the newest
  checkpoint, so eval/infer (and even ``--continue_learning``) restore it like any other.

The output directory is written under a temporary name and renamed into place.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import tempfile
import time

import tensorflow as tf

from open_seq2seq.errors import CheckpointError
from open_seq2seq.training.checkpoints import BEST_DIR
from open_seq2seq.training.moving_average import CHECKPOINT_NAME
from open_seq2seq.training.restoring import UnreadableCheckpoint
from open_seq2seq.utils.io import current_umask

#: The serialized object graph every TF2 checkpoint carries (copied from the newest).
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
#: Keys of the model's variables (the trainer saves the model as the "model" object).
MODEL_PREFIX = "model/"
#: Keys averaged when floating-point: the model's and the moving averages of its weights,
#: which must also be the same in every checkpoint.
AVERAGED_PREFIXES = (MODEL_PREFIX, f"{CHECKPOINT_NAME}/")
#: The resolved config cli.py writes beside the checkpoints, and the vocabularies the run
#: recorded (training/vocab_remap.py); copied so that OUT looks like a run (load_model from it
#: remaps a changed vocabulary by token as from the run itself).
CONFIG_FILES = ("config.txt", "config.yaml", "vocabularies.json")
#: Where the output records which checkpoints it averages.
PROVENANCE_FILE = "averaged.json"
STATE_FILE = "checkpoint"

# What TensorFlow raises reading a truncated or corrupt checkpoint (as in restoring.py).
_UNREADABLE = (IndexError, tf.errors.OpError)
_STEP = re.compile(r"-(\d+)$")


@dataclasses.dataclass
class AveragedCheckpoint:
  """What :func:`average_checkpoints` wrote.

  Attributes:
    path: prefix of the written checkpoint (``OUT/ckpt-<step>``).
    sources: the averaged checkpoints, oldest first (the last one is the newest).
    averaged: keys of the variables averaged.
    copied: keys taken from the newest checkpoint unchanged.
  """

  path: str
  sources: list[str]
  averaged: list[str]
  copied: list[str]


def checkpoint_step(path: str) -> int | None:
  """The step of ``.../ckpt-<step>``, or None for a prefix without one."""
  match = _STEP.search(path)
  return int(match.group(1)) if match else None


def last_checkpoints(logdir: str, n: int) -> list[str]:
  """The newest ``n`` checkpoints the run ``logdir`` lists in its state file, oldest first.

  Only listed checkpoints count: folders of a save cut short and checkpoints dropped from
  the list (e.g. unreadable ones skipped on resume) are not part of the run any more.
  """
  if n < 1:
    raise CheckpointError(f"--last_n {n}: must be at least 1")
  if not os.path.isdir(logdir):
    raise CheckpointError(f"{logdir}: no such directory; pass the --logdir of a trained run")
  state = tf.train.get_checkpoint_state(logdir)
  paths = list(state.all_model_checkpoint_paths) if state is not None else []
  if not paths:
    raise CheckpointError(f"{logdir}: no checkpoint found; train first or point --logdir "
                          f"at a trained run")
  if len(paths) < n:
    raise CheckpointError(
        f"{logdir} holds {len(paths)} checkpoint(s) ({_names(paths)}), fewer than "
        f"--last_n {n}; lower --last_n, or keep more with num_checkpoints")
  return paths[-n:]


def sorted_checkpoints(paths: list[str]) -> list[str]:
  """Checkpoint prefixes given by hand, oldest first (by step when all have one).

  Accepts ``ckpt-N.index`` too, so that a shell glob (``run/ckpt-*.index``) works; a glob
  sorts ``ckpt-100`` before ``ckpt-20``, hence the sort by step.
  """
  prefixes: list[str] = []
  for path in paths:
    prefix = path[:-len(".index")] if path.endswith(".index") else path
    if not os.path.isfile(prefix + ".index"):
      raise CheckpointError(f"{path}: not a checkpoint (no {prefix}.index); pass checkpoint "
                            f"prefixes such as RUN/ckpt-1000")
    if prefix not in prefixes:
      prefixes.append(prefix)
  if not prefixes:
    raise CheckpointError("--checkpoints: no checkpoint given")
  steps = [checkpoint_step(p) for p in prefixes]
  if all(s is not None for s in steps):
    if len(set(steps)) < len(steps):
      raise CheckpointError(f"--checkpoints: several checkpoints of the same step "
                            f"({_names(prefixes)}); pass checkpoints of one run")
    prefixes.sort(key=checkpoint_step)
  return prefixes


def average_checkpoints(checkpoints: list[str], output_dir: str) -> AveragedCheckpoint:
  """Averages the model weights of ``checkpoints`` (oldest first) into ``output_dir``.

  Raises:
    CheckpointError: ``output_dir`` holds a checkpoint or is the directory of one of the
      checkpoints; the checkpoints differ in keys, shapes or dtypes; one is unreadable.
  """
  if not checkpoints:
    raise CheckpointError("no checkpoint to average")
  _check_output_dir(checkpoints, output_dir)
  newest = checkpoints[-1]
  dtypes, shapes = _variable_maps(newest)
  for path in checkpoints[:-1]:
    _check_same_variables(path, newest, *_variable_maps(path), dtypes, shapes)
  averaged = sorted(key for key, dtype in dtypes.items()
                    if key.startswith(AVERAGED_PREFIXES) and dtype.is_floating)
  if not any(key.startswith(MODEL_PREFIX) for key in averaged):
    raise CheckpointError(f"{newest}: holds no floating-point model variable (no key under "
                          f"{MODEL_PREFIX}); was it written by open_seq2seq?")
  copied = sorted(set(dtypes) - set(averaged))
  tensors = {**_read(newest, copied, dtypes), **_mean(checkpoints, averaged, dtypes)}
  name = os.path.basename(newest)
  _write_directory(output_dir, lambda tmp: _write(tmp, name, tensors, checkpoints))
  return AveragedCheckpoint(os.path.join(output_dir, name), list(checkpoints), averaged, copied)


# ---------------------------------------------------------------------------- checks
def _names(paths: list[str]) -> str:
  return ", ".join(os.path.basename(p) for p in paths)


def _check_output_dir(checkpoints: list[str], output_dir: str) -> None:
  out = os.path.realpath(output_dir)
  for path in checkpoints:
    if os.path.realpath(os.path.dirname(os.path.abspath(path))) == out:
      raise CheckpointError(
          f"--output_dir {output_dir} is the directory of {os.path.basename(path)}: the "
          f"average goes into a new directory; choose another --output_dir")
  if os.path.exists(output_dir) and not os.path.isdir(output_dir):
    raise CheckpointError(f"--output_dir {output_dir} is a file; choose a directory")
  if os.path.isdir(output_dir):
    held = sorted(n for n in os.listdir(output_dir) if n == STATE_FILE or n.startswith("ckpt-"))
    if held:
      raise CheckpointError(f"--output_dir {output_dir} already holds a checkpoint ({held[0]}); "
                            f"choose a new directory (nothing was overwritten)")


def _variable_maps(path: str) -> tuple[dict, dict]:
  try:
    reader = tf.train.load_checkpoint(path)
    dtypes = reader.get_variable_to_dtype_map()
    shapes = reader.get_variable_to_shape_map()
  except _UNREADABLE as e:
    raise _unreadable(path, e) from None
  dtypes.pop(OBJECT_GRAPH_KEY, None)
  shapes.pop(OBJECT_GRAPH_KEY, None)
  return dtypes, shapes


def _check_same_variables(path: str, newest: str, dtypes: dict, shapes: dict,
                          newest_dtypes: dict, newest_shapes: dict) -> None:
  """One line naming the first model key (or moving-average key) in sorted order where
  ``path`` and ``newest`` differ. The rest of the state may differ (e.g. a resume that added
  a loss scaler or ran without the data position): only the newest's is kept."""
  def model(keys):
    return {key for key in keys if key.startswith(AVERAGED_PREFIXES)}

  differences = {}
  for key in model(dtypes) ^ model(newest_dtypes):
    holder, other = (path, newest) if key in dtypes else (newest, path)
    differences[key] = f"in {os.path.basename(holder)} but not in {os.path.basename(other)}"
  for key in model(dtypes) & model(newest_dtypes):
    if dtypes[key] != newest_dtypes[key]:
      differences[key] = f"dtype {dtypes[key].name} vs {newest_dtypes[key].name}"
    elif list(shapes[key]) != list(newest_shapes[key]):
      differences[key] = f"shape {list(shapes[key])} vs {list(newest_shapes[key])}"
  if differences:
    key = min(differences)
    raise CheckpointError(
        f"{path} and {newest} differ at {key} ({differences[key]}"
        f"{f', and {len(differences) - 1} more key(s)' if len(differences) > 1 else ''}): "
        f"they were written by different models or configs; average checkpoints of one run")


def _unreadable(path: str, error: BaseException) -> CheckpointError:
  reason = UnreadableCheckpoint(path, error).reason
  return CheckpointError(f"checkpoint {path} is unreadable ({reason}): it is truncated or "
                         f"corrupt; average without it (--checkpoints with the others)")


# ---------------------------------------------------------------------------- tensors
def _read(path: str, keys: list[str], dtypes: dict) -> dict[str, tf.Tensor]:
  """Tensors of ``path`` as saved (RestoreV2 reads any dtype, serialized state included)."""
  keys = [OBJECT_GRAPH_KEY] + keys
  kinds = [tf.string] + [dtypes[k] for k in keys[1:]]
  try:
    values = tf.raw_ops.RestoreV2(prefix=path, tensor_names=keys,
                                  shape_and_slices=[""] * len(keys), dtypes=kinds)
  except _UNREADABLE as e:
    raise _unreadable(path, e) from None
  return dict(zip(keys, values))


def _mean(checkpoints: list[str], keys: list[str], dtypes: dict) -> dict[str, tf.Tensor]:
  """The mean of every key over ``checkpoints``, in float64, cast back to its saved dtype.

  One checkpoint's variable at a time: memory stays at about one model in float64.
  """
  sums = {}
  for path in checkpoints:
    try:
      reader = tf.train.load_checkpoint(path)
      for key in keys:
        value = tf.cast(reader.get_tensor(key), tf.float64)
        sums[key] = value if key not in sums else sums[key] + value
    except _UNREADABLE as e:
      raise _unreadable(path, e) from None
  n = float(len(checkpoints))
  return {key: tf.cast(total / n, dtypes[key]) for key, total in sums.items()}


# ---------------------------------------------------------------------------- writing
def _write(directory: str, name: str, tensors: dict[str, tf.Tensor],
           checkpoints: list[str]) -> None:
  keys = sorted(tensors)
  tf.raw_ops.SaveV2(prefix=os.path.join(directory, name), tensor_names=keys,
                    shape_and_slices=[""] * len(keys), tensors=[tensors[k] for k in keys])
  for config in _config_files(checkpoints[-1]):
    shutil.copy2(config, os.path.join(directory, os.path.basename(config)))
  with open(os.path.join(directory, PROVENANCE_FILE), "w", encoding="utf-8") as f:
    json.dump({"checkpoints": [os.path.abspath(p) for p in checkpoints],
               "steps": [checkpoint_step(p) for p in checkpoints]}, f, indent=2)
    f.write("\n")
  # The state file tf.train.latest_checkpoint reads (a text proto, as CheckpointManager
  # writes it); the path is relative so that the directory can be renamed. CheckpointManager
  # (--continue_learning) lists only checkpoints newer than last_preserved_timestamp.
  now = time.time()
  with open(os.path.join(directory, STATE_FILE), "w", encoding="utf-8") as f:
    f.write(f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n'
            f"all_model_checkpoint_timestamps: {now}\n"
            f"last_preserved_timestamp: {now - 1.0}\n")


def _config_files(newest: str) -> list[str]:
  """The resolved config of the run ``newest`` belongs to (a best checkpoint's run is the
  parent of best_models/)."""
  directory = os.path.dirname(os.path.abspath(newest))
  if os.path.basename(directory) == BEST_DIR:
    directory = os.path.dirname(directory)
  paths = [os.path.join(directory, name) for name in CONFIG_FILES]
  return [p for p in paths if os.path.isfile(p)]


def _write_directory(output_dir: str, fill) -> None:
  """Calls ``fill(tmp)`` on a temporary directory beside ``output_dir``, then moves it into
  place: a new directory is one rename; into an existing one (empty, or holding no
  checkpoint) the files move one by one, index and then state file last, as TensorFlow
  itself writes them, so eval never sees a partial checkpoint."""
  parent = os.path.dirname(os.path.abspath(output_dir))
  os.makedirs(parent, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(output_dir))}.averaging-",
                         dir=parent)
  try:
    os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp's 0700 would outlive the rename
    fill(tmp)
    if not os.path.exists(output_dir):
      os.rename(tmp, output_dir)
      return
    names = sorted(os.listdir(tmp), key=lambda n: (n == STATE_FILE, n.endswith(".index"), n))
    for name in names:
      os.replace(os.path.join(tmp, name), os.path.join(output_dir, name))
    os.rmdir(tmp)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
