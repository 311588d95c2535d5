"""A batch-norm Transformer (OpenSeq2Seq's transformer-bn norm_params, TF 1 names renamed)
trains on 2 CPU towers and evaluates (decoding with the moving statistics) through run.py."""

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers import toy

pytestmark = pytest.mark.slow

CONFIG = '''
import runpy

import keras

_toy = runpy.run_path({toy!r})
base_model = _toy["base_model"]
train_params, eval_params = _toy["train_params"], _toy["eval_params"]

norm_params = {{
    "type": "batch_norm",
    "momentum": 0.95,
    "epsilon": 0.00001,
    "center_scale": False,
    "regularizer": keras.regularizers.L2(0.0005),
}}
base_params = dict(_toy["base_params"])
base_params["encoder_params"] = {{**base_params["encoder_params"], "norm_params": norm_params,
                                  "remove_padding": True}}
base_params["decoder_params"] = {{**base_params["decoder_params"], "norm_params": norm_params}}
'''


def test_transformer_bn_trains_on_towers_and_evaluates(tmp_path):
  data = toy.make_toy_data(str(tmp_path / "data"), train=64, dev=16, test=16)
  config = tmp_path / "transformer_bn.py"
  config.write_text(CONFIG.format(toy=toy.TOY_CONFIG))
  logdir = str(tmp_path / "logdir")
  common = [f"--config_file={config}", f"--logdir={logdir}", *toy.TINY_MODEL,
            *toy.data_overrides(data)]
  trained = toy.run_cli([*common, "--mode=train_eval", "--max_steps=6",
                         "--save_checkpoint_steps=6", "--cpu_towers=2",
                         *toy.split_overrides(data, "train")])
  assert trained.returncode == 0, trained.stdout[-2000:] + trained.stderr[-3000:]
  assert "2 replica(s)" in trained.stdout
  assert "eval at step 6" in trained.stdout and "BLEU" in trained.stdout
  assert ("encoder_params/norm_params/regularizer: ignored: center_scale is False"
          in trained.stdout)

  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(logdir))
  names = reader.get_variable_to_shape_map()
  means = [n for n in names if n.startswith("model/") and "moving_mean/" in n]
  # encoder and decoder: one per sublayer (1 + 1 and 1 + 1 + 1) plus each final norm
  assert len(means) == 2 + 3 + 2, sorted(names)
  assert all(np.abs(reader.get_tensor(n)).max() > 0 for n in means)  # moved by training
  assert not [n for n in names if n.startswith("model/") and "/gamma/" in n]

