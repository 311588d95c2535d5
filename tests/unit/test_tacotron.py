"""Tacotron 2 parts, encoder, decoder and loss: masking, zoneout, stopping, hand-made losses."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.decoders.tacotron2_decoder import Tacotron2Decoder
from open_seq2seq.encoders.tacotron2_encoder import Tacotron2Encoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.losses.text2speech_loss import Text2SpeechLoss
from open_seq2seq.parts.tacotron.attention import LocationSensitiveAttention
from open_seq2seq.parts.tacotron.cells import ZoneoutLSTMCell
from open_seq2seq.parts.tacotron.guided_attention import guided_attention_penalty
from open_seq2seq.parts.tacotron.layers import Postnet, Prenet

VOCAB, MEL, DEPTH = 20, 6, 8
POSTNET = [{"kernel_size": [3], "stride": [1], "num_channels": 8, "padding": "SAME",
            "activation_fn": tf.tanh},
           {"kernel_size": [3], "stride": [1], "num_channels": -1, "padding": "SAME",
            "activation_fn": None}]


def rng(seed=0):
  return np.random.default_rng(seed)


def padded(lengths, depth, garbage, seed=0):
  """[B, max(lengths), depth] normal values; beyond each length zeros or large garbage."""
  x = rng(seed).normal(size=(len(lengths), max(lengths), depth)).astype(np.float32)
  for i, n in enumerate(lengths):
    x[i, n:] = 100.0 * x[i, n:] if garbage else 0.0
  return x


# ----------------------------------------------------------------------------- attention
def run_attention(att, memory, lengths, queries):
  mem = att.prepare(tf.constant(memory), tf.constant(lengths))
  previous = tf.one_hot([0] * len(lengths), memory.shape[1], dtype=tf.float32)
  cumulative, steps = previous, []
  for query in queries:
    previous = att.location_alignments(tf.constant(query), mem, previous, cumulative)
    cumulative += previous
    steps.append(previous.numpy())
  return np.stack(steps, axis=1)  # [B, steps, S]


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_location_attention_masks_padding(dtype):
  att = LocationSensitiveAttention(8, use_bias=True, location_filters=4, location_kernel_size=5,
                                   dtype=dtype)
  att.build(DEPTH, 5)
  lengths = [7, 3]
  queries = rng(1).normal(size=(4, 2, 5)).astype(np.float32)
  aligns = run_attention(att, padded(lengths, DEPTH, garbage=True), lengths, queries)
  assert aligns.dtype == np.float32 and att.v.dtype == tf.float32
  for i, n in enumerate(lengths):
    np.testing.assert_allclose(aligns[i, :, :n].sum(-1), 1.0, atol=1e-5)
    assert np.all(aligns[i, :, n:] == 0.0)
  if dtype == "float32":  # a short utterance alone attends exactly as in the batch
    alone = run_attention(att, padded(lengths, DEPTH, False)[1:, :3], [3], queries[:, 1:])
    np.testing.assert_allclose(alone[0], aligns[1, :, :3], atol=1e-6)


# ----------------------------------------------------------------------------- zoneout cell
def cell_and_reference(p, units=32, depth=5):
  cell = ZoneoutLSTMCell(units, p)
  cell.build((None, depth))
  ref = keras.layers.LSTMCell(units)
  ref.build((None, depth))
  ref.set_weights(cell.cell.get_weights())
  r = rng(2)
  x, h, c = (tf.constant(r.normal(size=(8, n)).astype(np.float32)) for n in (depth, units, units))
  new_h, (_, new_c) = ref(x, [h, c])
  return cell, (x, h, c), (new_h.numpy(), new_c.numpy())


@pytest.mark.parametrize("training", [False, True])
def test_zoneout_zero_is_a_keras_lstm_cell(training):
  cell, (x, h, c), (new_h, new_c) = cell_and_reference(0.0)
  out, (h1, c1) = cell(x, [h, c], training=training)
  np.testing.assert_allclose(out, new_h, atol=1e-6)
  np.testing.assert_allclose(h1, new_h, atol=1e-6)
  np.testing.assert_allclose(c1, new_c, atol=1e-6)


def test_zoneout_cell_in_keras_rnn_equals_keras_lstm():  # state order (h, c) as Keras's
  x = rng(3).normal(size=(2, 6, 4)).astype(np.float32)
  rnn = keras.layers.RNN(ZoneoutLSTMCell(5, 0.0), return_sequences=True)
  lstm = keras.layers.LSTM(5, return_sequences=True)
  out = rnn(x).numpy()
  lstm.build(x.shape)
  lstm.set_weights(rnn.get_weights())
  np.testing.assert_allclose(out, lstm(x).numpy(), atol=1e-5)


def test_zoneout_is_the_expectation_at_inference_and_old_or_new_in_training():
  p = 0.3
  cell, (x, h, c), (new_h, new_c) = cell_and_reference(p)
  out, (h1, c1) = cell(x, [h, c], training=False)
  np.testing.assert_allclose(h1, p * h.numpy() + (1 - p) * new_h, atol=1e-6)
  np.testing.assert_allclose(c1, p * c.numpy() + (1 - p) * new_c, atol=1e-6)
  np.testing.assert_allclose(out, h1)
  _, (h1, c1) = cell(x, [h, c], training=True)
  for got, old, new in ((h1.numpy(), h.numpy(), new_h), (c1.numpy(), c.numpy(), new_c)):
    kept, updated = np.isclose(got, old, atol=1e-6), np.isclose(got, new, atol=1e-6)
    assert np.all(kept | updated)
    assert 0.15 < kept.mean() < 0.45  # 256 units, p = 0.3


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
def test_zoneout_bad_probability(p):
  with pytest.raises(ConfigError, match="zoneout_prob"):
    ZoneoutLSTMCell(4, p)


# ----------------------------------------------------------------------------- prenet, postnet
def test_prenet_dropout_is_always_on():
  x = tf.constant(rng(4).normal(size=(4, 6)).astype(np.float32))
  prenet = Prenet(16, 2, dropout_rate=0.5)
  a, b = prenet(x, training=False).numpy(), prenet(x, training=False).numpy()
  assert not np.allclose(a, b)
  still = Prenet(16, 2, dropout_rate=0.0)
  np.testing.assert_array_equal(still(x).numpy(), still(x).numpy())


def test_postnet_ignores_padding():
  postnet = Postnet(POSTNET, MEL, dropout_rate=0.0, bn_momentum=0.1, bn_epsilon=1e-5)
  lengths = [9, 4, 6]
  clean, noisy = padded(lengths, MEL, False), padded(lengths, MEL, True)
  for training in (False, True):
    a = postnet(clean, tf.constant(lengths), training=training).numpy()
    b = postnet(noisy, tf.constant(lengths), training=training).numpy()
    assert a.shape == clean.shape
    for i, n in enumerate(lengths):
      np.testing.assert_allclose(a[i, :n], b[i, :n], atol=1e-4)


# ----------------------------------------------------------------------------- encoder
ENCODER = {"src_emb_size": 16, "conv_layers": [{"kernel_size": [5], "stride": [1],
                                                "num_channels": 16, "padding": "same"}],
           "num_rnn_layers": 1, "rnn_cell_dim": 8}


def encoder(**params):
  return Tacotron2Encoder({**ENCODER, **params}, mode="eval", src_vocab_size=VOCAB)


def run_encoder(enc, ids, lengths, training=False):
  out = enc({"source_tensors": (tf.constant(ids, tf.int32), tf.constant(lengths, tf.int32))},
            training=training)
  return out["outputs"].numpy(), out["src_lengths"].numpy()


@pytest.mark.parametrize("params", [{}, {"zoneout_prob": 0.1, "num_rnn_layers": 2},
                                    {"zoneout_prob": 0.1, "rnn_unidirectional": True},
                                    {"rnn_type": "gru", "rnn_dropout_prob": 0.3},
                                    {"rnn_unidirectional": True}],
                         ids=["lstm", "zoneout", "zoneout_uni", "gru", "lstm_uni"])
def test_encoder_shape_and_padding_invariance(params):
  enc = encoder(**params)
  ids = rng(5).integers(3, VOCAB, size=(2, 9))  # garbage ids in the padding
  out, lengths = run_encoder(enc, ids, [9, 4])
  units = 8 if params.get("rnn_unidirectional") else 16
  assert out.shape == (2, 9, units) and lengths.tolist() == [9, 4]
  assert np.all(out[1, 4:] == 0.0)
  alone, _ = run_encoder(enc, ids[1:, :4], [4])
  np.testing.assert_allclose(alone[0], out[1, :4], atol=1e-5)
  if params.get("zoneout_prob"):
    rnn = enc.rnns[0] if params.get("rnn_unidirectional") else enc.rnns[0].forward_layer
    assert isinstance(rnn.cell, ZoneoutLSTMCell)
    assert run_encoder(enc, ids, [9, 4], training=True)[0].shape == out.shape


@pytest.mark.parametrize("params,match", [
    ({"rnn_type": keras.layers.GRU, "zoneout_prob": 0.1}, "zoneout"),
    ({"conv_layers": [{"kernel_size": [5], "stride": [2], "num_channels": 16}]}, "stride"),
    ({"rnn_type": "simple"}, "neither"),
])
def test_encoder_config_errors(params, match):
  with pytest.raises(ConfigError, match=match):
    encoder(**params)


# ----------------------------------------------------------------------------- decoder
DECODER = {"attention_layer_size": 8, "location_filters": 4, "location_kernel_size": 5,
           "decoder_cell_units": 16, "decoder_layers": 1, "prenet_units": 8, "prenet_layers": 2,
           "dropout_prob": 0.0, "postnet_conv_layers": POSTNET, "max_frames_per_symbol": 2.0}


def decoder(num_mag=0, **params):
  return Tacotron2Decoder({**DECODER, **params}, mode="eval", num_mel_features=MEL,
                          num_magnitude_features=num_mag)


def encoded(lengths, seed=0):
  return {"outputs": tf.constant(padded(lengths, DEPTH, False, seed)),
          "src_lengths": tf.constant(lengths, tf.int32)}


def targets(frame_lengths, frames, features=MEL, seed=1):
  spec = rng(seed).normal(size=(len(frame_lengths), frames, features)).astype(np.float32)
  stop = (np.arange(frames)[None] >= np.array(frame_lengths)[:, None] - 1).astype(np.float32)
  return (tf.constant(spec), tf.constant(stop), tf.constant(frame_lengths, tf.int32))


@pytest.mark.parametrize("r", [1, 3])
def test_teacher_forced_shapes_and_mask(r):
  dec = decoder(reduction_factor=r)
  out = dec({"encoder_output": encoded([5, 3]), "target_tensors": targets([10, 7], 10)})
  steps = -(-10 // r)
  assert out["spectrogram"].shape == out["decoder_spectrogram"].shape == (2, 10, MEL)
  assert out["stop_token_logits"].shape == (2, 10)
  assert out["alignments"].shape == (2, steps, 5) and out["alignments"].dtype == tf.float32
  assert out["final_sequence_lengths"].numpy().tolist() == [10, 7]
  for key in ("spectrogram", "decoder_spectrogram"):
    assert np.all(out[key].numpy()[1, 7:] == 0) and np.any(out[key].numpy()[1, :7] != 0)
  aligns = out["alignments"].numpy()
  np.testing.assert_allclose(aligns[0].sum(-1), 1.0, atol=1e-5)
  np.testing.assert_allclose(aligns[1, :-(-7 // r)].sum(-1), 1.0, atol=1e-5)
  assert np.all(aligns[1, -(-7 // r):] == 0) and np.all(aligns[1, :, 3:] == 0)
  loose = decoder(reduction_factor=r, mask_decoder_sequence=False)
  out = loose({"encoder_output": encoded([5, 3]), "target_tensors": targets([10, 7], 10)})
  assert np.any(out["decoder_spectrogram"].numpy()[1, 7:] != 0)


def test_teacher_forcing_reads_the_last_frame_of_each_group_and_ignores_padding():
  dec = decoder(reduction_factor=3, prenet_dropout_prob=0.0)
  spec, stop, lengths = targets([10, 7], 10)

  def run(spec, stop=stop, lengths=lengths, enc=encoded([5, 3])):
    out = dec({"encoder_output": enc, "target_tensors": (spec, stop, lengths)})
    return out["decoder_spectrogram"].numpy(), out["spectrogram"].numpy()

  base, post = run(spec)
  changed = spec.numpy().copy()
  changed[:, 4] += 5.0  # not the last frame of a group: never read
  np.testing.assert_allclose(run(tf.constant(changed))[0], base, atol=1e-6)
  changed[:, 5] += 5.0  # the last of group 2 feeds step 3 (frames 6..8) and later
  moved = run(tf.constant(changed))[0]
  np.testing.assert_allclose(moved[:, :6], base[:, :6], atol=1e-6)
  assert not np.allclose(moved[:, 6:], base[:, 6:])
  enc = encoded([5, 3])  # the shorter utterance alone: as in the batch
  alone = run(spec[1:, :7], stop[1:, :7], lengths[1:],
              {"outputs": enc["outputs"][1:, :3], "src_lengths": enc["src_lengths"][1:]})
  np.testing.assert_allclose(alone[0][0], base[1, :7], atol=1e-5)
  np.testing.assert_allclose(alone[1][0], post[1, :7], atol=1e-5)


def test_decoder_under_mixed_precision():
  dec = Tacotron2Decoder({**DECODER, "reduction_factor": 2}, mode="eval", dtype="mixed_bfloat16",
                         num_mel_features=MEL, num_magnitude_features=4)
  tgt = targets([8, 5], 8, MEL + 4)
  for inputs in ({"target_tensors": tgt}, {}):
    out = dec({"encoder_output": encoded([5, 3]), **inputs}, training=bool(inputs))
    assert out["spectrogram"].dtype == out["magnitude"].dtype == tf.bfloat16
    assert out["alignments"].dtype == out["stop_token_logits"].dtype == tf.float32
  loss = Text2SpeechLoss({}, num_mel_features=MEL, num_magnitude_features=4, reduction_factor=2)
  out = dec({"encoder_output": encoded([5, 3]), "target_tensors": tgt}, training=True)
  total, _ = loss.compute_loss({"decoder_output": out, "target_tensors": tgt})
  assert total.dtype == tf.float32 and np.isfinite(total.numpy())


def free_run(dec, lengths, bias, values=None):
  enc = encoded(lengths) if values is None else {"outputs": tf.constant(values),
                                                  "src_lengths": tf.constant(lengths)}
  dec({"encoder_output": enc, "target_tensors": targets([6] * len(lengths), 6)})  # builds
  kernel = np.zeros(dec.stop_projection.kernel.shape, np.float32)
  if values is not None:
    kernel[dec.params["decoder_cell_units"], :] = 100.0  # logit = 100 x context channel 0
  dec.stop_projection.kernel.assign(kernel)
  dec.stop_projection.bias.assign(np.asarray(bias, np.float32))
  return {k: v.numpy() for k, v in dec({"encoder_output": enc}).items()}


@pytest.mark.parametrize("r,bias,length,steps", [
    (1, [50.0], 1, 1), (3, [50.0] * 3, 1, 1),  # stops at once: the first frame
    (3, [-50.0, 50.0, 50.0], 2, 1),  # the first frame whose stop token fires, included
    (1, [-50.0], 10, 10), (3, [-50.0] * 3, 12, 4)])  # never: 2 frames per symbol x 5 symbols
def test_free_running_stops_at_the_stop_token_or_the_frame_limit(r, bias, length, steps):
  out = free_run(decoder(reduction_factor=r), [5, 3], bias)
  assert out["final_sequence_lengths"].tolist() == [length, length]
  assert out["spectrogram"].shape == (2, steps * r, MEL)
  assert out["alignments"].shape == (2, steps, 5)
  assert out["stop_token_logits"].shape == (2, steps * r)
  assert np.all(out["spectrogram"][:, length:] == 0)
  assert np.all(out["spectrogram"][:, :length] != 0)


def test_free_running_stops_each_sequence_on_its_own():
  values = padded([5, 4], DEPTH, False)
  values[0, :, 0], values[1, :4, 0] = 1.0, -1.0  # context channel 0: +1 stops, -1 runs on
  out = free_run(decoder(reduction_factor=1), [5, 4], [0.0], values)
  assert out["final_sequence_lengths"].tolist() == [1, 10]
  assert np.all(out["spectrogram"][0, 1:] == 0) and np.all(out["alignments"][0, 1:] == 0)
  np.testing.assert_allclose(out["alignments"][1].sum(-1), 1.0, atol=1e-5)


def test_both_output_predicts_the_magnitude():
  dec = decoder(num_mag=9, reduction_factor=2)
  out = dec({"encoder_output": encoded([5, 3]), "target_tensors": targets([8, 5], 8, MEL + 9)})
  assert out["spectrogram"].shape == (2, 8, MEL) and out["magnitude"].shape == (2, 8, 9)
  assert np.all(out["magnitude"].numpy()[1, 5:] == 0)
  free = dec({"encoder_output": encoded([5, 3])})
  assert free["magnitude"].shape[-1] == 9
  assert free["magnitude"].shape[1] == free["spectrogram"].shape[1]


@pytest.mark.parametrize("params,num_mag,match", [
    ({"postnet_conv_layers": None}, 0, "postnet_conv_layers"),
    ({"enable_postnet": False}, 4, "enable_postnet"),
    ({"reduction_factor": 0}, 0, "reduction_factor"),
    ({"decoder_cell_type": "gru"}, 0, "decoder_cell_type"),
])
def test_decoder_config_errors(params, num_mag, match):
  with pytest.raises(ConfigError, match=match):
    decoder(num_mag=num_mag, **params)


def test_decoder_in_tf_function_with_variable_shapes():
  dec = decoder(reduction_factor=2, prenet_dropout_prob=0.0)
  spec = [tf.TensorSpec([None, None, DEPTH]), tf.TensorSpec([None], tf.int32)]
  tgt = [tf.TensorSpec([None, None, MEL]), tf.TensorSpec([None, None]),
         tf.TensorSpec([None], tf.int32)]

  def forced(values, src, spec, stop, lengths):
    return dec({"encoder_output": {"outputs": values, "src_lengths": src},
                "target_tensors": (spec, stop, lengths)}, training=False)["spectrogram"]

  def free(values, src):
    out = dec({"encoder_output": {"outputs": values, "src_lengths": src}})
    return out["spectrogram"], out["final_sequence_lengths"]

  graph_forced = tf.function(forced, input_signature=spec + tgt, autograph=False)
  graph_free = tf.function(free, input_signature=spec, autograph=False)
  for src, frames in (([5, 3], [7, 4]), ([4, 2, 6], [9, 9, 3])):
    args = (*encoded(src).values(), *targets(frames, max(frames)))
    np.testing.assert_allclose(graph_forced(*args), forced(*args), atol=1e-5)
    for got, want in zip(graph_free(*args[:2]), free(*args[:2])):
      np.testing.assert_allclose(got, want, atol=1e-5)


# ----------------------------------------------------------------------------- guided attention
def np_penalty(aligns, text_lengths, step_lengths, sigma=0.2):
  total = []
  for a, n_len, s_len in zip(aligns, text_lengths, step_lengths):
    s, n = np.arange(s_len)[:, None] / s_len, np.arange(n_len)[None, :] / n_len
    w = 1.0 - np.exp(-(n - s) ** 2 / (2 * sigma ** 2))
    total.append(float((a[:s_len, :n_len] * w).sum()))
  return np.array(total)


def test_guided_attention_diagonal_uniform_and_padding():
  diagonal = np.eye(10, dtype=np.float32)[None]
  uniform = np.full((1, 10, 10), 0.1, np.float32)
  assert float(guided_attention_penalty(diagonal, [10], [10])[0]) == pytest.approx(0.0, abs=1e-6)
  big = float(guided_attention_penalty(uniform, [10], [10])[0])
  assert big > 3.0 and big == pytest.approx(np_penalty(uniform, [10], [10])[0], rel=1e-5)
  garbage = np.full((2, 12, 9), 7.0, np.float32)  # padded steps/symbols hold garbage
  garbage[0, :10, :8] = rng(6).random((10, 8))
  garbage[1, :5, :3] = rng(7).random((5, 3))
  got = guided_attention_penalty(garbage, [8, 3], [10, 5], sigma=0.3).numpy()
  np.testing.assert_allclose(got, np_penalty(garbage, [8, 3], [10, 5], 0.3), rtol=1e-5)


# ----------------------------------------------------------------------------- loss
def loss_case(num_mag=0, r=1, seed=8):
  r_ = rng(seed)
  lengths, frames, n = np.array([4, 2]), 4, 3
  spec = r_.normal(size=(2, frames, MEL + num_mag)).astype(np.float32)
  stop = (np.arange(frames)[None] >= lengths[:, None] - 1).astype(np.float32)
  out = {k: r_.normal(size=(2, frames, MEL)).astype(np.float32)
         for k in ("decoder_spectrogram", "spectrogram")}
  out["stop_token_logits"] = r_.normal(size=(2, frames)).astype(np.float32)
  out["alignments"] = r_.random((2, -(-frames // r), n)).astype(np.float32)
  out["src_lengths"] = np.array([3, 2], np.int32)
  if num_mag:
    out["magnitude"] = r_.normal(size=(2, frames, num_mag)).astype(np.float32)
  return {"decoder_output": out, "target_tensors": (spec, stop, lengths)}


def np_loss(case, params=None, num_mag=0):
  p = {"l1_norm": False, "use_mask": True, "mel_weight": 1.0, "mag_weight": 1.0,
       "stop_token_weight": 1.0, "scale": 1.0, **(params or {})}
  out, (spec, stop, lengths) = case["decoder_output"], case["target_tensors"]
  err, mel = (np.abs if p["l1_norm"] else np.square), spec[..., :MEL]
  per = p["mel_weight"] * (err(out["decoder_spectrogram"] - mel).mean(-1) +
                           err(out["spectrogram"] - mel).mean(-1))
  if num_mag:
    per += p["mag_weight"] * err(out["magnitude"] - spec[..., MEL:]).mean(-1)
  z = out["stop_token_logits"].astype(np.float64)  # stable BCE with logits
  per += p["stop_token_weight"] * (np.maximum(z, 0) - z * stop + np.log1p(np.exp(-np.abs(z))))
  weights = np.ones_like(per)
  if p["use_mask"]:
    weights = (np.arange(spec.shape[1])[None] < lengths[:, None]).astype(np.float64)
  return float((per * weights).sum()) * p["scale"], float(np.sum(weights))


@pytest.mark.parametrize("params,num_mag", [
    ({}, 0), ({"l1_norm": True}, 0), ({"use_mask": False}, 0),
    ({"mel_weight": 0.5, "stop_token_weight": 2.0, "scale": 0.25}, 0),
    ({"mag_weight": 3.0}, 5), ({"l1_norm": True}, 5)])
def test_loss_equals_a_hand_computation(params, num_mag):
  case = loss_case(num_mag)
  loss = Text2SpeechLoss(params, num_mel_features=MEL, num_magnitude_features=num_mag)
  total, weight = loss.compute_loss(case)
  want, want_weight = np_loss(case, params, num_mag)
  assert float(weight) == want_weight == (8.0 if params.get("use_mask") is False else 6.0)
  assert float(total) == pytest.approx(want, rel=1e-5)


@pytest.mark.parametrize("r", [1, 3])
def test_guided_term_only_in_training_and_decaying(r):
  case = loss_case(r=r)
  params = {"guided_attention_weight": 2.0, "guided_attention_decay_steps": 100}
  loss = Text2SpeechLoss(params, num_mel_features=MEL, reduction_factor=r)
  base, _ = np_loss(case)
  assert float(loss.compute_loss(case)[0]) == pytest.approx(base, rel=1e-5)  # no step: eval
  off = Text2SpeechLoss({}, num_mel_features=MEL, reduction_factor=r)
  assert float(off.compute_loss(case, step=tf.constant(0))[0]) == pytest.approx(base, rel=1e-5)
  steps = -(-case["target_tensors"][2] // r)
  penalty = np_penalty(case["decoder_output"]["alignments"], [3, 2], steps).sum()
  for step, factor in ((0, 1.0), (25, 0.75), (100, 0.0), (400, 0.0)):
    got = float(loss.compute_loss(case, step=tf.constant(step, tf.int64))[0])
    assert got == pytest.approx(base + 2.0 * factor * r * penalty, rel=1e-5), step
  constant = Text2SpeechLoss({"guided_attention_weight": 2.0}, num_mel_features=MEL,
                             reduction_factor=r)
  got = float(constant.compute_loss(case, step=tf.constant(10 ** 6))[0])
  assert got == pytest.approx(base + 2.0 * r * penalty, rel=1e-5)
