"""CTC loss against a brute-force reference; greedy and beam decoding without an LM.

LM-fused decoding: tests/unit/test_ctc_lm_decoding.py; building LMs: test_build_lm.py.
"""

import itertools
import math

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.decoders.ctc_beam_search import CTCBeamSearchDecoder, ctc_greedy_decode
from open_seq2seq.decoders.fc_decoders import ctc_beam_ids, ctc_greedy_ids
from open_seq2seq.losses.ctc_loss import CTCLoss


def collapse(path, blank):
  out, prev = [], None
  for p in path:
    if p != prev and p != blank:
      out.append(p)
    prev = p
  return out


def brute_force_ctc(logits, label):
  """-log sum over every frame path that collapses to ``label`` (blank = last class)."""
  probs = np.exp(logits - logits.max(-1, keepdims=True))
  probs /= probs.sum(-1, keepdims=True)
  num_frames, num_classes = probs.shape
  total = 0.0
  for path in itertools.product(range(num_classes), repeat=num_frames):
    if collapse(path, num_classes - 1) == list(label):
      total += np.prod([probs[t, c] for t, c in enumerate(path)])
  return -math.log(total) if total > 0 else math.inf


CASES = [  # (frames, label)
    (5, [0, 1]), (5, [0, 0]), (4, [2]), (6, [1, 2, 1]), (3, []), (5, [0, 0, 1]),
]


def loss_of(logits_list, labels, mask_nan=True):
  batch = len(logits_list)
  max_t = max(len(l) for l in logits_list)
  num_classes = logits_list[0].shape[1]
  logits = np.zeros((batch, max_t, num_classes), np.float32)
  for i, l in enumerate(logits_list):
    logits[i, :len(l)] = l
  max_l = max(max(len(l) for l in labels), 1)
  ids = np.zeros((batch, max_l), np.int32)
  for i, l in enumerate(labels):
    ids[i, :len(l)] = l
  loss = CTCLoss({"mask_nan": mask_nan})
  logits_t = tf.constant(logits)
  with tf.GradientTape() as tape:
    tape.watch(logits_t)
    total, weight = loss.compute_loss({
        "decoder_output": {"logits": logits_t,
                           "src_lengths": tf.constant([len(l) for l in logits_list])},
        "target_tensors": (tf.constant(ids), tf.constant([len(l) for l in labels]))})
  return float(total), float(weight), tape.gradient(total, logits_t).numpy()


def test_ctc_loss_matches_brute_force():
  rng = np.random.default_rng(0)
  logits = [rng.normal(size=(t, 4)).astype(np.float32) * 2 for t, _ in CASES]
  labels = [l for _, l in CASES]
  expected = [brute_force_ctc(l.astype(np.float64), lab) for l, lab in zip(logits, labels)]
  total, weight, grad = loss_of(logits, labels)
  assert weight == len(CASES)
  assert total == pytest.approx(sum(expected), rel=1e-4)
  for l, lab, e in zip(logits, labels, expected):  # one at a time too
    assert loss_of([l], [lab])[0] == pytest.approx(e, rel=1e-4)
  assert np.isfinite(grad).all()
  # padded frames past a sequence's length get no gradient
  assert np.all(grad[2, 4:] == 0)


def test_impossible_alignment_is_masked():
  rng = np.random.default_rng(1)
  ok = rng.normal(size=(5, 4)).astype(np.float32)
  too_short = rng.normal(size=(2, 4)).astype(np.float32)  # "aa" needs 3 frames
  expected = brute_force_ctc(ok.astype(np.float64), [0, 1])
  total, weight, grad = loss_of([ok, too_short], [[0, 1], [0, 0]])
  assert total == pytest.approx(expected, rel=1e-4) and weight == 2
  assert np.isfinite(grad).all()
  unmasked = loss_of([ok, too_short], [[0, 1], [0, 0]], mask_nan=False)[0]
  assert not math.isfinite(unmasked)


def test_labels_longer_than_logits_give_zero_not_error():
  rng = np.random.default_rng(2)
  total, _, grad = loss_of([rng.normal(size=(2, 4)).astype(np.float32)], [[0, 1, 2]])
  assert total == 0.0 and np.all(grad == 0)


def one_hot_logits(frames, num_classes, high=5.0):
  logits = np.zeros((len(frames), num_classes), np.float32)
  logits[np.arange(len(frames)), frames] = high
  return logits


def test_greedy_decoding_tf_and_numpy():
  blank = 3
  frames = [0, 0, blank, 0, 1, 1, blank, 2, 2, 2]
  logits = one_hot_logits(frames, 4)
  assert ctc_greedy_decode(logits) == [0, 0, 1, 2]
  assert ctc_greedy_decode(logits, length=6) == [0, 0, 1]
  batch = np.stack([logits, one_hot_logits([blank] * 10, 4)])
  ids, lengths = ctc_greedy_ids(tf.constant(batch), tf.constant([6, 10]))
  assert lengths.numpy().tolist() == [3, 0]
  assert ids.numpy().tolist() == [[0, 0, 1]] + [[-1, -1, -1]]


def test_beam_search_beats_best_path():
  # p(a) = 0.4, p(blank) = 0.6 in both frames: best path is "" (0.36), but P("a") = 0.64
  logits = np.log(np.array([[0.4, 0.6], [0.4, 0.6]], np.float32))
  assert ctc_greedy_decode(logits) == []
  with CTCBeamSearchDecoder({0: "a"}, beam_width=4, num_workers=0) as decoder:
    assert decoder.decode_batch(logits[None], [2]) == ["a"]
  ids, lengths = ctc_beam_ids(tf.constant(logits[None]), tf.constant([2]), beam_width=4)
  assert ids.numpy()[0, :lengths.numpy()[0]].tolist() == [0]


def test_beam_search_without_lm_agrees_with_tensorflow():
  rng = np.random.default_rng(3)
  logits = rng.normal(size=(2, 12, 5)).astype(np.float32) * 3
  ids, lengths = ctc_beam_ids(tf.constant(logits), tf.constant([12, 9]), beam_width=16)
  with CTCBeamSearchDecoder(dict(enumerate("abcd")), beam_width=16, num_workers=0,
                            token_min_logp=-20.0) as ours:
    texts = ours.decode_batch(logits, [12, 9])
  for b in range(2):
    assert texts[b] == "".join("abcd"[i] for i in ids.numpy()[b, :lengths.numpy()[b]])
