"""Text2SpeechDataLayer, SpectrogramFeatures, the Text2Speech model's hooks and PngFile."""

import csv
import os

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import resolve_config
from open_seq2seq.data.text2speech.features import SpectrogramFeatures
from open_seq2seq.data.text2speech.text import clean_english
from open_seq2seq.data.text2speech.text2speech import Text2SpeechDataLayer
from open_seq2seq.decoders.tacotron2_decoder import Tacotron2Decoder
from open_seq2seq.encoders.tacotron2_encoder import Tacotron2Encoder
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.losses.text2speech_loss import Text2SpeechLoss
from open_seq2seq.models.text2speech import Text2Speech
from open_seq2seq.outputs import AudioSample, CsvRows, ImageSample, PngFile, WavFile
from open_seq2seq.output_sink import OutputSink
from open_seq2seq.parts.tacotron.alignment import (alignment_image, band_mass, focus_rate,
                                                   spectrogram_image)

VOCAB = "open_seq2seq/test_utils/vocab_tts.txt"
RATE, N_FFT, HOP, PAD_TO = 16000, 512, 128, 4
DURATIONS = [0.25, 0.4, 0.55, 0.7]
TEXTS = ["Hello world.", "It costs 3 dollars!", "Short one", "The last, longest line here."]
NAMES = [f"LJ001-{i:04d}" for i in range(1, 5)]


def tone(seconds, freq, seed):
  t = np.arange(int(seconds * RATE)) / RATE
  noise = 0.01 * np.random.default_rng(seed).standard_normal(len(t))
  return (0.5 * np.sin(2 * np.pi * freq * t) + noise).astype(np.float32)


def write_csv(path, lines):
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(line + "\n" for line in lines))
  return str(path)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  import soundfile
  root = tmp_path_factory.mktemp("tts")
  os.makedirs(root / "wavs")
  for i, (name, seconds) in enumerate(zip(NAMES, DURATIONS)):
    soundfile.write(str(root / "wavs" / f"{name}.wav"), tone(seconds, 300 + 150 * i, i), RATE,
                    subtype="PCM_16")
  return write_csv(root / "train.csv", [f"{n}|raw {i}|{t}" for i, (n, t)
                                        in enumerate(zip(NAMES, TEXTS))])


def params(csv, **overrides):
  base = {"dataset_files": [csv], "vocab_file": VOCAB, "num_audio_features": 10,
          "output_type": "mel", "sampling_rate": RATE, "n_fft": N_FFT, "hop_length": HOP,
          "mel_type": "htk", "mag_power": 1, "data_min": 1e-2, "pad_to": PAD_TO,
          "shuffle": False, "repeat": False}
  base.update(overrides)
  return base


def layer(csv, mode="eval", batch_size=2, **overrides):
  return Text2SpeechDataLayer(params(csv, **overrides), mode=mode, batch_size=batch_size,
                              random_seed=0)


def batches(data_layer):
  return [tf.nest.map_structure(lambda t: t.numpy(), b) for b in data_layer.build_dataset()]


def read(name):
  import soundfile
  return soundfile.read(name, dtype="float32")[0]


def by_id(data_layer):
  """{id: (ids, target frames, stop, length)} over one pass."""
  found = {}
  for b in batches(data_layer):
    (src, src_len), (spec, stop, lengths) = b["source_tensors"], b["target_tensors"]
    for i, index in enumerate(b["id"]):
      found[int(index)] = (src[i, :src_len[i]], spec[i], stop[i], int(lengths[i]))
  return found


