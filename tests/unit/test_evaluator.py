"""The Evaluator (passes, empty shards, best checkpoints, inference outputs) and the
Trainer's use of the data layer's batching facts, on a tiny toy Transformer."""

import os
import re

import pytest

from open_seq2seq.config import load_config
from open_seq2seq.distributed.backend import Backend
from open_seq2seq.output_sink import OutputSink
from open_seq2seq.training.checkpoints import CheckpointStore, model_checkpoint_object
from open_seq2seq.training.evaluator import Evaluator, InferenceRate
from open_seq2seq.training.trainer import Trainer
from tests.helpers import toy


class _Worker(Backend):
  """One worker of a two-process job, without the second process: gathering returns this
  worker's own objects (what a real gather would add from the other one is not needed)."""

  num_workers = 2

  def __init__(self, index):
    super().__init__()
    self.index = index

  @property
  def worker_index(self):
    return self.index


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp("toy"))
  toy.make_toy_data(directory, train=64, dev=1, test=5)  # ONE eval line for two workers
  return directory


def config(toy_data, mode, split, *extra):
  overrides = (toy.data_overrides(toy_data) + toy.split_overrides(toy_data, split) +
               toy.TINY_MODEL + ["--batch_size_per_gpu=4", *extra])
  base_model, configs = load_config(toy.TOY_CONFIG, mode, overrides)
  return base_model, configs[mode]


def build(toy_data, mode, split, *extra):
  base_model, params = config(toy_data, mode, split, *extra)
  return base_model(params, mode)


def test_a_worker_whose_eval_shard_is_empty_builds_and_evaluates_nothing(toy_data):
  model = build(toy_data, "eval", "dev")
  assert model.data_layer.get_size_in_samples() == 1
  second = Evaluator(model, _Worker(1))
  eval_results, loss_sum, weight = second.run_pass(model.data_layer)
  assert model.variables  # built on the padding batch
  assert (eval_results, loss_sum, weight) == ([], 0.0, 0.0)
  first = Evaluator(model, _Worker(0))
  eval_results, _, weight = first.run_pass(model.data_layer)
  assert [i for i, _ in eval_results] == [0] and weight > 0


def test_infer_outputs_come_back_in_input_order(toy_data, tmp_path):
  model = build(toy_data, "infer", "test", "--batch_size_per_gpu=2")
  evaluator = Evaluator(model, Backend())
  outputs, metrics = evaluator.infer(model.data_layer)
  assert "BLEU" in metrics  # the infer layer was given the test targets
  path = str(tmp_path / "pred.txt")
  [(written, count)] = OutputSink(path).write(outputs)
  assert written == path and count == 5
  with open(path, encoding="utf-8") as f:
    lines = f.read().splitlines()
  assert len(lines) == 5
  # the same as predicting the examples one by one, in file order
  one_by_one = []
  for batch in model.data_layer.build_dataset().unbatch().batch(1):
    one_by_one += model.interactive_lines(*_numpy(batch, evaluator))
  assert lines == one_by_one


def test_infer_logs_its_speed_after_the_first_batch(toy_data, capsys):
  model = build(toy_data, "infer", "test", "--batch_size_per_gpu=2")  # 5 inputs: 3 batches
  Evaluator(model, Backend()).infer(model.data_layer)
  [line] = [l for l in capsys.readouterr().out.splitlines() if "inputs/s" in l]
  # the first batch (2 inputs, with tracing) is not counted
  assert re.search(r"inferred 3 inputs after the first batch in [\d.]+ s: [\d.]+ inputs/s",
                   line), line


def test_inference_rate_needs_two_batches():
  rate = InferenceRate()
  assert rate.line() is None
  rate.batch_done(4)
  assert rate.line() is None  # one batch: all of its time is tracing
  rate.start -= 2.0  # as if the second batch ended two seconds after the first
  rate.batch_done(10)
  assert rate.count == 6 and rate.elapsed >= 2.0
  assert "inferred 6 inputs" in rate.line()


def _numpy(batch, evaluator):
  from open_seq2seq.training.evaluator import to_numpy
  return to_numpy(batch), evaluator.predict(batch)


def test_best_checkpoint_follows_the_model_metric(toy_data, tmp_path):
  model = build(toy_data, "eval", "dev")
  evaluator = Evaluator(model, Backend())
  evaluator.run_pass(model.data_layer)  # creates the variables
  store = CheckpointStore(str(tmp_path), {"model": model_checkpoint_object(model.named_layers)})
  evaluator.store = store
  assert model.best_metric == ("BLEU", True)
  evaluator._keep_if_best({"BLEU": 10.0}, step=5)
  evaluator._keep_if_best({"BLEU": 3.0}, step=6)  # worse: kept out
  evaluator._keep_if_best({"loss": 0.1}, step=7)  # not the model's metric: ignored
  assert store.best_info() == {"metric": "BLEU", "value": 10.0, "step": 5}
  assert os.path.exists(os.path.join(str(tmp_path), "best_models", "ckpt-5.index"))


