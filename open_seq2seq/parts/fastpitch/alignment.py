"""Learned text-to-speech alignment (Badlani et al. 2021, "One TTS alignment to rule them all").

FastPitch needs a duration (frames) per input symbol. Instead of reading them from a teacher
Tacotron's attention, the model learns a soft alignment jointly with itself and extracts hard
durations from it in every step:

* :func:`beta_binomial_log_prior`: a prior that favours the diagonal (frame t of T near symbol
  t * N / T), added to the soft alignment's log-probabilities early in training;
* :func:`forward_sum_loss`: the likelihood of all monotonic alignments of the mel frames to
  the symbols in order, computed as a CTC loss in which every symbol is its own label;
* :func:`monotonic_alignment_search` (MAS): the most likely monotonic path, computed in the
  graph (two ``tf.while_loop`` over the frames, batched and masked, so it runs on any
  device); its durations sum exactly to each utterance's frame count and, when there are at
  least as many frames as symbols, give every symbol at least one frame;
* :func:`binarization_loss`: pulls the soft alignment towards the hard path.

Alignments are ``[batch, frames, symbols]`` float32 tensors; lengths are int ``[batch]``.
"""

from __future__ import annotations

import tensorflow as tf

from open_seq2seq.parts.ctc import ctc_loss_per_utterance

#: Log-probability given to padded symbols where a finite value is needed (CTC).
MASKED_LOGIT = -1e4


def beta_binomial_log_prior(text_lengths: tf.Tensor, mel_lengths: tf.Tensor, symbols, frames,
                            scaling: float = 1.0) -> tf.Tensor:
  """Log of the beta-binomial alignment prior, float32 [B, frames, symbols].

  Row t (1-based) of an utterance of N symbols and T frames is the beta-binomial
  distribution over symbols 0..N-1 with n = N - 1, alpha = scaling * t and
  beta = scaling * (T + 1 - t): each row sums to 1 over the real symbols, and its mode moves
  from the first symbol to the last as t goes from 1 to T. Padded symbols get -inf; padded
  frames get 0 (no prior).
  """
  n = tf.cast(text_lengths, tf.float32)[:, None, None] - 1.0
  big_t = tf.cast(mel_lengths, tf.float32)[:, None, None]
  t = tf.cast(tf.range(frames), tf.float32)[None, :, None] + 1.0
  k = tf.cast(tf.range(symbols), tf.float32)[None, None, :]
  alpha = scaling * t
  beta = scaling * tf.maximum(big_t + 1.0 - t, 1.0)  # padded frames: any positive value
  nk = tf.maximum(n - k, 0.0)
  lgamma = tf.math.lgamma
  log_choose = lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(nk + 1.0)
  log_beta_num = lgamma(k + alpha) + lgamma(nk + beta) - lgamma(n + alpha + beta)
  log_beta_den = lgamma(alpha) + lgamma(beta) - lgamma(alpha + beta)
  log_prior = log_choose + log_beta_num - log_beta_den
  valid_symbol = k <= n
  valid_frame = t <= big_t
  log_prior = tf.where(valid_symbol, log_prior, -float("inf"))
  return tf.where(valid_frame, log_prior, tf.zeros_like(log_prior))


def monotonic_alignment_search(log_probs: tf.Tensor, text_lengths: tf.Tensor,
                               mel_lengths: tf.Tensor) -> tf.Tensor:
  """The most likely monotonic alignment path, float32 one-hot rows [B, T, N].

  A path starts at (frame 0, symbol 0), ends at (T_b - 1, N_b - 1), and from each frame to
  the next stays on its symbol or moves to the next one; it maximises the sum of
  ``log_probs`` over its cells (Viterbi over a left-to-right chain, as Glow-TTS's MAS). The
  forward pass keeps, per frame, the best score of reaching each symbol and whether it came
  from the previous symbol; the backward pass follows those choices from the last cell.
  Frames past ``mel_lengths`` are rows of zeros; symbols past ``text_lengths`` are never
  visited. No gradient flows through the path.
  """
  log_probs = tf.stop_gradient(tf.cast(log_probs, tf.float32))
  batch, frames, symbols = tf.unstack(tf.shape(log_probs))
  text_lengths = tf.cast(text_lengths, tf.int32)
  mel_lengths = tf.cast(mel_lengths, tf.int32)
  neg = tf.constant(-float("inf"), tf.float32)
  valid = tf.sequence_mask(text_lengths, symbols)  # [B, N]
  scores = tf.transpose(tf.where(valid[:, None, :], log_probs, neg), [1, 0, 2])  # [T, B, N]
  first = tf.one_hot(0, symbols, on_value=True, off_value=False, dtype=tf.bool)[None, :]
  best = tf.where(first, scores[0], neg)  # a path starts on symbol 0
  # moved[t][b, n]: the best path to (t, n) came from symbol n - 1 at frame t - 1
  moved = tf.TensorArray(tf.bool, size=frames, element_shape=[None, None])
  moved = moved.write(0, tf.zeros([batch, symbols], tf.bool))

  def forward(t, best, moved):
    from_previous = tf.pad(best[:, :-1], [[0, 0], [1, 0]], constant_values=-float("inf"))
    came = from_previous > best
    return t + 1, scores[t] + tf.where(came, from_previous, best), moved.write(t, came)

  _, best, moved = tf.while_loop(lambda t, *_: t < frames, forward, (1, best, moved))
  moved = moved.stack()  # [T, B, N]
  rows = tf.TensorArray(tf.float32, size=frames, element_shape=[None, None])

  def backward(t, symbol, rows):
    active = t < mel_lengths  # frames past an utterance's length stay rows of zeros
    rows = rows.write(t, tf.one_hot(symbol, symbols) * tf.cast(active, tf.float32)[:, None])
    step = tf.gather(moved[t], symbol, batch_dims=1)
    symbol = tf.where(active & step, symbol - 1, symbol)
    return t - 1, tf.maximum(symbol, 0), rows

  last = tf.maximum(text_lengths - 1, 0)  # the path ends on each utterance's last symbol
  _, _, rows = tf.while_loop(lambda t, *_: t >= 0, backward, (frames - 1, last, rows))
  return tf.transpose(rows.stack(), [1, 0, 2])


