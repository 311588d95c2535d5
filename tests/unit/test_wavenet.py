"""WaveNet: mu-law, data windows and their conditioning, causality, receptive field, loss
masking, in-graph sampling (fast generation against full recomputation), mixed precision, the
model's metrics and outputs, and one-line config errors. Tiny sizes, seconds each."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import resolve_config
from open_seq2seq.data.speech2text.audio import read_audio
from open_seq2seq.data.text2speech.wavenet import (WavenetDataLayer, mu_law_decode,
                                                   mu_law_encode)
from open_seq2seq.decoders.fake_decoder import FakeDecoder
from open_seq2seq.encoders.wavenet_encoder import WavenetEncoder, receptive_field, silence_id
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.losses.wavenet_loss import WavenetLoss
from open_seq2seq.models.text2speech_wavenet import Text2SpeechWavenet, entropy
from open_seq2seq.outputs import CsvRows, WavFile
from tests.helpers.wavenet import chirp, write_corpus

Q, HOP, MEL, RATE = 16, 4, 6, 8000
TINY = {"kernel_size": 2, "blocks": 2, "layers_per_block": 3, "filters": 8}
DATA = {"num_audio_features": 8, "sampling_rate": RATE, "n_fft": 64, "hop_length": 16,
        "quantization_channels": 32, "window_size": 128, "receptive_field": 10}


def encoder(params=None, **kwargs):
  # Seeded weights: with 8 filters the ReLUs after the skip sum can silence every channel at
  # a position for some initializations (about one in a few hundred positions), which would
  # hide a change there from the causality test below.
  keras.utils.set_random_seed(7)
  kwargs.setdefault("quantization_channels", Q)
  kwargs.setdefault("hop_length", HOP)
  kwargs.setdefault("random_seed", 3)
  return WavenetEncoder(dict(TINY, **(params or {})), mode=kwargs.pop("mode", "eval"), **kwargs)


def inputs(batch=2, frames=6, seed=0):
  rng = np.random.default_rng(seed)
  steps = frames * HOP
  ids = rng.integers(0, Q, (batch, steps)).astype(np.int32)
  mel = rng.normal(size=(batch, frames, MEL)).astype(np.float32)
  return ids, np.full([batch], steps, np.int32), mel


def forced(enc, ids, mel, lengths=None):
  lengths = np.full([len(ids)], ids.shape[1], np.int32) if lengths is None else lengths
  return enc.teacher_forced(tf.constant(ids), tf.constant(lengths), tf.constant(mel),
                            training=False).numpy()


def randomize_batch_norm(enc, seed=0):
  """Non-trivial moving statistics and affine parameters, so the tests see batch norm."""
  rng = np.random.default_rng(seed)
  for var in enc.variables:
    name = var.path
    if name.endswith(("moving_variance", "gamma")):
      var.assign(rng.uniform(0.5, 1.5, var.shape).astype(np.float32))
    elif name.endswith(("moving_mean", "beta")):
      var.assign(rng.normal(0.0, 0.3, var.shape).astype(np.float32))


# ----------------------------------------------------------------------------- mu-law
def test_mu_law_round_trip_and_silence():
  for channels in (16, 256):
    ids = np.arange(channels)
    np.testing.assert_array_equal(mu_law_encode(mu_law_decode(ids, channels), channels), ids)
    x = np.linspace(-1, 1, 2001).astype(np.float32)
    levels = mu_law_decode(ids, channels)
    back = mu_law_decode(mu_law_encode(x, channels).numpy(), channels)
    # each sample comes back as one of the two levels around it
    gaps = np.diff(levels)
    where = np.clip(np.searchsorted(levels, x), 1, channels - 1)
    assert np.all(np.abs(back - x) <= gaps[where - 1] + 1e-6)
    assert int(mu_law_encode(np.float32(0.0), channels)) == silence_id(channels) == channels // 2
    assert int(mu_law_encode(np.float32(1.5), channels)) == channels - 1  # clipped
    assert int(mu_law_encode(np.float32(-1.0), channels)) == 0
  # companding: small amplitudes get more bins than large ones
  ids = mu_law_encode(np.array([0.0, 0.01, 0.5, 0.51], np.float32), 256).numpy()
  assert ids[1] - ids[0] > ids[3] - ids[2]


# ----------------------------------------------------------------------------- encoder
def test_receptive_field_formula_and_published_size():
  assert receptive_field(3, 3, 10) == 6141  # OpenSeq2Seq's formula gave 6139: no preprocess
  assert receptive_field(2, 2, 3) == 1 + 1 * (1 + 2 * 7)
  enc = encoder()
  assert enc.receptive_field == receptive_field(2, 2, 3) == 16


def test_causal_and_receptive_field_is_measured_exactly():
  enc = encoder()
  ids, _, mel = inputs(batch=1, frames=10)
  base = forced(enc, ids, mel)
  randomize_batch_norm(enc)
  base = forced(enc, ids, mel)
  steps, field = ids.shape[1], enc.receptive_field
  for position in (5, 17, 30):
    changed = ids.copy()
    changed[0, position] = (changed[0, position] + 5) % Q
    out = forced(enc, changed, mel)
    moved = np.abs(out - base).max(axis=-1)[0] > 0
    # input `position` (the sample before it) reaches outputs position .. position+field-1
    assert not moved[:position].any(), "a future sample changed an earlier prediction"
    assert moved[position]
    last = min(position + field, steps)
    assert moved[position:last].any() and not moved[last:].any()
  # the last prediction sees exactly the previous `field` inputs
  changed = ids.copy()
  changed[0, steps - field] = (changed[0, steps - field] + 3) % Q
  assert np.abs(forced(enc, changed, mel)[0, -1] - base[0, -1]).max() > 0
  changed = ids.copy()
  changed[0, steps - field - 1] = (changed[0, steps - field - 1] + 3) % Q
  np.testing.assert_array_equal(forced(enc, changed, mel)[0, -1], base[0, -1])


def test_frame_i_conditions_samples_i_hop_to_next_frame():
  enc = encoder()
  ids, _, mel = inputs(batch=1, frames=6)
  base = forced(enc, ids, mel)
  frame = 3
  changed = mel.copy()
  changed[0, frame] += 1.0
  moved = np.abs(forced(enc, ids, changed) - base).max(axis=-1)[0] > 0
  assert not moved[:frame * HOP].any()
  assert moved[frame * HOP:(frame + 1) * HOP].all()


def test_padding_does_not_change_real_predictions():
  enc = encoder()
  ids, _, mel = inputs(batch=2, frames=6)
  short = forced(enc, ids[:1, :10], mel[:1, :3])
  padded = forced(enc, ids, mel, lengths=np.array([10, 24], np.int32))
  np.testing.assert_allclose(padded[0, :10], short[0], atol=1e-5)


def test_training_batch_norm_uses_real_positions_and_updates_moving_statistics():
  enc = encoder({"bn_momentum": 0.25})
  ids, _, mel = inputs(batch=2, frames=6)
  lengths = tf.constant([10, 24])
  forced(enc, ids, mel)  # builds
  stack = enc.stack
  before = stack.moving_mean.numpy()
  logits = enc.teacher_forced(ids, lengths, mel, training=True).numpy()
  after_mean, after_variance = stack.moving_mean.numpy(), stack.moving_variance.numpy()
  assert not np.allclose(after_mean, before)
  # momentum 0.25: moving = 0.25 * old + 0.75 * batch, old mean 0 and variance 1
  batch_mean = after_mean / 0.75
  assert np.all(np.abs(batch_mean) < 50) and np.all((after_variance - 0.25) / 0.75 >= 0)
  # padding garbage changes neither the statistics nor the real positions' logits
  stack.moving_mean.assign(before)
  stack.moving_variance.assign(np.ones_like(before))
  garbage = ids.copy()
  garbage[0, 10:] = (garbage[0, 10:] + 7) % Q
  again = enc.teacher_forced(garbage, lengths, mel, training=True).numpy()
  np.testing.assert_allclose(stack.moving_mean.numpy(), after_mean, atol=1e-5)
  np.testing.assert_allclose(again[0, :10], logits[0, :10], atol=1e-5)
  np.testing.assert_allclose(again[1], logits[1], atol=1e-5)


def test_regularizer_takes_kernels_not_batch_norm_parameters():
  from open_seq2seq.utils.regularizers import is_regularized
  enc = encoder()
  forced(enc, *inputs(batch=1, frames=1)[::2])
  regularized = {v.path.split("/")[-1] for v in enc.trainable_variables if is_regularized(v)}
  assert {"filter_kernels", "gate_kernels", "residual_skip_kernels"} <= regularized
  assert not regularized & {"bn_gamma", "bn_beta", "gamma", "beta", "bias"}
  kernels = enc.stack.filter_kernels.numpy()
  assert not np.allclose(kernels[0], kernels[1])  # each layer initialized on its own
  limit = np.sqrt(6.0 / (2 * 4 + 2 * 8))  # Glorot uniform of one layer's [2, 4, 8] kernel
  assert np.abs(kernels).max() <= limit and np.abs(kernels).max() > 0.5 * limit
  # stacked weights: few variables whatever the depth (tracing time grows with their number)
  assert len(enc.trainable_variables) < 20


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_sampling_length_and_seeded_determinism(temperature):
  _, _, mel = inputs(batch=2, frames=3)
  frames = np.array([3, 2], np.int32)
  enc = encoder({"temperature": temperature}, mode="infer", random_seed=11)
  first = enc({"source_tensors": (mel, frames)})
  assert first["audio_ids"].shape == (2, 3 * HOP)
  np.testing.assert_array_equal(first["audio_lengths"], frames * HOP)
  ids = first["audio_ids"].numpy()
  assert ids.min() >= 0 and ids.max() < Q
  again = enc({"source_tensors": (mel, frames)})["audio_ids"].numpy()
  np.testing.assert_array_equal(again, ids)
  if temperature > 0:
    other = WavenetEncoder(dict(TINY, temperature=temperature), mode="infer",
                           quantization_channels=Q, hop_length=HOP, random_seed=12)
    other(dict(source_tensors=(mel, frames)))
    other.set_weights(enc.get_weights())
    assert not np.array_equal(other({"source_tensors": (mel, frames)})["audio_ids"], ids)


def test_fast_generation_equals_full_recomputation():
  enc = encoder({"kernel_size": 3}, mode="infer")
  _, _, mel = inputs(batch=2, frames=4)
  enc.build()
  enc.teacher_forced(tf.zeros([1, 4], tf.int32), tf.constant([4]), tf.constant(mel[:1, :1]))
  randomize_batch_norm(enc)
  out = enc.generate(tf.constant(mel), tf.constant([4, 4]), return_logits=True)
  ids = out["audio_ids"].numpy()
  shifted = np.concatenate([np.full([2, 1], silence_id(Q)), ids[:, :-1]], axis=1)
  full = forced(enc, shifted.astype(np.int32), mel)
  np.testing.assert_allclose(out["logits"].numpy(), full, atol=1e-4, rtol=1e-4)


def test_mixed_bfloat16_keeps_logits_and_variables_float32():
  enc = encoder(dtype="mixed_bfloat16", mode="infer")
  ids, lengths, mel = inputs(batch=2, frames=2)
  out = enc({"source_tensors": (ids, lengths, mel, np.array([2, 2]))})
  assert out["logits"].dtype == tf.float32
  assert all(v.dtype == tf.float32 for v in enc.variables)
  assert enc.compute_dtype == "bfloat16"
  generated = enc.generate(tf.constant(mel), tf.constant([2, 2]), return_logits=True)
  assert generated["logits"].dtype == tf.float32
  assert generated["audio_ids"].shape == (2, 2 * HOP)
  probabilities = tf.nn.softmax(generated["logits"]).numpy()
  np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)


def test_unconditioned_encoder_ignores_mel():
  enc = encoder({"local_conditioning": False})
  ids, _, mel = inputs(batch=1, frames=3)
  np.testing.assert_array_equal(forced(enc, ids, mel), forced(enc, ids, mel + 5.0))


# ----------------------------------------------------------------------------- loss
def test_loss_counts_only_masked_in_samples():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(2, 5, Q)).astype(np.float32)
  targets = rng.integers(0, Q, (2, 5)).astype(np.int32)
  mask = np.array([[0, 1, 1, 1, 0], [1, 1, 0, 0, 0]], np.float32)
  loss = WavenetLoss()
  total, weight = loss.compute_loss({"decoder_output": {"logits": tf.constant(logits)},
                                     "target_tensors": (targets, mask)})
  log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  expected = -sum(log_softmax[b, t, targets[b, t]] for b, t in zip(*np.nonzero(mask)))
  assert float(weight) == 5.0
  np.testing.assert_allclose(float(total), expected, rtol=1e-5)
  garbage = logits.copy()
  garbage[mask == 0] = 1e4 * rng.normal(size=garbage[mask == 0].shape)
  again, _ = loss.compute_loss({"decoder_output": {"logits": tf.constant(garbage)},
                                "target_tensors": (targets, mask)})
  np.testing.assert_allclose(float(again), float(total), rtol=1e-6)


# ----------------------------------------------------------------------------- data layer
@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp("wavenet_data"))
  signals = [chirp(0.1, 200, 1200, RATE), chirp(0.013, 300, 500, RATE),  # 800 / 104 samples
             chirp(0.05, 400, 900, RATE)]
  return write_corpus(directory, signals, RATE), directory


def layer(csv, mode, seed=1, batch_size=3, **params):
  return WavenetDataLayer(dict(DATA, dataset_files=[csv], **params), mode=mode,
                          batch_size=batch_size, random_seed=seed)


def whole(data, index):
  signal = read_audio(data.paths[index], RATE)
  ids = mu_law_encode(signal, 32).numpy()
  previous = np.concatenate([[16], ids[:-1]])
  return signal, ids, previous, data.features.compute(signal).numpy()


def test_training_windows_and_their_conditioning_align(corpus):
  csv, _ = corpus
  data = layer(csv, "train", shuffle=False)
  hop, starts = 16, set()
  batches = iter(data.build_dataset())
  for _ in range(4):
    batch = next(batches)
    ids, lengths, mel, frames = (t.numpy() for t in batch["source_tensors"])
    targets, mask = (t.numpy() for t in batch["target_tensors"])
    for b, index in enumerate(batch["id"].numpy()):
      signal, full_ids, previous, full_mel = whole(data, index)
      n, f = lengths[b], frames[b]
      assert f == min(8, -(-len(signal) // hop)) and n == min(f * hop, len(signal))
      # the window's first frame tells where it starts: frame i <-> samples i*hop ..
      start = int(np.argmin(np.abs(full_mel[:len(full_mel) - f + 1] - mel[b, 0]).sum(-1)))
      np.testing.assert_allclose(mel[b, :f], full_mel[start:start + f], atol=1e-5)
      first = start * hop
      np.testing.assert_array_equal(targets[b, :n], full_ids[first:first + n])
      np.testing.assert_array_equal(ids[b, :n], previous[first:first + n])
      np.testing.assert_array_equal(mask[b, :n], (np.arange(n) >= 10).astype(np.float32))
      assert not mask[b, n:].any()
      if index == 0:
        starts.add(start)
  assert len(starts) > 1, "training windows should start at random frames"
  units = data.count_units(batch).numpy()
  assert units == mask.sum()


def test_windows_repeat_with_the_seed_and_eval_is_centred(corpus):
  csv, _ = corpus

  def first_windows(data):
    batch = next(iter(data.build_dataset()))
    return batch["target_tensors"][0].numpy(), batch["id"].numpy()

  a, b = first_windows(layer(csv, "train", seed=5)), first_windows(layer(csv, "train", seed=5))
  np.testing.assert_array_equal(a[0], b[0])
  data = layer(csv, "eval")
  batches = list(data.build_dataset())
  assert sum(len(batch["id"]) for batch in batches) == 3
  batch = batches[0]
  mel = batch["source_tensors"][2].numpy()
  for b, index in enumerate(batch["id"].numpy()):
    _, _, _, full_mel = whole(data, index)
    usable = -(-len(read_audio(data.paths[index], RATE)) // 16)
    start = (usable - min(8, usable)) // 2
    f = batch["source_tensors"][3].numpy()[b]
    np.testing.assert_allclose(mel[b, :f], full_mel[start:start + f], atol=1e-5)


def test_infer_gives_every_frame_of_each_file(corpus):
  csv, _ = corpus
  data = layer(csv, "infer")
  batch = next(iter(data.build_dataset()))
  assert "target_tensors" not in batch and len(batch["source_tensors"]) == 2
  mel, frames = (t.numpy() for t in batch["source_tensors"])
  for b, index in enumerate(batch["id"].numpy()):
    signal, _, _, full_mel = whole(data, index)
    assert frames[b] == -(-len(signal) // 16)
    np.testing.assert_allclose(mel[b, :frames[b]], full_mel[:frames[b]], atol=1e-5)
  capped = layer(csv, "infer", max_infer_frames=2)
  assert next(iter(capped.build_dataset()))["source_tensors"][1].numpy().max() == 2


def test_wavs_folder_itself_as_dataset_location(corpus):
  csv, directory = corpus
  data = layer(csv, "eval", dataset_location=os.path.join(directory, "wavs"))
  assert data.paths[0] == os.path.join(directory, "wavs", "clip0.wav")


def test_interactive_inputs_are_wav_or_npy_mel(corpus, tmp_path):
  csv, directory = corpus
  data = WavenetDataLayer(dict(DATA), mode="interactive_infer", batch_size=2)
  frames = np.random.default_rng(0).normal(size=(5, 8)).astype(np.float32)
  np.save(tmp_path / "mel.npy", frames)
  wav = os.path.join(directory, "wavs", "clip2.wav")
  batch = next(iter(data.dataset_from_inputs([wav, str(tmp_path / "mel.npy")])))
  mel, lengths = (t.numpy() for t in batch["source_tensors"])
  assert list(lengths) == [-(-400 // 16), 5]
  np.testing.assert_array_equal(mel[1, :5], frames)
  assert data.names == ["clip2", "mel"]
  np.save(tmp_path / "bad.npy", frames[:, :3])
  with pytest.raises(DataError, match="expected mel frames"):
    data.dataset_from_inputs([str(tmp_path / "bad.npy")])


# ----------------------------------------------------------------------------- the model
def model_config(csv, logdir, **data):
  return {"random_seed": 0, "batch_size_per_gpu": 2, "logdir": logdir,
          "encoder": WavenetEncoder, "encoder_params": dict(TINY),
          "decoder": FakeDecoder, "loss": WavenetLoss, "data_layer": WavenetDataLayer,
          "data_layer_params": dict(DATA, dataset_files=[csv], **data)}


def make_model(csv, logdir, mode, **data):
  return Text2SpeechWavenet(resolve_config(Text2SpeechWavenet,
                                           model_config(csv, logdir, **data), mode), mode)


def test_model_eval_metrics_and_infer_outputs(corpus, tmp_path):
  csv, _ = corpus
  model = make_model(csv, str(tmp_path), "eval")
  assert model.encoder.quantization_channels == 32 and model.encoder.hop_length == 16
  batch = next(iter(model.data_layer.build_dataset()))
  out = model.eval_outputs(batch)
  numpy_batch = tf.nest.map_structure(lambda t: t.numpy(), batch)
  predictions = tf.nest.map_structure(lambda t: t.numpy(), out["predictions"])
  metrics = model.finalize_evaluation(model.evaluate(numpy_batch, predictions))
  np.testing.assert_allclose(metrics["cross_entropy"], float(out["loss_sum"] / out["weight"]),
                             rtol=1e-5)
  assert 0.0 <= metrics["accuracy"] <= 1.0
  targets, mask = numpy_batch["target_tensors"]
  counts = np.bincount(targets[mask > 0], minlength=32)
  np.testing.assert_allclose(metrics["unigram_entropy"], entropy(counts), rtol=1e-6)
  assert 0 < metrics["unigram_entropy"] < np.log(32)

  trained_variables = len(model.variables)
  model = make_model(csv, str(tmp_path), "infer", max_infer_frames=2)
  # an inference batch builds the variables from one teacher-forced frame (no generation)
  model.create_variables(next(iter(model.data_layer.build_dataset())))
  assert len(model.variables) == trained_variables
  results = []
  for batch in model.data_layer.build_dataset():
    outputs = tf.nest.map_structure(lambda t: t.numpy(), model.predict(batch))
    results += model.infer(tf.nest.map_structure(lambda t: t.numpy(), batch), outputs)
  written = model.finalize_inference(results)
  wavs = [w for w in written if isinstance(w, WavFile)]
  # paths relative to the run's directory (the output sink resolves them)
  assert [w.path for w in wavs] == [f"infer_audio/clip{i}.wav" for i in range(3)]
  assert all(len(w.samples) == 2 * 16 and np.abs(w.samples).max() <= 1.0 for w in wavs)
  rows = [w for w in written if isinstance(w, CsvRows)]
  assert len(rows) == 1 and len(rows[0].records) == 3 and rows[0].path is None
  assert rows[0].path_columns == ("wav_path",)


def test_samples_are_a_training_windows_prediction_and_target_as_audio(corpus, tmp_path):
  csv, _ = corpus
  config = dict(model_config(csv, str(tmp_path)), max_steps=1)
  model = Text2SpeechWavenet(resolve_config(Text2SpeechWavenet, config, "train"), "train")
  batch = tf.nest.map_structure(lambda t: t.numpy(),
                                next(iter(model.data_layer.build_dataset())))
  outputs = tf.nest.map_structure(lambda t: t.numpy(), model.predict(batch))
  lines = model.format_samples(batch, outputs)
  samples = {s.name: s for s in model.sample_summaries(batch, outputs)}
  assert len(lines) == 1 and "teacher-forced bin accuracy" in lines[0]
  assert set(samples) == {"teacher_forced_audio", "target_audio"}
  targets, mask = batch["target_tensors"]
  counted = mask[0] > 0  # the samples the loss counts (not always a prefix of the window)
  predicted = np.argmax(outputs["logits"][0], axis=-1)[counted]
  for sample, ids in ((samples["teacher_forced_audio"], predicted),
                      (samples["target_audio"], targets[0][counted])):
    assert sample.sample_rate == model.description.sample_rate
    np.testing.assert_array_equal(sample.samples, mu_law_decode(ids, 32))
  assert model.sample_summaries({"id": batch["id"], "source_tensors": batch["source_tensors"]},
                                outputs) == []


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize("params, kwargs, message", [
    ({"filters": 1}, {}, "encoder_params/filters: must be at least 2"),
    ({"strides": 2}, {}, "encoder_params/strides"),
    ({"quantization_channels": 256}, {"quantization_channels": 16},
     "encoder_params/quantization_channels: 256, but the data layer quantizes to 16"),
    ({"temperature": -1.0}, {}, "encoder_params/temperature"),
    ({"layer_type": "conv2d"}, {}, "layer_type"),
])
def test_encoder_config_errors_are_one_line(params, kwargs, message):
  with pytest.raises(ConfigError) as error:
    encoder(params, **kwargs)
  assert message in str(error.value) and "\n" not in str(error.value)


def test_one_mel_channel_cannot_be_split_into_filter_and_gate():
  enc = encoder()
  ids, lengths, mel = inputs(batch=1, frames=2)
  with pytest.raises(ConfigError, match="num_audio_features: local conditioning"):
    enc.teacher_forced(ids, lengths, mel[..., :1])


@pytest.mark.parametrize("params, message", [
    ({"window_size": 8}, "data_layer_params/window_size: 8 samples is less than one frame"),
    ({"receptive_field": 128}, "data_layer_params/receptive_field: 128 context samples"),
    ({"quantization_channels": 1}, "data_layer_params/quantization_channels"),
    ({"fmax": 5000.0}, "data_layer_params/fmax"),
    ({"dataset_files": None}, "data_layer_params/dataset_files: needed in train mode"),
])
def test_data_layer_config_errors_are_one_line(corpus, params, message):
  csv, _ = corpus
  with pytest.raises(ConfigError) as error:
    WavenetDataLayer({**DATA, "dataset_files": [csv], **params}, mode="train", batch_size=2)
  assert message in str(error.value) and "\n" not in str(error.value)


def test_missing_wav_is_a_data_error(tmp_path):
  csv = tmp_path / "train.csv"
  csv.write_text("nothing|Nothing.|nothing.\n")
  with pytest.raises(DataError, match=r"train.csv:1: .*nothing.wav not found"):
    WavenetDataLayer(dict(DATA, dataset_files=[str(csv)]), mode="train", batch_size=2)
