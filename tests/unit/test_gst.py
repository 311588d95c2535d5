"""Global style tokens: reference encoder, style token layer, the Tacotron encoder's style
embedding and the data layer's style references."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.data.text2speech.text2speech import Text2SpeechDataLayer
from open_seq2seq.encoders.tacotron2_encoder import Tacotron2Encoder
from open_seq2seq.errors import ConfigError, DataError
from open_seq2seq.parts.tacotron.style_tokens import (ReferenceEncoder, StyleTokenLayer,
                                                      strided_lengths)
from tests.helpers.tts import VOCAB, write_corpus

CONVS = [{"kernel_size": [3, 3], "stride": [2, 2], "num_channels": 4, "padding": "SAME"},
         {"kernel_size": [3, 3], "stride": [2, 2], "num_channels": 8, "padding": "SAME"}]
MEL = 12


def frames(lengths, garbage, seed=0):
  """[B, max(lengths), MEL] reference frames; beyond each length zeros or large garbage."""
  x = np.random.default_rng(seed).normal(size=(len(lengths), max(lengths), MEL))
  for i, n in enumerate(lengths):
    x[i, n:] = 50.0 * x[i, n:] if garbage else 0.0
  return x.astype(np.float32)


# ----------------------------------------------------------------------------- reference
@pytest.mark.parametrize("padding,kernel,stride", [("SAME", 3, 2), ("VALID", 3, 2),
                                                   ("SAME", 1, 1), ("VALID", 4, 3)])
def test_strided_lengths_match_the_convolution(padding, kernel, stride):
  conv = keras.layers.Conv2D(1, (kernel, 1), strides=(stride, 1), padding=padding.lower())
  for n in range(kernel, 12):
    out = conv(tf.zeros([1, n, 1, 1]))
    assert int(strided_lengths(tf.constant(n), stride, kernel, padding)) == out.shape[1]


@pytest.mark.parametrize("rnn,bidirectional", [(keras.layers.GRU, False),
                                               (keras.layers.LSTM, True)])
@pytest.mark.parametrize("training", [False, True])
def test_reference_encoder_ignores_padding(rnn, bidirectional, training):
  ref = ReferenceEncoder(CONVS, rnn_cell_dim=6, rnn_unidirectional=not bidirectional,
                         rnn_class=rnn, reference_size=5)
  x = frames([17, 9], garbage=True)
  out = ref(tf.constant(x), tf.constant([17, 9]), training=training).numpy()
  assert out.shape == (2, 5) and np.all(np.abs(out) <= 1.0)
  # Alone and unpadded, the second reference gives the same summary (in training too: the
  # batch-norm statistics leave padded frames out, so compare against a batch whose padding
  # is zeros instead of garbage).
  clean = ref(tf.constant(frames([17, 9], garbage=False)), tf.constant([17, 9]),
              training=training).numpy()
  np.testing.assert_allclose(clean, out, atol=1e-4)
  if not training:
    alone = ref(tf.constant(x[1:, :9]), tf.constant([9]), training=False).numpy()
    np.testing.assert_allclose(alone[0], out[1], atol=1e-5)


def test_reference_encoder_with_a_reference_shorter_than_the_strides():
  ref = ReferenceEncoder(CONVS, rnn_cell_dim=6, reference_size=5)
  out = ref(tf.constant(frames([2, 1], garbage=False)), tf.constant([2, 1]))
  assert np.all(np.isfinite(out.numpy()))


# ----------------------------------------------------------------------------- tokens
@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_style_tokens_weights_are_float32_distributions_and_mix_reproduces_the_output(dtype):
  layer = StyleTokenLayer(num_tokens=6, token_size=10, attention_size=8, num_heads=2,
                          dtype=dtype)
  reference = tf.constant(np.random.default_rng(1).uniform(-1, 1, (3, 5)), tf.float32)
  style, weights = layer(reference)
  assert style.shape == (3, 8) and weights.shape == (3, 2, 6)
  assert weights.dtype == tf.float32
  np.testing.assert_allclose(weights.numpy().sum(-1), 1.0, atol=1e-5)
  np.testing.assert_allclose(layer.mix(weights).numpy(), style.numpy(), atol=1e-6)
  # Different references, different weights: the attention reads its query.
  assert np.abs(weights.numpy()[0] - weights.numpy()[1]).max() > 1e-4


@pytest.mark.parametrize("trainable", [False, True])
def test_token_table_is_trained_only_when_asked(trainable):
  layer = StyleTokenLayer(4, 6, 8, 2, trainable_tokens=trainable)
  layer(tf.zeros([1, 3]))
  names = [v.path for v in layer.trainable_variables]
  assert any("token_embeddings" in n for n in names) == trainable
  assert any("token_embeddings" in v.path for v in layer.variables)


# ----------------------------------------------------------------------------- encoder
STYLE = {"conv_layers": CONVS, "rnn_cell_dim": 6, "emb_size": 10, "attention_layer_size": 8,
         "num_tokens": 5, "num_heads": 2}
ENCODER = {"src_emb_size": 16, "conv_layers": [{"kernel_size": [5], "stride": [1],
                                                "num_channels": 16, "padding": "same"}],
           "num_rnn_layers": 1, "rnn_cell_dim": 8, "style_embedding_enable": True}


def gst_encoder(mode="eval", **style):
  return Tacotron2Encoder({**ENCODER, "style_embedding_params": {**STYLE, **style}}, mode=mode,
                          src_vocab_size=20)


def source(with_reference=True, seed=0):
  ids = tf.constant(np.random.default_rng(seed).integers(3, 20, (2, 7)), tf.int32)
  src = (ids, tf.constant([7, 4]))
  if with_reference:
    src += (tf.constant(frames([20, 13], garbage=True, seed=seed)), tf.constant([20, 13]))
  return src


def test_style_embedding_is_appended_to_every_symbol_and_depends_on_the_reference():
  enc = gst_encoder()
  out = enc({"source_tensors": source()})
  x = out["outputs"].numpy()
  assert x.shape == (2, 7, 16 + 8)
  style = x[:, :, 16:]
  np.testing.assert_allclose(style[0], np.repeat(style[0, :1], 7, 0), atol=1e-6)
  np.testing.assert_allclose(style[1, :4], np.repeat(style[1, :1], 4, 0), atol=1e-6)
  assert np.all(x[1, 4:] == 0.0)  # padded symbols stay zero
  assert out["style_token_weights"].shape == (2, 2, 5)
  other = source(seed=3)
  other = source()[:2] + other[2:]
  changed = enc({"source_tensors": other})["outputs"].numpy()
  np.testing.assert_allclose(changed[:, :, :16], x[:, :, :16], atol=1e-6)  # text part
  assert np.abs(changed[:, :, 16:] - style).max() > 1e-4


def test_without_a_reference_the_encoder_says_what_to_set():
  with pytest.raises(ConfigError, match="style_input"):
    gst_encoder()({"source_tensors": source(with_reference=False)})


def test_token_weights_replace_the_reference_at_inference_only():
  weights = [0.0, 2.0, 0.0, 0.0, 0.0]
  enc = gst_encoder(mode="infer", token_weights=weights)
  out = enc({"source_tensors": source(with_reference=False)})
  token = out["outputs"].numpy()[0, 0, 16:]
  values = enc.style_tokens.token_values().numpy()[1].reshape(-1)  # token 1, every head
  expected = enc.style_tokens.output_layer(tf.constant(values[None])).numpy()[0]
  np.testing.assert_allclose(token, expected, atol=1e-5)
  np.testing.assert_allclose(out["style_token_weights"].numpy()[:, :, 1], 1.0)
  trained = gst_encoder(mode="train", token_weights=weights)
  with pytest.raises(ConfigError, match="style_input"):  # training reads references
    trained({"source_tensors": source(with_reference=False)})


@pytest.mark.parametrize("style,match", [
    ({"attention_layer_size": 9}, "multiple of num_heads"),
    ({"token_weights": [1.0, 2.0]}, "num_tokens"),
    ({"rnn_type": "simple"}, "neither"),
    ({"conv_layers": [{"kernel_size": [3], "num_channels": 4}]}, "kernel_size"),
])
def test_style_config_errors(style, match):
  with pytest.raises(ConfigError, match=match):
    gst_encoder(**style)


def test_style_defaults_are_the_papers():
  enc = Tacotron2Encoder({**ENCODER}, mode="eval", src_vocab_size=20)
  assert [c["num_channels"] for c in enc.style_params["conv_layers"]] == [32, 32, 64, 64,
                                                                           128, 128]
  assert (enc.style_params["num_tokens"], enc.style_params["num_heads"]) == (10, 4)


# ----------------------------------------------------------------------------- data layer
def layer_params(csv_path, directory, **extra):
  return {"dataset_files": [csv_path], "dataset_location": directory, "vocab_file": VOCAB,
          "output_type": "both", "num_audio_features": {"mel": MEL, "magnitude": 33},
          "sampling_rate": 16000, "n_fft": 64, "style_input": "wav", **extra}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp("gst"))
  csv_path = write_corpus(directory, ["one two", "three", "four five"], [0.3, 0.2, 0.25])
  return directory, csv_path


def batch_of(layer):
  return next(iter(layer.build_dataset()))


def test_training_references_are_the_utterances_own_mel_frames(corpus):
  layer = Text2SpeechDataLayer(layer_params(corpus[1], corpus[0]), mode="eval", batch_size=3)
  batch = batch_of(layer)
  ids, lengths, reference, ref_lengths = batch["source_tensors"]
  target, _, target_lengths = batch["target_tensors"]
  assert reference.shape[-1] == MEL
  assert np.all(ref_lengths.numpy() < target_lengths.numpy())  # speech only, no end frames
  for row, n in enumerate(ref_lengths.numpy()):
    np.testing.assert_array_equal(reference.numpy()[row, :n], target.numpy()[row, :n, :MEL])


def test_infer_reads_each_lines_wav_as_its_reference(corpus):
  evaluated = batch_of(Text2SpeechDataLayer(layer_params(corpus[1], corpus[0]), mode="eval",
                                            batch_size=3))
  layer = Text2SpeechDataLayer(layer_params(corpus[1], corpus[0]), mode="infer", batch_size=3)
  batch = batch_of(layer)
  assert "target_tensors" not in batch and len(batch["source_tensors"]) == 4
  for got, want in zip(batch["source_tensors"][2:], evaluated["source_tensors"][2:]):
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("mode", ["infer", "interactive_infer"])
def test_style_wav_is_every_sentences_reference(corpus, mode):
  directory, csv_path = corpus
  wav = os.path.join(directory, "wavs", "utt1.wav")
  layer = Text2SpeechDataLayer(layer_params(csv_path, directory, style_wav=wav), mode=mode,
                               batch_size=3)
  batch = next(iter(layer.dataset_from_inputs(["Hello.", "Hi there."]) if mode ==
                    "interactive_infer" else layer.build_dataset()))
  reference, lengths = batch["source_tensors"][2:]
  own = batch_of(Text2SpeechDataLayer(layer_params(csv_path, directory), mode="eval",
                                      batch_size=3))["source_tensors"]
  n = int(own[3][1])
  assert set(lengths.numpy().tolist()) == {n}
  for row in reference.numpy():
    np.testing.assert_allclose(row, own[2].numpy()[1, :n], atol=1e-5)


def test_interactive_without_style_wav_has_no_reference(corpus):
  layer = Text2SpeechDataLayer(layer_params(corpus[1], corpus[0]), mode="interactive_infer",
                               batch_size=2)
  batch = next(iter(layer.dataset_from_inputs(["Hello."])))
  assert len(batch["source_tensors"]) == 2


def test_style_wav_errors(corpus):
  directory, csv_path = corpus
  with pytest.raises(ConfigError, match="style_input"):
    Text2SpeechDataLayer(layer_params(csv_path, directory, style_input=None,
                                      style_wav=os.path.join(directory, "wavs", "utt0.wav")),
                         mode="infer")
  with pytest.raises(DataError, match="does not exist"):
    Text2SpeechDataLayer(layer_params(csv_path, directory, style_wav="/nonexistent.wav"),
                         mode="infer")
