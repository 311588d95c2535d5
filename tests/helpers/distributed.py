"""Helpers for the distributed tests: a tiny model, its config, and ways to start runs.

The tiny encoder/decoder/loss train in milliseconds and have an embedding (sparse gradients
turned dense by the trainer), dense layers and a non-autoregressive decoder, which is all
the distribution code needs to be compared against a single process.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from open_seq2seq.decoders.decoder import Decoder
from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.losses.loss import Loss
from open_seq2seq.models.model import UpdateGroup
from open_seq2seq.models.text2text import Text2Text
from open_seq2seq.utils.params import Param

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GO_ID, EOS_ID = 2, 3
MAX_POSITIONS = 64


class TinyEncoder(Encoder):
  """Embedding + dense; also returns the length-masked mean of its outputs."""

  PARAMS = {**Encoder.PARAMS, "hidden_size": Param(int, 16, "Width.")}

  def __init__(self, params, *, vocab_size, mode="train", name="encoder", dtype="float32"):
    super().__init__(params, mode=mode, name=name, dtype=dtype)
    size = self.params["hidden_size"]
    self.embedding = keras.layers.Embedding(vocab_size, size, dtype=self.dtype_policy)
    self.dense = keras.layers.Dense(size, activation="tanh", dtype=self.dtype_policy)

  def call(self, input_dict, training=None):
    ids, lengths = input_dict["source_tensors"]
    outputs = self.dense(self.embedding(ids))
    mask = tf.sequence_mask(lengths, tf.shape(ids)[1], dtype=outputs.dtype)[:, :, None]
    pooled = tf.reduce_sum(outputs * mask, 1) / tf.cast(lengths, outputs.dtype)[:, None]
    return {"outputs": outputs, "src_lengths": lengths, "pooled": pooled}


class TinyDecoder(Decoder):
  """Predicts each target position from the source summary, a position and the previous
  target token (teacher forcing); at inference, from the summary and position only."""

  PARAMS = {**Decoder.PARAMS, "hidden_size": Param(int, 16, "Width.")}

  def __init__(self, params, *, vocab_size, mode="train", name="decoder", dtype="float32"):
    super().__init__(params, mode=mode, name=name, dtype=dtype)
    size = self.params["hidden_size"]
    self.embedding = keras.layers.Embedding(vocab_size, size, dtype=self.dtype_policy)
    self.positions = keras.layers.Embedding(MAX_POSITIONS, size, dtype=self.dtype_policy)
    self.hidden = keras.layers.Dense(size, activation="tanh", dtype=self.dtype_policy)
    self.logits = keras.layers.Dense(vocab_size, dtype=self.dtype_policy)

  def call(self, input_dict, training=None):
    pooled = input_dict["encoder_output"]["pooled"]
    if "target_tensors" in input_dict:
      targets, _ = input_dict["target_tensors"]
      previous = tf.concat([tf.fill([tf.shape(targets)[0], 1], GO_ID),
                            tf.cast(targets[:, :-1], tf.int32)], axis=1)
      steps = tf.shape(targets)[1]
      extra = self.embedding(previous)
    else:
      steps = tf.reduce_max(input_dict["encoder_output"]["src_lengths"]) + 2
      extra = 0.0
    state = pooled[:, None, :] + self.positions(tf.range(steps))[None] + extra
    logits = self.logits(self.hidden(state))
    outputs = tf.argmax(logits, axis=-1, output_type=tf.int32)
    # Each prediction is as long as its source (then EOS), whatever else is in the batch.
    lengths = input_dict["encoder_output"]["src_lengths"]
    outputs = tf.where(tf.sequence_mask(lengths, steps), outputs, EOS_ID)
    return {"logits": logits, "outputs": outputs, "final_sequence_lengths": lengths}


class TinyLoss(Loss):
  """Cross-entropy summed over real target tokens; weight = their number."""

  PARAMS = {}

  def compute_loss(self, input_dict):
    logits = tf.cast(input_dict["decoder_output"]["logits"], tf.float32)
    targets, lengths = input_dict["target_tensors"]
    mask = tf.sequence_mask(lengths, tf.shape(targets)[1], dtype=tf.float32)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(targets, tf.int32),
                                                            logits=logits)
    return tf.reduce_sum(losses * mask), tf.reduce_sum(mask)


class TwoOptimizerText2Text(Text2Text):
  """The tiny model trained by two update groups, as an adversarial model is: first the
  encoder ("critic", its own optimizer settings under ``optimizers/critic``) on a loss of its
  own (the cross-entropy plus a penalty on the pooled summary), then the decoder (the
  top-level settings, the global step) on the cross-entropy, which reads the encoder as the
  first update left it."""

  def update_groups(self):
    def critic_loss(batch, training):
      loss, weight, outputs = self.compute_loss(batch, training)
      encoded = self.encoder({"source_tensors": batch["source_tensors"]}, training=training)
      pooled = tf.cast(encoded["pooled"], tf.float32)
      return loss + tf.reduce_sum(tf.square(pooled)), weight, outputs

    return [UpdateGroup("critic", ("encoder",), critic_loss),
            UpdateGroup("generator", None, self.compute_loss)]


#: The run key that gives the critic its own settings (SGD, no clipping).
TWO_OPTIMIZERS = {"critic": {"optimizer": "SGD", "optimizer_params": {"learning_rate": 0.2},
                             "max_grad_norm": None}}


CONFIG_TEMPLATE = '''
from open_seq2seq.data.text2text.text2text import ParallelTextDataLayer
from open_seq2seq.models import Text2Text
from tests.helpers.distributed import TinyDecoder, TinyEncoder, TinyLoss

base_model = Text2Text
data = {data!r}

def layer(split, **extra):
  return {{"src_vocab_file": data + "/vocab/source.txt",
          "tgt_vocab_file": data + "/vocab/target.txt",
          "source_file": data + "/" + split + "/source.txt",
          "target_file": data + "/" + split + "/target.txt",
          "shuffle": False, "max_length": None, **extra}}

base_params = {{
    "random_seed": 0, "num_gpus": 1, "batch_size_per_gpu": 8, "max_steps": 3,
    "print_loss_steps": 1, "logdir": "unused", "save_checkpoint_steps": None,
    "optimizer": "Adam", "optimizer_params": {{"learning_rate": 0.05}},
    "max_grad_norm": 1.0,
    "encoder": TinyEncoder, "encoder_params": {{"hidden_size": 16}},
    "decoder": TinyDecoder, "decoder_params": {{"hidden_size": 16}},
    "loss": TinyLoss, "loss_params": {{}},
}}
train_params = {{"data_layer": ParallelTextDataLayer, "data_layer_params": layer("train")}}
eval_params = {{"data_layer": ParallelTextDataLayer, "eval_batch_size_per_gpu": 7,
               "data_layer_params": layer("dev")}}
infer_params = {{"data_layer": ParallelTextDataLayer, "eval_batch_size_per_gpu": 7,
                "data_layer_params": layer("test")}}
'''


def write_config(directory: str, data_dir: str, two_optimizers: bool = False) -> str:
  """The tiny config (with ``two_optimizers``: :class:`TwoOptimizerText2Text`, the critic's
  settings :data:`TWO_OPTIMIZERS`, and moving averages of the weights) in ``directory``;
  returns its path."""
  text = CONFIG_TEMPLATE.format(data=data_dir)
  name = "tiny_config.py"
  if two_optimizers:
    name = "tiny_two_optimizers_config.py"
    text += ("from tests.helpers.distributed import TwoOptimizerText2Text\n"
             "base_model = TwoOptimizerText2Text\n"
             f"base_params['optimizers'] = {TWO_OPTIMIZERS!r}\n"
             # and moving averages, updated once per step after the last group's update
             "base_params['moving_average_decay'] = 0.9\n")
  path = os.path.join(directory, name)
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return path


def make_data(directory: str) -> str:
  """Toy reversal data with uneven eval/infer sizes (shards differ in batch counts)."""
  subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "create_toy_data.py"),
                  "--data_dir", directory, "--train_size", "200", "--dev_size", "43",
                  "--test_size", "43", "--seed", "3"], check=True, capture_output=True)
  return directory


def environment(**extra: str) -> dict:
  env = {k: v for k, v in os.environ.items()
         if not k.startswith(("OMPI_", "PMI_", "PMIX_", "HOROVOD_")) and k != "TF_CONFIG"}
  env.update(TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, PYTHONUNBUFFERED="1",
             OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
             TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")
  env.update(extra)
  return env


def run_py() -> list[str]:
  return [os.path.join(ROOT, "run.py")]


def command(launcher: str, args: list[str]) -> list[str]:
  """``python run.py ARGS`` started as one process or as 2 ranks by ``launcher``."""
  if launcher == "single":
    return [sys.executable] + run_py() + args
  if launcher == "launch":
    return [sys.executable, "-m", "open_seq2seq.launch", "-np", "2", "--timeout", "400",
            *run_py(), *args]
  if launcher == "mpiexec":
    return ["mpiexec", "--oversubscribe", "-np", "2", sys.executable, *run_py(), *args]
  raise ValueError(launcher)


def run(launcher: str, args: list[str], timeout: float = 420,
        env: dict | None = None) -> subprocess.CompletedProcess:
  """Runs ``run.py ARGS`` as ``command`` starts it; ``env`` adds environment variables."""
  return subprocess.run(command(launcher, args), capture_output=True, text=True,
                        timeout=timeout, env=environment(**(env or {})), cwd=ROOT)


def weights(logdir: str) -> dict[str, np.ndarray]:
  """Every variable of the latest checkpoint (model weights and optimizer slots)."""
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(logdir))
  return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
          if k.endswith("VARIABLE_VALUE") and not k.startswith("save_counter")}


def max_difference(a: dict, b: dict) -> float:
  assert sorted(a) == sorted(b) and a, (sorted(a), sorted(b))
  return max(float(np.abs(a[k].astype(np.float64) - b[k]).max()) for k in a)


def eval_line(stdout: str) -> str:
  lines = [line for line in stdout.splitlines() if "eval at step" in line]
  assert lines, stdout[-2000:]
  return lines[-1][lines[-1].index("eval at step"):]


def have_mpiexec() -> bool:
  return shutil.which("mpiexec") is not None


def has_checkpoint(logdir: str) -> bool:
  """Whether ``logdir`` holds any checkpoint yet. (Waiting for one of a given step races with
  a fast run: a tiny model saves and rotates out ckpt-20 within a polling interval.)"""
  try:
    return any(n.startswith("ckpt-") and n.endswith(".index") for n in os.listdir(logdir))
  except FileNotFoundError:
    return False


def kill_group(proc: subprocess.Popen) -> None:
  """SIGKILL to ``proc``'s process group (started with ``start_new_session=True``): mpiexec
  and its ranks, none left running."""
  try:
    os.killpg(proc.pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  proc.communicate()


def wait_for(predicate, timeout: float, what: str) -> None:
  deadline = time.time() + timeout
  while time.time() < deadline:
    if predicate():
      return
    time.sleep(0.5)
  raise AssertionError(f"timed out after {timeout}s waiting for {what}")
