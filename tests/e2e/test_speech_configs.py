"""The published speech configs are shipped and build at their published sizes.

Loading every mode, training steps, eval and infer of every example config (speech included)
through run.py are in tests/e2e/test_example_configs.py; this file only builds the models
whose size was published and counts their parameters (one forward pass, no step).
"""

import glob
import os

import numpy as np
import pytest

from open_seq2seq.config import load_config
from tests.helpers.speech import CONFIG_DIR, write_corpus

CONFIGS = sorted(glob.glob(os.path.join(CONFIG_DIR, "*.py")))
PUBLISHED = ["ds2_small_1gpu.py", "ds2_large_8gpus_mp.py", "w2lplus_large_8gpus_mp.py",
             "jasper10x5_LibriSpeech_nvgrad.py", "quartznet15x5_LibriSpeech.py"]
# parameter counts of the published models (OpenSeq2Seq / papers), within 10%
EXPECTED_PARAMS = {"jasper10x5_LibriSpeech_nvgrad.py": 333e6,
                   "quartznet15x5_LibriSpeech.py": 18.9e6}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  return write_corpus(str(tmp_path_factory.mktemp("configs")), ["one two", "three"],
                      durations=[0.6, 0.45])


def test_published_configs_exist():
  names = {os.path.basename(c) for c in CONFIGS}
  assert set(PUBLISHED) <= names


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED_PARAMS))
def test_config_builds_at_its_published_size(name, corpus):
  overrides = [f"--data_layer_params/dataset_files=['{corpus}']", "--batch_size_per_gpu=2"]
  base_model, configs = load_config(os.path.join(CONFIG_DIR, name), "eval", overrides)
  model = base_model(configs["eval"], "eval")
  model.create_variables(next(iter(model.data_layer.build_dataset())))
  count = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
  assert abs(count / EXPECTED_PARAMS[name] - 1) < 0.1, count
