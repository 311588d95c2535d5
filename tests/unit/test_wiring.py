"""The model wires its components: sizes, dtype and shared layers are pushed, never pulled."""

import ast
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import validate_top_level
from open_seq2seq.data.data_layer import DataLayer
from open_seq2seq.data.description import SpeechDescription, TextDescription
from open_seq2seq.decoders import FullyConnectedCTCDecoder, TransformerDecoder
from open_seq2seq.encoders import TransformerEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.losses import CTCLoss, PaddedCrossEntropyLossWithSmoothing
from open_seq2seq.models import Speech2Text, Text2Text
from open_seq2seq.utils.params import Param

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "open_seq2seq"
SIZES = dict(hidden_size=16, num_heads=2, filter_size=32)


class TextLayer(DataLayer):
  """Describes a corpus without reading one; remembers how the model built it."""

  PARAMS = {"src_vocab_size": Param(int, 13), "tgt_vocab_size": Param(int, 13)}

  @property
  def description(self) -> TextDescription:
    src, tgt = self.params["src_vocab_size"], self.params["tgt_vocab_size"]
    return TextDescription(src, tgt, {}, {}, {i: str(i) for i in range(src)},
                           {i: str(i) for i in range(tgt)})


class SpeechLayer(DataLayer):
  PARAMS = {}
  IDX2CHAR = {0: " ", 1: "a", 2: "b"}

  @property
  def description(self) -> SpeechDescription:
    return SpeechDescription(num_audio_features=8, tgt_vocab_size=4, idx2char=self.IDX2CHAR,
                             char2idx={c: i for i, c in self.IDX2CHAR.items()})


def text_model(mode="train", src=13, tgt=13, decoder_params=None, dtype="float32"):
  config = {
      "data_layer": TextLayer, "data_layer_params": {"src_vocab_size": src,
                                                     "tgt_vocab_size": tgt},
      "encoder": TransformerEncoder, "encoder_params": {"encoder_layers": 1, **SIZES},
      "decoder": TransformerDecoder,
      "decoder_params": {"num_hidden_layers": 1, **SIZES, **(decoder_params or {})},
      "loss": PaddedCrossEntropyLossWithSmoothing, "batch_size_per_gpu": 3,
      "random_seed": 7, "dtype": dtype,
  }
  return Text2Text(validate_top_level(Text2Text, config), mode)


# ------------------------------------------------------------------- no component holds the model
def _pulls_from_a_model(path: pathlib.Path) -> list[str]:
  """``model``/``data_layer`` names, arguments or attributes in a module's code."""
  found = []
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    name = (node.id if isinstance(node, ast.Name) else node.arg if isinstance(node, ast.arg)
            else node.attr if isinstance(node, ast.Attribute) else None)
    if name in ("model", "data_layer"):
      found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {name}")
  return found


def test_no_component_module_reads_the_model_or_the_data_layer():
  modules = [p for d in ("encoders", "decoders", "losses") for p in (PACKAGE / d).glob("*.py")]
  modules.append(PACKAGE / "utils" / "component.py")
  assert len(modules) > 10
  assert [hit for path in modules for hit in _pulls_from_a_model(path)] == []


# ------------------------------------------------------------------- components without a model
def test_ctc_decoder_built_without_a_model():
  decoder = FullyConnectedCTCDecoder({}, vocab_size=4, idx2char=SpeechLayer.IDX2CHAR)
  assert decoder.vocab_size == 4 and decoder.idx2char == SpeechLayer.IDX2CHAR
  assert decoder.params["beam_width"] == 16  # defaults filled by the base class
  out = decoder({"encoder_output": {"outputs": tf.zeros([2, 5, 3]),
                                    "src_lengths": tf.constant([5, 3])}})
  assert out["logits"].shape == (2, 5, 4)
  assert FullyConnectedCTCDecoder({"tgt_vocab_size": 6}, vocab_size=4).vocab_size == 6
  with pytest.raises(ConfigError, match=r"^decoder_params/tgt_vocab_size: unknown; [^\n]*$"):
    FullyConnectedCTCDecoder({})
  with pytest.raises(ConfigError, match=r"^decoder_params/tgt_vocab_size: must be a positive"):
    FullyConnectedCTCDecoder({}, vocab_size=0)


