"""The ``checkpoint`` state file missing or garbled: resume, eval and load_model find the
checkpoints from their files and say so; no run deletes or overwrites a checkpoint that is
not of its own line (an earlier run's is moved aside); a corrupt best.json on resume is moved
aside with a warning."""

import glob
import os

import pytest
import tensorflow as tf

from open_seq2seq.errors import CheckpointError
from open_seq2seq.training.checkpoints import (CheckpointStore, checkpoint_for_eval,
                                               latest_checkpoint, load_pretrained,
                                               model_checkpoint_object, restore_model_weights)
from tests.helpers import linear


def _train(logdir, steps, continue_learning=False, **params):
  trainer = linear.trainer(str(logdir), max_steps=steps, save_checkpoint_steps=1, **params)
  trainer.train(trainer.model.data_layer, continue_learning=continue_learning)
  return trainer


def _files(logdir):
  """name -> (size, mtime) of every checkpoint file."""
  return {os.path.basename(p): (os.path.getsize(p), os.path.getmtime(p))
          for p in glob.glob(os.path.join(str(logdir), "ckpt-*"))}


def _break_state(logdir, how):
  path = os.path.join(str(logdir), "checkpoint")
  if how == "removed":
    os.remove(path)
  elif how == "garbled":
    with open(path, "r+b") as f:
      f.write(b"\x00\xff garbage \x9c" * 3)
  elif how == "truncated":
    with open(path, "r+b") as f:
      f.truncate(7)
  else:  # lists a checkpoint whose files are gone
    with open(path, "a", encoding="utf-8") as f:
      f.write('model_checkpoint_path: "ckpt-9"\n')


STATES = ["removed", "garbled", "truncated", "lists_a_missing_checkpoint"]


@pytest.mark.parametrize("how", STATES)
def test_resume_continues_from_the_newest_checkpoint_and_keeps_the_older_ones(
    tmp_path, capsys, how):
  _train(tmp_path, 3)
  before = _files(tmp_path)
  _break_state(tmp_path, how)
  trainer = _train(tmp_path, 5, continue_learning=True, num_checkpoints=2)
  out = capsys.readouterr().out
  assert f"{tmp_path}/checkpoint is " + ("missing" if how == "removed" else "unreadable") in out
  assert "found checkpoints from their files (ckpt-1, ckpt-2, ckpt-3); resuming from the " \
         "newest that reads, ckpt-3" in out
  assert f"Restored {tmp_path}/ckpt-3 at step 3" in out
  assert trainer.global_step == 5
  after = _files(tmp_path)
  # what the run found is kept as it was, although num_checkpoints is 2; its own line
  # (ckpt-3 it resumed from, 4, 5) is rotated as usual
  assert {k: after.get(k) for k in before if not k.startswith("ckpt-3")} == \
         {k: v for k, v in before.items() if not k.startswith("ckpt-3")}
  assert sorted(after) == sorted(f"ckpt-{s}.{e}" for s in (1, 2, 4, 5)
                                 for e in ("index", "data-00000-of-00001"))
  assert latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-5")


@pytest.mark.parametrize("how", STATES)
def test_eval_and_load_model_find_the_newest_checkpoint_from_its_files(tmp_path, capsys, how):
  trained = _train(tmp_path, 3)
  _break_state(tmp_path, how)
  path = checkpoint_for_eval(str(tmp_path), best=False)
  assert path == str(tmp_path / "ckpt-3")
  assert "using " + path + ", the newest checkpoint found from its files" in \
         capsys.readouterr().out
  model = linear.model()
  model.create_variables(next(iter(model.data_layer.build_dataset())))
  assert restore_model_weights(model, path)[0] == 3
  loaded, _ = load_pretrained(tf.train.Checkpoint(
      model=model_checkpoint_object(model.named_layers)), str(tmp_path))
  assert loaded and trained.global_step == 3


def test_no_checkpoint_and_a_garbled_state_file_is_one_error(tmp_path):
  os.makedirs(tmp_path / "run")
  (tmp_path / "run" / "checkpoint").write_bytes(b"\xff\xfe")
  with pytest.raises(CheckpointError, match=r"run: no checkpoint found \(.*/run/checkpoint is "
                     r"unreadable \(.*\)\); train first"):
    checkpoint_for_eval(str(tmp_path / "run"), best=False)


def test_a_fresh_run_moves_an_earlier_runs_checkpoints_aside(tmp_path, capsys):
  _train(tmp_path, 3)
  before = _files(tmp_path)
  _train(tmp_path, 2)  # as --no_dir_check does: from scratch in a used logdir
  assert "moved the earlier run's checkpoints to" in capsys.readouterr().out
  aside, = glob.glob(str(tmp_path / "earlier_run-*"))
  assert _files(aside) == before  # nothing deleted or overwritten
  assert os.path.isfile(os.path.join(aside, "checkpoint"))
  assert latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-2")
  assert latest_checkpoint(aside) == os.path.join(aside, "ckpt-3")


def test_a_checkpoint_another_writer_made_is_not_overwritten(tmp_path):
  model = linear.model()
  model.create_variables(next(iter(model.data_layer.build_dataset())))
  objects = {"model": model_checkpoint_object(model.named_layers)}
  ours = CheckpointStore(str(tmp_path), objects)
  ours.save(1)
  other = CheckpointStore(str(tmp_path), objects)  # e.g. a second run into the same logdir
  other.restore_latest()
  other.save(2)
  before = _files(tmp_path)
  with pytest.raises(CheckpointError, match="ckpt-2 exists and was not written by this run"):
    ours.save(2)
  assert _files(tmp_path) == before


def _with_best(logdir):
  trainer = _train(logdir, 2)
  trainer.store.maybe_save_best("loss", 1.0, False, 2)
  return os.path.join(str(logdir), "best_models")


@pytest.mark.parametrize("damage", ["garbled_json", "not_a_record", "state_removed"])
def test_an_unreadable_best_model_record_is_moved_aside_on_resume(tmp_path, capsys, damage):
  best = _with_best(tmp_path)
  if damage == "garbled_json":
    with open(os.path.join(best, "best.json"), "w", encoding="utf-8") as f:
      f.write('{"metric": "loss", "val')
  elif damage == "not_a_record":
    with open(os.path.join(best, "best.json"), "w", encoding="utf-8") as f:
      f.write("[1, 2]\n")
  else:
    os.remove(os.path.join(best, "checkpoint"))
  trainer = _train(tmp_path, 3, continue_learning=True)
  out = capsys.readouterr().out
  assert "warning: " in out and "moved best_models/ to" in out and "(nothing deleted)" in out
  aside, = glob.glob(str(tmp_path / "unreadable_best_models-*"))
  assert os.path.isfile(os.path.join(aside, "best_models", "ckpt-2.index"))
  assert trainer.store.maybe_save_best("loss", 2.0, False, 3)  # a best is chosen afresh
  assert trainer.store.best_info()["step"] == 3


def test_a_corrupt_best_json_mid_run_is_one_error(tmp_path):
  best = _with_best(tmp_path)
  trainer = linear.trainer(str(tmp_path))
  store = CheckpointStore(str(tmp_path), {"model": model_checkpoint_object(
      trainer.model.named_layers)})
  with open(os.path.join(best, "best.json"), "w", encoding="utf-8") as f:
    f.write("{")
  with pytest.raises(CheckpointError, match=r"best.json is unreadable \(.*\): it records which "
                     r"checkpoint is the best; move .*best_models/ away"):
    store.best_info()
