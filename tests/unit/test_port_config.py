"""Porting OpenSeq2Seq (TF 1) configs: the renaming table, the rewriter, the two scripts."""

import importlib.util
import os
import re
import textwrap

import pytest

from open_seq2seq import config as cfg
from open_seq2seq import porting

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _script(name: str):
  spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "scripts", f"{name}.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


# A small Transformer config in OpenSeq2Seq's style, with TF 1 names in code, in comments
# and in strings (only those in code may change).
TF1_CONFIG = textwrap.dedent('''\
    # Toy Transformer for OpenSeq2Seq. tf.contrib.layers.xavier_initializer stays in comments.
    import tensorflow as tf
    from open_seq2seq.models import Text2Text
    from open_seq2seq.encoders import TransformerEncoder
    from open_seq2seq.decoders import TransformerDecoder
    from open_seq2seq.data.text2text.text2text import ParallelTextDataLayer, SpecialTextTokens
    from open_seq2seq.losses import PaddedCrossEntropyLossWithSmoothing
    from open_seq2seq.optimizers.lr_policies import transformer_policy

    base_model = Text2Text
    d_model = 32
    note = "tf.layers.dense and tf.nn.rnn_cell.LSTMCell inside a string"

    base_params = {
      "batch_size_per_gpu": 8,
      "max_steps": 20,
      "logdir": "toy-transformer",
      "dtype": tf.float32,
      "optimizer": tf.contrib.opt.LazyAdamOptimizer,  # was tf.train.AdamOptimizer
      "optimizer_params": {"beta1": 0.9, "beta2": 0.98, "epsilon": 1e-09},
      "lr_policy": transformer_policy,
      "lr_policy_params": {"learning_rate": 1.0, "warmup_steps": 10, "d_model": d_model},
      "regularizer": tf.contrib.layers.l2_regularizer,
      "regularizer_params": {'scale': 1e-4},
      "initializer": tf.contrib.layers.xavier_initializer,
      "encoder": TransformerEncoder,
      "encoder_params": {
        "encoder_layers": 1, "hidden_size": d_model, "num_heads": 2,
        "filter_size": 2 * d_model, "attention_dropout": 0.1, "relu_dropout": 0.1,
        "layer_postprocess_dropout": 0.1,
        "initializer": tf.random_uniform_initializer,
        "initializer_params": {"minval": -0.1, "maxval": 0.1},
      },
      "decoder": TransformerDecoder,
      "decoder_params": {
        "num_hidden_layers": 1, "hidden_size": d_model, "num_heads": 2,
        "filter_size": 2 * d_model, "attention_dropout": 0.1, "relu_dropout": 0.1,
        "layer_postprocess_dropout": 0.1, "beam_size": 2, "alpha": 0.6,
        "extra_decode_length": 2,
        "EOS_ID": SpecialTextTokens.EOS_ID.value,
        "GO_SYMBOL": SpecialTextTokens.S_ID.value,
        "END_SYMBOL": SpecialTextTokens.EOS_ID.value,
        "PAD_SYMBOL": SpecialTextTokens.PAD_ID.value,
      },
      "loss": PaddedCrossEntropyLossWithSmoothing,
      "loss_params": {"label_smoothing": 0.1},
    }

    _data = {"src_vocab_file": "vocab/src.txt", "tgt_vocab_file": "vocab/tgt.txt",
             "source_file": "train/src.txt", "target_file": "train/tgt.txt",
             "delimiter": " "}
    train_params = {"data_layer": ParallelTextDataLayer,
                    "data_layer_params": dict(_data, shuffle=True, repeat=True)}
    eval_params = {"data_layer": ParallelTextDataLayer,
                   "data_layer_params": dict(_data, shuffle=False, repeat=False)}
    ''')

EXPECTED_CHANGES = {
    "import tensorflow as tf\n": "import tensorflow as tf\nimport keras\n",
    '"optimizer": tf.contrib.opt.LazyAdamOptimizer,': '"optimizer": "LazyAdam",',
    '"regularizer": tf.contrib.layers.l2_regularizer,': '"regularizer": keras.regularizers.L2,',
    '"initializer": tf.contrib.layers.xavier_initializer,':
        '"initializer": keras.initializers.GlorotUniform,',
    '"initializer": tf.random_uniform_initializer,':
        '"initializer": keras.initializers.RandomUniform,',
}


@pytest.fixture(scope="module")
def ported():
  return porting.port_source(TF1_CONFIG)


def test_renames_only_code_names(ported):
  expected = TF1_CONFIG
  for old, new in EXPECTED_CHANGES.items():
    assert expected.count(old) == 1, old
    expected = expected.replace(old, new)
  assert ported.text == expected  # comments, strings and everything else byte for byte
  assert "tf.contrib.layers.xavier_initializer stays in comments" in ported.text
  assert "# was tf.train.AdamOptimizer" in ported.text
  assert ported.warnings == []


