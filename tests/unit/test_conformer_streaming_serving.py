"""The streaming SavedModel: features chunk by chunk (against the whole recording's) and an
exported recognizer driven over a long utterance, against whole-utterance decoding."""

import json
import os

import keras
import numpy as np
import pytest
import soundfile
import tensorflow as tf

from open_seq2seq.data.speech2text.features import FeatureExtractor
from open_seq2seq.encoders import ConformerEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.serving import export
from open_seq2seq.serving.speech_streaming import (StreamingFeatures, running_normalization,
                                                   streaming_extension)
from tests.helpers.speech import build_model, load_script, speech_config, tone, write_corpus

ENCODER = {"d_model": 32, "num_layers": 2, "num_heads": 4, "conv_kernel_size": 5,
           "subsampling_channels": 8, "dropout": 0.0, "attention_dropout": 0.0,
           "conv_causal": True, "att_context_size": [4, 1]}


def long_signal(seconds=4.0):
  """Tones of changing pitch, louder and softer: longer than the corpus' utterances."""
  parts = [tone(0.5, 150 + 90 * i, seed=i) * (0.3 + 0.2 * (i % 3)) for i in range(8)]
  return np.concatenate(parts)[:int(seconds * 16000)]


def stream_features(front, signal, sizes):
  state, frames, start = front.initial_state(1), [], 0
  for i, size in enumerate(sizes):
    final = i == len(sizes) - 1
    chunk = signal[start:] if final else signal[start:start + size]
    start += len(chunk)
    out, state = front.step(tf.constant(chunk[None]), tf.constant(final), state)
    frames.append(out.numpy()[0])
  return np.concatenate(frames)


@pytest.mark.parametrize("input_type,per_feature,warmup", [
    ("logfbank", True, 1), ("logfbank", False, 37), ("spectrogram", True, 50)])
def test_features_chunk_by_chunk_equal_the_whole_recording(input_type, per_feature, warmup):
  """Any split of the audio into calls gives the frames of the whole recording, normalized
  with the statistics so far (after the warm-up)."""
  extractor = FeatureExtractor(input_type, 24, 16000, window_size=0.025, window_stride=0.01,
                               norm_per_feature=per_feature)
  signal = long_signal(1.3)
  want = running_normalization(extractor.raw_features(signal), per_feature, warmup)
  assert want.shape[0] == extractor.num_frames(len(signal))
  front = StreamingFeatures(extractor, warmup)
  for sizes in ([160] * 200, [700, 1, 0, 2900, 333] * 20, [len(signal)]):
    got = stream_features(front, signal, sizes)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=2e-4, rtol=1e-4)


@pytest.mark.parametrize("per_feature", [True, False])
def test_a_stream_within_the_warmup_gets_the_data_layers_features(per_feature):
  """Held until the end, the frames are normalized as the data layer normalizes an
  utterance (the peak normalization it also applies is a gain: no change after it)."""
  extractor = FeatureExtractor("logfbank", 24, 16000, norm_per_feature=per_feature)
  signal = long_signal(0.9)
  front = StreamingFeatures(extractor, warmup=1000)
  got = stream_features(front, signal, [1000] * 20)
  np.testing.assert_allclose(got, extractor(signal), atol=1e-3)


def test_running_normalization_settles_to_the_utterance_statistics():
  features = np.random.default_rng(0).normal(3.0, 2.0, size=(4000, 5)).astype(np.float32)
  offline = (features - features.mean(0)) / (features.std(0) + 1e-5)
  for warmup in (1, 100):
    running = running_normalization(features, True, warmup)
    np.testing.assert_allclose(running[-1], offline[-1], atol=1e-4)
    assert np.abs(running[2000:] - offline[2000:]).max() < 0.15
  head = features[:100]
  np.testing.assert_allclose(running_normalization(features, True, 100)[:100],
                             (head - head.mean(0)) / (head.std(0) + 1e-5), atol=1e-5)


def test_mfcc_cannot_stream():
  with pytest.raises(ConfigError, match="mfcc cannot stream"):
    StreamingFeatures(FeatureExtractor("mfcc", 13))