# ----------------------------------------------------------------------------- batches
def test_batches_sources_targets_stop_tokens_and_padding(corpus):
  data = layer(corpus)
  features = data.features
  assert features.num_features == 10 and data.description.src_vocab_size == data.text.vocab_size
  for b in batches(data):
    spec = b["target_tensors"][0]
    assert spec.shape[0] <= 2 and spec.shape[1] % PAD_TO == 0 and spec.shape[2] == 10
    assert b["source_tensors"][0].shape[1] % PAD_TO == 0
  found = by_id(data)
  assert sorted(found) == [0, 1, 2, 3]
  for index, (ids, spec, stop, length) in found.items():
    assert ids[0] == data.text.bos_id and ids[-1] == data.text.eos_id
    assert data.text.decode(ids[1:-1]) == clean_english(TEXTS[index])
    speech = features.num_frames(int(DURATIONS[index] * RATE))
    assert length == speech + 1 + (-(speech + 1)) % PAD_TO and length % PAD_TO == 0
    assert np.all(stop[:speech] == 0) and np.all(stop[speech:] == 1)
    np.testing.assert_array_equal(spec[speech:], np.full_like(spec[speech:], np.log(1e-2)))
    signal = read(os.path.join(os.path.dirname(corpus), "wavs", NAMES[index] + ".wav"))
    np.testing.assert_allclose(spec[:speech], features.compute(signal).numpy(), atol=1e-5)


def np_features(signal, kind, n_mel=10, n_mag=20, power=1.0, data_min=1e-2):
  import librosa
  magnitude = np.abs(librosa.stft(signal.astype(np.float64), n_fft=N_FFT, hop_length=HOP,
                                  window="hann", center=True, pad_mode="constant")) ** power
  parts = []
  if kind in ("mel", "both"):
    basis = librosa.filters.mel(sr=RATE, n_fft=N_FFT, n_mels=n_mel, htk=True, norm=None)
    parts.append(np.log(np.maximum(basis @ magnitude, data_min)))
  if kind in ("magnitude", "both"):
    mag = magnitude[:n_mag]
    parts.append(mag if kind == "both" else np.log(np.maximum(mag, data_min)))
  return np.concatenate(parts).T


@pytest.mark.parametrize("kind,num,power", [("mel", 10, 1), ("mel", 10, 2),
                                            ("magnitude", 20, 1),
                                            ("both", {"mel": 10, "magnitude": 20}, 1)])
def test_features_match_librosa(corpus, kind, num, power):
  data = layer(corpus, output_type=kind, num_audio_features=num, mag_power=power)
  width = {"mel": 10, "magnitude": 20, "both": 30}[kind]
  assert data.features.num_features == width
  ids, spec, stop, length = by_id(data)[1]
  signal = read(os.path.join(os.path.dirname(corpus), "wavs", NAMES[1] + ".wav"))
  want = np_features(signal, kind, power=power)
  speech = int((stop == 0).sum())
  assert spec.shape[1] == width and speech == len(want)
  np.testing.assert_allclose(spec[:speech], want, atol=1e-4, rtol=1e-4)
  pad = np.log(1e-2) if kind != "both" else np.r_[np.full(10, np.log(1e-2)), np.full(20, 1e-2)]
  np.testing.assert_allclose(spec[speech:], np.broadcast_to(pad, spec[speech:].shape), rtol=1e-6)


def test_feature_normalization(corpus):
  plain = by_id(layer(corpus))[0][1]
  normal = layer(corpus, feature_normalize=True, feature_normalize_mean=-2.0,
                 feature_normalize_std=4.0)
  np.testing.assert_allclose(by_id(normal)[0][1], (plain + 2.0) / 4.0, atol=1e-5)
  np.testing.assert_allclose(normal.features.magnitude(by_id(normal)[0][1][:3]),
                             layer(corpus).features.magnitude(plain[:3]), rtol=1e-4, atol=1e-6)


def test_duration_max_filters_training_and_eval_not_infer(corpus):
  limit = SpectrogramFeatures("mel", 10, 0, RATE, N_FFT, HOP, N_FFT).num_frames(
      int(DURATIONS[1] * RATE))
  train = layer(corpus, mode="train", duration_max=limit)
  assert sorted(i for b in batches(train) for i in b["id"]) == [0, 1]
  assert sorted(by_id(layer(corpus, duration_max=limit))) == [0, 1]