def test_one_note_per_rename_with_lines(ported):
  assert ported.notes[0].startswith('line 19: tf.contrib.opt.LazyAdamOptimizer -> "LazyAdam"')
  assert any(n.startswith("line 23: tf.contrib.layers.l2_regularizer -> keras.regularizers.L2 ")
             and "l2 = s/2" in n for n in ported.notes)
  assert ported.notes[-1] == "added: import keras"
  assert len(ported.notes) == 5


def test_ported_config_loads(ported, tmp_path):
  path = tmp_path / "toy_transformer.py"
  path.write_text(ported.text)
  model, configs = cfg.load_config(str(path), "train_eval")
  train = configs["train"]
  assert model.__name__ == "Text2Text"
  assert train["optimizer"] == "LazyAdam"
  assert train["regularizer_params"] == {"scale": 1e-4}  # kept as written
  assert train["encoder_params"]["initializer_params"] == {"minval": -0.1, "maxval": 0.1}
  assert configs["eval"]["data_layer_params"]["shuffle"] is False
  # The unported config does not load: TF 2 has no tf.contrib.
  original = tmp_path / "original.py"
  original.write_text(TF1_CONFIG)
  with pytest.raises(Exception, match="contrib"):
    cfg.load_config(str(original), "train")


def test_untranslatable_names_warn_with_line_numbers():
  text = textwrap.dedent('''\
      import tensorflow as tf
      params = {
        "cell": tf.contrib.rnn.LayerNormBasicLSTMCell,
        "x": tf.placeholder,
        "y": tf.nn.relu,
        "z": tf.contrib.rnn.LayerNormBasicLSTMCell,
      }
      ''')
  result = porting.port_source(text, resolve=None)
  assert result.text == text  # nothing it cannot translate is touched
  assert len(result.warnings) == 2
  assert re.match(r"lines 3, 6: tf\.contrib\.rnn\.LayerNormBasicLSTMCell: no TF 2 / Keras 3 "
                  r"equivalent \(Keras has no layer-normalised LSTM cell", result.warnings[0])
  assert result.warnings[1].startswith("line 4: tf.placeholder: no TF 2 / Keras 3 equivalent")


def test_called_optimizer_is_not_renamed_and_warns():
  text = 'import tensorflow as tf\nopt = tf.train.MomentumOptimizer(0.1, 0.9)\n'
  result = porting.port_source(text, resolve=None)
  assert result.text == text
  assert result.warnings == ['line 2: tf.train.MomentumOptimizer: called here, so not renamed: '
                             'give the name "Momentum" and move the arguments into the params '
                             'dict']


def test_compat_v1_alias_crlf_and_attributes_of_other_names():
  text = ('import tensorflow.compat.v1 as tf\r\nimport os\r\n'
          'a = tf.compat.v1.train.AdamOptimizer\r\nb = tf.layers.conv2d\r\n'
          'c = os.tf.layers.conv2d\r\n')
  result = porting.port_source(text, resolve=None)
  assert result.text == ('import tensorflow as tf\r\nimport keras\r\nimport os\r\n'
                         'a = "Adam"\r\nb = keras.layers.Conv2D\r\n'
                         'c = os.tf.layers.conv2d\r\n')


def test_non_ascii_text_and_declared_encoding_are_kept(tmp_path):
  text = 'é = 1; import tensorflow as tf\nx = "ü"; y = tf.layers.dense  # ö tf.layers.dense\n'
  assert porting.port_source(text, resolve=None).text == (
      'é = 1; import tensorflow as tf\nimport keras\n'
      'x = "ü"; y = keras.layers.Dense  # ö tf.layers.dense\n')
  source = tmp_path / "latin1.py"
  source.write_bytes("# -*- coding: latin-1 -*-\nimport tensorflow as tf\n"
                     "r = tf.contrib.layers.l1_regularizer  # café\n".encode("latin-1"))
  out = tmp_path / "out.py"
  assert _script("port_config").main([str(source), "-o", str(out), "--no-import-check"]) == 0
  assert out.read_bytes() == ("# -*- coding: latin-1 -*-\nimport tensorflow as tf\n"
                              "import keras\nr = keras.regularizers.L1  # café\n"
                              ).encode("latin-1")


def test_project_imports_moved_here_are_rewritten_and_missing_ones_reported():
  text = ("from open_seq2seq.decoders.fc_decoders import FullyConnectedDecoder, Other\n"
          "from open_seq2seq.encoders import NoSuchEncoder\n")
  where = {"FullyConnectedDecoder": "open_seq2seq.decoders",
           "Other": "open_seq2seq.decoders.fc_decoders"}
  result = porting.port_source(text, resolve=lambda module, name: where.get(name))
  assert result.text == ("from open_seq2seq.decoders.fc_decoders import Other\n"
                         "from open_seq2seq.decoders import FullyConnectedDecoder\n"
                         "from open_seq2seq.encoders import NoSuchEncoder\n")
  assert result.missing == [("open_seq2seq.encoders", "NoSuchEncoder")]
  assert result.warnings == ["line 2: open_seq2seq.encoders.NoSuchEncoder: not in this "
                             "project (yet)"]


