"""Dropout with a mask drawn from 16 random bits per element, and its seeded RNG.

``keras.random.dropout`` draws one float32 uniform per element (a Philox counter per 4
elements, then an int->float conversion) and compares it with the rate. Here one 32-bit
Philox word gives the masks of two elements: the word is split into two 16-bit halves and an
element is kept when its half is >= ``round(rate * 65536)``. The rate is therefore realised
to within 2**-17 (0.1 -> 0.100006), and the kept values are scaled by ``65536 / (65536 -
threshold)`` (the exact inverse of the realised keep probability), so the expectation of the
output equals the input exactly. On 2 AVX2 cores the mask of 8M elements costs about half of
Keras's (docs/benchmarks.md, *Levers: the CPU allocator, 16-bit dropout masks*).

The RNG state is a ``keras.random.SeedGenerator`` variable, as in ``keras.layers.Dropout``:
a checkpoint holds it, so a resumed run draws the masks an uninterrupted run would.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

#: Bits of randomness per element.
_BITS = 16
_LEVELS = 1 << _BITS


def dropout_seed_generator(rate: float) -> keras.random.SeedGenerator | None:
  """A layer's own dropout RNG (None when ``rate`` is 0), created inside its ``build``.

  Its state is a variable (path ``.../dropout_seed/seed_generator_state``) and its initial
  seed comes from Python's seeded ``random``, as for ``keras.layers.Dropout``.
  """
  return keras.random.SeedGenerator(name="dropout_seed") if rate else None


def keep_threshold(rate: float) -> int:
  """The 16-bit value at or above which an element is kept."""
  if not 0.0 <= rate < 1.0:
    raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
  return min(int(round(rate * _LEVELS)), _LEVELS - 1)


def keep_mask(shape: Any, rate: float, seed: tf.Tensor) -> tf.Tensor:
  """Boolean mask of ``shape``, each element True with probability ``1 - rate`` (to 2**-17),
  a pure function of ``seed`` (int32 [2])."""
  shape = tf.convert_to_tensor(shape, tf.int32)
  size = tf.reduce_prod(shape)
  words = tf.random.stateless_uniform([(size + 1) // 2], seed=seed, minval=None, maxval=None,
                                      dtype=tf.uint32)
  halves = tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size]
  return tf.reshape(halves >= tf.constant(keep_threshold(rate), tf.uint16), shape)


def dropout(x: tf.Tensor, rate: float, training: bool | None,
            seed_generator: keras.random.SeedGenerator | None) -> tf.Tensor:
  """Dropout that is a no-op unless ``training`` is true and ``rate`` > 0."""
  if not training or not rate:
    return x
  # the generator's int64 state folded into the int32 seed stateless ops take, as Keras does
  seed = tf.cast(tf.math.floormod(seed_generator.next(), tf.int32.max - 1), tf.int32)
  threshold = keep_threshold(rate)
  scale = tf.constant(_LEVELS / (_LEVELS - threshold), x.dtype)
  return tf.where(keep_mask(tf.shape(x), rate, seed), x * scale, tf.zeros([], x.dtype))