@pytest.mark.parametrize("use_cache", [False, True])
def test_use_cache_reads_each_file_once(corpus, monkeypatch, use_cache):
  from open_seq2seq.data.text2speech import text2speech
  reads = []
  real = text2speech.read_audio
  monkeypatch.setattr(text2speech, "read_audio", lambda path, *a: reads.append(path) or
                      real(path, *a))
  data = layer(corpus, use_cache=use_cache)
  first, second = by_id(data), by_id(data)
  assert len(reads) == (4 if use_cache else 8) and len(set(reads)) == 4
  for index, (_, spec, _, _) in first.items():
    np.testing.assert_array_equal(second[index][1], spec)


def test_pad_value_and_dataset_defaults(corpus):
  ids, spec, stop, length = by_id(layer(corpus, pad_value=-3.0))[0]
  speech = int((stop == 0).sum())
  assert speech < length and np.all(spec[speech:] == -3.0)
  mailabs = Text2SpeechDataLayer({**params(corpus), "dataset": "MAILABS", "n_fft": None,
                                  "hop_length": None, "sampling_rate": None}, mode="eval")
  assert (mailabs.features.sample_rate, mailabs.features.n_fft) == (16000, 800)
  assert mailabs.features.hop_length == 200 and mailabs.features.win_length == 800


def test_without_pad_eos_the_last_frame_is_the_stop_frame(corpus):
  # OpenSeq2Seq: without pad_EOS the last speech frame carries the stop token (else the
  # loss, masked to the lengths, never sees a 1 and the model never learns to stop).
  data = layer(corpus, pad_EOS=False)
  for index, (ids, spec, stop, length) in by_id(data).items():
    speech = data.features.num_frames(int(DURATIONS[index] * RATE))
    assert ids[0] != data.text.bos_id and ids[-1] != data.text.eos_id
    assert length == speech
    assert np.all(stop[:speech - 1] == 0) and stop[speech - 1] == 1


def test_sharding_is_disjoint_and_complete(corpus):
  shards = [Text2SpeechDataLayer(params(corpus), mode="eval", batch_size=3, num_workers=2,
                                 worker_id=w) for w in (0, 1)]
  ids = [sorted(by_id(s)) for s in shards]
  assert not set(ids[0]) & set(ids[1]) and sorted(ids[0] + ids[1]) == [0, 1, 2, 3]
  assert [s.get_size_in_samples() for s in shards] == [len(i) for i in ids]


def test_infer_needs_no_audio_and_has_no_targets(tmp_path):
  csv = write_csv(tmp_path / "test.csv", ["missing_a|x|Hello there.", "missing_b|y|Two"])
  data = layer(csv, mode="infer")
  found = batches(data)
  assert all("target_tensors" not in b for b in found)
  assert sorted(i for b in found for i in b["id"]) == [0, 1]
  assert data.names == ["missing_a", "missing_b"]


def test_interactive_inputs():
  data = Text2SpeechDataLayer(params(None, dataset_files=None), mode="interactive_infer",
                              batch_size=2)
  found = [b for b in data.dataset_from_inputs(["Hello world.", "Again"])]
  ids, lengths = found[0]["source_tensors"]
  assert "target_tensors" not in found[0] and ids.shape[0] == 2
  assert data.text.decode(ids[1, 1:lengths[1] - 1].numpy()) == "again"
  assert data.names == ["interactive_0", "interactive_1"]
  with pytest.raises(DataError, match="empty"):
    data.dataset_from_inputs(["  "])


@pytest.mark.parametrize("line,match", [("nowav|raw|Some text.", "not found"),
                                        ("LJ001-0001|raw|   ", "transcript"),
                                        ("LJ001-0001", "expected")])
def test_data_errors(corpus, tmp_path, line, match):
  csv = write_csv(tmp_path / "bad.csv", [line])
  with pytest.raises(DataError, match=match):
    layer(csv, mode="train", dataset_location=os.path.dirname(corpus))