def streaming_model(tmp_path, decoder):
  corpus = write_corpus(str(tmp_path), ["one two", "three", "four five", "six"],
                        durations=[0.7, 0.45, 0.6, 0.4])
  top = {}
  if decoder == "transducer":
    from open_seq2seq.decoders import TransducerDecoder
    from open_seq2seq.losses import RNNTLoss
    top = {"decoder": TransducerDecoder, "loss": RNNTLoss,
           "decoder_params": {"pred_hidden": 16, "joint_hidden": 16, "pred_dropout": 0.0,
                              "joint_dropout": 0.0, "max_symbols_per_step": 2}}
  keras.utils.set_random_seed(0)
  config = speech_config([corpus], encoder=ConformerEncoder, encoder_params=ENCODER,
                         data_params={"num_audio_features": 20}, **top)
  model = build_model(config, "infer")
  model.predict(next(iter(model.data_layer.build_dataset())))  # creates the variables
  return model


def whole_utterance_text(model, signal):
  """Greedy decoding of the whole recording's (running-normalized) features in one pass of
  the encoder (``encode``: no chunks)."""
  layer = model.data_layer
  features = running_normalization(layer.extractor.raw_features(signal),
                                   layer.params["norm_per_feature"], 100)  # 1 s warm-up
  outputs, lengths = model.encoder.encode(tf.constant(features[None]),
                                          tf.constant([len(features)]), training=False)
  out = model.decoder({"encoder_output": {"outputs": outputs, "src_lengths": lengths}})
  ids = out["outputs"].numpy()[0][:out["final_sequence_lengths"].numpy()[0]]
  return layer.targets.decode(list(ids))


@pytest.mark.parametrize("decoder", ["ctc", "transducer"])
def test_exported_streaming_recognizer_over_a_long_utterance(tmp_path, decoder, capsys):
  """4 s (the corpus' utterances are 0.4-0.7 s) in calls of 0.25 s, then a final call."""
  model = streaming_model(tmp_path, decoder)
  signal = long_signal(4.0)
  reference = whole_utterance_text(model, signal)
  export_dir = str(tmp_path / "exported")
  metadata = export.save(model, model.serving_adapter(), export_dir, {"model": "Speech2Text"},
                         extra=streaming_extension(model))
  assert sorted(metadata["signatures"]) == ["serving_default", "stream_initial_state",
                                            "stream_step"]
  with open(os.path.join(export_dir, "assets.extra", "open_seq2seq.json"),
            encoding="utf-8") as f:
    assert json.load(f) == json.loads(json.dumps(metadata))
  loaded = tf.saved_model.load(export_dir)
  serve, start = loaded.signatures["stream_step"], loaded.signatures["stream_initial_state"]
  state = start(batch_size=tf.constant(1))
  pieces, position = [], 0
  for size in [4000] * 15 + [None]:
    chunk = signal[position:position + size] if size else signal[position:]
    position += len(chunk)
    out = serve(audio=tf.constant(chunk[None]), final=tf.constant(size is None), **state)
    state = {name: out[name] for name in state}
    pieces.append(out["text"].numpy()[0].decode("utf-8"))
  assert position == len(signal)
  assert len(reference) >= 3 and sum(1 for p in pieces[:-1] if p) >= 2  # text as it comes
  assert "".join(pieces) == reference
  # the whole-waveform signature transcribes it too (its encoder runs chunk by chunk)
  whole = loaded.signatures["serving_default"](waveform=tf.constant(signal[None]),
                                               length=tf.constant([len(signal)]))
  assert whole["ids_length"].numpy()[0] > 0
  if decoder == "ctc":  # the client script, in calls of 160 ms: the calls change nothing
    wav = str(tmp_path / "long.wav")
    soundfile.write(wav, signal, 16000, subtype="FLOAT")
    capsys.readouterr()
    assert load_script("stream_transcribe").main([export_dir, wav]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == reference and "real-time factor" in err


def test_the_client_script_explains_what_it_cannot_do(tmp_path):
  script = load_script("stream_transcribe")
  with pytest.raises(SystemExit, match=r"^error: .*: not an export of run.py --mode=export"):
    script.main([str(tmp_path / "none"), "x.wav"])
  (tmp_path / "assets.extra").mkdir()
  (tmp_path / "assets.extra" / "open_seq2seq.json").write_text('{"signatures": {}}')
  with pytest.raises(SystemExit, match="has no streaming signatures"):
    script.main([str(tmp_path), "x.wav"])


def test_no_streaming_signatures_for_a_full_context_or_beam_search_model(tmp_path, capsys):
  model = streaming_model(tmp_path, "transducer")
  model.decoder.params["use_beam_search"] = True
  assert streaming_extension(model) is None
  assert "notice: no streaming signatures in this export: decoder_params/use_beam_search" \
      in capsys.readouterr().err
  model.encoder.streaming = False
  assert streaming_extension(model) is None
