"""``load_model`` across a changed vocabulary: the rows of embeddings and output layers are
mapped by token (OpenNMT-tf's ``update_vocab``), from the vocabularies a run records.

**What is indexed by a vocabulary** is declared, not guessed from shapes. A component lists
its vocabulary-indexed variables in ``VOCAB_INDEXED`` (attribute path -> ``(role, axis)``;
role ``"input"``: the tokens it reads, ``"output"``: the tokens it predicts), and the model
says which of its vocabularies each role of each component is (``VOCABULARY_ROLES``, e.g.
``{"encoder": {"input": "source"}, "decoder": {"input": "target", "output": "target"}}``),
gives the token of every id of each (``vocabularies()``) and reads a vocabulary file as its
data layer would (``read_vocabulary_file``; ``vocabulary_files`` names those of a config).

**The source run's vocabularies**: a training run records its own in
``<logdir>/vocabularies.json`` when it starts (the token of every id, special tokens and
fillers included: an edited vocabulary file cannot mislead a later load). ``load_model``
reads the record of the run it loads from; for a run made before the record, the files its
``config.yaml`` names (with a warning: they may have been edited since); and
``load_model_vocab_files`` ({name: file}) gives them explicitly, e.g. for a checkpoint
without its run directory. With none of these, rows load by index where shapes match, as
before (one notice).

**The mapping**: a token in both vocabularies takes its old row, a new token gets a fresh
one drawn from the fresh table's values, independent of the row its id had
(:func:`remap_rows`), a removed token's row is dropped; special tokens are tokens like the
others (same strings, so they map to themselves). Fillers of a vocabulary padded to a
multiple of eight (``<unused0>``...) and the extra rows of tables padded to a multiple of
eight (``pad_embeddings_2_eight``) never carry a learned token: they keep their fresh values.
An identical vocabulary takes the plain path (key and shape). Optimizer slots are never
loaded (:func:`~open_seq2seq.training.restoring.load_pretrained` reads model variables only).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.training.checkpoints import BEST_DIR
from open_seq2seq.training.restoring import (checkpoint_path, load_pretrained,
                                             variable_keys)
from open_seq2seq.utils.io import atomic_write_text

#: The file in a run directory that records the token of every id of each vocabulary.
VOCAB_RECORD = "vocabularies.json"
#: Filler tokens of vocabularies padded to a multiple of eight (data/text2text/vocab.py,
#: data/lm/vocab.py): never in the data, so their rows hold nothing learned.
_FILLER = re.compile(r"<unused\d+>\Z")
#: Rows a table may have beyond its vocabulary (padded to a multiple of eight).
_MAX_PADDING_ROWS = 7


#: Seed of the shuffle that draws new tokens' rows (fixed: a load is reproducible).
ADDED_ROWS_SEED = 20240601


def _is_token(token: str) -> bool:
  return bool(token) and not _FILLER.match(token)


@dataclasses.dataclass(frozen=True)
class VocabMapping:
  """Which row of the new table takes which row of the old one.

  Attributes:
    new_rows, old_rows: row ``new_rows[i]`` of the new table takes row ``old_rows[i]`` of
      the old one (the tokens in both vocabularies).
    added_rows: the rows of the tokens in the new vocabulary alone.
    kept, new, removed: tokens in both, in the new vocabulary alone, in the old one alone.
  """

  new_rows: np.ndarray
  old_rows: np.ndarray
  added_rows: np.ndarray
  kept: int
  new: int
  removed: int

  def summary(self, name: str) -> str:
    return (f"{name} vocabulary remapped: {self.kept} kept, {self.new} new (initialised), "
            f"{self.removed} removed")


def vocabulary_mapping(old_tokens: Sequence[str], new_tokens: Sequence[str]) -> VocabMapping:
  """The mapping from a table indexed by ``old_tokens`` to one indexed by ``new_tokens``
  (the token of each id; fillers and empty entries are no tokens)."""
  old_ids = {token: i for i, token in enumerate(old_tokens) if _is_token(token)}
  new_ids = {token: i for i, token in enumerate(new_tokens) if _is_token(token)}
  pairs = [(i, old_ids[token]) for token, i in new_ids.items() if token in old_ids]
  new_rows = np.array([n for n, _ in pairs], dtype=np.int64)
  old_rows = np.array([o for _, o in pairs], dtype=np.int64)
  added_rows = np.array(sorted(i for token, i in new_ids.items() if token not in old_ids),
                        dtype=np.int64)
  return VocabMapping(new_rows, old_rows, added_rows, kept=len(pairs),
                      new=len(new_ids) - len(pairs),
                      removed=len(old_ids) - len(pairs))


def remap_rows(old_value: np.ndarray, fresh_value: np.ndarray, mapping: VocabMapping,
               axis: int) -> np.ndarray:
  """``fresh_value`` with the slices along ``axis`` of the tokens both vocabularies hold
  replaced by their slices of ``old_value`` (in ``fresh_value``'s dtype).

  A new token's slice is drawn afresh from the fresh table's own values (all of them,
  shuffled by a fixed seed): the initializer's distribution, yet independent of the row the
  same id had. Keeping the fresh row itself would not be: with the run's random seed, a table
  of another size starts with the same leading rows as the source run's did, so a new token
  would start where the old token of its id started and compete with it."""
  old, fresh = np.asarray(old_value), np.asarray(fresh_value)
  if old.ndim != fresh.ndim or np.delete(old.shape, axis).tolist() != \
      np.delete(fresh.shape, axis).tolist():
    raise ValueError(f"tables of shapes {list(old.shape)} and {list(fresh.shape)} differ "
                     f"beyond axis {axis}")
  result = np.array(fresh, copy=True)
  rows = np.moveaxis(result, axis, 0)  # a view: writing it writes result
  rows[mapping.new_rows] = np.moveaxis(old, axis, 0)[mapping.old_rows].astype(result.dtype)
  if len(mapping.added_rows):
    pool = np.random.default_rng(ADDED_ROWS_SEED).permutation(fresh.reshape(-1))
    shape = (len(mapping.added_rows),) + rows.shape[1:]
    rows[mapping.added_rows] = np.resize(pool, shape).astype(result.dtype)
  return result


@dataclasses.dataclass(frozen=True)
class IndexedVariable:
  """A variable whose slices along ``axis`` are the ids of vocabulary ``vocabulary``."""
  variable: Any
  vocabulary: str
  axis: int
  where: str


def indexed_variables(model: Any) -> list[IndexedVariable]:
  """The vocabulary-indexed variables of ``model``'s components (their ``VOCAB_INDEXED``
  with the model's ``VOCABULARY_ROLES``), each once (a shared embedding is its owner's)."""
  roles: Mapping[str, Mapping[str, str]] = getattr(model, "VOCABULARY_ROLES", {})
  found, seen = [], set()
  for slot, layer in model.named_layers.items():
    for path, (role, axis) in getattr(layer, "VOCAB_INDEXED", {}).items():
      name = roles.get(slot, {}).get(role)
      variable = _attribute(layer, path)
      if name is None or variable is None or id(variable) in seen:
        continue  # not a vocabulary of this model, or a part this configuration lacks
      seen.add(id(variable))
      found.append(IndexedVariable(variable, name, axis, f"{slot}.{path}"))
  return found


def _attribute(obj: Any, path: str) -> Any:
  for name in path.split("."):
    obj = getattr(obj, name, None)
    if obj is None:
      return None
  return obj


def model_vocabularies(model: Any) -> dict[str, list[str]]:
  """The model's vocabularies (name -> the token of every id); empty for families whose
  variables no vocabulary indexes."""
  method = getattr(model, "vocabularies", None)
  return {name: list(tokens) for name, tokens in method().items()} if method else {}


def record_vocabularies(logdir: str, model: Any) -> None:
  """Writes ``<logdir>/vocabularies.json`` (atomically) for a model with vocabularies."""
  vocabularies = model_vocabularies(model)
  if vocabularies:
    os.makedirs(logdir, exist_ok=True)
    atomic_write_text(os.path.join(logdir, VOCAB_RECORD),
                      json.dumps(vocabularies, ensure_ascii=False, indent=0) + "\n")


def _run_directory(source: str) -> str:
  """The run directory of ``source`` (a run directory, or one of its checkpoints)."""
  if os.path.isdir(source):
    return source
  folder = os.path.dirname(os.path.abspath(source))
  return os.path.dirname(folder) if os.path.basename(folder) == BEST_DIR else folder


def read_record(run_dir: str) -> dict[str, list[str]] | None:
  """The vocabularies ``run_dir`` recorded (None: it has no record)."""
  path = os.path.join(run_dir, VOCAB_RECORD)
  if not os.path.isfile(path):
    return None
  try:
    with open(path, encoding="utf-8") as f:
      record = json.load(f)
  except (OSError, ValueError) as e:
    raise ConfigError(f"{path}: unreadable ({' '.join(str(e).split())[:120]}); restore it, "
                      f"or give the run's vocabulary files in load_model_vocab_files") from None
  if not isinstance(record, dict) or not all(
      isinstance(tokens, list) and all(isinstance(t, str) for t in tokens)
      for tokens in record.values()):
    raise ConfigError(f"{path}: not a {{name: [token, ...]}} record; restore it, or give the "
                      f"run's vocabulary files in load_model_vocab_files")
  return record


def _from_config(model: Any, run_dir: str, warn: Callable[[str], None]
                 ) -> dict[str, list[str]] | None:
  """A run made before vocabularies were recorded: the files its config.yaml names."""
  import yaml
  try:
    with open(os.path.join(run_dir, "config.yaml"), encoding="utf-8") as f:
      document = yaml.safe_load(f)
  except (OSError, yaml.YAMLError):
    return None
  train = document.get("train") if isinstance(document, dict) else None
  files = model.vocabulary_files(train) if isinstance(train, dict) and \
      hasattr(model, "vocabulary_files") else {}
  for name, path in files.items():
    if not os.path.isfile(path):
      raise ConfigError(f"load_model: {run_dir} records no vocabularies ({VOCAB_RECORD}) and "
                        f"its {name} vocabulary file {path} (config.yaml) is missing; give "
                        f"the file it was trained with in load_model_vocab_files/{name}")
  if files:
    warn(f"warning: load_model: {run_dir} has no {VOCAB_RECORD} (made before runs recorded "
         f"their vocabularies): its vocabularies are read from the files its config.yaml "
         f"names ({', '.join(files.values())}); if they were edited since, give the "
         f"originals in load_model_vocab_files")
  return {name: model.read_vocabulary_file(path) for name, path in files.items()}


def source_vocabularies(model: Any, source: str, files: Mapping[str, str] | None,
                        warn: Callable[[str], None]) -> dict[str, list[str]]:
  """The vocabularies the checkpoint of ``source`` was trained with, as far as known:
  ``files`` (load_model_vocab_files) first, then the run's record, then its config.yaml."""
  ours = model_vocabularies(model)
  unknown = sorted(set(files or {}) - set(ours))
  if unknown:
    names = ", ".join(sorted(ours)) or "none"
    raise ConfigError(f"load_model_vocab_files/{unknown[0]}: not a vocabulary of "
                      f"{type(model).__name__} (its vocabularies: {names})")
  run_dir = _run_directory(source)
  explicit = {name: model.read_vocabulary_file(path)
              for name, path in (files or {}).items()}
  recorded = {} if set(explicit) >= set(ours) else \
      read_record(run_dir) or _from_config(model, run_dir, warn) or {}
  return {**{k: v for k, v in recorded.items() if k in ours}, **explicit}


