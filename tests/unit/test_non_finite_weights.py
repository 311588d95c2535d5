"""No checkpoint ever holds a NaN or an infinity: a save of non-finite weights is a
DivergenceError (the newest checkpoint stays the last good one), eval of such a checkpoint
is a CheckpointError, and a finite loss that explodes gets one warning line."""

import os

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.distributed.backend import Backend
from open_seq2seq.errors import CheckpointError, DivergenceError
from open_seq2seq.training.checkpoints import (CheckpointStore, model_checkpoint_object,
                                               named_variables)
from open_seq2seq.training.evaluator import Evaluator
from open_seq2seq.training.trainer import Trainer
from tests.helpers import linear


def _checkpoints(logdir):
  return sorted(n for n in os.listdir(logdir) if n.endswith(".index"))


def _built(tmp_path, **params):
  trainer, _ = linear.built(str(tmp_path), **params)
  model = trainer.model
  trainer.make_store()
  return model, trainer


def test_non_finite_weights_are_never_saved(tmp_path):
  model, trainer = _built(tmp_path)
  trainer.store.save(1)
  kernel = model.encoder.kernel
  kernel.assign(tf.tensor_scatter_nd_update(kernel, [[0, 1]], [np.nan]))
  with pytest.raises(DivergenceError, match=r"step 2: 1 weight variable\(s\) are not finite "
                     r"\(encoder.kernel\): not saved, the newest checkpoint is still .*ckpt-1"):
    trainer.store.save(2)
  with pytest.raises(DivergenceError, match="not finite"):
    trainer.store.maybe_save_best("loss", 0.5, higher_is_better=False, step=2)
  assert _checkpoints(tmp_path) == ["ckpt-1.index"]
  assert not os.path.exists(tmp_path / "best_models")


def test_a_nan_metric_is_never_the_best(tmp_path):
  _, trainer = _built(tmp_path)
  assert not trainer.store.maybe_save_best("loss", float("nan"), False, step=1)
  assert trainer.store.best_info() is None


def test_an_update_that_overflows_the_weights_stops_training_unsaved(tmp_path):
  # The first loss is finite; lr * gradient overflows float32, so the weights become inf.
  trainer = linear.trainer(str(tmp_path), optimizer_params={"learning_rate": 3e38},
                           max_steps=3, save_checkpoint_steps=1)
  model = trainer.model
  with pytest.raises(DivergenceError, match="step 1: .* not finite .* newest checkpoint is "
                     "still none"):
    trainer.train(model.data_layer)
  assert _checkpoints(tmp_path) == []


def test_evaluating_a_non_finite_checkpoint_is_an_error(tmp_path):
  trained = linear.model()
  trained.create_variables(next(iter(trained.data_layer.build_dataset())))
  trained.encoder.bias.assign([np.inf, 0.0, 0.0])
  # written as an older version (or another tool) could have written it
  CheckpointStore(str(tmp_path), {"model": model_checkpoint_object(trained.named_layers)}
                  ).save(7)
  fresh = linear.model()
  evaluator = Evaluator(fresh, Backend())
  with pytest.raises(CheckpointError, match=r"ckpt-7 holds non-finite weights "
                     r"\(encoder.bias\): the run had diverged"):
    evaluator.restore_for(fresh.data_layer, str(tmp_path / "ckpt-7"))
  assert sorted(named_variables(fresh.named_layers)) == ["encoder.bias", "encoder.kernel"]


def test_an_exploding_finite_loss_gets_one_warning(tmp_path, capsys):
  trainer = linear.trainer(str(tmp_path), optimizer_params={"learning_rate": 1.5}, max_steps=6)
  model = trainer.model
  trainer.train(model.data_layer)  # losses 0.56, 7.3, 137, ...
  warnings = [line for line in capsys.readouterr().out.splitlines() if "diverging" in line]
  assert len(warnings) == 1 and "step 3: loss 136.8 is over 100x this run's first (0.5599)" \
      in warnings[0], warnings


def test_a_run_that_ends_at_chance_level_gets_a_warning():
  # pylint: disable=import-outside-toplevel
  from open_seq2seq.models.speech2text import Speech2Text
  from open_seq2seq.models.text2text import Text2Text
  from open_seq2seq.training.trainer import nothing_learned
  wer = (Speech2Text.best_metric, Speech2Text.chance_level)
  assert nothing_learned(*wer, {"WER": 1.0, "loss": 3.0}, 500) == (
      "WER 1 after 500 steps is what a model that learned nothing gets (1): check the data "
      "and its labels, the learning rate (too high or too low) and the loss, or train longer")
  assert nothing_learned(*wer, {"WER": 0.97}, 500) is None
  assert nothing_learned(*wer, {"WER": 1.0}, 50) is None  # a smoke test, not a run
  bleu = (Text2Text.best_metric, Text2Text.chance_level)
  assert nothing_learned(*bleu, {"BLEU": 0.0}, 300).startswith("BLEU 0 after 300 steps")
  assert nothing_learned(*bleu, {"BLEU": 0.4}, 300) is None
  assert nothing_learned(("loss", False), None, {"loss": 9.0}, 900) is None
