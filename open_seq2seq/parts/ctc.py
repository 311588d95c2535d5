"""Connectionist temporal classification through TensorFlow's C++ kernel, per utterance
(the speech CTC loss and FastPitch's alignment loss both use it)."""

from __future__ import annotations

import tensorflow as tf


def dense_to_sparse(ids: tf.Tensor, lengths: tf.Tensor) -> tf.SparseTensor:
  """Sparse labels of the first ``lengths[b]`` ids of each row."""
  mask = tf.sequence_mask(lengths, maxlen=tf.shape(ids)[1])
  indices = tf.where(mask)
  values = tf.gather_nd(ids, indices)
  return tf.SparseTensor(indices, tf.cast(values, tf.int32), tf.shape(ids, out_type=tf.int64))


def ctc_loss_per_utterance(labels: tf.Tensor, label_lengths: tf.Tensor, logits: tf.Tensor,
                           logit_lengths: tf.Tensor) -> tf.Tensor:
  """Negative log-likelihood of each utterance, blank = last class, logits [B, T, V].

  Uses TensorFlow's C++ CTC kernel (fast on CPUs). Labels longer than their logits give a
  loss of 0 with no gradient instead of an error; impossible alignments (too many repeats)
  give +inf, which ``mask_nan`` removes. Empty labels (silent utterances), which the kernel
  rejects, get the all-blank path's loss.
  """
  logits = tf.cast(logits, tf.float32)
  logit_lengths = tf.cast(logit_lengths, tf.int32)
  label_lengths = tf.cast(label_lengths, tf.int32)
  empty = label_lengths <= 0
  # a one-symbol placeholder label keeps the kernel happy; its loss is replaced below
  labels = tf.pad(tf.cast(labels, tf.int32), [[0, 0], [0, 1]])
  labels = tf.clip_by_value(labels, 0, tf.shape(logits)[-1] - 2)
  ctc = tf.compat.v1.nn.ctc_loss(
      labels=dense_to_sparse(labels, tf.where(empty, 1, label_lengths)),
      inputs=logits, sequence_length=logit_lengths,
      preprocess_collapse_repeated=False, ctc_merge_repeated=True,
      ignore_longer_outputs_than_inputs=True, time_major=False)
  frames = tf.sequence_mask(logit_lengths, tf.shape(logits)[1], tf.float32)
  blank_path = -tf.reduce_sum(tf.nn.log_softmax(logits)[:, :, -1] * frames, axis=1)
  return tf.where(empty, blank_path, ctc)