@pytest.mark.parametrize("overrides,match", [
    ({"output_type": "both", "num_audio_features": 30}, "num_audio_features"),
    ({"fmax": 9000.0}, "Nyquist"),
    ({"output_type": "magnitude", "num_audio_features": N_FFT // 2 + 2}, "magnitude bins"),
    ({"data_min": {"magnitude": 1e-5}}, "data_min"),
])
def test_config_errors(corpus, overrides, match):
  with pytest.raises(ConfigError, match=match):
    layer(corpus, **overrides)


def test_features_back_to_audio():
  features = SpectrogramFeatures("mel", 20, 0, RATE, N_FFT, HOP, N_FFT, data_min_mel=1e-2)
  signal = tone(0.3, 440, 0)
  frames = features.compute(signal)
  magnitude = features.magnitude(frames).numpy()
  assert magnitude.shape == (frames.shape[0], N_FFT // 2 + 1) and magnitude.min() >= 0.0
  audio = features.to_audio(frames, num_iters=4).numpy()
  assert audio.ndim == 1 and abs(len(audio) - len(signal)) <= HOP
  assert np.all(np.isfinite(audio)) and np.abs(audio).max() > 0


# ----------------------------------------------------------------------------- model hooks
def model_config(csv, logdir, **data):
  return {
      "random_seed": 0, "max_steps": 2, "batch_size_per_gpu": 2, "logdir": str(logdir),
      "encoder": Tacotron2Encoder, "decoder": Tacotron2Decoder, "loss": Text2SpeechLoss,
      "encoder_params": {"src_emb_size": 16, "num_rnn_layers": 1, "rnn_cell_dim": 8,
                         "conv_layers": [{"kernel_size": [3], "stride": [1],
                                          "num_channels": 16, "padding": "SAME"}]},
      "decoder_params": {"attention_layer_size": 8, "location_filters": 4,
                         "location_kernel_size": 5, "decoder_cell_units": 16,
                         "decoder_layers": 1, "prenet_units": 8, "reduction_factor": 3,
                         "max_frames_per_symbol": 1.0,
                         "postnet_conv_layers": [{"kernel_size": [3], "stride": [1],
                                                  "num_channels": -1, "padding": "SAME"}]},
      "loss_params": {"guided_attention_weight": 1.0},
      "data_layer": Text2SpeechDataLayer,
      "data_layer_params": params(csv, pad_to=3, **data),
  }


def build(csv, logdir, mode="eval", **data):
  return Text2Speech(resolve_config(Text2Speech, model_config(csv, logdir, **data), mode), mode)


def test_components_get_the_feature_sizes(corpus, tmp_path):
  model = build(corpus, tmp_path, output_type="both",
                num_audio_features={"mel": 10, "magnitude": 20})
  assert (model.decoder.num_mel, model.decoder.num_mag, model.decoder.exp_mag) == (10, 20, True)
  assert (model.loss.num_mel, model.loss.num_mag, model.loss.r) == (10, 20, 3)


def test_evaluate_on_hand_made_outputs(corpus, tmp_path):
  model = build(corpus, tmp_path)
  eye4, eye3 = np.eye(4), np.zeros((7, 4))
  eye3[:3, :3] = np.eye(3)
  free = np.zeros((2, 7, 4))
  free[0, :4] = np.eye(4)
  free[1, :, 2] = 1.0  # always the last of 3 symbols: in the band at steps 4 and 5 of 7
  batch = {"id": np.array([5, 6]), "target_tensors": (None, None, np.array([12, 9]))}
  outputs = {"src_lengths": np.array([4, 3]), "final_sequence_lengths": np.array([12, 20]),
             "alignments": free, "forced_alignments": np.stack([np.pad(eye4, ((0, 3), (0, 0))),
                                                                eye3])}
  results = model.evaluate(batch, outputs)
  assert [r[0] for r in results] == [5, 6]
  np.testing.assert_allclose(results[0][1], (1.0, 1.0, 1.0, 1.0))
  np.testing.assert_allclose(results[1][1], (1.0, 1.0, 2 / 7, 0.0))
  metrics = model.finalize_evaluation(results)
  assert metrics == pytest.approx({"band_mass": 1.0, "focus_rate": 1.0,
                                   "free_band_mass": (1 + 2 / 7) / 2, "stop_accuracy": 0.5})
  ids = np.array([[1, 40, 41, 2], [1, 42, 2, 0]])  # <s> x y </s>
  batch["source_tensors"] = (ids, np.array([4, 3]))
  outputs["spectrogram"] = np.random.default_rng(0).normal(-2.0, 1.0, (2, 21, 10))
  assert model.format_samples(batch, outputs) == [
      f"Sample text: {model.data_layer.text.decode(ids[0, :4])} | frames predicted 12, true 12"]
  assert model.sample_summaries(batch, outputs) == []  # save_to_tensorboard is off
  model.params["save_to_tensorboard"] = True
  samples = {s.name: s for s in model.sample_summaries(batch, outputs)}
  assert set(samples) == {"alignment", "spectrogram", "teacher_forced_alignment", "audio"}
  # a labelled figure (RGB, larger than the 4 x 4 weights); the spectrogram a plain image
  assert samples["alignment"].image.shape[2] == 3 and samples["alignment"].image.shape[0] > 4
  assert samples["spectrogram"].image.shape == (10, 12)
  assert isinstance(samples["alignment"], ImageSample)
  assert isinstance(samples["audio"], AudioSample) and samples["audio"].sample_rate == RATE
  assert abs(len(samples["audio"].samples) - 11 * HOP) <= HOP


def test_eval_outputs_and_training_step(corpus, tmp_path):
  model = build(corpus, tmp_path)
  batch = next(iter(model.data_layer.build_dataset()))
  out = model.eval_outputs(batch)
  assert float(out["weight"]) == float(np.sum(batch["target_tensors"][2]))
  forced = out["predictions"]["forced_alignments"]
  assert forced.shape[1] == -(-batch["target_tensors"][0].shape[1] // 3)
  steps = []
  original = model.loss.compute_loss
  model.loss.compute_loss = lambda d, step=None: steps.append(step) or original(d, step=step)
  model.training_step = tf.Variable(7, dtype=tf.int64)
  model.compute_loss(batch, training=True)
  model.compute_loss(batch, training=False)
  assert int(steps[0]) == 7 and steps[1] is None


def test_finalize_inference_writes_audio_alignments_and_csv(corpus, tmp_path):
  model = build(corpus, tmp_path / "logdir", mode="infer")
  model.predict(next(iter(model.data_layer.build_dataset())))  # builds the variables
  model.decoder.stop_projection.bias.assign([-50.0] * 3)  # never stops: max_frames_per_symbol
  results = []
  for batch in model.data_layer.build_dataset():
    outputs = tf.nest.map_structure(lambda t: t.numpy(), model.predict(batch))
    results += model.infer(tf.nest.map_structure(lambda t: t.numpy(), batch), outputs)
  outputs = model.finalize_inference(results)
  wavs = [o for o in outputs if isinstance(o, WavFile)]
  pngs = [o for o in outputs if isinstance(o, PngFile)]
  csvs = [o for o in outputs if isinstance(o, CsvRows)]
  # paths relative to the run's directory, which the sink is given
  assert [w.path for w in wavs] == [f"infer_audio/{n}.wav" for n in NAMES]
  assert [p.path for p in pngs] == [f"infer_audio/{n}_alignment.png" for n in NAMES]
  assert len(csvs) == 1 and csvs[0].path is None
  assert [r[1][0] for r in csvs[0].records] == NAMES
  logdir = str(tmp_path / "logdir")
  written = OutputSink(str(tmp_path / "infer.csv"), directory=logdir).write(outputs)
  assert len(written) == 9
  directory = os.path.join(logdir, "infer_audio")
  assert [p for p, _ in written[:2]] == [os.path.join(directory, NAMES[0] + ".wav"),
                                         os.path.join(directory, NAMES[0] + "_alignment.png")]
  with open(tmp_path / "infer.csv", encoding="utf-8", newline="") as f:
    rows = list(csv.DictReader(f))
  assert [r["wav_path"] for r in rows] == [os.path.join(directory, n + ".wav") for n in NAMES]
  import soundfile
  audio, rate = soundfile.read(rows[0]["wav_path"])
  frames = len(dict(results)[0][0])  # the spectrogram of utterance 0
  assert frames > 1 and frames % 3 == 0 and rate == RATE and np.abs(audio).max() <= 1.0
  assert abs(len(audio) - (frames - 1) * HOP) <= HOP
  image = tf.io.decode_png(open(os.path.join(logdir, pngs[0].path), "rb").read()).numpy()
  assert image.shape == pngs[0].image.shape and image.max() == 255


def test_interactive_outputs_and_lines(tmp_path):
  model = build(None, tmp_path, mode="interactive_infer", dataset_files=None)
  batch = next(iter(model.data_layer.dataset_from_inputs(["Hello.", "Bye"])))
  batch = tf.nest.map_structure(lambda t: t.numpy(), batch)
  symbols = batch["source_tensors"][1]
  outputs = {"spectrogram": np.random.default_rng(1).normal(-2.0, 1.0, (2, 9, 10)),
             "final_sequence_lengths": np.array([9, 6]), "src_lengths": symbols,
             "alignments": np.full((2, 3, symbols.max()), 1.0 / symbols.max())}
  files = model.interactive_outputs(batch, outputs)
  wavs = [f.path for f in files if isinstance(f, WavFile)]
  assert wavs == [f"interactive_audio/interactive_{i}.wav" for i in (0, 1)]
  sink = OutputSink(os.devnull, directory=str(tmp_path))  # as interactive_infer writes them
  written = [path for path, _ in sink.write(files) if path.endswith(".wav")]
  assert written == [os.path.join(str(tmp_path), w) for w in wavs]
  assert model.interactive_lines(batch, outputs, resolve=sink.resolve) == [
      f"{written[0]} ({9 * HOP / RATE:.2f} s)", f"{written[1]} ({6 * HOP / RATE:.2f} s)"]


@pytest.mark.parametrize("shape", [(5, 7), (4, 3, 3)])
def test_png_file_round_trip(tmp_path, shape):
  image = np.random.default_rng(0).random(shape) * 1.4 - 0.2  # out of range: clipped
  path = str(tmp_path / "a.png")
  assert PngFile(image, path).write(path) == 1
  decoded = tf.io.decode_png(open(path, "rb").read()).numpy()
  channels = shape[2] if len(shape) == 3 else 1
  assert decoded.shape == (*shape[:2], channels) and decoded.dtype == np.uint8
  want = np.round(np.clip(image, 0, 1) * 255).reshape(decoded.shape)
  np.testing.assert_array_equal(decoded, want)


# ----------------------------------------------------------------------------- alignment metrics
def test_band_mass_and_focus_rate():
  diagonal, uniform = np.eye(40), np.full((200, 200), 1 / 200)
  assert band_mass(diagonal, 40, 40) == 1.0 and focus_rate(diagonal, 40, 40) == 1.0
  assert band_mass(uniform, 200, 200, width=0.1) == pytest.approx(0.2, abs=0.015)
  assert focus_rate(uniform, 200, 200) == pytest.approx(1 / 200)
  padded_diag = np.full((50, 45), 3.0)
  padded_diag[:40, :40] = diagonal  # padding beyond steps/symbols is ignored
  assert band_mass(padded_diag, 40, 40) == 1.0 and focus_rate(padded_diag, 40, 40) == 1.0
  assert band_mass(np.zeros((4, 4)), 4, 4) == 0.0


def test_alignment_and_spectrogram_images():
  aligns = np.full((12, 9), 5.0)
  aligns[:10, :7] = np.random.default_rng(9).random((10, 7)) * 0.5
  aligns[0, :7], aligns[0, 0] = 0.0, 0.5  # step 0 attends symbol 0 only
  image = alignment_image(aligns, 10, 7)
  assert image.shape == (7, 10) and image.min() >= 0.0 and image.max() <= 1.0
  np.testing.assert_allclose(image.max(axis=0), 1.0, atol=1e-6)  # columns scaled to 1
  assert image[-1, 0] == 1.0 and np.all(image[:-1, 0] == 0.0)  # symbol 0 at the bottom
  frames = np.random.default_rng(10).normal(size=(8, 5))
  frames[:, 0] += 10.0  # the lowest feature is loudest
  spec = spectrogram_image(frames, 6)
  assert spec.shape == (5, 6) and spec.min() == 0.0 and spec.max() == 1.0
  assert spec[-1].mean() > spec[:-1].mean()  # low frequencies at the bottom
