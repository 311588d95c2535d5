"""``decoder_params/min_decode_length`` reaches the search of every translation decoder,
greedy and beam, and no decoded sequence ends before it (the search itself is tested
against exhaustive search in test_beam_search.py)."""

import numpy as np
import pytest

from open_seq2seq.errors import ConfigError
from open_seq2seq.parts import beam_search
from tests.helpers.text import EOS, batch_of, random_tokens, run
from tests.unit import test_convs2s, test_rnn_decoders, test_transformer

MIN_LENGTH = 4


def _transformer(beam, min_length):
  return test_transformer.build(decoder_params={"beam_size": beam, "extra_decode_length": 6,
                                                "min_decode_length": min_length})


def _convs2s(beam, min_length):
  return test_convs2s.build(decoder_params={"beam_size": beam, "extra_decode_length": 6,
                                            "min_decode_length": min_length})


def _decode_rnn(beam, min_length):
  decoder = test_rnn_decoders.build("luong", beam=True, beam_width=beam, extra_decode_length=6,
                                    min_decode_length=min_length)
  return test_rnn_decoders.infer(decoder, test_rnn_decoders.encoder_output([3, 1]))


def _decode(name, beam, min_length):
  if name == "rnn":
    return _decode_rnn(beam, min_length)
  model = {"transformer": _transformer, "convs2s": _convs2s}[name](beam, min_length)
  src = random_tokens(np.random.default_rng(0), [3, 1], 11)
  return run(model, batch_of(src, 11))[1]


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("name", ["transformer", "convs2s", "rnn"])
def test_no_sequence_ends_before_the_minimum(name, beam, monkeypatch):
  seen = []
  for function in ("beam_search", "greedy_decode"):
    real = getattr(beam_search, function)

    def spy(*args, _real=real, **kwargs):
      seen.append(kwargs.get("min_length"))
      return _real(*args, **kwargs)
    monkeypatch.setattr(beam_search, function, spy)
  out = _decode(name, beam, MIN_LENGTH)
  assert seen == [MIN_LENGTH]
  ids, lengths = out["outputs"].numpy(), out["final_sequence_lengths"].numpy()
  assert (lengths >= MIN_LENGTH).all()
  assert (ids[:, :MIN_LENGTH] != EOS).all()


@pytest.mark.parametrize("name", ["transformer", "convs2s", "rnn"])
def test_a_negative_minimum_is_a_config_error(name):
  with pytest.raises(ConfigError, match="min_decode_length"):
    _decode(name, 1, -1)
