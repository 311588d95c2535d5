"""Every example speech config loads in every mode, builds at its published size and runs a
forward/backward step on tiny generated audio."""

import glob
import os
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import load_config
from tests.helpers.speech import CONFIG_DIR, write_corpus

CONFIGS = sorted(glob.glob(os.path.join(CONFIG_DIR, "*.py")))
PUBLISHED = ["ds2_small_1gpu.py", "ds2_large_8gpus_mp.py", "w2lplus_large_8gpus_mp.py",
             "jasper10x5_LibriSpeech_nvgrad.py", "quartznet15x5_LibriSpeech.py"]
# parameter counts of the published models (OpenSeq2Seq / papers), within 10%
EXPECTED_PARAMS = {"jasper10x5_LibriSpeech_nvgrad.py": 333e6, "quartznet15x5_LibriSpeech.py": 18.9e6}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  return write_corpus(str(tmp_path_factory.mktemp("configs")), ["one two", "three"],
                      durations=[0.6, 0.45])


def test_published_configs_exist():
  names = {os.path.basename(c) for c in CONFIGS}
  assert set(PUBLISHED) <= names


SMALL = {"w2l_toy_synthetic.py", "ds2_small_1gpu.py"}


@pytest.mark.parametrize("path", [
    c if os.path.basename(c) in SMALL else pytest.param(c, marks=pytest.mark.slow)
    for c in CONFIGS], ids=os.path.basename)
def test_config_builds_and_steps(path, corpus):
  overrides = [f"--data_layer_params/dataset_files=['{corpus}']", "--batch_size_per_gpu=2"]
  for mode in ("eval", "infer"):
    load_config(path, mode, overrides)
  base_model, configs = load_config(path, "train", overrides)
  model = base_model(configs["train"], "train")
  batch = next(iter(model.data_layer.build_dataset()))
  with tf.GradientTape() as tape:
    loss, weight, out = model.compute_loss(batch, training=True)
  grads = tape.gradient(loss, model.trainable_variables)
  assert np.isfinite(loss.numpy()) and weight.numpy() == 2
  assert out["logits"].shape[-1] == 29
  assert all(g is not None for g in grads)
  name = os.path.basename(path)
  if name in EXPECTED_PARAMS:
    count = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
    assert abs(count / EXPECTED_PARAMS[name] - 1) < 0.1, count
