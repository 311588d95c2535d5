"""Random sampling decoding: temperature, top-k and top-p (nucleus) filtering, and noise that
is a pure function of a seed, so that a sample is reproducible.

:func:`sample_decode` draws ``num_samples`` sequences per example, token by token, each from
the model's next-token distribution reshaped by

1. the temperature ``T``: probabilities ``∝ p ** (1 / T)`` (T < 1 sharpens, T > 1 flattens;
   T → 0 is greedy decoding);
2. top-k: only the ``k`` most likely tokens (0: all of them; 1: greedy decoding);
3. top-p (nucleus): only the smallest set of most likely tokens whose probability (after 1
   and 2, renormalised) reaches ``p`` (1: all of them);

in that order, as fairseq and Hugging Face apply them. A token is drawn by the Gumbel-max
trick: the argmax of the filtered log-probabilities plus Gumbel noise ``-log(-log(u))``,
which samples exactly from their softmax. The uniform ``u`` of (example, sample, step, token)
is a hash of the example's seed, the sample's index, the step and the token (MurmurHash3's
32-bit finalizer, on uint32 tensors): no random state, no variable, the same draws inside
``tf.function``, a SavedModel or eager code, whatever the batch an example is decoded in.

An example's seed (:func:`example_seeds`) is a hash of the run's seed and the example's
source ids, so a sample depends on the seed, the source sentence and the sample's index
only: not on the batch, its padding, the bucketing or the number of workers.

A sample's score is its log-probability under the model (temperature 1, nothing filtered),
summed over its tokens, end symbol included; the samples of an example come out sorted by it.
"""

from __future__ import annotations

from typing import Any, Sequence

import tensorflow as tf

from open_seq2seq.parts import beam_search

_NEG_INF = float("-inf")
#: Odd 32-bit constants mixing the step, the token and the sample index into the hash.
_STEP_MIX, _TOKEN_MIX, _SAMPLE_MIX = 0x9E3779B9, 0x85EBCA77, 0xC2B2AE3D
_BITS = 24  # bits of each uniform: u = (h + 0.5) / 2**24, never 0 or 1


def _u32(value: Any) -> tf.Tensor:
  return tf.cast(value, tf.uint32) if isinstance(value, tf.Tensor) else \
      tf.constant(value & 0xFFFFFFFF, tf.uint32)


def fmix32(x: tf.Tensor) -> tf.Tensor:
  """MurmurHash3's 32-bit finalizer: a bijection of uint32 in which every input bit
  changes every output bit with probability about 1/2."""
  x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, _u32(16)))
  x = x * _u32(0x85EBCA6B)
  x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, _u32(13)))
  x = x * _u32(0xC2B2AE35)
  return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, _u32(16)))


def example_seeds(seed: int, batch_size: Any, source_ids: tf.Tensor | None = None,
                  source_lengths: tf.Tensor | None = None) -> tf.Tensor:
  """uint32 [batch] seed of each example: a hash of ``seed`` and its source ids (the first
  ``source_lengths`` of each row), or, without sources, of ``seed`` and its row index."""
  base = fmix32(_u32(seed))
  if source_ids is None:
    rows = tf.range(batch_size)
    return fmix32(tf.bitwise.bitwise_xor(_u32(rows) * _u32(_STEP_MIX), base))
  ids = tf.convert_to_tensor(source_ids)
  mask = tf.sequence_mask(source_lengths, tf.shape(ids)[1])
  text = tf.strings.reduce_join(tf.ragged.boolean_mask(tf.strings.as_string(ids), mask),
                                axis=1, separator=" ")
  fingerprint = tf.strings.to_hash_bucket_fast(text, 2 ** 32)  # FarmHash, int64 < 2**32
  return fmix32(tf.bitwise.bitwise_xor(tf.cast(fingerprint, tf.uint32), base))


def uniform_noise(row_seeds: tf.Tensor, step: Any, vocab_size: Any) -> tf.Tensor:
  """float32 [rows, vocab] uniforms in (0, 1), a hash of each row's seed, ``step`` and the
  token."""
  key = fmix32(tf.bitwise.bitwise_xor(
      row_seeds, fmix32(_u32(step) * _u32(_STEP_MIX) + _u32(1))))[:, None]
  tokens = _u32(tf.range(vocab_size)) * _u32(_TOKEN_MIX)
  h = fmix32(fmix32(tf.bitwise.bitwise_xor(key, tokens[None])) + key)
  h = tf.bitwise.right_shift(h, _u32(32 - _BITS))
  return (tf.cast(h, tf.float32) + 0.5) * (2.0 ** -_BITS)


