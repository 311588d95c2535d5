"""``graph_optimizations`` (training/graph_optimizations.py): off, the process's functions run
without Grappler, compute the same, and the trainer's start line says so; the setting is a
run key that a later command of the run does not inherit."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import load_config
from open_seq2seq.run_settings import NOT_REMEMBERED
from open_seq2seq.training import graph_optimizations
from tests.helpers import linear, toy


@pytest.fixture
def restored():
  """Leaves the process as it found it (the rest of the session runs with its default)."""
  before = graph_optimizations.enabled()
  yield
  graph_optimizations.apply(before)


@pytest.mark.usefixtures("restored")
def test_apply_turns_the_meta_optimizer_off_and_on():
  graph_optimizations.apply(False)
  assert not graph_optimizations.enabled()
  assert tf.config.optimizer.get_experimental_options()["disable_meta_optimizer"] is True
  graph_optimizations.apply(True)
  assert graph_optimizations.enabled()


@pytest.mark.usefixtures("restored")
def test_a_function_computes_the_same_without_it():
  x = tf.constant(np.arange(12, dtype=np.float32).reshape(3, 4))

  def fold(x):  # constant folding and arithmetic rewrites have something to do here
    return tf.reduce_sum(tf.matmul(x, tf.ones([4, 2])) * 2.0 + tf.constant(3.0) * 4.0, axis=1)

  results = []
  for enabled in (True, False):
    graph_optimizations.apply(enabled)
    results.append(tf.function(fold)(x).numpy())  # a new function: optimized at first call
  np.testing.assert_array_equal(*results)


@pytest.mark.usefixtures("restored")
def test_the_start_line_says_when_it_is_off(tmp_path, capsys):
  for enabled, logdir in ((True, tmp_path / "on"), (False, tmp_path / "off")):
    graph_optimizations.apply(enabled)
    trainer = linear.trainer(str(logdir), max_steps=1)
    trainer.train(trainer.model.data_layer)
    line = next(l for l in capsys.readouterr().out.splitlines() if "Training " in l)
    assert line.endswith("backend single)" if enabled else
                         "backend single, graph optimizations off)"), line


def test_it_is_a_run_key_on_by_default_and_not_remembered():
  data = toy.data_overrides("/nonexistent")
  assert load_config(toy.TOY_CONFIG, "train", data)[1]["train"]["graph_optimizations"] is True
  off = load_config(toy.TOY_CONFIG, "train", data + ["--graph_optimizations=False"])
  assert off[1]["train"]["graph_optimizations"] is False
  assert "graph_optimizations" in NOT_REMEMBERED
