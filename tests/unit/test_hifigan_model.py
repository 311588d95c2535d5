"""The HiFi-GAN vocoder family: its data layer (segments of whole frames, the Tacotron
layer's features, seeded and resumable, whole utterances at eval/infer, interactive inputs),
the model's two update groups and their losses, eval metrics, infer outputs, mixed
precision, export, and the example configs' sizes."""

import os

import numpy as np
import pytest
import soundfile
import tensorflow as tf

from open_seq2seq.config import load_config
from open_seq2seq.data import Text2SpeechDataLayer, VocoderDataLayer
from open_seq2seq.distributed.backend import Backend
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.losses.hifigan_loss import utterance_distances
from open_seq2seq.parts.hifigan import log_mel_spectrogram, multi_resolution_stft_loss
from open_seq2seq.outputs import CsvRows, WavFile
from open_seq2seq.serving import export
from open_seq2seq.training.evaluator import Evaluator, to_numpy
from open_seq2seq.training.train_step import TrainStep
from tests.helpers import hifigan as h
from tests.helpers.tts import VOCAB

RATE, HOP = 8000, 64
AUDIO = {"num_audio_features": 16, "sampling_rate": RATE, "n_fft": 256, "hop_length": HOP,
         "mel_type": "slaney", "mag_power": 1, "fmax": 4000}
CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "example_configs", "text2speech")

