"""Centaur parts, encoder, decoder and model hooks: causality, padding, frame-by-frame
synthesis equal to teacher forcing, stopping, forced attention, mixed precision, config
errors."""

import os

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import resolve_config
from open_seq2seq.data.text2speech.text2speech import Text2SpeechDataLayer
from open_seq2seq.decoders.centaur_decoder import CentaurDecoder
from open_seq2seq.encoders.centaur_encoder import CentaurEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.losses.text2speech_loss import Text2SpeechLoss
from open_seq2seq.models.text2speech_centaur import Text2SpeechCentaur
from open_seq2seq.outputs import CsvRows, PngFile, WavFile
from open_seq2seq.parts.centaur import (CentaurAttention, ConvBlock, Prenet, position_encoding,
                                        window_mask)
from tests.helpers.tts import VOCAB, write_corpus

VOCAB_SIZE, MEL, DEPTH = 20, 6, 12


def rng(seed=0):
  return np.random.default_rng(seed)


def causal(channels, kernel=3, **extra):
  return {"kernel_size": [kernel], "stride": [1], "num_channels": channels, "padding": "VALID",
          "is_causal": True, **extra}


def same(channels, kernel=3, **extra):
  return {"kernel_size": [kernel], "stride": [1], "num_channels": channels, "padding": "SAME",
          **extra}


def decoder(num_mag=0, dtype="float32", **overrides):
  params = {"prenet_layers": 2, "prenet_hidden_size": 16, "hidden_size": 16,
            "attention_layers": 2, "attention_heads": 2, "attention_dropout": 0.0,
            "layer_postprocess_dropout": 0.0, "prenet_dropout": 0.0, "cnn_dropout_prob": 0.0,
            "attention_cnn_dropout_prob": 0.0, "self_attention_conv_params": causal(16),
            "conv_layers": [causal(16), causal(16)], "reduction_factor": 2,
            "max_frames_per_symbol": 2.0, "stop_threshold": 1.0}  # 1.0: never stops
  if num_mag:
    params["mag_conv_layers"] = [causal(8, is_residual=False)]
  params.update(overrides)
  return CentaurDecoder(params, num_mel_features=MEL, num_magnitude_features=num_mag, dtype=dtype)


def encoder(**overrides):
  params = {"embedding_size": 16, "output_size": DEPTH, "cnn_dropout_prob": 0.0,
            "conv_layers": [same(16), same(16, 5)]}
  params.update(overrides)
  return CentaurEncoder(params, src_vocab_size=VOCAB_SIZE)


def encoded(lengths, seed=0):
  values = rng(seed).normal(size=(len(lengths), max(lengths), DEPTH)).astype(np.float32)
  for i, n in enumerate(lengths):
    values[i, n:] = 0.0
  return {"outputs": tf.constant(values), "src_lengths": tf.constant(lengths)}


def targets(lengths, frames, features=MEL, seed=1):
  spec = rng(seed).normal(size=(len(lengths), frames, features)).astype(np.float32)
  return (tf.constant(spec), tf.zeros([len(lengths), frames]), tf.constant(lengths))


def numpy(out):
  return {k: v.numpy() for k, v in out.items()}


# ----------------------------------------------------------------------------- parts
def test_causal_conv_block_step_by_step_equals_the_whole_sequence():
  block = ConvBlock(8, 4, 8, is_causal=True, bn_epsilon=1e-3)
  x = rng(2).normal(size=(2, 7, 8)).astype(np.float32)
  whole = block(tf.constant(x), tf.constant([7, 7])).numpy()
  buffer, steps = block.initial_buffer(2, tf.float32), []
  for t in range(7):
    y, buffer = block.step(tf.constant(x[:, t]), buffer)
    steps.append(y.numpy())
  np.testing.assert_allclose(np.stack(steps, axis=1), whole, atol=1e-5)
  x2 = x.copy()
  x2[:, 4:] += 10.0  # the future changes: frames 0..3 do not
  changed = block(tf.constant(x2), tf.constant([7, 7])).numpy()
  np.testing.assert_allclose(changed[:, :4], whole[:, :4], atol=1e-6)
  assert not np.allclose(changed[:, 4:], whole[:, 4:])


