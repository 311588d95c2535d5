"""End to end on synthetic speech through run.py: the shipped DeepSpeech2 config, shrunk by
overrides (one conv layer, one bidirectional GRU of 64, row convolution on) and trained with
its own augmentation (speed perturbation and noise), transcribes held-out utterances with a
WER far below what a model that learnt nothing gets (1.0 for blank output)."""

import os

import pytest

from tests.helpers import toy
from tests.helpers.speech import CONFIG_DIR, VOCAB, held_out_wer
from tests.learning.test_speech import workdir  # noqa: F401  (the synthetic corpus)

pytestmark = pytest.mark.slow

CONFIG = os.path.join(CONFIG_DIR, "ds2_small_1gpu.py")
DATA = "data/synthetic_speech"
# The config's model and training as shipped, but for the data and the size: a model that
# trains 400 steps in under a minute on 2 AMD cores (dev WER 0.12 at step 400, 0.09 at 600;
# the gate is 0.4).
OVERRIDES = [
    f"--data_layer_params/vocab_file={VOCAB}",
    f"--train_params/data_layer_params/dataset_files=['{DATA}/train.csv']",
    f"--eval_params/data_layer_params/dataset_files=['{DATA}/dev.csv']",
    f"--infer_params/data_layer_params/dataset_files=['{DATA}/test.csv']",
    "--data_layer_params/num_audio_features=40", "--data_layer_params/input_type=logfbank",
    "--data_layer_params/norm_per_feature=True",
    "--encoder_params/conv_layers=[{'kernel_size': [11, 11], 'stride': [2, 2], "
    "'num_channels': 8, 'padding': 'SAME'}]",
    "--encoder_params/num_rnn_layers=1", "--encoder_params/rnn_cell_dim=64",
    "--encoder_params/row_conv=True", "--encoder_params/n_hidden=128",
    "--encoder_params/dropout_keep_prob=0.9",
    "--lr_policy_params/learning_rate=0.003",  # the config's 1e-4 is for LibriSpeech's hours
    "--max_steps=400", "--batch_size_per_gpu=16", "--summaries=[]",
    "--eval_steps=200", "--print_loss_steps=50", "--print_samples_steps=200",
    "--save_checkpoint_steps=200", "--save_summaries_steps=100",
]


def run(workdir, mode, *extra):  # noqa: F811
  return toy.run_cli([f"--config_file={CONFIG}", f"--mode={mode}",
                      f"--logdir={workdir}/ds2_logdir", *OVERRIDES, *extra], cwd=workdir)


@pytest.fixture(scope="module")
def trained(workdir):  # noqa: F811
  result = run(workdir, "train_eval")
  assert result.returncode == 0, result.stderr[-3000:]
  return result


def test_trains_a_row_convolution_with_batch_norm(trained, workdir):  # noqa: F811
  import tensorflow as tf
  assert "eval at step 400" in trained.stdout and "WER" in trained.stdout
  checkpoint = tf.train.latest_checkpoint(os.path.join(workdir, "ds2_logdir"))
  shapes = {name: shape for name, shape in tf.train.list_variables(checkpoint)
            if "row_conv" in name and "optimizer" not in name}
  assert [s for n, s in shapes.items() if "conv..kernel" in n] == [[8, 128, 1]]  # 2 x 64
  assert any("norm..moving_variance" in n for n in shapes), sorted(shapes)


def test_learns_to_transcribe_held_out_speech(trained, workdir):  # noqa: F811
  output = os.path.join(workdir, "ds2_test_predictions.csv")
  result = run(workdir, "infer", f"--infer_output_file={output}")
  assert result.returncode == 0, result.stderr[-3000:]
  wer = held_out_wer(output, os.path.join(workdir, DATA, "test.csv"))
  assert wer < 0.4, f"held-out WER {wer:.3f}"
