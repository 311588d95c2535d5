"""Writes a trained model as a SavedModel that serves without this package.

``run.py --mode=export --export_dir=DIR`` (see :mod:`open_seq2seq.cli`) builds the model for
inference, creates its variables on the adapter's example input, restores the checkpoint and
calls :func:`save`: one ``serving_default`` signature from the family's
:class:`~open_seq2seq.serving.adapter.ServingAdapter`, plus ``assets.extra/open_seq2seq.json``
describing it (and, for a speech model, its spectrogram settings: ``audio_features``). The
directory is written under a temporary name and renamed into place, so an interrupted export
never leaves a half-written model where a server would load it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from typing import Any

import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.serving.adapter import ServingAdapter

__all__ = ["check_export_dir", "save", "METADATA_FILE"]

#: The export's description, beside the SavedModel's own files.
METADATA_FILE = os.path.join("assets.extra", "open_seq2seq.json")


def check_export_dir(export_dir: str | None) -> str:
  """``export_dir`` if a new export can be written there, else a one-line error."""
  if not export_dir:
    raise ConfigError("--mode=export needs --export_dir=DIR (a directory that does not "
                      "exist yet)")
  export_dir = os.path.abspath(export_dir)
  if os.path.exists(export_dir):
    raise ConfigError(f"--export_dir {export_dir} already exists; choose a new directory "
                      f"(an export never overwrites one)")
  parent = os.path.dirname(export_dir)
  if not os.path.isdir(parent):
    raise ConfigError(f"--export_dir: directory {parent} does not exist")
  return export_dir


class _Exported(tf.Module):
  """The saved object: the model's layers (their variables) and the adapter (its tables)."""

  def __init__(self, layers: list, adapter: ServingAdapter):
    super().__init__(name="open_seq2seq_export")
    self.model_layers = list(layers)
    self.adapter = adapter


def serving_function(model: Any, adapter: ServingAdapter) -> tf.types.experimental.GenericFunction:
  """The traced raw-inputs -> outputs function of ``model`` behind ``adapter``."""
  names = list(adapter.inputs)
  specs = [tf.TensorSpec(spec.shape, spec.dtype, name=name)
           for name, (spec, _) in adapter.inputs.items()]

  def serve(*args):
    inputs = dict(zip(names, args))
    batch = adapter.to_batch(inputs)
    return adapter.to_outputs(inputs, batch, model.predict(batch))

  return tf.function(serve, input_signature=specs, autograph=False)


def save(model: Any, adapter: ServingAdapter, export_dir: str,
         metadata: dict[str, Any], extra: Any = None) -> dict[str, Any]:
  """Saves ``model`` (variables created and restored) with ``adapter``'s signature, and
  ``extra``'s if given (a tf.Module with ``signatures()`` -> name -> concrete function and
  ``describe_signatures()``, such as a streaming recognizer's).

  Returns the metadata written to :data:`METADATA_FILE`.
  """
  function = serving_function(model, adapter)
  exported = _Exported(model.layers, adapter)
  exported.serve = function
  concrete = function.get_concrete_function()
  signatures = {"serving_default": concrete}
  described = {"serving_default": adapter.describe()}
  if extra is not None:
    exported.extra = extra
    signatures.update(extra.signatures())
    described.update(extra.describe_signatures())
  metadata = dict(metadata, signatures=described)
  features = getattr(model, "features", None)
  if dataclasses.is_dataclass(features) and not isinstance(features, type):
    # a speech model's spectrogram settings: what a model reading its frames (a synthesizer
    # loading an exported vocoder, open_seq2seq.models.vocoder_link) must share with it
    metadata["audio_features"] = dataclasses.asdict(features)
  partial = f"{export_dir}.partial-{os.getpid()}"
  shutil.rmtree(partial, ignore_errors=True)
  try:
    tf.saved_model.save(exported, partial, signatures=signatures)
    os.makedirs(os.path.join(partial, "assets.extra"), exist_ok=True)
    with open(os.path.join(partial, METADATA_FILE), "w", encoding="utf-8") as f:
      json.dump(metadata, f, indent=2)  # insertion order: the first output is the main one
      f.write("\n")
    os.rename(partial, export_dir)
  finally:
    shutil.rmtree(partial, ignore_errors=True)
  return metadata
