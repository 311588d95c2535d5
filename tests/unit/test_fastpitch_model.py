"""FastPitch's encoder, decoder, loss and model hooks: length regulator, padding invariance,
pace and pitch shift, mixed precision, the loss terms, eval metrics and config errors."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.data.description import Text2SpeechDescription
from open_seq2seq.decoders.fastpitch_decoder import FastPitchDecoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.losses.fastpitch_loss import PARTS
from open_seq2seq.models.text2speech_fastpitch import PART_METRICS, FastPitch
from open_seq2seq.parts.fastpitch.alignment import beta_binomial_log_prior
from open_seq2seq.parts.fastpitch.length_regulator import regulate_length
from tests.helpers import fastpitch as fp


def test_length_regulator_matches_numpy_repeat():
  r = np.random.default_rng(0)
  x = r.normal(size=(3, 5, 4)).astype(np.float32)
  durations = np.array([[2, 0, 3, 1, 0], [0, 0, 1, 0, 0], [4, 4, 4, 4, 4]], np.int32)
  out, lengths, index = regulate_length(tf.constant(x), tf.constant(durations))
  np.testing.assert_array_equal(lengths.numpy(), durations.sum(1))
  assert out.shape == (3, 20, 4)
  for b in range(3):
    expected = np.repeat(x[b], durations[b], axis=0)
    np.testing.assert_array_equal(out.numpy()[b, :len(expected)], expected)
    assert not out.numpy()[b, len(expected):].any()
    np.testing.assert_array_equal(index.numpy()[b, :len(expected)],
                                  np.repeat(np.arange(5), durations[b]))
    assert (index.numpy()[b, len(expected):] == -1).all()
  fixed, _, _ = regulate_length(tf.constant(x), tf.constant(durations), max_frames=24)
  assert fixed.shape == (3, 24, 4)


@pytest.mark.parametrize("targets", [True, False], ids=["teacher_forced", "free_running"])
def test_a_sequence_alone_and_batched_with_a_longer_one_gives_the_same_mel(targets):
  encoder, decoder, _ = fp.components()
  data = fp.batch([5, 9], [17, 30], seed=1, pad_symbols=3, pad_frames=4)
  batched = fp.run(encoder, decoder, data, targets=targets)
  alone = fp.run(encoder, decoder, fp.row(data, 0, 5, 17), targets=targets)
  frames = int(alone["final_sequence_lengths"][0])
  assert int(batched["final_sequence_lengths"][0]) == frames
  if targets:
    assert frames == 17
  np.testing.assert_allclose(batched["spectrogram"].numpy()[0, :frames],
                             alone["spectrogram"].numpy()[0, :frames], atol=2e-5)
  assert not batched["spectrogram"].numpy()[0, frames:].any()
  np.testing.assert_array_equal(batched["durations"].numpy()[0, :5], alone["durations"].numpy()[0])
  np.testing.assert_array_equal(batched["alignments"].numpy()[0, :frames, :5],
                                alone["alignments"].numpy()[0, :frames])


def test_teacher_forced_durations_sum_to_the_target_lengths_and_pitch_follows_mas():
  encoder, decoder, _ = fp.components()
  data = fp.batch([4, 7, 3], [11, 20, 3], seed=2, pad_frames=2)
  out = fp.run(encoder, decoder, data)
  np.testing.assert_array_equal(out["durations"].numpy().sum(1), [11, 20, 3])
  assert (out["durations"].numpy()[0, :4] >= 1).all()
  path, pitch = out["alignments"].numpy(), data["target_tensors"][3].numpy()
  for b, n in enumerate([4, 7, 3]):
    for s in range(n):
      frames = pitch[b][path[b, :, s] > 0]
      voiced = frames[frames != 0]
      expected = voiced.mean() if voiced.size else 0.0
      np.testing.assert_allclose(out["pitch_targets"].numpy()[b, s], expected, atol=1e-5)
  # the pitch embedding reads the MAS pitch when teacher forced
  np.testing.assert_array_equal(out["pitch"].numpy(), out["pitch_targets"].numpy())


def test_pace_two_halves_the_output_length():
  encoder, decoder, _ = fp.components()
  # durations of about 6 frames per symbol: bias the duration predictor's output
  decoder.build()
  decoder.duration_predictor.projection.bias.assign([np.log(7.0)])
  data = fp.batch([6, 10], [30, 50], seed=3)
  normal = fp.run(encoder, decoder, data, targets=False)
  decoder.pace = 2.0
  fast = fp.run(encoder, decoder, data, targets=False)
  log_d = normal["log_duration_predictions"].numpy()
  for b, n in enumerate([6, 10]):
    frames = np.maximum(np.exp(log_d[b, :n]) - 1, 0)
    assert int(normal["final_sequence_lengths"][b]) == np.round(frames).sum()
    assert int(fast["final_sequence_lengths"][b]) == np.round(frames / 2).sum()
    ratio = int(fast["final_sequence_lengths"][b]) / int(normal["final_sequence_lengths"][b])
    assert abs(ratio - 0.5) <= 0.5 * n / int(normal["final_sequence_lengths"][b])


def test_pitch_shift_moves_the_pitch_embedding_input_and_the_output():
  encoder, decoder, _ = fp.components()
  data = fp.batch([6, 4], [30, 20], seed=4)
  plain = fp.run(encoder, decoder, data, targets=False)
  decoder.pitch_shift = 0.5  # the model passes Hz / pitch_std
  shifted = fp.run(encoder, decoder, data, targets=False)
  mask = np.arange(6)[None, :] < np.array([6, 4])[:, None]
  np.testing.assert_allclose((shifted["pitch"] - plain["pitch"]).numpy(), 0.5 * mask, atol=1e-6)
  np.testing.assert_allclose(plain["pitch"].numpy(), plain["pitch_predictions"].numpy() * mask)
  np.testing.assert_array_equal(shifted["durations"].numpy(), plain["durations"].numpy())
  assert np.abs(shifted["spectrogram"].numpy() - plain["spectrogram"].numpy()).max() > 1e-3


def test_the_model_converts_the_pitch_shift_from_hertz():
  model = FastPitch.__new__(FastPitch)
  model.params = {"pace": 1.5, "pitch_shift": 30.0}
  description = fp.description(pitch_std=60.0)
  kwargs = model.component_kwargs("decoder", description)
  assert kwargs == {"num_mel_features": fp.MEL, "pace": 1.5, "pitch_shift": 0.5}
  with pytest.raises(ConfigError, match="FastPitchDataLayer"):
    model.component_kwargs("decoder", Text2SpeechDescription(
        src_vocab_size=fp.VOCAB, idx2symbol=(), features=description.features))


def test_mixed_precision_is_close_to_float32_and_keeps_float32_outputs():
  data = fp.batch([5, 8], [20, 28], seed=5)
  full = fp.run(*fp.components("float32")[:2], data)
  encoder, decoder, loss = fp.components("mixed_bfloat16")
  half = fp.run(encoder, decoder, data)
  for key in ("spectrogram", "log_duration_predictions", "pitch_predictions",
              "alignment_log_probs"):
    assert half[key].dtype == tf.float32, key
  scale = np.abs(full["spectrogram"].numpy()).mean()
  diff = np.abs(full["spectrogram"].numpy() - half["spectrogram"].numpy()).mean()
  assert diff < 0.1 * scale, (diff, scale)
  total, weight = loss.compute_loss({"decoder_output": half,
                                     "target_tensors": data["target_tensors"]})
  assert total.dtype == tf.float32 and np.isfinite(total.numpy()) and weight.numpy() == 2.0


def test_loss_terms_weights_and_the_binarization_schedule():
  encoder, decoder, loss = fp.components()
  data = fp.batch([5, 8], [20, 28], seed=6)
  out = fp.run(encoder, decoder, data)
  parts = {k: v.numpy() for k, v in loss.parts(out, data["target_tensors"]).items()}
  assert set(parts) == set(PARTS)
  for name, value in parts.items():
    assert value.shape == (2,) and np.isfinite(value).all() and (value > 0).all(), name
  mel = data["target_tensors"][0].numpy()
  expected = [((out["spectrogram"].numpy()[b, :t] - mel[b, :t]) ** 2).mean()
              for b, t in enumerate([20, 28])]
  np.testing.assert_allclose(parts["mel"], expected, rtol=1e-5)
  inputs = {"decoder_output": out, "target_tensors": data["target_tensors"]}
  p = loss.params
  without = sum(p[f"{k}_weight"] * parts[k].sum() for k in PARTS if k != "binarization")
  for step, on in ((None, 0.0), (9, 0.0), (10, 1.0)):
    step = None if step is None else tf.constant(step, tf.int64)
    total, _ = loss.compute_loss(inputs, step=step)
    np.testing.assert_allclose(total.numpy(), without + on * parts["binarization"].sum(),
                               rtol=1e-5)


def test_every_trainable_variable_gets_a_gradient():
  encoder, decoder, loss = fp.components()
  data = fp.batch([5, 8], [20, 28], seed=7)
  fp.run(encoder, decoder, data)
  with tf.GradientTape() as tape:
    out = fp.run(encoder, decoder, data, training=True)
    total, _ = loss.compute_loss({"decoder_output": out,
                                  "target_tensors": data["target_tensors"]},
                                 step=tf.constant(20, tf.int64))
  variables = encoder.trainable_variables + decoder.trainable_variables
  grads = tape.gradient(total, variables)
  missing = [v.path for v, g in zip(variables, grads) if g is None]
  assert not missing
  assert all(np.isfinite(tf.convert_to_tensor(g).numpy()).all() for g in grads)


def test_eval_metrics_from_per_utterance_results():
  model = FastPitch.__new__(FastPitch)
  outputs = {"src_lengths": np.array([3, 2]), "mas_durations": np.array([[2, 3, 1], [4, 4, 0]]),
             "forced_log_durations": np.log1p(np.array([[2.0, 1.0, 1.0], [4.0, 6.0, 9.0]])),
             "final_sequence_lengths": np.array([5, 12])}
  for i, name in enumerate(PARTS):
    outputs[f"part_{name}"] = np.array([1.0 + i, 3.0 + i])
  batch = {"id": np.array([4, 7]), "target_tensors": (None, None, np.array([6, 8]))}
  results = model.evaluate(batch, outputs)
  assert [index for index, _ in results] == [4, 7]
  metrics = model.finalize_evaluation(results)
  for i, name in enumerate(PART_METRICS.values()):
    assert metrics[name] == pytest.approx(2.0 + i)
  assert metrics["duration_error"] == pytest.approx((0 + 2 + 0 + 0 + 2) / 5)
  assert metrics["length_ratio"] == pytest.approx((5 / 6 + 12 / 8) / 2)
  assert metrics["length_accuracy"] == pytest.approx(0.5)
  assert metrics["mas_length_error"] == pytest.approx((0 + 0) / 2)


@pytest.mark.parametrize("key,value", [("d_model", 0), ("predictor_dropout", 1.0),
                                       ("aligner_temperature", 0.0), ("max_duration", 0)])
def test_bad_decoder_params_are_one_line_config_errors(key, value):
  with pytest.raises(ConfigError, match=f"decoder_params/{key}"):
    FastPitchDecoder(dict(fp.DECODER, **{key: value}), num_mel_features=fp.MEL)


def test_a_decoder_narrower_than_the_encoder_is_a_config_error():
  encoder, _, _ = fp.components()
  decoder = FastPitchDecoder(dict(fp.DECODER, d_model=8, head_size=4), num_mel_features=fp.MEL)
  with pytest.raises(ConfigError, match="decoder_params/d_model"):
    fp.run(encoder, decoder, fp.batch([3], [9]))


def test_the_prior_can_be_switched_off():
  data = fp.batch([5, 8], [20, 28], seed=8)
  with_prior = fp.run(*fp.components()[:2], data)
  without = fp.run(*fp.components(params={"use_prior": False})[:2], data)
  prior = beta_binomial_log_prior(tf.constant([5, 8]), tf.constant([20, 28]), 8, 28).numpy()
  real = np.isfinite(prior) & (np.arange(28)[None, :, None] < np.array([20, 28])[:, None, None])
  np.testing.assert_allclose(with_prior["alignment_log_probs"].numpy()[real],
                             (without["alignment_log_probs"].numpy() + prior)[real], rtol=1e-5,
                             atol=1e-4)