def test_non_causal_conv_block_ignores_padding_and_residual_needs_equal_channels():
  block = ConvBlock(6, 5, 6, is_causal=False)
  x = rng(3).normal(size=(2, 9, 6)).astype(np.float32)
  garbage = x.copy()
  garbage[1, 4:] = 1e3
  a = block(tf.constant(x), tf.constant([9, 4]), training=True).numpy()  # masked statistics
  b = block(tf.constant(garbage), tf.constant([9, 4]), training=True).numpy()
  np.testing.assert_allclose(a[:, :4], b[:, :4], atol=1e-5)
  np.testing.assert_allclose(a[0], b[0], atol=1e-5)
  with pytest.raises(ConfigError, match="is_residual"):
    ConvBlock(8, 3, 6)


def test_prenet_drops_out_in_training_or_with_inference_dropout():
  x = tf.ones([4, 10])
  plain, kept = Prenet(2, 32, 10, dropout=0.5), Prenet(2, 32, 10, dropout=0.5,
                                                      inference_dropout=True)
  for net in (plain, kept):
    net.build()
    for dense in net.dense:
      dense.kernel.assign(tf.ones_like(dense.kernel) * 0.1)
  np.testing.assert_allclose(plain(x).numpy(), plain(x).numpy())
  assert np.any(plain(x, training=True).numpy() == 0.0)
  assert np.any(kept(x).numpy() == 0.0)


def test_position_encoding_and_window_mask():
  pe = position_encoding(7, 5).numpy()
  assert pe.shape == (7, 5)
  np.testing.assert_allclose(pe[0], [0, 0, 0, 1, 1], atol=1e-6)  # 3 sines, 2 of 3 cosines
  mask = window_mask(tf.constant([[0, 4]]), 6, window_size=3, back_step_size=1).numpy()
  assert mask.tolist() == [[[True, True, True, False, False, False],
                            [False, False, False, True, True, True]]]


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_attention_masks_padded_text_and_keeps_float32_weights(dtype):
  att = CentaurAttention(8, 2, DEPTH, dtype=dtype)
  att.build()
  memory = encoded([5, 3])["outputs"].numpy()
  memory[1, 3:] = 1e3  # garbage behind the mask
  queries = tf.constant(rng(4).normal(size=(2, 4, 8)).astype(np.float32))
  allowed = tf.sequence_mask([5, 3], 5)[:, None, None, :]
  out, weights = att(queries, att.memory_kv(tf.constant(memory)), allowed)
  assert weights.dtype == tf.float32 and weights.shape == (2, 2, 4, 5)
  assert out.dtype == (tf.bfloat16 if dtype == "mixed_bfloat16" else tf.float32)
  np.testing.assert_allclose(weights.numpy().sum(-1), 1.0, atol=1e-5)
  assert np.all(weights.numpy()[1, :, :, 3:] == 0.0)


# ----------------------------------------------------------------------------- encoder
def test_encoder_output_ignores_padding():
  enc = encoder()
  ids = np.array([[3, 4, 5, 6, 7, 8], [9, 10, 11, 0, 0, 0]])
  garbage = ids.copy()
  garbage[1, 3:] = 12  # real symbols behind the length: never read
  batch = enc({"source_tensors": (tf.constant(garbage), tf.constant([6, 3]))})
  alone = enc({"source_tensors": (tf.constant(ids[1:, :3]), tf.constant([3]))})
  out = batch["outputs"].numpy()
  assert out.shape == (2, 6, DEPTH) and np.all(out[1, 3:] == 0.0)
  np.testing.assert_allclose(out[1, :3], alone["outputs"].numpy()[0], atol=1e-5)
  assert batch["src_lengths"].numpy().tolist() == [6, 3]