@pytest.mark.parametrize("extra,iter_size", [
    ([], 1),
    (["--iter_size=2"], 2),
    (["--data_layer_params/batching=tokens", "--batch_size_per_gpu=64"], 1),
])
def test_steps_per_epoch_come_from_the_data_layer(toy_data, extra, iter_size):
  base_model, run = config(toy_data, "train", "train", "--max_steps=None", "--num_epochs=2",
                           "--data_layer_params/repeat=False", *extra)
  model = base_model(run, "train")
  trainer = Trainer(model, run, Backend(), logdir="/nonexistent")
  batches = model.data_layer.batches_per_epoch()
  assert batches == sum(1 for _ in model.data_layer.build_dataset())  # one pass, exactly
  assert trainer.steps_per_epoch == -(-batches // iter_size)  # a partial update counts
  assert trainer.max_steps == 2 * trainer.steps_per_epoch
  if "--data_layer_params/batching=tokens" in extra:
    # 64 tokens per batch: many more batches than 64 sentences / 4 per batch
    assert batches > 64 // 4


def _speech_model(directory):
  from tests.helpers import speech
  corpus = speech.write_corpus(directory, ["one two", "three"], durations=[0.6, 0.45])
  # dropout in every block: Keras makes its seed states when the layer is constructed
  config = speech.speech_config([corpus], encoder_params={**speech.TINY_TDNN,
                                                          "dropout_keep_prob": 0.8})
  return speech.build_model(config, "eval")


@pytest.mark.parametrize("family", ["text", "speech"])
def test_restore_for_loads_every_weight_into_a_fresh_model(toy_data, tmp_path, family):
  """A model built for eval/infer gets all the trained weights: Keras creates some variables
  (dropout seed states) before a layer is built, so "has variables" is not "is built"."""
  import numpy as np
  from open_seq2seq.training.checkpoints import latest_checkpoint, named_variables

  def make():
    if family == "text":
      return build(toy_data, "eval", "dev")
    return _speech_model(str(tmp_path / "corpus"))

  trained = make()
  trained.create_variables(next(iter(trained.data_layer.build_dataset())))
  for variable in trained.trainable_variables:
    variable.assign(variable + 0.5)  # anything a fresh initialisation would not give
  store = CheckpointStore(str(tmp_path), {"model": model_checkpoint_object(trained.named_layers)})
  store.save(3)
  fresh = make()
  evaluator = Evaluator(fresh, Backend())
  evaluator.restore_for(fresh.data_layer, latest_checkpoint(str(tmp_path)))
  assert evaluator.restored_step == 3
  expected, restored = named_variables(trained.named_layers), named_variables(fresh.named_layers)
  assert sorted(restored) == sorted(expected) and len(restored) > 10
  # every variable named by its place in the model, none by an auto-numbered Keras path
  assert not [name for name in restored if name.startswith("unattributed")]
  for name, variable in expected.items():
    np.testing.assert_array_equal(restored[name].numpy(), variable.numpy(), err_msg=name)


@pytest.fixture(scope="module")
def eval_data(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp("toy_eval"))
  toy.make_toy_data(directory, train=8, dev=10, test=1)  # 10 eval lines: 5 batches of 2
  return directory


class _TwoTowers(Backend):
  """Two local replicas without logical devices: each step's batches are evaluated one
  after the other (the step grouping and the padding are the backend's own)."""

  num_local_replicas = 2

  def _per_replica(self, batches):
    return list(batches)

  def run(self, fn, args=()):
    return [fn(batch) for batch in args[0]]

  def local_results(self, value):
    return list(value)


@pytest.mark.parametrize("limit,backend,expected_ids,truncated", [
    (2, Backend, range(4), True),
    (3, _TwoTowers, range(6), True),  # the second step's second batch is past the limit
    (2, _TwoTowers, range(4), True),  # the step after the limit is not run at all
    (5, Backend, range(10), False),   # exactly the whole set: not truncated
    (9, _TwoTowers, range(10), False),
])
def test_eval_batches_bounds_an_eval_pass(eval_data, limit, backend, expected_ids, truncated):
  model = build(eval_data, "eval", "dev", "--batch_size_per_gpu=2")
  evaluator = Evaluator(model, backend(), eval_batches=limit)
  results, _, weight = evaluator.run_pass(model.data_layer)
  assert evaluator.truncated is truncated and weight > 0
  assert [i for i, _ in results] == list(expected_ids)


def test_a_truncated_eval_never_becomes_the_best(eval_data, tmp_path, capsys):
  model = build(eval_data, "eval", "dev", "--batch_size_per_gpu=2")
  evaluator = Evaluator(model, Backend(), eval_batches=1)
  evaluator.run_pass(model.data_layer)
  evaluator.store = CheckpointStore(str(tmp_path),
                                    {"model": model_checkpoint_object(model.named_layers)})
  metrics = evaluator.evaluate(model.data_layer, step=4)
  assert evaluator.truncated and "BLEU" in metrics
  assert evaluator.store.best_info() is None
  out = capsys.readouterr().out
  assert "eval at step 4 (first 1 batch: eval_batches)" in out
  assert "not compared with best_models/" in out
  whole = Evaluator(model, Backend(), store=evaluator.store)
  whole.evaluate(model.data_layer, step=5)
  assert not whole.truncated and whole.store.best_info()["step"] == 5


def test_the_run_key_reaches_the_trainers_evaluator(toy_data):
  base_model, run = config(toy_data, "train", "train", "--eval_batches=3")
  trainer = Trainer(base_model(run, "train"), run, Backend(), logdir="/nonexistent")
  assert trainer.evaluator.eval_batches == 3
  with pytest.raises(Exception, match="eval_batches: must be at least 1"):
    config(toy_data, "train", "train", "--eval_batches=0")
