"""Unreadable checkpoints (truncated data, flipped bytes, an empty index): one line naming
the file for eval/infer and load_model, a fall back to the newest readable one on resume
(the state file then lists it as the newest), and leftovers of a save cut short removed."""

import os

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.errors import CheckpointError
from open_seq2seq.training.checkpoints import (CheckpointStore, UnreadableCheckpoint,
                                               latest_checkpoint, load_pretrained,
                                               model_checkpoint_object, restore_model_weights)
from open_seq2seq.training.trainer import Trainer
from tests.helpers import linear


def _trained(logdir, steps=3):
  """A linear run with a checkpoint at every step (and its data position in each)."""
  trainer = linear.trainer(str(logdir), max_steps=steps, save_checkpoint_steps=1)
  model = trainer.model
  trainer.train(model.data_layer)
  return model


def _data_file(prefix):
  return f"{prefix}.data-00000-of-00001"


def _truncate(prefix):
  with open(_data_file(prefix), "r+b") as f:
    f.truncate(os.path.getsize(_data_file(prefix)) // 2)


def _flip(prefix, where):
  path = _data_file(prefix)
  data = bytearray(open(path, "rb").read())
  data[int(where * (len(data) - 1))] ^= 0xFF
  open(path, "wb").write(bytes(data))


def _empty_index(prefix):
  open(f"{prefix}.index", "wb").close()


CORRUPTIONS = {
    "truncated_data": _truncate,
    "first_byte_flipped": lambda p: _flip(p, 0.0),
    "middle_byte_flipped": lambda p: _flip(p, 0.5),
    "last_byte_flipped": lambda p: _flip(p, 1.0),
    "empty_index": _empty_index,
}


def _resumed(logdir, steps):
  trainer = linear.trainer(str(logdir), max_steps=steps, save_checkpoint_steps=1)
  model = trainer.model
  first = next(iter(model.data_layer.build_dataset()))
  trainer.build(first)
  # pylint: disable-next=protected-access
  trainer._data_iterator = iter(model.data_layer.build_dataset())
  store = trainer.make_store(with_data=True)
  return model, trainer, store


@pytest.mark.parametrize("corrupt", sorted(CORRUPTIONS))
def test_resume_falls_back_to_the_newest_readable_checkpoint(tmp_path, corrupt):
  _trained(tmp_path)
  newest = str(tmp_path / "ckpt-3")
  CORRUPTIONS[corrupt](newest)
  model, trainer, store = _resumed(tmp_path, 3)
  path, skipped = store.restore_latest()
  assert path == str(tmp_path / "ckpt-2") and trainer.global_step == 2
  assert [s.path for s in skipped] == [newest] and skipped[0].reason
  # the state file now lists ckpt-2 as the newest: eval reads it, and step 3 is saved anew
  assert latest_checkpoint(str(tmp_path)) == path
  assert store.save(3) == newest
  restore_model_weights(model, newest)


@pytest.mark.parametrize("corrupt", sorted(CORRUPTIONS))
def test_eval_and_load_model_name_the_unreadable_file(tmp_path, corrupt):
  # Eval reads the weights alone (a flipped byte in the optimizer's state does not stop it):
  # this checkpoint holds nothing else, so every corruption hits what eval reads.
  model = linear.model()
  model.create_variables(next(iter(model.data_layer.build_dataset())))
  CheckpointStore(str(tmp_path), {"model": model_checkpoint_object(model.named_layers)}).save(1)
  prefix = str(tmp_path / "ckpt-1")
  CORRUPTIONS[corrupt](prefix)
  with pytest.raises(UnreadableCheckpoint, match=f"checkpoint {prefix} is unreadable .*: it is "
                     "truncated or corrupt; --continue_learning falls back"):
    restore_model_weights(model, prefix)
  if corrupt != "empty_index":
    return  # load_model reads single tensors: it finds them intact when other bytes broke
  with pytest.raises(UnreadableCheckpoint, match=f"checkpoint {prefix} is unreadable"):
    load_pretrained(tf.train.Checkpoint(model=model_checkpoint_object(model.named_layers)),
                    str(tmp_path))


def test_no_readable_checkpoint_is_one_error(tmp_path):
  _trained(tmp_path, steps=2)
  for step in (1, 2):
    _truncate(str(tmp_path / f"ckpt-{step}"))
  _, _, store = _resumed(tmp_path, 2)
  with pytest.raises(CheckpointError, match=f"no checkpoint of {tmp_path} is readable"):
    store.restore_latest()


def test_folders_of_a_save_cut_short_are_removed_by_the_writers_first_save(tmp_path):
  for folder in ("ckpt-7_temp", "best_models/ckpt-5_temp", "keep_temp"):
    os.makedirs(tmp_path / folder)
  objects = {"w": tf.Variable(np.zeros(2, np.float32))}
  reader = CheckpointStore(str(tmp_path), objects, write=False)
  assert reader.save(1) is None
  assert reader.removed_partial_saves == [] and os.path.isdir(tmp_path / "ckpt-7_temp")
  writer = CheckpointStore(str(tmp_path), objects)
  # nothing is touched until the run writes (a benchmark never does)
  assert writer.removed_partial_saves == [] and os.path.isdir(tmp_path / "ckpt-7_temp")
  writer.save(1)
  assert sorted(writer.removed_partial_saves) == [str(tmp_path / "best_models/ckpt-5_temp"),
                                                  str(tmp_path / "ckpt-7_temp")]
  assert sorted(os.listdir(tmp_path)) == ["best_models", "checkpoint",
                                          "ckpt-1.data-00000-of-00001", "ckpt-1.index",
                                          "keep_temp"]


def test_a_checkpoint_set_aside_by_a_save_cut_short_is_moved_back(tmp_path):
  # A save over a checkpoint of the same step (one found unreadable, or the run's own best)
  # moves that one to ckpt-N_replaced/ until the new one is written; after a kill in between,
  # the writer puts it back before resuming.
  weights = tf.Variable(np.ones(2, np.float32))
  CheckpointStore(str(tmp_path), {"w": weights}).save(4)
  os.makedirs(tmp_path / "ckpt-4_replaced")
  for name in ("ckpt-4.index", "ckpt-4.data-00000-of-00001"):
    os.replace(tmp_path / name, tmp_path / "ckpt-4_replaced" / name)
  weights.assign([5.0, 5.0])
  store = CheckpointStore(str(tmp_path), {"w": weights})
  assert store.restore_latest() == (str(tmp_path / "ckpt-4"), [])
  assert weights.numpy().tolist() == [1.0, 1.0]
  assert not os.path.exists(tmp_path / "ckpt-4_replaced")
