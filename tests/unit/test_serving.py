"""What cannot be exported says so in one line (--mode=export), and the export directory is
checked before anything is built."""

import types

import pytest

from open_seq2seq.errors import ConfigError
from open_seq2seq.models.image2label import Image2Label
from open_seq2seq.models.lstm_lm import LSTMLM
from open_seq2seq.models.text2speech import Text2Speech
from open_seq2seq.serving.export import check_export_dir


def test_a_family_without_a_serving_adapter_cannot_be_exported():
  stub = LSTMLM.__new__(LSTMLM)  # the hook needs nothing built
  with pytest.raises(ConfigError, match="LSTMLM models cannot be exported yet"):
    stub.serving_adapter()


def test_image2label_over_a_data_layer_without_eval_preprocessing():
  model = types.SimpleNamespace(data_layer=types.SimpleNamespace())
  with pytest.raises(ConfigError, match="has no in-graph eval preprocessing"):
    Image2Label.serving_adapter(model)


@pytest.mark.parametrize("params,cmudict,match", [
    ({"style_input": "wav"}, None, "style reference"),
    ({"style_input": None}, object(), "CMU dictionary"),
])
def test_text2speech_front_ends_outside_the_graph(params, cmudict, match):
  layer = types.SimpleNamespace(params=params, text=types.SimpleNamespace(cmudict=cmudict))
  with pytest.raises(ConfigError, match=match):
    Text2Speech.serving_adapter(types.SimpleNamespace(data_layer=layer))


def test_export_dir_must_be_new_and_its_parent_must_exist(tmp_path):
  with pytest.raises(ConfigError, match="needs --export_dir"):
    check_export_dir(None)
  with pytest.raises(ConfigError, match="already exists"):
    check_export_dir(str(tmp_path))
  with pytest.raises(ConfigError, match="does not exist"):
    check_export_dir(str(tmp_path / "missing" / "export"))
  assert check_export_dir(str(tmp_path / "new")) == str(tmp_path / "new")