def load_model(root: tf.train.Checkpoint, model: Any, params: Mapping[str, Any],
               log: Callable[[str], None] | None = None) -> None:
  """``load_model``: initialises ``root``'s model variables from another run by key and
  shape, the rows of vocabulary-indexed variables by token when the vocabularies differ, and
  reports both (``log``: the chief's console, None elsewhere).

  Raises:
    ConfigError: ``load_model_vocab_files`` without ``load_model`` or naming no vocabulary
      of the model, or a source vocabulary that does not fit the checkpoint's tables.
  """
  source, files = params["load_model"], params.get("load_model_vocab_files")
  if not source:
    if files:
      raise ConfigError("load_model_vocab_files: given without load_model; set load_model "
                        "to the run (or checkpoint) these vocabularies belong to")
    return
  say = log or (lambda line: None)
  path = checkpoint_path(source)
  ours = model_vocabularies(model)
  theirs = source_vocabularies(model, source, files, say) if ours else {}
  if ours and not theirs:
    say(f"load_model: {source} records no vocabularies ({VOCAB_RECORD}): vocabulary rows "
        f"load by index where shapes match; give load_model_vocab_files if they differ")
  keys = {id(var): key for key, var in variable_keys(root).items()}
  shapes = tf.train.load_checkpoint(path).get_variable_to_shape_map()
  remap = [v for v in indexed_variables(model) if v.vocabulary in theirs and
           keys.get(id(v.variable)) in shapes and (
               theirs[v.vocabulary] != ours[v.vocabulary] or
               list(shapes[keys[id(v.variable)]]) != list(v.variable.shape))]
  loaded, skipped = load_pretrained(root, source, exclude={keys[id(v.variable)] for v in remap})
  mappings = {name: vocabulary_mapping(theirs[name], ours[name])
              for name in sorted({v.vocabulary for v in remap})}
  reader = tf.train.load_checkpoint(path)
  for item in remap:
    key = keys[id(item.variable)]
    old = reader.get_tensor(key)
    rows, size = old.shape[item.axis], len(theirs[item.vocabulary])
    if not size <= rows <= size + _MAX_PADDING_ROWS:
      raise ConfigError(f"load_model: {item.where} has {rows} rows in {path}, but its "
                        f"{item.vocabulary} vocabulary has {size} tokens: that is not the "
                        f"vocabulary it was trained with; give the right files in "
                        f"load_model_vocab_files/{item.vocabulary}")
    try:
      value = remap_rows(old, item.variable.numpy(), mappings[item.vocabulary], item.axis)
    except ValueError as e:
      skipped.append(f"{key} ({e})")
      continue
    item.variable.assign(value)
    loaded.append(key)
  say(f"load_model: initialised {len(loaded)} variables from {source}, skipped "
      f"{len(skipped)}" + (": " + "; ".join(skipped[:10]) if skipped else ""))
  for name, mapping in mappings.items():
    if theirs[name] != ours[name]:
      say(f"load_model: {mapping.summary(name)}")


__all__ = ["VOCAB_RECORD", "VocabMapping", "IndexedVariable", "vocabulary_mapping",
           "remap_rows", "indexed_variables", "model_vocabularies", "record_vocabularies",
           "read_record", "source_vocabularies", "load_model"]
