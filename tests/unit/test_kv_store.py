"""The key/value store of incremental Transformer decoding (parts/transformer/kv_store.py)."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.parts.transformer.attention import SelfAttention
from open_seq2seq.parts.transformer.kv_store import KeyValueStore

LAYERS, HEADS, DEPTH, SLOTS = 2, 2, 3, 3


def keys_values(step: int, layer: int):
  """Distinct keys and values [slots, heads, 1, depth] of a position and layer."""
  base = np.arange(SLOTS * HEADS * DEPTH, dtype=np.float32).reshape(SLOTS, HEADS, 1, DEPTH)
  return (tf.constant(base + 1000 * step + 100 * layer),
          tf.constant(-(base + 1000 * step + 100 * layer)))


def test_each_hypothesis_reads_the_keys_of_its_ancestors():
  """Through its rows (which beam search reorders), a hypothesis reads the keys and values
  that its ancestor slots wrote at each earlier position; the buffer itself never moves."""
  store = KeyValueStore(LAYERS, HEADS, DEPTH)
  buffer = store.buffer(SLOTS, 3, tf.float32)
  rows = store.initial_rows(SLOTS)
  parents = [[2, 2, 0], [1, 0, 0]]  # beam reorder after steps 0 and 1
  lineage = [[s] for s in range(SLOTS)]  # slot that computed each position, per hypothesis
  for step in range(3):
    cache, rows = store.step(buffer, rows, step)
    assert rows.shape == (SLOTS, step + 1, HEADS)
    for layer in range(LAYERS):
      k, v, cache = cache.append(*keys_values(step, layer))
      assert k.shape == (SLOTS, HEADS, step, DEPTH)  # the earlier positions
      for slot in range(SLOTS):
        for t, source in enumerate(lineage[slot][:step]):
          written_k, written_v = keys_values(t, layer)
          np.testing.assert_array_equal(k[slot, :, t], written_k[source, :, 0])
          np.testing.assert_array_equal(v[slot, :, t], written_v[source, :, 0])
    buffer = cache.buffer
    if step < 2:
      rows = tf.gather(rows, parents[step])  # what beam search does to the states
      lineage = [lineage[p] + [slot] for slot, p in enumerate(parents[step])]


def test_bfloat16_buffer_keeps_the_compute_dtype():
  store = KeyValueStore(1, HEADS, DEPTH)
  buffer, rows = store.buffer(SLOTS, 2, tf.bfloat16), store.initial_rows(SLOTS)
  for step in range(2):
    cache, rows = store.step(buffer, rows, step)
    k, v = keys_values(step, 0)
    k, v, cache = cache.append(tf.cast(k, tf.bfloat16), tf.cast(v, tf.bfloat16))
    buffer = cache.buffer
  assert k.dtype == tf.bfloat16
  np.testing.assert_array_equal(tf.cast(k[:, :, 0], tf.float32), keys_values(0, 0)[0][:, :, 0])


def test_a_cached_step_refuses_a_bias():
  layer = SelfAttention(8, 2)
  layer.build()
  store = KeyValueStore(1, 2, 4)
  cache, _ = store.step(store.buffer(3, 1, tf.float32), store.initial_rows(3), 0)
  x = tf.zeros([3, 1, 8])
  out, _ = layer(x, cache=cache)
  assert out.shape == (3, 1, 8)
  with pytest.raises(ValueError, match="takes no bias"):
    layer(x, tf.zeros([1, 1, 1, 1]), cache=cache)