def test_component_dtype_comes_from_the_caller_and_params_override_it():
  mixed = FullyConnectedCTCDecoder({}, vocab_size=4, dtype="mixed_float16")
  assert mixed.compute_dtype == "float16"
  pinned = FullyConnectedCTCDecoder({"dtype": "float32"}, vocab_size=4, dtype="mixed_float16")
  assert pinned.compute_dtype == "float32"


# ------------------------------------------------------------------- the model wires
def test_text_model_hands_sizes_mode_and_seed_out():
  model = text_model(src=13, tgt=11, mode="eval")
  assert (model.encoder.vocab_size, model.decoder.vocab_size) == (13, 11)
  assert model.loss.vocab_size(tf.zeros([1, 1, 11])) == 11
  assert model.data_layer.random_seed == 7 and model.data_layer.mode == "eval"
  assert model.encoder.mode == model.decoder.mode == "eval"
  assert model.description.tgt_vocab_size == 11
  assert model.target_text([4, 5, 3]) == "4 5"


def test_interactive_infer_reaches_the_data_layer_components_infer():
  model = text_model(mode="interactive_infer")
  assert model.data_layer.mode == "interactive_infer"
  assert model.decoder.mode == "infer"


def test_model_dtype_reaches_the_components():
  model = text_model(dtype="mixed_bfloat16")
  assert model.encoder.compute_dtype == model.decoder.compute_dtype == "bfloat16"


def test_configured_size_wins_over_the_description():
  model = text_model(tgt=11, decoder_params={"tgt_vocab_size": 9})
  assert model.decoder.vocab_size == 9


def test_shared_embeddings_are_one_set_of_variables():
  model = text_model(decoder_params={"shared_embed": True})
  assert model.decoder.embedding is model.encoder.embedding_softmax_layer
  variables = model.trainable_variables
  assert len({id(v) for v in variables}) == len(variables)
  embeddings = [v for v in variables if "embedding" in v.path]
  assert len(embeddings) == 1 and embeddings[0].path.startswith("transformer_encoder/")
  src = (tf.constant([[4, 5, 3]]), tf.constant([3]))
  out = model.decoder({"encoder_output": model.encoder({"source_tensors": src}),
                       "target_tensors": src})
  assert np.isfinite(out["logits"].numpy()).all()


def test_shared_embeddings_with_different_sizes_is_a_one_line_error():
  with pytest.raises(ConfigError) as error:
    text_model(src=13, tgt=11, decoder_params={"shared_embed": True})
  message = str(error.value)
  assert "\n" not in message
  assert message.startswith("decoder_params/shared_embed: source (13) and target (11)")


def test_text_model_needs_a_text_description():
  config = {"data_layer": SpeechLayer, "encoder": TransformerEncoder,
            "encoder_params": {"encoder_layers": 1, **SIZES}, "decoder": TransformerDecoder,
            "decoder_params": {"num_hidden_layers": 1, **SIZES}, "batch_size_per_gpu": 2}
  with pytest.raises(ConfigError, match="^data_layer: Text2Text needs .*TextDescription"):
    Text2Text(validate_top_level(Text2Text, config), "train")


def test_speech_model_hands_the_alphabet_to_the_ctc_decoder():
  config = {"data_layer": SpeechLayer, "encoder": TransformerEncoder,
            "encoder_params": {"encoder_layers": 1, **SIZES, "src_vocab_size": 8},
            "decoder": FullyConnectedCTCDecoder, "loss": CTCLoss, "batch_size_per_gpu": 2}
  model = Speech2Text(validate_top_level(Speech2Text, config), "train")
  assert model.decoder.vocab_size == 4
  assert model.decoder.idx2char == SpeechLayer.IDX2CHAR
  assert isinstance(model.loss, CTCLoss)  # offered nothing it does not take