# ----------------------------------------------------------------------------- decoder
@pytest.mark.parametrize("r", [1, 2, 3])
def test_teacher_forced_shapes_and_causality(r):
  dec = decoder(reduction_factor=r)
  enc = encoded([5, 3])
  out = numpy(dec({"encoder_output": enc, "target_tensors": targets([9, 7], 9)}))
  steps = -(-9 // r)
  assert out["spectrogram"].shape == (2, 9, MEL) and out["stop_token_logits"].shape == (2, 9)
  assert out["alignments"].shape == (2, steps, 5) and out["alignments"].dtype == np.float32
  assert np.all(out["spectrogram"][1, 7:] == 0.0)
  assert out["final_sequence_lengths"].tolist() == [9, 7]
  np.testing.assert_allclose(out["alignments"][0].sum(-1), 1.0, atol=1e-5)
  assert np.all(out["alignments"][1, :, 3:] == 0.0)  # padded text gets no weight
  spec, stop, lengths = targets([9, 7], 9)
  changed = spec.numpy()
  changed[:, 5:] += 10.0  # frame 5 onwards: only the steps after frame 5's group change
  later = numpy(dec({"encoder_output": enc, "target_tensors": (tf.constant(changed), stop,
                                                                 lengths)}))
  first_changed = (5 // r + 1) * r  # the first frame of the step fed frame 5's group
  for key in ("spectrogram", "stop_token_logits"):
    np.testing.assert_allclose(later[key][:, :first_changed], out[key][:, :first_changed],
                               atol=1e-5)
    assert not np.allclose(later[key][0, first_changed:], out[key][0, first_changed:])


def test_decoder_output_ignores_text_padding():
  dec = decoder()
  enc = encoded([5, 3])
  garbage = enc["outputs"].numpy()
  garbage[1, 3:] = 1e3
  spec, stop, _ = targets([8, 8], 8)
  batch = numpy(dec({"encoder_output": {"outputs": tf.constant(garbage),
                                        "src_lengths": enc["src_lengths"]},
                     "target_tensors": (spec, stop, tf.constant([8, 8]))}))
  alone = numpy(dec({"encoder_output": {"outputs": enc["outputs"][1:, :3],
                                        "src_lengths": tf.constant([3])},
                     "target_tensors": (spec[1:], stop[1:], tf.constant([8]))}))
  np.testing.assert_allclose(batch["spectrogram"][1], alone["spectrogram"][0], atol=1e-4)
  np.testing.assert_allclose(batch["alignments"][1, :, :3], alone["alignments"][0], atol=1e-5)


@pytest.mark.parametrize("num_mag,r", [(0, 1), (0, 2), (5, 3)])
def test_free_running_equals_teacher_forcing_on_its_own_frames(num_mag, r):
  dec = decoder(num_mag=num_mag, reduction_factor=r, bn_epsilon=1e-3)
  enc = encoded([5, 3])
  free = numpy(dec({"encoder_output": enc}))
  frames = free["spectrogram"].shape[1]
  assert frames == -(-10 // r) * r  # never stops: 2 frames per symbol x 5 symbols
  assert free["final_sequence_lengths"].tolist() == [frames, frames]
  fed = free["spectrogram"]
  if num_mag:
    assert free["magnitude"].shape == (2, frames, num_mag)
    fed = np.concatenate([fed, free["magnitude"]], axis=-1)
  forced = numpy(dec({"encoder_output": enc, "target_tensors": (
      tf.constant(fed), tf.zeros([2, frames]), tf.constant([frames, frames]))}))
  for key in ("spectrogram", "stop_token_logits", "alignments") + (("magnitude",) * bool(num_mag)):
    np.testing.assert_allclose(forced[key], free[key], atol=2e-4, err_msg=key)


def free_run(dec, lengths, bias):
  enc = encoded(lengths)
  dec({"encoder_output": enc})  # builds the variables
  dec.stop_projection.kernel.assign(tf.zeros_like(dec.stop_projection.kernel))
  dec.stop_projection.bias.assign(np.asarray(bias, np.float32))
  return numpy(dec({"encoder_output": enc}))


@pytest.mark.parametrize("r,bias,length,steps", [
    (1, [50.0], 1, 1), (2, [50.0] * 2, 1, 1),  # stops at once: the first frame
    (3, [-50.0, 50.0, 50.0], 2, 1),  # the first frame whose stop token fires, included
    (1, [-50.0], 10, 10), (3, [-50.0] * 3, 12, 4)])  # never: 2 frames per symbol x 5 symbols
def test_free_running_stops_at_the_stop_token_or_the_frame_limit(r, bias, length, steps):
  out = free_run(decoder(reduction_factor=r, stop_threshold=0.5), [5, 3], bias)
  assert out["final_sequence_lengths"].tolist() == [length, length]
  assert out["spectrogram"].shape == (2, steps * r, MEL)
  assert out["alignments"].shape == (2, steps, 5)
  assert out["stop_token_logits"].shape == (2, steps * r)
  assert np.all(out["spectrogram"][:, length:] == 0)


def test_forced_attention_moves_forward_at_most_one_symbol_per_step():
  dec = decoder(window_size=2, back_step_size=0, attention_heads=1, alignment_layer=0,
                max_frames_per_symbol=4.0)
  out = free_run(dec, [7, 4], [-50.0] * 2)
  for b, n in enumerate([7, 4]):
    aligns = out["alignments"][b]
    position = 0
    for step in aligns:  # each step attends inside [previous argmax, previous argmax + 2)
      inside = step[position:position + 2]
      assert inside.sum() == pytest.approx(1.0, abs=1e-5)
      position = position + int(np.argmax(inside))
    assert np.all(aligns[:, n:] == 0.0)


@pytest.mark.parametrize("choice", [0, -1, "mean"])
def test_alignment_layer_choice(choice):
  dec = decoder(alignment_layer=choice)
  out = numpy(dec({"encoder_output": encoded([5, 3]), "target_tensors": targets([8, 6], 8)}))
  np.testing.assert_allclose(out["alignments"][0].sum(-1), 1.0, atol=1e-5)


def test_mixed_bfloat16_keeps_alignments_and_stop_logits_float32():
  dec = decoder(num_mag=4, dtype="mixed_bfloat16")
  enc = encoded([5, 3])
  forced = dec({"encoder_output": enc, "target_tensors": targets([8, 6], 8, MEL + 4)})
  free = dec({"encoder_output": enc})
  for out in (forced, free):
    assert out["alignments"].dtype == tf.float32
    assert out["stop_token_logits"].dtype == tf.float32
    assert out["spectrogram"].dtype == tf.bfloat16
  assert dec.stop_projection.kernel.dtype == tf.float32
  assert dec.blocks[0].attention.q_dense.kernel.dtype == tf.float32  # float32 variables


def test_decoder_in_tf_function_with_variable_shapes():
  dec = decoder()
  spec = [tf.TensorSpec([None, None, DEPTH]), tf.TensorSpec([None], tf.int32)]

  @tf.function(input_signature=spec)
  def free(values, src):
    return dec({"encoder_output": {"outputs": values, "src_lengths": src}})["spectrogram"]

  for lengths in ([5, 3], [4]):
    enc = encoded(lengths)
    assert free(enc["outputs"], enc["src_lengths"]).shape[0] == len(lengths)


# ----------------------------------------------------------------------------- config errors
@pytest.mark.parametrize("overrides,match", [
    ({"attention_heads": 3}, "attention_heads: 3 does not divide"),
    ({"conv_layers": [same(16)]}, "conv_layers/0/padding"),
    ({"conv_layers": [dict(same(16), is_causal=False)]}, "conv_layers/0/is_causal"),
    ({"conv_layers": [causal(16, stride=[2])]}, "conv_layers/0/stride"),
    ({"conv_layers": [causal(8)]}, "conv_layers/0/is_residual"),
    ({"self_attention_conv_params": causal(8, is_residual=False)},
     "self_attention_conv_params/num_channels"),
    ({"window_size": 0}, "window_size"),
    ({"force_layers": [2]}, "force_layers"),
    ({"alignment_layer": 5}, "alignment_layer"),
    ({"alignment_layer": "last"}, "alignment_layer"),
    ({"reduction_factor": 0}, "reduction_factor"),
    ({"attention_dropout": 1.0}, "attention_dropout"),
    ({"bogus": 1}, "bogus"),
])
def test_decoder_config_errors(overrides, match):
  with pytest.raises(ConfigError, match=match) as error:
    decoder(**overrides)
  assert "\n" not in str(error.value)


@pytest.mark.parametrize("overrides,match", [
    ({"conv_layers": [same(16, padding="VALID")]}, "conv_layers/0/padding"),
    ({"conv_layers": [causal(16)]}, "conv_layers/0/is_causal"),
    ({"conv_layers": [same(8)]}, "conv_layers/0/is_residual"),
    ({"output_size": 0}, "output_size"),
    ({"cnn_dropout_prob": -0.1}, "cnn_dropout_prob"),
])
def test_encoder_config_errors(overrides, match):
  with pytest.raises(ConfigError, match=match) as error:
    encoder(**overrides)
  assert "\n" not in str(error.value)


def test_norm_type_is_declared_as_ignored():
  assert CentaurEncoder.declared_params()["norm_type"].ignored


# ----------------------------------------------------------------------------- model hooks
@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("centaur"))
  return write_corpus(root, ["One two.", "Three!", "Four, five?"], [0.3, 0.2, 0.25])


def build(csv, logdir, mode):
  config = {
      "random_seed": 0, "max_steps": 2, "batch_size_per_gpu": 2, "logdir": str(logdir),
      "encoder": CentaurEncoder, "decoder": CentaurDecoder, "loss": Text2SpeechLoss,
      "encoder_params": {"embedding_size": 16, "output_size": 16,
                         "conv_layers": [same(16)]},
      "decoder_params": {"prenet_layers": 1, "prenet_hidden_size": 8, "hidden_size": 16,
                         "attention_layers": 1, "attention_dropout": 0.1,
                         "layer_postprocess_dropout": 0.1, "reduction_factor": 2,
                         "conv_layers": [causal(16)], "max_frames_per_symbol": 1.0},
      "loss_params": {"guided_attention_weight": 1.0},
      "data_layer": Text2SpeechDataLayer,
      "data_layer_params": {"dataset_files": [csv], "vocab_file": VOCAB,
                            "num_audio_features": 10, "output_type": "mel",
                            "sampling_rate": 16000, "n_fft": 512, "hop_length": 128,
                            "pad_to": 2, "shuffle": False, "repeat": False},
  }
  return Text2SpeechCentaur(resolve_config(Text2SpeechCentaur, config, mode), mode)


def to_numpy(structure):
  return tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, structure)


def test_model_eval_hooks_on_the_decoder_outputs(corpus, tmp_path):
  model = build(corpus, tmp_path, "eval")
  assert model.loss.r == 2 and model.decoder.num_mel == 10
  results = []
  for batch in model.data_layer.build_dataset():
    out = model.eval_outputs(batch)
    assert float(out["weight"]) == float(np.sum(batch["target_tensors"][2]))
    results += model.evaluate(to_numpy(batch), to_numpy(out["predictions"]))
    lines = model.format_samples(to_numpy(batch), to_numpy(out["predictions"]))
    assert lines[0].startswith("Sample text:")
  metrics = model.finalize_evaluation(results)
  assert set(metrics) == {"band_mass", "focus_rate", "free_band_mass", "stop_accuracy"}
  assert all(np.isfinite(v) for v in metrics.values())
  model.training_step = tf.Variable(1, dtype=tf.int64)
  loss, weight, _ = model.compute_loss(batch, training=True)  # with guided attention
  assert np.isfinite(float(loss)) and float(weight) > 0


def test_model_infer_writes_audio_and_alignments(corpus, tmp_path):
  model = build(corpus, tmp_path / "logdir", "infer")
  results = []
  for batch in model.data_layer.build_dataset():
    results += model.infer(to_numpy(batch), to_numpy(model.predict(batch)))
  outputs = model.finalize_inference(results)
  wavs = [o for o in outputs if isinstance(o, WavFile)]
  pngs = [o for o in outputs if isinstance(o, PngFile)]
  assert len(wavs) == len(pngs) == 3 and len([o for o in outputs if isinstance(o, CsvRows)]) == 1
  assert all(os.path.basename(w.path) == f"utt{i}.wav" for i, w in enumerate(wavs))
  spec, _, aligns, symbols = dict(results)[0]
  assert aligns.shape == (-(-len(spec) // 2), symbols)