def filter_log_probs(log_probs: tf.Tensor, temperature: float = 1.0, topk: int = 0,
                     topp: float = 1.0) -> tf.Tensor:
  """Temperature, then top-k, then top-p (see the module docstring): float32 [rows, vocab]
  logits of the sampling distribution, -inf outside it (ties at a boundary stay in)."""
  x = tf.cast(log_probs, tf.float32) / temperature
  vocab = x.shape[-1]
  if topk and (vocab is None or topk < vocab):
    kth = tf.math.top_k(x, topk).values[:, -1:]
    x = tf.where(x < kth, _NEG_INF, x)
  if topp < 1.0:
    ordered = tf.sort(x, axis=-1, direction="DESCENDING")
    before = tf.cumsum(tf.nn.softmax(ordered), axis=-1, exclusive=True)
    # The smallest most-likely set reaching topp: a token is in it while the tokens before
    # it hold less than topp (so the most likely one always is); its least likely value is
    # the threshold.
    kept = tf.where(before < topp, ordered, float("inf"))
    x = tf.where(x < tf.reduce_min(kept, axis=-1, keepdims=True), _NEG_INF, x)
  return x


def draw(logits: tf.Tensor, uniforms: tf.Tensor) -> tf.Tensor:
  """int32 [rows]: a token of each row drawn from ``softmax(logits)`` with the ``uniforms``
  (Gumbel-max)."""
  gumbel = -tf.math.log(-tf.math.log(uniforms))
  return tf.argmax(logits + gumbel, axis=-1, output_type=tf.int32)


def sample_decode(symbols_to_logits_fn: beam_search.StepFn, initial_ids: tf.Tensor,
                  decode_length: Any, eos_id: int, seeds: tf.Tensor, num_samples: int = 1,
                  temperature: float = 1.0, topk: int = 0, topp: float = 1.0,
                  states: Any = None, pad_id: int = 0, min_length: int = 0,
                  buffers: Any = None, banned_ids: Sequence[int] = ()
                  ) -> beam_search.DecodeResult:
  """Draws ``num_samples`` sequences per example (see the module docstring).

  Args: as for :func:`open_seq2seq.parts.beam_search.greedy_decode` (``states`` with first
    dimension batch, tiled here to batch * num_samples; the step function sees the samples
    of an example in adjacent rows, as beam search's hypotheses), and
    seeds: uint32 [batch] seed of each example (:func:`example_seeds`).
    num_samples: sequences drawn per example, independently.
    temperature, topk, topp: the filters of :func:`filter_log_probs`.

  Returns:
    :class:`~open_seq2seq.parts.beam_search.DecodeResult` with ids [batch, num_samples,
    time] and summed log-probabilities and lengths [batch, num_samples], each example's
    samples sorted by score, best first.
  """
  if temperature <= 0:
    raise ValueError(f"temperature must be > 0, got {temperature}")
  n = num_samples
  initial_ids = tf.cast(initial_ids, tf.int32)
  batch_size = tf.shape(initial_ids)[0]
  lengths = tf.broadcast_to(tf.cast(decode_length, tf.int32), [batch_size])
  sample_index = tf.tile(tf.range(n), [batch_size])
  row_seeds = fmix32(tf.bitwise.bitwise_xor(
      beam_search.tile_beam(tf.cast(seeds, tf.uint32), n),
      fmix32(_u32(sample_index) * _u32(_SAMPLE_MIX))))

  def choose(log_probs, step):
    logits = filter_log_probs(log_probs, temperature, topk, topp)
    return draw(logits, uniform_noise(row_seeds, step, tf.shape(log_probs)[-1]))

  result = beam_search.greedy_decode(
      symbols_to_logits_fn, beam_search.tile_beam(initial_ids, n),
      beam_search.tile_beam(lengths, n), eos_id, states=beam_search.tile_beam(
          states if states is not None else {}, n), pad_id=pad_id, min_length=min_length,
      buffers=buffers, banned_ids=banned_ids, choose=choose)
  ids = tf.reshape(result.ids, [batch_size, n, -1])
  scores = tf.reshape(result.scores, [batch_size, n])
  order = tf.argsort(scores, axis=1, direction="DESCENDING", stable=True)
  return beam_search.DecodeResult(tf.gather(ids, order, batch_dims=1),
                                  tf.gather(scores, order, batch_dims=1),
                                  tf.gather(tf.reshape(result.lengths, [batch_size, n]),
                                            order, batch_dims=1))
