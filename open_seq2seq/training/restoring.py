"""Reading checkpoints back: across dtypes, from another run (``load_model``), and the one
error every unreadable checkpoint becomes.

Variables are found by their checkpoint key (TensorFlow's object-graph naming), so a run
trained in "mixed" restores into float16 and back, and ``load_model`` matches by key and
shape (rows of a changed vocabulary by token: :mod:`open_seq2seq.training.vocab_remap`).
"""

from __future__ import annotations

import os
from typing import Any, Collection

import tensorflow as tf

from open_seq2seq.errors import CheckpointError
from open_seq2seq.training.checkpoint_files import latest_in

#: What TensorFlow raises reading a truncated or corrupt checkpoint (a short ``.data``
#: file: IndexError; a bad checksum or an empty ``.index``: an OpError).
_UNREADABLE = (IndexError, tf.errors.OpError)


class UnreadableCheckpoint(CheckpointError):
  """A checkpoint whose files cannot be read back (truncated, corrupt, missing parts)."""

  def __init__(self, path: str, error: BaseException):
    text = str(error).strip()
    self.path = path
    self.reason = (text.splitlines()[0] if text else type(error).__name__)[:200]
    name = os.path.basename(path)
    super().__init__(
        f"checkpoint {path} is unreadable ({self.reason}): it is truncated or corrupt; "
        f"--continue_learning falls back to the newest checkpoint that reads, and eval/infer "
        f"use an earlier one once this one's files ({name}.index, {name}.data-*) are removed")


class ModelMismatch(CheckpointError):
  """A checkpoint whose model variables are not this model's (names or shapes differ): it was
  written by a model of other sizes, layers or vocabularies."""

  def __init__(self, path: str, problems: list[str]):
    self.path = path
    self.problems = problems
    super().__init__(f"{path}: its weights do not fit this model ({'; '.join(problems)}): it "
                     f"was written by a different model or config; give the settings it was "
                     f"trained with, or --allow_model_changes to load what fits")


def model_mismatches(root: tf.train.Checkpoint, path: str, count_unused: bool = True
                     ) -> list[str]:
  """How the model variables (``model/...``) of ``root`` and of checkpoint ``path`` differ:
  variables only one of them has and shapes that differ, one phrase each (empty: they fit).

  ``count_unused``: whether variables of the checkpoint that ``root`` lacks count. A model
  built for inference may create some only when it first decodes (a decoder's embedding):
  they are restored then, so with the run's own settings they are no mismatch."""
  try:
    shapes = tf.train.load_checkpoint(path).get_variable_to_shape_map()
  except _UNREADABLE as e:
    raise UnreadableCheckpoint(path, e) from None
  saved = {key for key in shapes if _is_weight(key)}
  ours = {key: var for key, var in variable_keys(root).items() if _is_weight(key)}
  missing, unused = sorted(set(ours) - saved), sorted(saved - set(ours)) if count_unused else []
  reshaped = [f"{_shown(key)} {list(shapes[key])} in it, {list(var.shape)} here"
              for key, var in sorted(ours.items())
              if key in saved and list(shapes[key]) != list(var.shape)]
  problems = []
  if missing:
    problems.append(f"{len(missing)} of the model's variables are not in it "
                    f"({_listed(missing)})")
  if unused:
    problems.append(f"{len(unused)} of its variables are not in the model ({_listed(unused)})")
  if reshaped:
    problems.append(f"{len(reshaped)} have another shape ({'; '.join(reshaped[:2])}"
                    + (", ..." if len(reshaped) > 2 else "") + ")")
  return problems


def _is_weight(key: str) -> bool:
  """A model variable that a model of the same settings has in every mode: not an optimizer
  slot, nor the state of a random-number generator (Keras makes those for layers that draw
  at run time, e.g. a decoder's sampling only while training)."""
  return (key.startswith("model/") and ".OPTIMIZER_SLOT" not in key
          and not _shown(key).endswith("seed_state"))


def _shown(key: str) -> str:
  """A variable's name as the model names it, from its checkpoint key."""
  name = key.removeprefix("model/").removeprefix("weights/")
  name = name.removesuffix("/.ATTRIBUTES/VARIABLE_VALUE")
  return name.replace(".S", "/").replace("..", ".")


def _listed(keys: list[str]) -> str:
  return ", ".join(_shown(k) for k in keys[:2]) + (", ..." if len(keys) > 2 else "")


def variable_keys(root: tf.train.Checkpoint) -> dict[str, Any]:
  """Maps the checkpoint key of every variable reachable from ``root`` to the variable.

  Keys follow TensorFlow's object-graph naming (``model/encoder/.../.ATTRIBUTES/VARIABLE_VALUE``)
  found breadth-first, the way ``tf.train.Checkpoint`` names them.
  """
  view = tf.train.TrackableView(root)
  keys: dict[str, Any] = {}
  seen = {id(root)}
  queue = [("", root)]
  while queue:
    path, obj = queue.pop(0)
    for name, child in view.children(obj).items():
      if id(child) in seen:
        continue
      seen.add(id(child))
      # escaped as TensorFlow escapes names in checkpoint keys ("." -> "..", "/" -> ".S")
      escaped = name.replace(".", "..").replace("/", ".S")
      child_path = f"{path}/{escaped}" if path else escaped
      if isinstance(child, tf.Variable) or _is_keras_variable(child):
        keys[f"{child_path}/.ATTRIBUTES/VARIABLE_VALUE"] = child
      else:
        queue.append((child_path, child))
  return keys


