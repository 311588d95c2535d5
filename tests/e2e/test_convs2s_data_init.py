"""ConvS2S with data-dependent weight-norm initialization through run.py: the moments come
from the whole global batch (towers, TF multi-worker and Horovod give the weights of one
process with the same global batch), and a resumed run keeps its checkpoint's values
instead of initializing again (so it equals an uninterrupted run).

The model is OpenSeq2Seq's toy-reversal CC config at width 32, dropout off (replicas would
draw different masks), on the distributed tests' toy data.
"""

import os

import pytest

from tests.e2e.test_distributed_training import (WEIGHT_TOLERANCE, needs_horovod, _check)
from tests.helpers import distributed as h
from tests.helpers import toy

pytestmark = pytest.mark.slow

CONFIG = os.path.join(toy.ROOT, "example_configs", "text2text", "toy-reversal",
                      "nmt-reversal-CC.py")
INIT_LINE = "Data-dependent initialization of"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  return h.make_data(str(tmp_path_factory.mktemp("convs2s_init") / "data"))


def _args(data_dir, logdir, batch, *extra):
  side = {"encoder": "src_emb_size", "decoder": "tgt_emb_size"}
  model = []
  for name, width_key in side.items():
    model += [f"--{name}_params/{width_key}=32",
              f"--{name}_params/conv_nchannels_kwidth=[(32, 3), (32, 3)]",
              f"--{name}_params/weight_norm_init=data",
              f"--{name}_params/embedding_dropout_keep_prob=1.0",
              f"--{name}_params/hidden_dropout_keep_prob=1.0"]
  return ([f"--config_file={CONFIG}", "--mode=train", f"--logdir={logdir}",
           "--random_seed=0", "--decoder_params/out_dropout_keep_prob=1.0", "--summaries=[]",
           "--save_summaries_steps=None", "--print_samples_steps=None",
           "--print_loss_steps=1", "--data_layer_params/shuffle=False",
           "--data_layer_params/max_length=None", f"--batch_size_per_gpu={batch}"] +
          toy.data_overrides(data_dir) + toy.split_overrides(data_dir, "train") + model +
          list(extra))


@pytest.fixture(scope="module")
def single(data, tmp_path_factory):
  """One process, global batch 16, 2 steps."""
  logdir = str(tmp_path_factory.mktemp("convs2s_init_single") / "run")
  result = _check(h.run("single", _args(data, logdir, 16, "--max_steps=2")))
  assert result.stdout.count(INIT_LINE) == 1
  return logdir


@pytest.mark.parametrize("launcher,extra", [
    pytest.param("single", ["--cpu_towers=2"], id="towers"),
    pytest.param("launch", [], id="multi_worker"),
    pytest.param("mpiexec", ["--use_horovod=True"], id="horovod", marks=needs_horovod),
])
def test_initialization_uses_the_global_batch(data, single, launcher, extra, tmp_path):
  # Moments of one replica's half of the batch would give other g and b (by ~1e-2).
  logdir = str(tmp_path / "run")
  result = _check(h.run(launcher, _args(data, logdir, 8, "--max_steps=2", *extra)))
  assert "2 replica(s)" in result.stdout
  assert result.stdout.count(INIT_LINE) == 1  # the chief alone logs it
  difference = h.max_difference(h.weights(logdir), h.weights(single))
  assert difference < WEIGHT_TOLERANCE, difference


def test_a_resumed_run_keeps_its_checkpoint_values(data, tmp_path):
  straight, split = str(tmp_path / "straight"), str(tmp_path / "split")
  _check(h.run("single", _args(data, straight, 16, "--max_steps=4")))
  _check(h.run("single", _args(data, split, 16, "--max_steps=2")))
  resumed = _check(h.run("single", _args(data, split, 16, "--max_steps=4",
                                         "--continue_learning")))
  assert INIT_LINE not in resumed.stdout
  assert h.max_difference(h.weights(split), h.weights(straight)) < 1e-5
