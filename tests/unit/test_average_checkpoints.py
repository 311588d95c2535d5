"""Checkpoint averaging (open_seq2seq/training/averaging.py, scripts/average_checkpoints.py):
the model's floating-point weights are the mean over the checkpoints, everything else comes
from the newest, the result restores through the project's own paths, and every refusal is
one line with exit status 2."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.errors import CheckpointError
from open_seq2seq.training.checkpoints import (CheckpointStore, checkpoint_for_eval,
                                               restore_model_weights)
from open_seq2seq.training.trainer import Trainer
from open_seq2seq.training import averaging
from tests.helpers import linear
from tests.helpers.speech import load_script

STEPS = (1, 2, 3, 4)


class _State:
  """Variables laid out as the trainer saves them: model/weights/<name>, optimizer/state/<i>,
  and an input pipeline position."""

  def __init__(self, kernel_shape=(2, 3), extra=False, loss_scaler=False):
    model = tf.Module()
    model.weights = {"kernel": tf.Variable(np.zeros(kernel_shape, np.float32)),
                     "half": tf.Variable(np.zeros(4, np.float16)),
                     "seed_state": tf.Variable(np.zeros(2, np.int64))}
    if extra:
      model.weights["bias"] = tf.Variable(np.zeros(3, np.float32))
    optimizer = tf.Module()
    optimizer.state = [tf.Variable(np.int64(0)), tf.Variable(np.zeros(kernel_shape, np.float32))]
    self.model, self.optimizer = model, optimizer
    self.iterator = iter(tf.data.Dataset.range(100))
    self.objects = {"model": model, "optimizer": optimizer, "data": self.iterator}
    if loss_scaler:  # e.g. added when a run is resumed in mixed precision
      self.objects["loss_scaler"] = tf.Variable(np.float32(2.0 ** 15))

  def set(self, step: int) -> None:
    """Values that depend on the step (and an iterator advanced ``step`` times)."""
    w = self.model.weights
    w["kernel"].assign(np.full(w["kernel"].shape, 0.1 * step, np.float32)
                       + np.arange(np.prod(w["kernel"].shape), dtype=np.float32).reshape(
                           w["kernel"].shape))
    w["half"].assign(np.array([0.3, -1.7, 2.9, 100.0], np.float16) * step)
    w["seed_state"].assign([7 * step, 1])
    self.optimizer.state[0].assign(step)
    self.optimizer.state[1].assign(np.full(w["kernel"].shape, -step, np.float32))
    next(self.iterator)


def _run(logdir, steps=STEPS, **kwargs):
  """A run whose checkpoint of step s holds _State.set(s)."""
  state = _State(**kwargs)
  store = CheckpointStore(str(logdir), state.objects, max_to_keep=10)
  for step in steps:
    state.set(step)
    store.save(step)
  return state


def _saved(path, name):
  return tf.train.load_checkpoint(str(path)).get_tensor(
      f"model/weights/{name}/.ATTRIBUTES/VARIABLE_VALUE")


def test_model_weights_are_the_mean_and_the_rest_comes_from_the_newest(tmp_path):
  _run(tmp_path / "run")
  out = tmp_path / "avg"
  chosen = averaging.last_checkpoints(str(tmp_path / "run"), 3)
  assert [os.path.basename(p) for p in chosen] == ["ckpt-2", "ckpt-3", "ckpt-4"]
  result = averaging.average_checkpoints(chosen, str(out))
  assert result.path == str(out / "ckpt-4") and result.sources == chosen
  assert checkpoint_for_eval(str(out), best=False) == result.path

  for name, dtype in (("kernel", np.float32), ("half", np.float16)):
    expected = np.mean([_saved(p, name).astype(np.float64) for p in chosen], axis=0)
    got = _saved(result.path, name)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected.astype(dtype), rtol=1e-7)
    assert not np.allclose(got, _saved(chosen[-1], name))  # (the test can fail)
  # integer model state, optimizer state and the data position: the newest's
  restored = _State()
  tf.train.Checkpoint(**restored.objects).restore(result.path).assert_consumed()
  assert restored.model.weights["seed_state"].numpy().tolist() == [28, 1]
  assert int(restored.optimizer.state[0].numpy()) == 4
  np.testing.assert_array_equal(restored.optimizer.state[1].numpy(), np.full((2, 3), -4.0))
  assert int(next(restored.iterator)) == 4  # the newest had read 0..3
  assert json.loads((out / "averaged.json").read_text())["steps"] == [2, 3, 4]


def test_explicit_checkpoints_are_ordered_by_step(tmp_path):
  _run(tmp_path / "run", steps=(2, 10, 100))
  run = tmp_path / "run"
  # as a shell glob gives them: ckpt-10, ckpt-100, ckpt-2
  given = [str(run / f"ckpt-{s}.index") for s in (10, 100, 2)]
  chosen = averaging.sorted_checkpoints(given)
  assert chosen == [str(run / f"ckpt-{s}") for s in (2, 10, 100)]
  result = averaging.average_checkpoints(chosen, str(tmp_path / "avg"))
  assert os.path.basename(result.path) == "ckpt-100"
  expected = np.mean([_saved(p, "kernel").astype(np.float64) for p in chosen], axis=0)
  np.testing.assert_allclose(_saved(result.path, "kernel"), expected.astype(np.float32),
                             rtol=1e-7)


def _linear_run(logdir, steps=3):
  trainer = linear.trainer(str(logdir), max_steps=steps, save_checkpoint_steps=1)
  model = trainer.model
  trainer.train(model.data_layer)


def test_average_of_a_trained_run_restores_for_eval_and_for_resuming(tmp_path):
  run, out = tmp_path / "run", tmp_path / "avg"
  _linear_run(run)
  (run / "config.yaml").write_text("train: {}\n")  # what cli.py writes beside checkpoints
  (run / "vocabularies.json").write_text('{"source": ["a"]}\n')  # and the trainer
  chosen = averaging.last_checkpoints(str(run), 2)
  averaging.average_checkpoints(chosen, str(out))
  assert (out / "config.yaml").read_text() == "train: {}\n"
  # load_model from the average remaps a changed vocabulary as from the run
  assert (out / "vocabularies.json").read_text() == '{"source": ["a"]}\n'
  kernel = "model/weights/encoder..kernel/.ATTRIBUTES/VARIABLE_VALUE"
  expected = np.mean([tf.train.load_checkpoint(p).get_tensor(kernel) for p in chosen], axis=0)

  # eval/infer: the model's weights only, through the project's own restore
  model = linear.model()
  model.create_variables(next(iter(model.data_layer.build_dataset())))
  step, _ = restore_model_weights(model, checkpoint_for_eval(str(out), best=False))
  assert step == 3
  np.testing.assert_allclose(model.encoder.kernel.numpy(), expected, rtol=1e-6)

  # --continue_learning from the average: optimizer and step of the newest
  trainer = linear.trainer(str(out), max_steps=3, save_checkpoint_steps=1)
  model = trainer.model
  trainer.build(next(iter(model.data_layer.build_dataset())))
  # pylint: disable-next=protected-access
  trainer._data_iterator = iter(model.data_layer.build_dataset())
  path, skipped = trainer.make_store(with_data=True).restore_latest()
  assert path == str(out / "ckpt-3") and not skipped and trainer.global_step == 3
  np.testing.assert_allclose(model.encoder.kernel.numpy(), expected, rtol=1e-6)


# ---------------------------------------------------------------------------- refusals
@pytest.fixture(name="script", scope="module")
def _script():
  return load_script("average_checkpoints")


def _refused(script, capsys, argv):
  assert script.main([str(a) for a in argv]) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: ") and err.count("\n") == 1, err
  return err


def test_script_prints_what_it_averaged(tmp_path, script, capsys):
  _run(tmp_path / "run")
  out = tmp_path / "avg"
  assert script.main(["--logdir", str(tmp_path / "run"), "--last_n", "2",
                      "--output_dir", str(out)]) == 0
  text = capsys.readouterr().out
  assert "ckpt-3" in text and "ckpt-4" in text and "ckpt-2" not in text
  assert f"wrote {out / 'ckpt-4'}" in text
  assert sorted(os.listdir(out)) == ["averaged.json", "checkpoint", "ckpt-4.data-00000-of-00001",
                                     "ckpt-4.index"]
  assert not [n for n in os.listdir(tmp_path) if "averaging" in n]  # no temporary left


def test_refuses_more_checkpoints_than_the_run_holds(tmp_path, script, capsys):
  _run(tmp_path / "run")
  err = _refused(script, capsys, ["--logdir", tmp_path / "run", "--last_n", 5,
                                  "--output_dir", tmp_path / "avg"])
  assert "holds 4 checkpoint(s)" in err and "--last_n 5" in err
  assert not (tmp_path / "avg").exists()


def test_refuses_an_output_dir_that_holds_a_checkpoint(tmp_path, script, capsys):
  _run(tmp_path / "run")
  _run(tmp_path / "other", steps=(9,))
  before = sorted(os.listdir(tmp_path / "other"))
  err = _refused(script, capsys, ["--logdir", tmp_path / "run", "--last_n", 2,
                                  "--output_dir", tmp_path / "other"])
  assert "already holds a checkpoint" in err
  assert sorted(os.listdir(tmp_path / "other")) == before


def test_refuses_the_runs_own_logdir(tmp_path, script, capsys):
  _run(tmp_path / "run")
  err = _refused(script, capsys, ["--logdir", tmp_path / "run", "--last_n", 2,
                                  "--output_dir", f"{tmp_path / 'run'}/"])
  assert "is the directory of" in err


def test_refuses_checkpoints_of_different_models(tmp_path, script, capsys):
  _run(tmp_path / "a", steps=(1,))
  _run(tmp_path / "b", steps=(2,), kernel_shape=(2, 4))
  _run(tmp_path / "c", steps=(3,), extra=True)
  err = _refused(script, capsys, ["--checkpoints", tmp_path / "a/ckpt-1", tmp_path / "b/ckpt-2",
                                  "--output_dir", tmp_path / "avg"])
  # (the optimizer slot differs too: only model keys must match, the rest is the newest's)
  assert "model/weights/kernel/.ATTRIBUTES/VARIABLE_VALUE (shape [2, 3] vs [2, 4]" in err
  err = _refused(script, capsys, ["--checkpoints", tmp_path / "a/ckpt-1", tmp_path / "c/ckpt-3",
                                  "--output_dir", tmp_path / "avg"])
  assert "model/weights/bias/.ATTRIBUTES/VARIABLE_VALUE (in ckpt-3 but not in ckpt-1)" in err
  assert not (tmp_path / "avg").exists()


def test_state_besides_the_model_may_differ(tmp_path):
  _run(tmp_path / "a", steps=(1,))
  _run(tmp_path / "b", steps=(2,), loss_scaler=True)
  result = averaging.average_checkpoints([str(tmp_path / "a/ckpt-1"), str(tmp_path / "b/ckpt-2")],
                                         str(tmp_path / "avg"))
  assert "loss_scaler/.ATTRIBUTES/VARIABLE_VALUE" in result.copied
  restored = _State(loss_scaler=True)
  tf.train.Checkpoint(**restored.objects).restore(result.path).assert_consumed()
  assert float(restored.objects["loss_scaler"].numpy()) == 2.0 ** 15


def test_refuses_a_run_without_checkpoints_and_a_missing_file(tmp_path, script, capsys):
  (tmp_path / "empty").mkdir()
  err = _refused(script, capsys, ["--logdir", tmp_path / "empty", "--last_n", 2,
                                  "--output_dir", tmp_path / "avg"])
  assert "no checkpoint found" in err
  err = _refused(script, capsys, ["--checkpoints", tmp_path / "empty/ckpt-5",
                                  "--output_dir", tmp_path / "avg"])
  assert "not a checkpoint" in err


def test_an_unreadable_checkpoint_is_named(tmp_path):
  _run(tmp_path / "run")
  open(tmp_path / "run" / "ckpt-3.data-00000-of-00001", "wb").close()  # emptied
  with pytest.raises(CheckpointError, match="ckpt-3 is unreadable"):
    averaging.average_checkpoints(averaging.last_checkpoints(str(tmp_path / "run"), 3),
                                  str(tmp_path / "avg"))
  assert not (tmp_path / "avg").exists()
  assert os.listdir(tmp_path) == ["run"]  # no temporary directory left behind


def test_an_existing_directory_without_a_checkpoint_is_filled(tmp_path):
  _run(tmp_path / "run")
  out = tmp_path / "avg"
  out.mkdir()
  (out / "notes.txt").write_text("mine\n")
  result = averaging.average_checkpoints(averaging.last_checkpoints(str(tmp_path / "run"), 2),
                                         str(out))
  assert checkpoint_for_eval(str(out), best=False) == result.path
  assert (out / "notes.txt").read_text() == "mine\n"
  assert sorted(os.listdir(tmp_path)) == ["avg", "run"]  # the temporary directory is gone
