"""How components receive keywords: sizes are offers, anything else unexpected is an error."""

import importlib
import inspect

import pytest

from open_seq2seq.decoders.transformer_decoder import TransformerDecoder, TransformerDecoderLayer
from open_seq2seq.encoders.transformer_encoder import TransformerEncoder, TransformerEncoderLayer
from open_seq2seq.losses import CTCLoss, PaddedCrossEntropyLossWithSmoothing
from open_seq2seq.utils.component import accepted_kwargs

PACKAGES = ("encoders", "decoders", "losses")


def _components() -> list[type]:
  found = []
  for package in PACKAGES:
    module = importlib.import_module(f"open_seq2seq.{package}")
    found += [getattr(module, name) for name in module.__all__
              if inspect.isclass(getattr(module, name))]
  return found


def test_accepted_kwargs_keeps_what_the_constructor_names():
  class Named:
    def __init__(self, params, *, vocab_size=None, mode="train"):
      pass

  offered = {"vocab_size": 5, "idx2char": {}}
  assert accepted_kwargs(Named, offered) == {"vocab_size": 5}
  assert accepted_kwargs(CTCLoss, offered) == {}
  assert accepted_kwargs(PaddedCrossEntropyLossWithSmoothing, offered) == {"vocab_size": 5}
  assert accepted_kwargs(lambda params, **kwargs: None, offered) == offered
  assert accepted_kwargs(lambda params: None, offered) == {}


def test_no_public_component_constructor_swallows_keywords():
  # With **kwargs a constructor is offered every size (accepted_kwargs) and could drop
  # what it does not use without a word.
  components = _components()
  assert len(components) > 30
  swallowing = [c.__name__ for c in components
                if any(p.kind is inspect.Parameter.VAR_KEYWORD
                       for p in inspect.signature(c).parameters.values())]
  assert swallowing == []


@pytest.mark.parametrize("component", _components(), ids=lambda c: c.__name__)
def test_an_unexpected_constructor_keyword_is_an_error_naming_it(component):
  with pytest.raises(TypeError) as error:
    component({}, vocab_sise=3)
  message = str(error.value)
  assert "'vocab_sise'" in message
  # Python names the constructor that refused it: the component's or a base class's.
  owner = message.split(".__init__()")[0]
  assert owner in {klass.__name__ for klass in component.__mro__}, message


@pytest.mark.parametrize("component,layer", [(TransformerEncoder, TransformerEncoderLayer),
                                             (TransformerDecoder, TransformerDecoderLayer)])
def test_transformer_layers_pass_their_keywords_to_keras_which_refuses_unknown_ones(component,
                                                                                   layer):
  # (params, initializer, **kwargs): the kwargs are Keras' (name, dtype), never dropped.
  depth = "encoder_layers" if component is TransformerEncoder else "num_hidden_layers"
  params = component.validate_params({"hidden_size": 8, "num_heads": 2, "filter_size": 16,
                                      depth: 1})
  assert layer(params, None, name="layer").name == "layer"
  with pytest.raises(ValueError, match=rf"{layer.__name__}.*vocab_sise"):
    layer(params, None, vocab_sise=3)