def _is_keras_variable(obj: Any) -> bool:
  import keras  # local: keep this module importable without building Keras state
  return isinstance(obj, keras.Variable)


def restore_across_dtypes(root: tf.train.Checkpoint, path: str,
                          expect_partial: bool = False, allow_changes: bool = False,
                          count_unused: bool = True) -> list[str]:
  """Restores ``root`` from ``path`` even if the run that wrote it used another ``dtype``.

  "float32" and "mixed" runs store float32 weights and optimizer state, "float16" runs store
  float16 ones. TensorFlow refuses to restore a variable saved in another dtype, so when any
  variable differs, every variable is read and cast instead (objects that are not variables,
  such as the input pipeline position, then start afresh).

  Args:
    root: the checkpoint object to restore into (its variables already built).
    expect_partial: the checkpoint may hold more than ``root`` (e.g. the optimizer when only
      weights are wanted).
    allow_changes: when the model variables differ (:func:`model_mismatches`), load every
      variable whose key and shape match and leave the others as they are, instead of
      raising (a deliberate change of the model: ``--allow_model_changes``).

  Returns:
    The keys of the variables that were cast (empty when dtypes matched).

  Raises:
    ModelMismatch: the model variables of ``root`` and of the checkpoint differ.
  """
  problems = model_mismatches(root, path, count_unused)
  if problems and not allow_changes:
    raise ModelMismatch(path, problems)
  try:
    if problems:
      return _restore_what_fits(root, path)
    return _restore_across_dtypes(root, path, expect_partial)
  except _UNREADABLE as e:
    raise UnreadableCheckpoint(path, e) from None


def _restore_what_fits(root: tf.train.Checkpoint, path: str) -> list[str]:
  """Every variable of ``root`` found in ``path`` with its shape, cast to its dtype; returns
  the keys cast."""
  reader = tf.train.load_checkpoint(path)
  shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
  cast = []
  for key, var in sorted(variable_keys(root).items()):
    if key in shapes and list(shapes[key]) == list(var.shape):
      if dtypes[key] != tf.as_dtype(var.dtype):
        cast.append(key)
      var.assign(tf.cast(reader.get_tensor(key), var.dtype))
  return cast


def _restore_across_dtypes(root: tf.train.Checkpoint, path: str,
                           expect_partial: bool) -> list[str]:
  reader = tf.train.load_checkpoint(path)
  saved = reader.get_variable_to_dtype_map()
  variables = variable_keys(root)
  cast = sorted(key for key, var in variables.items()
                if key in saved and saved[key] != tf.as_dtype(var.dtype))
  if not cast:
    try:
      status = root.restore(path)
      if expect_partial:
        status.expect_partial().assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.InvalidArgumentError) as e:
      detail = str(e).strip().splitlines()[0][:300]
      raise CheckpointError(f"{path}: does not match this model; it was written by a "
                            f"different model or config ({detail})") from None
    return []
  shapes = reader.get_variable_to_shape_map()
  for key, var in sorted(variables.items()):
    if key not in saved:
      if not key.startswith("model/"):
        continue  # e.g. a loss scaler added on resume: keeps its initial state
      raise CheckpointError(f"{path}: holds no {key}; it was written by a different model")
    if list(shapes[key]) != list(var.shape):
      raise CheckpointError(f"{path}: {key} has shape {shapes[key]}, the model "
                            f"{list(var.shape)}; it was written by a different model")
    var.assign(tf.cast(reader.get_tensor(key), var.dtype))
  return cast


def checkpoint_path(source: str) -> str:
  """The checkpoint ``load_model`` reads: ``source`` itself (a checkpoint prefix), or the
  latest checkpoint of ``source`` when it is a run directory (found from the files, without a
  state file)."""
  path = latest_in(source)[0] if os.path.isdir(source) else source
  if not path or not tf.io.gfile.exists(path + ".index"):
    raise CheckpointError(f"load_model: no checkpoint found at {source}")
  return path


def load_pretrained(root: tf.train.Checkpoint, source: str,
                    exclude: Collection[str] = ()) -> tuple[list[str], list[str]]:
  """Initialises variables of ``root`` from another run, matching by key and shape.

  Args:
    root: a checkpoint object whose ``model`` holds the variables to initialise.
    source: a run directory (its latest checkpoint is used) or a checkpoint prefix.
    exclude: keys left alone (and left out of the lists returned): the caller loads them
      itself (rows of a changed vocabulary, :mod:`open_seq2seq.training.vocab_remap`).

  Returns:
    (loaded keys, skipped keys with the reason). Only model variables (``model/...``) are
    read: optimizer slots and steps start afresh.
  """
  path = checkpoint_path(source)
  try:
    return _load_pretrained(root, source, path, frozenset(exclude))
  except _UNREADABLE as e:
    raise UnreadableCheckpoint(path, e) from None


def _load_pretrained(root: tf.train.Checkpoint, source: str, path: str,
                     exclude: frozenset[str]) -> tuple[list[str], list[str]]:
  reader = tf.train.load_checkpoint(path)
  shapes = reader.get_variable_to_shape_map()
  loaded, skipped = [], []
  for key, var in sorted(variable_keys(root).items()):
    if not key.startswith("model/") or key in exclude:
      continue
    if key not in shapes:
      skipped.append(f"{key} (not in {source})")
      continue
    if list(shapes[key]) != list(var.shape):
      skipped.append(f"{key} (shape {list(var.shape)} != {list(shapes[key])})")
      continue
    value = reader.get_tensor(key)
    var.assign(tf.cast(value, var.dtype))
    loaded.append(key)
  return loaded, skipped
