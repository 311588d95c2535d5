"""Decoding with carried state: a streaming Conformer's chunk-by-chunk transcripts (CTC best
path, transducer greedy search) equal the whole utterance's."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.decoders import TransducerDecoder
from open_seq2seq.decoders.fc_decoders import FullyConnectedCTCDecoder
from open_seq2seq.encoders import ConformerEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.conformer.recognizer import CTCStreamDecoder, StreamingRecognizer
from tests.helpers.speech import padded_features

NUM_FEATURES = 20
LENGTHS = [61, 16, 40, 1, 33]
VOCAB = 6  # 5 labels and the blank
ENCODER = {"d_model": 32, "num_layers": 2, "num_heads": 4, "conv_kernel_size": 5,
           "subsampling_channels": 8, "dropout": 0.0, "attention_dropout": 0.0,
           "conv_causal": True, "conv_norm_type": "layer_norm", "att_context_size": [2, 1]}
TRANSDUCER = {"pred_hidden": 16, "joint_hidden": 16, "pred_dropout": 0.0,
              "joint_dropout": 0.0, "max_symbols_per_step": 3}


def models(kind):
  keras.utils.set_random_seed(1)
  encoder = ConformerEncoder(ENCODER, mode="infer")
  if kind == "ctc":
    decoder = FullyConnectedCTCDecoder({}, vocab_size=VOCAB, mode="infer")
  else:
    decoder = TransducerDecoder(TRANSDUCER, vocab_size=VOCAB, mode="infer")
  return encoder, decoder


def rows(ids, counts):
  return [list(ids[i, :n]) for i, n in enumerate(counts)]


def whole_utterance(encoder, decoder, x):
  encoded = encoder({"source_tensors": (tf.constant(x), tf.constant(LENGTHS))})
  out = decoder({"encoder_output": encoded})
  return rows(out["outputs"].numpy(), out["final_sequence_lengths"].numpy()), out


def chunk_by_chunk(recognizer, x, chunks_per_step=1):
  step = recognizer.chunk_frames * chunks_per_step
  steps = -(-x.shape[1] // step)
  x = np.pad(x, [(0, 0), (0, steps * step - x.shape[1]), (0, 0)])
  state = recognizer.initial_state(len(LENGTHS), NUM_FEATURES)
  transcripts = [[] for _ in LENGTHS]
  for i in range(steps):
    lengths = np.clip(np.array(LENGTHS) - i * step, 0, step).astype(np.int32)
    ids, counts, state = recognizer.step(tf.constant(x[:, i * step:(i + 1) * step]),
                                         tf.constant(lengths), state)
    for row, labels in enumerate(rows(ids.numpy(), counts.numpy())):
      transcripts[row] += labels
  return transcripts, state


@pytest.mark.parametrize("kind", ["ctc", "transducer"])
def test_chunk_by_chunk_transcripts_equal_the_whole_utterance(kind):
  encoder, decoder = models(kind)
  x = padded_features(LENGTHS, NUM_FEATURES, garbage=True, seed=2)
  reference, out = whole_utterance(encoder, decoder, x)
  assert sum(len(r) for r in reference) >= 10  # the random model says something
  recognizer = StreamingRecognizer(encoder, decoder)
  for per_step in (1, 3):
    transcripts, state = chunk_by_chunk(recognizer, x, per_step)
    assert transcripts == reference
  if kind == "transducer":  # the carried score is the whole search's
    np.testing.assert_allclose(state["decoder_score"].numpy(), out["scores"].numpy(),
                               rtol=1e-5, atol=1e-4)


def test_ctc_merges_a_label_repeated_across_a_chunk_boundary():
  """Chunks [a a | a b] -> a b; [a blank | a] -> a a; an empty chunk keeps the last class."""
  keras.utils.set_random_seed(0)
  decoder = FullyConnectedCTCDecoder({}, vocab_size=3, mode="infer")
  ctc = CTCStreamDecoder(decoder, 3)
  decoder.fc.kernel.assign(np.eye(3, dtype=np.float32))
  decoder.fc.bias.assign(np.zeros(3, np.float32))
  a, b, blank = np.eye(3, dtype=np.float32)
  chunks = [np.stack([[a, a], [a, blank]]), np.stack([[a, b], [a, a]]),
            np.stack([[b, b], [b, b]])]
  state, got = ctc.initial_state(2), [[], []]
  for chunk, lengths in zip(chunks, ([2, 2], [2, 1], [0, 0])):
    ids, counts, state = ctc.step(tf.constant(chunk), tf.constant(lengths), state)
    for row, labels in enumerate(rows(ids.numpy(), counts.numpy())):
      got[row] += labels
  assert got == [[0, 1], [0, 0]]
  np.testing.assert_array_equal(state["last"].numpy(), [1, 0])


def test_decoders_that_look_ahead_are_refused():
  encoder, decoder = models("transducer")
  decoder.params["use_beam_search"] = True
  with pytest.raises(ConfigError, match="use_beam_search: streaming decodes a transducer"):
    StreamingRecognizer(encoder, decoder)
  encoder, decoder = models("ctc")
  decoder.params["use_beam_search"] = True
  with pytest.raises(ConfigError, match="streaming decodes CTC greedily"):
    StreamingRecognizer(encoder, decoder)
  full = ConformerEncoder({**ENCODER, "att_context_size": None}, mode="infer")
  with pytest.raises(ConfigError, match="streaming needs att_context_size"):
    StreamingRecognizer(full, decoder)