def test_table_entries_name_real_keras_objects():
  import keras  # pylint: disable=import-outside-toplevel
  for key, rename in porting.RENAMES.items():
    if rename.new and rename.new.startswith("keras.") and not key.endswith("."):
      obj = keras
      for part in rename.new.split(".")[1:]:
        obj = getattr(obj, part)  # raises if the table names something Keras lacks


def test_docs_table_is_the_generated_one():
  with open(os.path.join(ROOT, "docs", "porting.md"), encoding="utf-8") as f:
    docs = f.read()
  match = re.search(r"<!-- renames:begin -->\n(.*?)\n<!-- renames:end -->", docs, re.S)
  assert match, "docs/porting.md lost its renaming-table markers"
  assert match.group(1) == porting.markdown_table(), (
      "docs/porting.md is stale: paste `python scripts/port_config.py --table` between the "
      "markers")


def test_port_config_writes_atomically(tmp_path, monkeypatch, capsys):
  port_config = _script("port_config")
  source = tmp_path / "tf1.py"
  source.write_text(TF1_CONFIG)
  out = tmp_path / "ported.py"
  out.write_text("old content\n")
  # A failure at the rename leaves the old file whole and no temporary file behind.
  monkeypatch.setattr(port_config.os, "replace",
                      lambda *a: (_ for _ in ()).throw(OSError(28, "No space left")))
  assert port_config.main([str(source), "-o", str(out)]) == 2
  assert out.read_text() == "old content\n"
  assert sorted(p.name for p in tmp_path.iterdir()) == ["ported.py", "tf1.py"]
  monkeypatch.undo()
  assert port_config.main([str(source), "-o", str(out)]) == 0
  assert out.read_text() == porting.port_source(TF1_CONFIG).text
  assert sorted(p.name for p in tmp_path.iterdir()) == ["ported.py", "tf1.py"]
  err = capsys.readouterr().err
  assert f"{source}: line 19: tf.contrib.opt.LazyAdamOptimizer -> \"LazyAdam\"" in err


def test_port_config_strict_exit_status(tmp_path, capsys):
  port_config = _script("port_config")
  source = tmp_path / "bad.py"
  source.write_text("import tensorflow as tf\nx = tf.contrib.rnn.NASCell\n")
  assert port_config.main([str(source), "--no-import-check"]) == 0
  assert port_config.main([str(source), "--no-import-check", "--strict"]) == 1
  assert "line 2: tf.contrib.rnn.NASCell: no TF 2 / Keras 3 equivalent" in capsys.readouterr().err


def test_check_script_classifies(tmp_path):
  check = _script("check_openseq2seq_configs")
  (tmp_path / "good.py").write_text(TF1_CONFIG)
  (tmp_path / "gap.py").write_text(TF1_CONFIG.replace('"max_steps": 20,',
                                                      '"max_steps": 20, "no_such_key": 1,'))
  (tmp_path / "missing.py").write_text(TF1_CONFIG.replace(
      "from open_seq2seq.encoders import TransformerEncoder",
      "from open_seq2seq.encoders import TransformerEncoder, NoSuchEncoder"))
  results = {name: check.check_config(str(tmp_path / name), str(tmp_path / "out" / name))
             for name in ("good.py", "gap.py", "missing.py")}
  assert results["good.py"]["result"] == "loads"
  assert results["good.py"]["modes"] == ["train", "eval"]
  assert results["gap.py"]["result"] == "gap"
  assert results["gap.py"]["errors"]["train"][0].startswith("no_such_key: unknown parameter")
  # every class OpenSeq2Seq's configs import exists now: an unknown one is charged to the
  # family of the config's model
  assert results["missing.py"]["result"] == "missing: translation RNN/ConvS2S (issue 11)"
  assert results["missing.py"]["detail"] == "NoSuchEncoder"
  table = check.report(results)
  assert "| `gap.py` | train, eval | gap |" in table


def test_check_script_reports_what_configs_print_after_its_table(tmp_path, capsys):
  """Issue 38: warnings printed while a config is loaded and built came before the table;
  they are the notices of their config, in the report."""
  check = _script("check_openseq2seq_configs")
  (tmp_path / "noisy.py").write_text(TF1_CONFIG + textwrap.dedent('''\
      import warnings
      print("warning: noisy.py says something while it loads")
      warnings.warn("a Python warning of noisy.py")
      '''))
  assert check.main([str(tmp_path)]) == 0
  out, err = capsys.readouterr()
  assert err == "" and out.startswith("| config | modes | result | detail |\n"), out[:300]
  notices = out.split("### Notices", 1)[1]
  assert "* `noisy.py`: warning: noisy.py says something while it loads" in notices
  assert "* `noisy.py`: UserWarning: a Python warning of noisy.py" in notices