def durations_of(path: tf.Tensor) -> tf.Tensor:
  """Frames per symbol of a hard path [B, T, N]: int32 [B, N] (its column sums)."""
  return tf.cast(tf.round(tf.reduce_sum(tf.cast(path, tf.float32), axis=1)), tf.int32)


def forward_sum_loss(log_probs: tf.Tensor, text_lengths: tf.Tensor, mel_lengths: tf.Tensor,
                     blank_log_prob: float = -1.0) -> tf.Tensor:
  """Per utterance: -log of the summed probability of every monotonic alignment, divided by
  its number of symbols, float32 [B].

  The soft alignment's log-probabilities [B, T, N] become CTC logits over N + 1 classes (one
  class per symbol, then a blank with the constant ``blank_log_prob``), and the label
  sequence is 0..N_b - 1: CTC then sums over every way of reading the symbols in order,
  each for one or more frames (blanks between them, rarely useful, are allowed). An
  utterance with fewer frames than symbols cannot be aligned and contributes 0.
  """
  log_probs = tf.cast(log_probs, tf.float32)
  batch, _, symbols = tf.unstack(tf.shape(log_probs))
  text_lengths = tf.cast(text_lengths, tf.int32)
  mel_lengths = tf.cast(mel_lengths, tf.int32)
  valid = tf.sequence_mask(text_lengths, symbols)[:, None, :]
  masked = tf.where(valid, tf.maximum(log_probs, MASKED_LOGIT), MASKED_LOGIT)
  blank = tf.fill(tf.concat([tf.shape(masked)[:2], [1]], 0), blank_log_prob)
  # symbol n is class n, the blank the last class (TensorFlow's C++ CTC kernel: memory
  # O(frames x symbols); tf.nn.ctc_loss's dense path on dense labels keeps a symbols x
  # symbols transition per frame: 480 GB for a 71 s Asterisk prompt of 527 symbols)
  logits = tf.concat([masked, blank], axis=2)
  labels = tf.tile(tf.range(symbols)[None, :], [batch, 1])
  alignable = text_lengths <= mel_lengths
  # an unalignable utterance gets one frame per symbol as a stand-in (its loss is dropped)
  logit_lengths = tf.where(alignable, mel_lengths, text_lengths)
  frames_needed = tf.maximum(tf.shape(logits)[1], tf.reduce_max(logit_lengths))
  logits = tf.pad(logits, [[0, 0], [0, frames_needed - tf.shape(logits)[1]], [0, 0]])
  loss = ctc_loss_per_utterance(labels, text_lengths, logits, logit_lengths)
  loss = loss / tf.cast(tf.maximum(text_lengths, 1), tf.float32)
  return tf.where(alignable, loss, tf.zeros_like(loss))


def binarization_loss(hard: tf.Tensor, soft: tf.Tensor, mel_lengths: tf.Tensor) -> tf.Tensor:
  """Per utterance: -mean over its frames of log soft(frame, symbol of the hard path),
  float32 [B] (0 for an utterance without frames)."""
  log_soft = tf.math.log(tf.maximum(tf.cast(soft, tf.float32), 1e-12))
  total = -tf.reduce_sum(tf.cast(hard, tf.float32) * log_soft, axis=[1, 2])
  return total / tf.maximum(tf.cast(mel_lengths, tf.float32), 1.0)


def average_per_symbol(values: tf.Tensor, path: tf.Tensor) -> tf.Tensor:
  """Mean of frame ``values`` [B, T] over each symbol's frames of a hard ``path`` [B, T, N],
  counting only non-zero (voiced) frames; 0 for a symbol without any. float32 [B, N]."""
  values = tf.cast(values, tf.float32)
  path = tf.cast(path, tf.float32)
  voiced = tf.cast(tf.not_equal(values, 0.0), tf.float32)
  total = tf.einsum("bt,btn->bn", values, path)
  count = tf.einsum("bt,btn->bn", voiced, path)
  return tf.math.divide_no_nan(total, count)
