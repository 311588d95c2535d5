"""Small text datasets for the data-pipeline tests."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def length_dataset(lengths, with_target: bool = True) -> tf.data.Dataset:
  """Unbatched dict elements: ``source`` of each of ``lengths`` (ids 4..), a target one id
  longer (all 5s) unless ``with_target`` is False, their lengths, and ``id`` = position."""
  def gen():
    for i, n in enumerate(lengths):
      element = {"source": np.arange(4, 4 + n, dtype=np.int32), "source_length": np.int32(n),
                 "id": np.int64(i)}
      if with_target:
        element["target"] = np.full(n + 1, 5, np.int32)
        element["target_length"] = np.int32(n + 1)
      yield element
  spec = {"source": tf.TensorSpec([None], tf.int32), "source_length": tf.TensorSpec([], tf.int32),
          "id": tf.TensorSpec([], tf.int64)}
  if with_target:
    spec.update(target=tf.TensorSpec([None], tf.int32),
                target_length=tf.TensorSpec([], tf.int32))
  return tf.data.Dataset.from_generator(gen, output_signature=spec)


# ----------------------------------------------------------------- encoder/decoder unit tests
#: Ids of the toy vocabularies: padding, start and end symbols.
PAD, GO, EOS = 0, 2, 3


def batch_of(sequences, vocab):
  """Pads token lists (EOS appended) into (ids [B, T], lengths [B])."""
  rows = [list(s) + [EOS] for s in sequences]
  width = max(len(r) for r in rows)
  ids = np.full((len(rows), width), PAD, np.int32)
  for i, r in enumerate(rows):
    ids[i, :len(r)] = r
  assert ids.max() < vocab
  return tf.constant(ids), tf.constant([len(r) for r in rows], tf.int32)


def random_tokens(rng, lengths, vocab):
  """Token lists of the given lengths drawn from the real ids (4 .. vocab - 1)."""
  return [rng.integers(4, vocab, size=n).tolist() for n in lengths]


def run(model, src, tgt=None, training=False):
  """(encoder output, decoder output) of ``model.encoder`` / ``model.decoder`` on a batch."""
  enc = model.encoder({"source_tensors": src}, training=training)
  inputs = {"encoder_output": enc}
  if tgt is not None:
    inputs["target_tensors"] = tgt
  return enc, model.decoder(inputs, training=training)
