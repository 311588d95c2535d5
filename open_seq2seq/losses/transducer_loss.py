"""RNN-Transducer loss (Graves, 2012) on plain TensorFlow ops, with exact gradients.

The joint network scores every encoder frame ``t`` against every prefix of ``u`` target
labels: ``logits[b, t, u, :]``. An alignment is a monotone path through the lattice of
nodes ``(t, u)``, ``0 <= t < T_b``, ``0 <= u <= U_b``, from ``(0, 0)``: a blank moves to
``(t + 1, u)``, label ``u + 1`` moves to ``(t, u + 1)``, and the path ends with the blank of
``(T_b - 1, U_b)``. The loss is ``-log`` of the sum of the path probabilities.

**Algorithm.** Only two log-probabilities per node enter the sum, blank and the next label,
each ``logit - logsumexp_V(logits)``; they are set to -inf outside each utterance's lattice,
so padding (of any finite value) never counts. The forward variables ``alpha(t, u)`` (every
path into the node) and the backward variables ``beta(t, u)`` (every path from it to the
end) are computed one anti-diagonal ``n = t + u`` at a time: a node depends only on diagonal
``n - 1`` (``n + 1`` for ``beta``), so ``T + U`` sequential steps (a ``tf.scan``) each update
the whole diagonal of the whole batch at once. The lattice is stored skewed (row ``u``
shifted by ``u`` frames) so that a diagonal is a contiguous slice. The gradient is the
textbook one:

    d loss / d logits[t, u, v] = softmax[t, u, v] * occupancy(t, u)
                                 - [v = blank] * gamma_blank(t, u) - [v = y_u+1] * gamma_label(t, u)

with ``gamma_* = exp(alpha + log_prob + beta(next node) - log P)`` and the node occupancy
``gamma_blank + gamma_label``: ``exp(logit - log_sum_exp + log occupancy)`` for every class,
then the two classes each node emits replaced (``tf.where``: faster here than a scatter). It
is a ``tf.custom_gradient``: nothing of the recursion is kept for autodiff.

**Cost.** Time: one log-sum-exp pass over the ``B x T x (U+1) x V`` logits forward, one
exp pass and two selects backward, plus ``2 (T + U)`` small sequential steps. Memory: what
is kept from the forward to the backward pass is ``O(B T U)`` (log-sum-exp, two
log-probabilities, alpha by diagonal); beta is ``O(B T U)`` too. The peak is set by the
passes over the logits: TensorFlow allocates each elementwise result anew, so a pass holds
two ``B T (U+1) V`` float32 tensors at once; the backward pass waits for beta, so it never
runs beside the forward one. Measured (``scripts/bench_rnnt_loss.py``): loss + gradient
need twice the size of float32 logits beyond the logits, the returned gradient included,
for float32 and for bfloat16 logits alike. The logits themselves (the joint network's
output) stay the largest cost of a transducer; a fused joint that never materializes them
(the "function merging" of Li et al., 2019, or a pruned RNN-T) is the step beyond this
loss and not implemented here.

Half-precision logits (bfloat16, float16) are read as they are: the log-sum-exp, the
recursion and the gradient run in float32 and the gradient is returned in the logits' dtype.
float64 logits run in float64 (useful for exact gradient checks).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from open_seq2seq.losses.loss import Loss
from open_seq2seq.utils.params import Param

NEG_INF = float("-inf")


def _log_add(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
  """log(exp(a) + exp(b)), -inf (not NaN) when both are -inf."""
  top = tf.maximum(a, b)
  return tf.where(tf.equal(top, NEG_INF), top, top + tf.math.log1p(tf.exp(-tf.abs(a - b))))


def _skew(x: tf.Tensor, fill: float) -> tf.Tensor:
  """[B, R, C] -> [B, R, C + R - 1] with out[:, r, n] = x[:, r, n - r] (``fill`` elsewhere)."""
  shape = tf.shape(x)
  batch, rows, cols = shape[0], shape[1], shape[2]
  x = tf.pad(x, [[0, 0], [0, 0], [0, rows]], constant_values=fill)
  # rows of length C + R read back as rows of length C + R - 1: row r starts r places later
  x = tf.reshape(x, [batch, rows * (cols + rows)])[:, :rows * (cols + rows - 1)]
  return tf.reshape(x, [batch, rows, cols + rows - 1])


def _unskew(x: tf.Tensor, cols: tf.Tensor) -> tf.Tensor:
  """Inverse of :func:`_skew`: [B, R, N] -> [B, R, cols], out[:, r, j] = x[:, r, j + r]."""
  shape = tf.shape(x)
  batch, rows, diagonals = shape[0], shape[1], shape[2]
  x = tf.pad(tf.reshape(x, [batch, rows * diagonals]), [[0, 0], [0, rows]])
  return tf.reshape(x, [batch, rows, diagonals + 1])[:, :, :cols]


def _shift_down(x: tf.Tensor) -> tf.Tensor:
  """[B, R] -> out[:, r] = x[:, r - 1], -inf in row 0."""
  return tf.pad(x, [[0, 0], [1, 0]], constant_values=NEG_INF)[:, :-1]


def _shift_up(x: tf.Tensor) -> tf.Tensor:
  """[B, R] -> out[:, r] = x[:, r + 1], -inf in the last row."""
  return tf.pad(x[:, 1:], [[0, 0], [0, 1]], constant_values=NEG_INF)


@tf.function(reduce_retracing=True)
def _alphas(blank_diagonals: tf.Tensor, label_diagonals: tf.Tensor) -> tf.Tensor:
  """Forward variables [N, B, U+1] by diagonal, from the skewed log-probs [N, B, U+1].

  Diagonal ``n``, row ``u`` holds node ``(n - u, u)``; a diagonal's nodes come from the
  previous diagonal's by a blank (same row) or by a label (row above).
  """
  batch, rows = tf.shape(blank_diagonals)[1], tf.shape(blank_diagonals)[2]
  first = tf.concat([tf.zeros([batch, 1], blank_diagonals.dtype),
                     tf.fill([batch, rows - 1], tf.constant(NEG_INF, blank_diagonals.dtype))], 1)

  def step(previous, diagonal):
    blank, label = diagonal
    return _log_add(previous + blank, _shift_down(previous + label))

  # every diagonal is scanned (the last step's output is dropped): a scan over no elements
  # cannot be stacked once a relaxed retrace has left the element shape unknown (T=1, U=0)
  rest = tf.scan(step, (blank_diagonals, label_diagonals), initializer=first)
  return tf.concat([first[None], rest[:-1]], 0)


@tf.function(reduce_retracing=True)
def _betas(blank_diagonals: tf.Tensor, label_diagonals: tf.Tensor, ends: tf.Tensor) -> tf.Tensor:
  """Backward variables [N + 1, B, U+1] by diagonal (see :func:`_alphas`).

  The log-probabilities are -inf outside each utterance's lattice, so are its betas; ``ends``
  [N + 1, B, U+1] is 0 at the virtual node ``(T_b, U_b)`` after the final blank and -inf
  elsewhere, which makes ``beta(T_b - 1, U_b)`` that blank's log-probability.
  """
  def step(following, diagonal):
    blank, label, end = diagonal
    return tf.maximum(_log_add(blank + following, label + _shift_up(following)), end)

  betas = tf.scan(step, (blank_diagonals, label_diagonals, ends[:-1]), initializer=ends[-1],
                  reverse=True)
  return tf.concat([betas, ends[-1:]], 0)


def _to_diagonals(x: tf.Tensor) -> tf.Tensor:
  """[B, T, U+1] -> [T + U, B, U+1], diagonal n, row u = x[:, n - u, u] (-inf outside)."""
  return tf.transpose(_skew(tf.transpose(x, [0, 2, 1]), NEG_INF), [2, 0, 1])


def _from_diagonals(x: tf.Tensor, frames: tf.Tensor) -> tf.Tensor:
  """Inverse of :func:`_to_diagonals`, the first ``frames`` frames: [N, B, U+1] -> [B, T, U+1]."""
  return tf.transpose(_unskew(tf.transpose(x, [1, 2, 0]), frames), [0, 2, 1])


def _check_inputs(logits, labels, logit_lengths, label_lengths, blank) -> None:
  """Asserts the values a caller can get wrong (lengths, label ids, blank).

  ``tf.debugging.Assert`` with string data only: no guarding ``cond`` around it, which would
  keep Grappler from optimizing the recursion's loops (and say so in the log).
  """
  shape = tf.shape(logits, out_type=tf.int32)
  width = tf.shape(labels)[1]
  classes = shape[3]
  bad_label = tf.logical_and(tf.sequence_mask(label_lengths, width),
                             tf.logical_or(labels < 0, labels >= classes))
  for holds, message in (
      (tf.equal(shape[2], width + 1), "logits must be [B, T, U+1, V] for labels [B, U]"),
      (tf.reduce_all(logit_lengths <= shape[1]), "a logit length exceeds the logits' frames"),
      (tf.reduce_all(label_lengths <= width), "a label length exceeds the labels' width"),
      (tf.reduce_all(label_lengths >= 0), "a label length is negative"),
      (tf.logical_and(blank >= 0, blank < classes), "blank is not a class of the logits"),
      (tf.logical_not(tf.reduce_any(bad_label)), "a label id is not a class of the logits")):
    tf.debugging.Assert(holds, [f"rnnt_loss: {message}"])


def rnnt_loss(logits: tf.Tensor, labels: tf.Tensor, logit_lengths: tf.Tensor,
              label_lengths: tf.Tensor, blank: int = 0) -> tf.Tensor:
  """Negative log-likelihood of each utterance under an RNN transducer (module doc).

  Args:
    logits: [B, T, U+1, V] unnormalized joint-network outputs (float32, bfloat16, float16 or
      float64); ``logits[b, t, u]`` scores frame ``t`` after the first ``u`` labels.
    labels: [B, U] integer label ids, padded (the padding is never read).
    logit_lengths: [B] frames of each utterance, ``1 <= T_b <= T``.
    label_lengths: [B] labels of each utterance, ``0 <= U_b <= U``.
    blank: index of the blank class; negative counts from the end (-1: the last class).

  Returns:
    [B] float32 (float64 for float64 logits): ``-log P(labels_b | frames_b)``; ``+inf``
    with a zero gradient for an utterance of no frames. Differentiable in ``logits``.
  """
  logits = tf.convert_to_tensor(logits)
  if not logits.dtype.is_floating:
    raise TypeError(f"rnnt_loss: logits must be floating point, got {logits.dtype.name}")
  compute_dtype = tf.float64 if logits.dtype == tf.float64 else tf.float32
  labels = tf.cast(labels, tf.int32)
  logit_lengths = tf.cast(logit_lengths, tf.int32)
  label_lengths = tf.cast(label_lengths, tf.int32)
  classes = tf.shape(logits, out_type=tf.int32)[3]
  blank = tf.convert_to_tensor(blank, tf.int32)
  blank = tf.where(blank < 0, blank + classes, blank)
  # no control dependency on the checks: a tf.function runs them all the same (stateful ops),
  # and a dependency would keep Grappler from optimizing the recursion's loops
  _check_inputs(logits, labels, logit_lengths, label_lengths, blank)

  @tf.custom_gradient
  def loss_of(logits):
    # stop_gradient: an eager tape must not record (and keep the tensors of) the inner ops
    x = tf.stop_gradient(logits)
    shape = tf.shape(x, out_type=tf.int32)
    batch, frames, rows = shape[0], shape[1], shape[2]
    t = tf.range(frames)[None, :, None]
    u = tf.range(rows)[None, None, :]
    in_lattice = (t < logit_lengths[:, None, None]) & (u <= label_lengths[:, None, None])
    # the label each node emits next; the last row (and padding) emits none: blank stands in
    next_label = tf.pad(tf.where(tf.sequence_mask(label_lengths, rows - 1), labels, blank),
                        [[0, 0], [0, 1]], constant_values=blank)  # [B, U+1]
    wanted = tf.stack([tf.fill(tf.shape(next_label), blank), next_label], -1)
    log_norm = tf.reduce_logsumexp(tf.cast(x, compute_dtype), axis=-1)  # [B, T, U+1]
    picked = tf.cast(tf.gather(x, tf.broadcast_to(wanted[:, None], [batch, frames, rows, 2]),
                               batch_dims=3), compute_dtype) - log_norm[..., None]
    # -inf outside the lattice: no path goes there, whatever the padding holds
    blank_lp = tf.where(in_lattice, picked[..., 0], NEG_INF)
    label_lp = tf.where(in_lattice & (u < label_lengths[:, None, None]), picked[..., 1], NEG_INF)
    del picked
    blank_diagonals, label_diagonals = _to_diagonals(blank_lp), _to_diagonals(label_lp)
    alphas = _alphas(blank_diagonals, label_diagonals)  # [T + U, B, U+1]
    has_frames = logit_lengths > 0
    last_t = tf.maximum(logit_lengths - 1, 0)
    utterances = tf.range(batch)
    log_likelihood = (
        tf.gather_nd(alphas, tf.stack([last_t + label_lengths, utterances, label_lengths], 1))
        + tf.gather_nd(blank_lp, tf.stack([utterances, last_t, label_lengths], 1)))
    log_likelihood = tf.where(has_frames, log_likelihood, NEG_INF)

    def grad(upstream):
      ends = tf.where(
          tf.equal(tf.range(tf.shape(alphas)[0] + 1)[:, None, None],
                   (logit_lengths + label_lengths)[None, :, None])
          & tf.equal(u, label_lengths[None, :, None]), tf.zeros([], compute_dtype), NEG_INF)
      betas = _betas(blank_diagonals, label_diagonals, ends)
      alpha = _from_diagonals(alphas, frames)  # [B, T, U+1]
      beta = _from_diagonals(betas, frames + 1)  # [B, T+1, U+1]: frame T_b holds the end
      base = alpha - tf.where(has_frames, log_likelihood, tf.zeros_like(log_likelihood))[
          :, None, None]
      # each node's blank and label occupancy (-inf + anything stays -inf outside the lattice)
      by_blank = tf.exp(base + blank_lp + beta[:, 1:])
      by_label = tf.exp(base + label_lp + tf.pad(
          beta[:, :-1, 1:], [[0, 0], [0, 0], [0, 1]], constant_values=NEG_INF))
      occupancy = by_blank + by_label
      del alpha, beta, base
      scale = tf.cast(upstream, compute_dtype)[:, None, None]
      # the two classes each node emits: softmax * occupancy less their own occupancy
      label_grad = (tf.exp(label_lp) * occupancy - by_label) * scale
      blank_grad = (tf.exp(blank_lp) * occupancy - by_blank - tf.where(
          tf.equal(next_label, blank)[:, None], by_label, tf.zeros_like(by_label))) * scale
      # every class: softmax * occupancy * |scale| = exp(logit - shift), in two passes over
      # the logits; the shift depends on beta, so they run after the recursion, not beside
      # the forward pass (which would double the peak memory)
      shift = log_norm - tf.math.log(occupancy * tf.abs(scale))
      with tf.control_dependencies([shift]):  # a cast of its own: not the forward's, kept alive
        late = tf.identity(x)
      grads = tf.exp(tf.cast(late, compute_dtype) - shift[..., None])
      grads = tf.cond(tf.reduce_any(scale < 0), lambda: grads * tf.sign(scale)[..., None],
                      lambda: grads)
      classes_range = tf.range(classes)
      grads = tf.where(tf.equal(classes_range, next_label[..., None])[:, None],
                       label_grad[..., None], grads)
      grads = tf.where(tf.equal(classes_range, blank), blank_grad[..., None], grads)
      return tf.cast(grads, logits.dtype)

    return -log_likelihood, grad

  return loss_of(logits)


class RNNTLoss(Loss):
  """RNN-Transducer loss summed over the batch's utterances; the weight is their number.

  The trainer so reports the mean loss per utterance, as with :class:`CTCLoss`.

  The contract with a transducer decoder:

  * ``decoder_output["logits"]``: [B, T, U+1, V], the joint network's unnormalized outputs
    (any float dtype), ``logits[b, t, u]`` for encoder frame ``t`` after the first ``u``
    target labels (the prediction network reads the targets behind a start symbol), ``U``
    the targets' padded width;
  * ``decoder_output["src_lengths"]``: [B], encoder frames per utterance (as CTC decoders);
  * ``target_tensors``: ``(ids [B, U], lengths [B])`` as the data layer gives them; no id
    equals the blank index.

  The blank is ``loss_params/blank`` (default the last class, as CTC's: the data layer's ids
  then need no shift, and the joint has ``vocab_size + 1`` outputs).
  """

  PARAMS = {
      "mask_nan": Param(bool, True,
                        "Replace NaN/inf utterance losses (e.g. no encoder frames) by 0."),
      "blank": Param(int, -1, "Index of the blank among the joint's outputs; negative counts "
                     "from the end (-1: the last class)."),
  }

  def __init__(self, params: dict[str, Any] | None = None, *, name: str = "rnnt_loss"):
    super().__init__(params, name=name)

  def compute_loss(self, input_dict: dict) -> tuple[tf.Tensor, tf.Tensor]:
    decoder_output = input_dict["decoder_output"]
    ids, id_lengths = input_dict["target_tensors"]
    losses = tf.cast(rnnt_loss(decoder_output["logits"], ids, decoder_output["src_lengths"],
                               id_lengths, blank=self.params["blank"]), tf.float32)
    if self.params["mask_nan"]:
      losses = tf.where(tf.math.is_finite(losses), losses, tf.zeros_like(losses))
    weight = tf.cast(tf.shape(losses)[0], tf.float32)
    return tf.reduce_sum(losses), weight