CONFIG = """
from open_seq2seq.data import VocoderDataLayer
from open_seq2seq.decoders import FakeDecoder
from open_seq2seq.encoders import HiFiGANEncoder
from open_seq2seq.losses import HiFiGANLoss
from open_seq2seq.models import HiFiGAN

base_model = HiFiGAN
base_params = {
    "random_seed": 0, "batch_size_per_gpu": 3, "max_steps": 2, "dtype": %(dtype)r,
    "optimizer": "AdamW", "optimizer_params": {"learning_rate": 1e-3, "beta1": 0.8,
                                               "beta2": 0.99},
    "optimizers": {"discriminator": {"optimizer": "SGD",
                                     "optimizer_params": {"learning_rate": 0.1}}},
    "encoder": HiFiGANEncoder,
    "encoder_params": {"preset": "v3", "upsample_rates": [4, 4, 4],
                       "upsample_kernel_sizes": [8, 8, 8], "upsample_initial_channel": 16,
                       "resblock_kernel_sizes": [3], "resblock_dilation_sizes": [[1, 2]]},
    "decoder": FakeDecoder,
    "loss": HiFiGANLoss,
    "loss_params": {"periods": [2, 3], "period_channels": [4, 8, 8], "num_scales": 2,
                    "scale_channels": [4, 8, 8], "scale_kernel_sizes": [5, 9, 3],
                    "scale_strides": [1, 2, 1], "scale_groups": [1, 2, 1]},
    "data_layer": VocoderDataLayer,
    "data_layer_params": dict(%(audio)r, segment_size=%(segment)d,
                              dataset_files=[%(train)r]),
}
eval_params = {"data_layer_params": {"dataset_files": [%(val)r]}}
infer_params = {"data_layer_params": {"dataset_files": [%(val)r]}}
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("vocoder"))
  # lengths that are not whole frames, one shorter than a segment
  signals = [h.tones(1, i, seconds, RATE)[0][0]
             for i, seconds in enumerate([0.21, 0.3, 0.05, 0.17, 0.26])]
  train = h.write_corpus(root, signals, RATE, "train.csv", prefix="train")
  val = h.write_corpus(root, signals[:3], RATE, "val.csv", prefix="val")
  return root, train, val, signals


def layer(corpus, mode="train", seed=0, **params):
  _, train, val, _ = corpus
  files = [train if mode == "train" else val]
  return VocoderDataLayer(dict(AUDIO, dataset_files=files, **params), mode=mode, batch_size=2,
                          random_seed=seed)


def batches(data_layer, count):
  return [to_numpy(b) for b, _ in zip(data_layer.build_dataset(), range(count))]


def write_config(corpus, dtype="float32", segment=512):
  root, train, val, _ = corpus
  path = os.path.join(root, f"config_{dtype}_{segment}.py")
  with open(path, "w", encoding="utf-8") as f:
    f.write(CONFIG % {"dtype": dtype, "audio": AUDIO, "segment": segment, "train": train,
                      "val": val})
  return path


def build(corpus, mode="train", dtype="float32", *overrides):
  cls, loaded = load_config(write_config(corpus, dtype), mode, list(overrides))
  return cls(loaded[mode], mode), loaded[mode]


# ------------------------------------------------------------------------- data layer

def test_training_segments_are_whole_frames_of_the_audio_and_its_mel(corpus):
  data = layer(corpus, segment_size=600)  # 9 frames of 64
  for batch in batches(data, 6):
    (mel, frames), (audio, samples) = batch["source_tensors"], batch["target_tensors"]
    assert mel.shape[2] == 16 and audio.shape[1] == mel.shape[1] * HOP
    np.testing.assert_array_equal(samples, frames * HOP)
    for b, index in enumerate(batch["id"]):
      signal = data._read(index)  # pylint: disable=protected-access
      whole_mel, whole_audio = (t.numpy() for t in data.frames_and_audio(tf.constant(signal)))
      assert len(whole_audio) == len(whole_mel) * HOP >= len(signal)
      assert frames[b] == min(9, len(whole_mel))
      starts = [s for s in range(len(whole_mel) - frames[b] + 1)
                if np.array_equal(whole_audio[s * HOP:(s + frames[b]) * HOP],
                                  audio[b, :samples[b]])]
      assert starts, "the segment is not a frame-aligned slice of the utterance"
      np.testing.assert_allclose(mel[b, :frames[b]], whole_mel[starts[0]:starts[0] + frames[b]],
                                 atol=1e-5)
      assert not audio[b, samples[b]:].any()


def test_the_frames_are_the_tacotron_data_layers(corpus):
  root, _, val, _ = corpus
  common = dict(AUDIO, dataset_files=[val], data_min=1e-3, feature_normalize=True,
                feature_normalize_mean=-3.0, feature_normalize_std=2.0)
  vocoder = VocoderDataLayer(common, mode="eval", batch_size=1)
  tacotron = Text2SpeechDataLayer(dict(common, vocab_file=VOCAB, output_type="mel",
                                       pad_EOS=False, pad_to=1), mode="eval", batch_size=1)
  for ours, theirs in zip(batches(vocoder, 3), batches(tacotron, 3)):
    frames = ours["source_tensors"][1][0]
    assert frames == -(-len(soundfile.read(vocoder.paths[ours["id"][0]])[0]) // HOP)
    np.testing.assert_allclose(ours["source_tensors"][0][0],
                               theirs["target_tensors"][0][0][:frames], atol=1e-5)


def test_segments_follow_the_seed_and_a_restored_iterator_resumes_exactly(corpus, tmp_path):
  def audio(batch_list):
    return [b["target_tensors"][0] for b in batch_list]

  first, again = batches(layer(corpus, seed=3), 8), batches(layer(corpus, seed=3), 8)
  for a, b in zip(audio(first), audio(again)):
    np.testing.assert_array_equal(a, b)
  other = audio(batches(layer(corpus, seed=4), 8))
  assert any(a.shape != b.shape or not np.array_equal(a, b)
             for a, b in zip(audio(first), other))
  iterator = iter(layer(corpus, seed=3).build_dataset())
  for _ in range(3):
    next(iterator)
  path = tf.train.Checkpoint(data=iterator).save(str(tmp_path / "it"))
  resumed = iter(layer(corpus, seed=3).build_dataset())
  tf.train.Checkpoint(data=resumed).restore(path)
  for want in audio(first[3:]):
    np.testing.assert_array_equal(to_numpy(next(resumed))["target_tensors"][0], want)


def test_eval_reads_whole_utterances_in_order_and_infer_only_their_frames(corpus):
  signals = corpus[3]
  evaluated = batches(layer(corpus, "eval"), 2)
  ids = np.concatenate([b["id"] for b in evaluated])
  assert list(ids) == [0, 1, 2]
  lengths = np.concatenate([b["target_tensors"][1] for b in evaluated])
  assert list(lengths) == [-(-len(s) // HOP) * HOP for s in signals[:3]]
  inferred = batches(layer(corpus, "infer"), 2)
  assert all("target_tensors" not in b for b in inferred)
  assert list(np.concatenate([b["source_tensors"][1] for b in inferred])) == list(
      lengths // HOP)


def test_interactive_inputs_are_wavs_or_mel_arrays(corpus, tmp_path):
  data = VocoderDataLayer(AUDIO, mode="interactive_infer", batch_size=4)
  wav = layer(corpus, "eval").paths[0]
  mel = np.random.default_rng(0).standard_normal([7, 16]).astype(np.float32)
  np.save(tmp_path / "pred.npy", mel)
  batch = to_numpy(next(iter(data.dataset_from_inputs([wav, str(tmp_path / "pred.npy")]))))
  assert data.names == ["val0", "pred"]
  frames = batch["source_tensors"][1]
  assert frames[1] == 7 and frames[0] == -(-len(corpus[3][0]) // HOP)
  np.testing.assert_array_equal(batch["source_tensors"][0][1, :7], mel)
  np.save(tmp_path / "bad.npy", mel[:, :5])
  with pytest.raises(DataError, match=r"bad.npy: expected mel frames \[frames, 16\]"):
    data.dataset_from_inputs([str(tmp_path / "bad.npy")])


@pytest.mark.parametrize("params, message", [
    ({"segment_size": 32}, r"segment_size: 32 samples is less than one frame"),
    ({"fmax": 5000}, r"fmax: 5000 Hz is above the Nyquist frequency 4000"),
])
def test_data_layer_config_errors_are_one_line(corpus, params, message):
  with pytest.raises(ConfigError, match=message) as error:
    layer(corpus, **params)
  assert "\n" not in str(error.value)


def test_the_generators_hop_must_be_the_data_layers(corpus):
  with pytest.raises(ConfigError, match=r"encoder_params/upsample_rates: \[4, 4\] multiply to "
                                        r"16 samples per frame, but the data layer's "
                                        r"hop_length is 64"):
    build(corpus, "train", "float32", "--encoder_params/upsample_rates=[4, 4]",
          "--encoder_params/upsample_kernel_sizes=[8, 8]")


def test_kernels_are_the_papers_unless_an_initializer_is_set(corpus):
  def conv_post(*overrides):
    model, _ = build(corpus, "train", "float32", *overrides)
    model.encoder.build()
    conv = model.encoder.generator.conv_post
    return conv.kernel_v.numpy(), conv.kernel_g.numpy()

  kernel, gain = conv_post()
  assert 0.005 < kernel.std() < 0.02  # N(0, 0.01)
  for overrides in (["--initializer=ones"], ["--encoder_params/initializer=ones"]):
    kernel, gain = conv_post(*overrides)
    assert (kernel == 1.0).all()
    np.testing.assert_allclose(gain, np.sqrt(kernel.size), rtol=1e-6)  # one output channel


def test_encoder_remove_dc_centres_each_utterance_in_training_and_eval(corpus):
  """``encoder_params/remove_dc`` reaches the generator: with it, every utterance's output
  has mean ~0 over its valid samples (training segments and eval's whole padded clips);
  without it (the default) the same weights give the same waveforms plus their means."""
  outputs = {}
  for remove_dc in (False, True):
    for mode in ("train", "eval"):
      model, _ = build(corpus, mode, "float32", f"--encoder_params/remove_dc={remove_dc}")
      assert model.encoder.generator.remove_dc is remove_dc
      batch = next(iter(model.data_layer.build_dataset()))
      model.encoder.build()
      for v in model.encoder.weights:  # the same weights in every model, a clear offset
        v.assign(tf.fill(v.shape, 0.0 if "bias" in v.path else 0.5))
      out = model.forward(batch, training=False)
      outputs[remove_dc, mode] = (out["audio"].numpy(), out["audio_lengths"].numpy())
  for mode in ("train", "eval"):
    (plain, lengths), (centred, _) = outputs[False, mode], outputs[True, mode]
    assert len(set(lengths.tolist())) > 1 or mode == "train"
    for b, n in enumerate(lengths):
      assert abs(plain[b, :n].mean()) > 1e-3  # an offset to remove
      assert abs(centred[b, :n].mean()) < 1e-5
      np.testing.assert_allclose(centred[b, :n], plain[b, :n] - plain[b, :n].mean(),
                                 atol=1e-5)
      assert not centred[b, n:].any()


# ------------------------------------------------------------------------- the model

@pytest.fixture(scope="module")
def trained(corpus):
  model, run = build(corpus)
  step = TrainStep(model, run, Backend(), max_steps=2, steps_per_epoch=None,
                   count_units=model.data_layer.count_units)
  batch = next(iter(model.data_layer.build_dataset()))
  step.build(batch, is_chief=False)
  return model, step, batch


def test_the_discriminators_update_first_then_the_generator(trained):
  model, step, batch = trained
  discriminator, generator = step.groups
  assert [g.name for g in step.groups] == ["discriminator", "generator"]
  assert {id(v) for v in discriminator.variables} == {
      id(v) for v in model.loss.trainable_variables}
  assert {id(v) for v in generator.variables} == {
      id(v) for v in model.encoder.trainable_variables}
  assert len(discriminator.variables) > 20 and len(generator.variables) > 10
  assert type(discriminator.optimizer).__name__ == "SGD"  # optimizers/discriminator
  assert type(generator.optimizer).__name__ == "AdamW"
  with tf.GradientTape(persistent=True) as tape:
    d_loss, d_weight, _ = model.discriminator_loss(batch, training=True)
    g_loss, g_weight, _ = model.compute_loss(batch, training=True)
  assert float(d_weight) == float(g_weight) == len(batch["id"])
  # the discriminators' loss never reaches the generator; the generator's reaches it all
  assert all(g is None for g in tape.gradient(d_loss, generator.variables))
  assert all(g is not None for g in tape.gradient(d_loss, discriminator.variables))
  assert all(g is not None for g in tape.gradient(g_loss, generator.variables))

  # an update of the discriminators by hand (SGD), then the step's own
  before = [v.numpy() for v in discriminator.variables + generator.variables]
  grads = tape.gradient(d_loss, discriminator.variables)
  values = step.function()(iter([batch]))
  # the spectrally normalized first scale's power iteration advanced once more in the step
  spectral = {id(v) for v in model.loss.msd.discriminators[0].variables}
  for variable, value, grad in zip(discriminator.variables, before, grads):
    if id(variable) not in spectral:
      np.testing.assert_allclose(variable.numpy(), value - 0.1 * grad.numpy() / float(d_weight),
                                 rtol=1e-4, atol=1e-6)
  after = [v.numpy() for v in generator.variables]
  assert any(not np.allclose(a, b) for a, b in zip(after, before[len(discriminator.variables):]))
  assert any(not np.allclose(v.numpy(), b) for v, b in zip(discriminator.variables, before)
             if id(v) in spectral)
  assert step.global_step == 1 and int(discriminator.optimizer.iterations.numpy()) == 1
  assert np.isfinite(float(values["loss"])) and np.isfinite(float(values["loss/discriminator"]))


def test_the_generator_objective_is_the_papers_weighted_sum(trained):
  model, _, batch = trained
  output = model.forward(batch, training=False)
  audio, lengths = batch["target_tensors"]
  terms = model.loss.generator_terms(output["audio"], audio, lengths, training=False)
  assert all(t.dtype == tf.float32 for t in terms.values())
  total = terms["adversarial"] + 2.0 * terms["feature_matching"] + 45.0 * terms["mel_l1"]
  np.testing.assert_allclose(float(terms["total"]), float(total), rtol=1e-5)
  assert float(terms["stft"]) == 0.0  # stft_weight 0: the paper's objective
  assert float(terms["mel_l1"]) > 0.1 and float(terms["feature_matching"]) > 0
  loss_sum, weight, _ = model.compute_loss(batch, training=False)
  np.testing.assert_allclose(float(loss_sum) / float(weight), float(terms["total"]), rtol=1e-4)


def test_distances_are_zero_for_the_same_audio_and_follow_their_definitions(trained):
  model, _, batch = trained
  audio, lengths = batch["target_tensors"]
  same = utterance_distances(audio, audio, lengths, model.mel_options)
  assert not same["mel_l1_sum"].numpy().any() and set(same) == {"mel_l1_sum", "frames"}
  fake = 0.7 * audio + 0.05 * tf.random.stateless_normal(tf.shape(audio), [1, 2])
  got = utterance_distances(audio, fake, lengths, model.mel_options)
  real_mel, frames = log_mel_spectrogram(audio, lengths, **model.mel_options)
  diff = (real_mel - log_mel_spectrogram(fake, lengths, **model.mel_options)[0]).numpy()
  frames = frames.numpy()
  np.testing.assert_array_equal(got["frames"].numpy(), frames)
  for b, count in enumerate(frames):
    np.testing.assert_allclose(got["mel_l1_sum"].numpy()[b], np.abs(diff[b, :count]).sum(),
                               rtol=1e-5)
  assert np.all(got["mel_l1_sum"].numpy() > 0)


def test_eval_reports_mel_l1_and_mcd_and_infer_writes_a_wav_per_input(corpus, trained):
  model, _, _ = trained
  evaluator = Evaluator(model, Backend())
  metrics = evaluator.evaluate(build(corpus, "eval")[0].data_layer)
  assert set(metrics) == {"mel_l1", "mcd"} and metrics["mel_l1"] > 0 and metrics["mcd"] > 0
  assert model.best_metric == ("mel_l1", False)
  inferring = build(corpus, "infer")[0]  # names its files after its own data layer's lines
  outputs, _ = Evaluator(inferring, Backend()).infer(inferring.data_layer)
  assert inferring.loss.mpd.built is False  # infer never builds the discriminators
  wavs = [o for o in outputs if isinstance(o, WavFile)]
  assert [w.path for w in wavs] == [f"infer_audio/val{i}.wav" for i in range(3)]
  assert [len(w.samples) for w in wavs] == [-(-len(s) // HOP) * HOP for s in corpus[3][:3]]
  assert all(w.sample_rate == RATE and np.abs(w.samples).max() <= 1.0 for w in wavs)
  rows = [r for o in outputs if isinstance(o, CsvRows) for r in o.records]
  assert [r[1][0] for r in sorted(rows)] == ["val0", "val1", "val2"]


def test_samples_and_interactive_outputs(corpus, trained, tmp_path):
  model, _, batch = trained
  numpy_batch, outputs = to_numpy(batch), Evaluator(model, Backend()).predict(batch)
  line = model.format_samples(numpy_batch, outputs)[0]
  assert line.startswith("Sample train") and "mel L1" in line and "MCD" in line
  clips = model.sample_summaries(numpy_batch, outputs)
  assert [c.name for c in clips] == ["generated_audio", "target_audio"]
  assert len(clips[0].samples) == len(clips[1].samples) == numpy_batch["target_tensors"][1][0]
  interactive, _ = build(corpus, "interactive_infer")
  wav = layer(corpus, "eval").paths[1]
  inputs = to_numpy(next(iter(interactive.data_layer.dataset_from_inputs([wav]))))
  predicted = Evaluator(interactive, Backend()).predict(inputs)
  files = interactive.interactive_outputs(inputs, predicted)
  assert [f.path for f in files] == ["interactive_audio/val1.wav"]
  seconds = -(-len(corpus[3][1]) // HOP) * HOP / RATE
  assert interactive.interactive_lines(inputs, predicted, resolve=lambda p: "/run/" + p) == [
      f"/run/interactive_audio/val1.wav ({seconds:.2f} s)"]


def test_the_loss_weights_are_the_configs(corpus):
  model, _ = build(corpus, "train", "float32", "--loss_params/mel_weight=10.0",
                   "--loss_params/feature_matching_weight=0.0",
                   "--loss_params/stft_weight=3.0",
                   "--loss_params/stft_resolutions=[[128, 32, 96], [64, 16, 64]]")
  batch = next(iter(model.data_layer.build_dataset()))
  output = model.forward(batch, training=False)
  audio, lengths = batch["target_tensors"]
  terms = model.loss.generator_terms(output["audio"], audio, lengths, training=False)
  stft = multi_resolution_stft_loss(audio, output["audio"], lengths,
                                    resolutions=[[128, 32, 96], [64, 16, 64]])
  assert float(terms["stft"]) == pytest.approx(float(stft), rel=1e-5) and float(stft) > 0.1
  np.testing.assert_allclose(float(terms["total"]), float(
      terms["adversarial"] + 10.0 * terms["mel_l1"] + 3.0 * terms["stft"]), rtol=1e-5)


def test_mixed_precision_trains_with_float32_losses(corpus):
  model, run = build(corpus, "train", "mixed_bfloat16")
  step = TrainStep(model, run, Backend(), max_steps=2, steps_per_epoch=None,
                   count_units=model.data_layer.count_units)
  batch = next(iter(model.data_layer.build_dataset()))
  step.build(batch, is_chief=False)
  assert model.encoder.generator.compute_dtype == "bfloat16"
  assert model.loss.mpd.compute_dtype == "bfloat16"
  assert all(v.dtype == "float32" for v in model.variables)
  d_loss, _, _ = model.discriminator_loss(batch, training=False)
  g_loss, _, output = model.compute_loss(batch, training=False)
  assert d_loss.dtype == g_loss.dtype == output["audio"].dtype == tf.float32
  values = step.function()(iter([batch]))
  assert np.isfinite(float(values["loss"])) and np.isfinite(float(values["loss/discriminator"]))
  assert int(values["skipped"]) == 0


def test_export_serves_mel_to_waveform_as_the_model_predicts(trained, tmp_path):
  model, _, batch = trained
  adapter = model.serving_adapter()
  directory = str(tmp_path / "export")
  metadata = export.save(model, adapter, directory, {"model": "HiFiGAN"})
  described = metadata["signatures"]["serving_default"]
  assert described["audio_outputs"] == {"audio": {"length": "audio_length",
                                                  "sample_rate": RATE}}
  assert described["inputs"]["mel"]["shape"] == [None, None, 16]
  serve = tf.saved_model.load(directory).signatures["serving_default"]
  mel, frames = batch["source_tensors"]
  served = serve(mel=mel, mel_length=tf.cast(frames, tf.int32))
  predicted = model.predict(batch)
  np.testing.assert_array_equal(served["audio_length"].numpy(), frames.numpy() * HOP)
  np.testing.assert_allclose(served["audio"].numpy(), predicted["audio"].numpy(), atol=1e-5)


def test_the_loss_needs_the_model_and_refuses_bad_sizes(corpus):
  from open_seq2seq.losses import HiFiGANLoss  # pylint: disable=import-outside-toplevel
  with pytest.raises(ConfigError, match="HiFiGANLoss needs the data layer's spectrogram"):
    HiFiGANLoss({})
  with pytest.raises(ConfigError, match=r"loss_params/mel_fmax: 6000 Hz is above the Nyquist"):
    build(corpus, "train", "float32", "--loss_params/mel_fmax=6000")
  with pytest.raises(ConfigError, match=r"loss_params: .*groups 3 must divide"):
    build(corpus, "train", "float32", "--loss_params/scale_groups=[1, 3, 1]")
  with pytest.raises(ConfigError, match=r"stft_resolutions: win_length 600 is above its "
                                        r"n_fft 512"):
    build(corpus, "train", "float32", "--loss_params/stft_resolutions=[[512, 128, 600]]")
  with pytest.raises(ConfigError, match=r"stft_resolutions"):
    build(corpus, "train", "float32", "--loss_params/stft_resolutions=[[512, 128]]")


# ------------------------------------------------------------------------- configs

def test_v1_config_has_the_papers_sizes_and_settings(corpus):
  root, train, _, _ = corpus
  overrides = [f"--data_layer_params/dataset_files=['{train}']",
               f"--data_layer_params/dataset_location={root}"]
  for mode in ("train", "eval", "infer", "interactive_infer"):
    load_config(os.path.join(CONFIGS, "hifigan_v1.py"), mode, overrides)
  cls, loaded = load_config(os.path.join(CONFIGS, "hifigan_v1.py"), "train", overrides)
  config = loaded["train"]
  assert config["batch_size_per_gpu"] == 16
  assert config["data_layer_params"]["segment_size"] == 8192
  betas = [config["optimizer_params"].get(k, config["optimizer_params"].get(k.replace("_", "")))
           for k in ("beta_1", "beta_2")]
  assert betas == [0.8, 0.99]
  assert config["lr_policy_params"]["decay_rate"] == 0.999
  model = cls(config, "train")
  model.encoder.build()
  model.loss.build()
  counts = [sum(int(np.prod(v.shape)) for v in layer.trainable_variables)
            for layer in (model.encoder, model.loss.mpd, model.loss.msd)]
  assert abs(counts[0] / 13.92e6 - 1) < 0.01
  assert counts[1:] == [41_105_770, 29_618_821]
  features = model.features
  assert (features.sample_rate, features.n_fft, features.hop_length, features.num_mel,
          features.fmax, features.mel_type) == (22050, 1024, 256, 80, 8000.0, "slaney")
  assert model.loss.mel_options["fmax"] is None  # the loss spectrogram up to Nyquist


def test_stft_resolutions_without_an_stft_weight_are_announced_as_ignored():
  from open_seq2seq import slots  # pylint: disable=import-outside-toplevel
  from open_seq2seq.losses import HiFiGANLoss  # pylint: disable=import-outside-toplevel
  from open_seq2seq.models import HiFiGAN  # pylint: disable=import-outside-toplevel
  resolutions = [[256, 64, 256]]
  off = {"loss": HiFiGANLoss, "loss_params": {"stft_resolutions": resolutions}}
  on = {"loss": HiFiGANLoss, "loss_params": {"stft_resolutions": resolutions,
                                             "stft_weight": 2.0}}
  assert "loss_params/stft_resolutions: ignored: stft_weight is 0, so the STFT loss is off" \
      in slots.ignored_settings(HiFiGAN, off)
  assert not any("stft" in line for line in slots.ignored_settings(HiFiGAN, on))
