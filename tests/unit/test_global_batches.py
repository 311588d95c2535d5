"""Balanced workers (open_seq2seq/data/global_batches.py): the workers of a step share one
bucketed global batch, the same on every worker and in the one-process run."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.data import global_batches, transforms
from open_seq2seq.data.text2text.text2text import ParallelTextDataLayer
from open_seq2seq.errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WIDTH = 8


def skewed_lengths(count=240, seed=0):
  """Half short sentences (3..10 ids), half long ones (40..60): buckets far apart."""
  rng = np.random.default_rng(seed)
  return np.where(rng.random(count) < 0.5, rng.integers(3, 11, count), rng.integers(40, 61, count))


def features(lengths):
  """Columns indexed by example id: source ids all equal to the id (to check rows), a target
  one id longer."""
  lengths = np.asarray(lengths, np.int32)
  ids = np.arange(len(lengths), dtype=np.int32)
  return {"source": tf.RaggedTensor.from_row_lengths(np.repeat(ids, lengths), lengths),
          "source_length": lengths,
          "target": tf.RaggedTensor.from_row_lengths(np.repeat(ids, lengths + 1), lengths + 1),
          "target_length": lengths + 1}


def batching(lengths, batch_size=4, by_tokens=False, width=WIDTH):
  longest = int(np.max(lengths)) + 1  # the target side
  return transforms.Batching(batch_size, by_tokens,
                             tuple(transforms.bucket_boundaries(longest, width)), longest)


def pipeline(lengths, num_workers=1, worker_id=0, batch_size=4, seed=7, repeat=True, **kw):
  return global_batches.training_pipeline(
      np.arange(len(lengths)), batching(lengths, batch_size, **kw),
      process_fn=global_batches.lookup(features(lengths)), num_workers=num_workers,
      worker_id=worker_id, seed=seed, repeat=repeat, map_fn=None)


def steps(dataset, count=None):
  """Flat numpy batches of ``dataset`` (the first ``count``, or all)."""
  dataset = dataset if count is None else dataset.take(count)
  return [{k: v.numpy() for k, v in batch.items()} for batch in dataset]


def bucket_of(length):
  return int(np.searchsorted(np.asarray(transforms.bucket_boundaries(61, WIDTH)), length,
                             side="right"))


@pytest.mark.parametrize("num_workers", [2, 3])
def test_the_workers_of_a_step_share_the_one_process_global_batch(num_workers):
  lengths = skewed_lengths()
  one = steps(pipeline(lengths, batch_size=4 * num_workers), 60)
  workers = [steps(pipeline(lengths, num_workers, k), 60) for k in range(num_workers)]
  for s, whole in enumerate(one):
    shares = [w[s] for w in workers]
    assert all(len(share["id"]) == 4 for share in shares)  # a repeated stream: full batches
    union = np.concatenate([share["id"] for share in shares])
    assert sorted(union) == sorted(whole["id"])  # nothing lost or repeated in the step
    for share in shares:  # each row is the example it names, padded as in the global batch
      assert share["source"].shape[1] == whole["source"].shape[1]
      for row, example, n in zip(share["source"], share["id"], share["source_length"]):
        assert (row[:n] == example).all() and (row[n:] == 0).all() and n == lengths[example]
    # one bucket for the whole step: every row's length (the longer side) in it
    assert len({bucket_of(n + 1) for share in shares for n in share["source_length"]}) == 1


@pytest.mark.parametrize("num_workers", [2, 3])
def test_one_pass_gives_every_example_once_and_counts_its_steps(num_workers):
  lengths = skewed_lengths(count=95, seed=1)  # remainders of 2 rows in some buckets
  b = batching(lengths)
  shares = [steps(pipeline(lengths, num_workers, k, repeat=False)) for k in range(num_workers)]
  assert len({len(s) for s in shares}) == 1  # every worker takes part in every step
  assert len(shares[0]) == global_batches.count_steps(lengths + 1, b, num_workers)
  seen = np.concatenate([batch["id"] for share in shares for batch in share])
  assert len(seen) == len(set(seen.tolist()))
  # only a bucket's last rows, too few to give each worker one, are left out
  sizes = global_batches.global_batch_sizes(b, num_workers)
  counts = np.bincount([bucket_of(n + 1) for n in lengths], minlength=len(sizes))
  left_out = sum(n % size for n, size in zip(counts, sizes) if n % size < num_workers)
  assert len(seen) == len(lengths) - left_out and left_out > 0
  print(f"\n{num_workers} workers: {left_out} of {len(lengths)} examples left out of one pass")
  # a repeated stream carries remainders over: as many steps per epoch as one process takes
  assert global_batches.count_steps(lengths + 1, b, num_workers, repeat=True) == \
      global_batches.count_steps(lengths + 1, batching(lengths, 4 * num_workers), 1, repeat=True)
  one = steps(pipeline(lengths, batch_size=4 * num_workers, repeat=False))
  assert sorted(np.concatenate([b["id"] for b in one])) == list(range(len(lengths)))


def test_a_repeating_pipeline_is_infinite_for_the_distributed_iterator():
  # the filter of small remainders hides the count from tf.data; declared infinite, a
  # multi-worker iterator spares its per-batch all-reduce (tests/unit/test_pipeline.py)
  lengths = skewed_lengths(40)
  assert pipeline(lengths, num_workers=2).cardinality() == tf.data.INFINITE_CARDINALITY
  assert pipeline(lengths, num_workers=2, repeat=False).cardinality() != \
      tf.data.INFINITE_CARDINALITY


def test_token_batches_give_each_worker_a_replica_batch():
  lengths = skewed_lengths()
  budget = 200
  one_replica = transforms.bucket_batch_sizes(budget, True, batching(lengths).boundaries,
                                              max_length=62)
  for k in range(2):
    for share in steps(pipeline(lengths, 2, k, batch_size=budget, by_tokens=True), 40):
      padded = share["target"].shape[1]
      assert len(share["id"]) == one_replica[bucket_of(padded)]
      assert len(share["id"]) * padded <= budget


def padded_length_gaps(make, num_workers=2, count=80):
  """Per step, the longest real length of the slowest worker's batch minus the fastest's."""
  shares = [steps(make(k), count) for k in range(num_workers)]
  longest = [[int(b["target_length"].max()) for b in share] for share in shares]
  return [max(step) - min(step) for step in zip(*longest)]


def test_balanced_steps_have_near_equal_padded_lengths_where_shards_do_not():
  lengths = skewed_lengths()
  b = batching(lengths)

  def sharded(k):  # today's pipeline: worker k buckets its own shard, with its own seed
    examples = transforms.slices({**features(lengths), "id": np.arange(len(lengths))})
    return transforms.training_pipeline(examples, b, num_shards=2, shard_index=k,
                                        shuffle_buffer_size=len(lengths), seed=10 + k,
                                        map_fn=None)

  old = padded_length_gaps(sharded)
  new = padded_length_gaps(lambda k: pipeline(lengths, 2, k))
  print(f"\nlongest length, slowest minus fastest worker per step (80 steps, 2 workers): "
        f"sharded mean {np.mean(old):.1f} max {max(old)}; balanced mean {np.mean(new):.1f} "
        f"max {max(new)}")
  assert max(new) < WIDTH  # within one bucket
  assert np.mean(old) > 10 and max(old) > 30  # buckets ~40 ids apart, about half the steps


def test_a_sorted_back_and_forth_deal_keeps_the_workers_token_counts_closest():
  rng = np.random.default_rng(3)
  gaps = {"sorted snake": [], "sorted stride": [], "stride": [], "contiguous": []}
  for _ in range(200):
    n = rng.integers(9, 17, 8).astype(np.int32)
    batch = {"id": tf.range(8, dtype=tf.int64), "source_length": tf.constant(n),
             "target_length": tf.constant(n + rng.integers(0, 3, 8).astype(np.int32))}
    tokens = (batch["source_length"] + batch["target_length"]).numpy()
    mine = [global_batches.worker_rows(batch, 2, k)["id"].numpy() for k in range(2)]
    sums = [tokens[m].sum() for m in mine]
    gaps["sorted snake"].append(abs(sums[0] - sums[1]))
    ordered = np.sort(tokens, kind="stable")
    gaps["sorted stride"].append(abs(ordered[0::2].sum() - ordered[1::2].sum()))
    gaps["stride"].append(abs(tokens[0::2].sum() - tokens[1::2].sum()))
    gaps["contiguous"].append(abs(tokens[:4].sum() - tokens[4:].sum()))
    assert abs(sums[0] - sums[1]) <= tokens.max() - tokens.min()
    assert sorted(np.concatenate(mine)) == list(range(8))
    three = [global_batches.worker_rows(batch, 3, k)["id"].numpy() for k in range(3)]
    assert sorted(np.concatenate(three)) == list(range(8))  # 3 + 3 + 2 rows
    assert sorted(map(len, three)) == [2, 3, 3]
  print("\nmean token-count gap between 2 workers (global batch of 8, lengths 9..16): " +
        ", ".join(f"{name} {np.mean(v):.2f}" for name, v in gaps.items()))
  others = [np.mean(v) for name, v in gaps.items() if name != "sorted snake"]
  assert np.mean(gaps["sorted snake"]) < 0.5 * min(others)


@pytest.mark.parametrize("taken", [3, 17])
def test_each_of_two_workers_resumes_exactly_from_a_checkpointed_iterator(tmp_path, taken):
  lengths = skewed_lengths(count=60)  # 17 steps: into the second epoch
  for k in range(2):
    straight = steps(pipeline(lengths, 2, k), taken + 12)
    iterator = iter(pipeline(lengths, 2, k))
    for _ in range(taken):
      next(iterator)
    path = tf.train.Checkpoint(data=iterator).save(str(tmp_path / f"w{k}-{taken}"))
    restored = iter(pipeline(lengths, 2, k))
    tf.train.Checkpoint(data=restored).restore(path)
    resumed = [next(restored)["id"].numpy().tolist() for _ in range(12)]
    assert resumed == [b["id"].tolist() for b in straight[taken:]]


SCRIPT = """
import sys
import numpy as np, tensorflow as tf
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
tf.random.set_seed(1000)  # as run.py seeds each worker: random_seed + worker index
import test_global_batches as t
for b in t.steps(t.pipeline(t.skewed_lengths(), 2, 1), 30):
  print(" ".join(map(str, b["id"])))
"""


def test_separate_processes_with_the_same_seed_build_the_same_batches():
  result = subprocess.run(
      [sys.executable, "-c", SCRIPT.format(root=ROOT, tests=os.path.join(ROOT, "tests", "unit"))],
      capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))
  assert result.returncode == 0, result.stderr[-3000:]
  tf.random.set_seed(5)  # another global seed here: the order must not depend on it
  here = [" ".join(map(str, b["id"])) for b in steps(pipeline(skewed_lengths(), 2, 1), 30)]
  assert result.stdout.splitlines() == here
  other_seed = [" ".join(map(str, b["id"]))
                for b in steps(pipeline(skewed_lengths(), 2, 1, seed=8), 30)]
  assert other_seed != here


# ------------------------------------------------------------------ the translation layer
@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("balanced")
  rng = np.random.default_rng(2)
  vocab = ["a", "b", "c", "d"]
  lines = [" ".join(rng.choice(vocab, size=n)) for n in skewed_lengths(120, seed=2) - 1]
  (tmp / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
  (tmp / "text.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
  path = str(tmp / "text.txt")
  return {"src_vocab_file": str(tmp / "vocab.txt"), "tgt_vocab_file": str(tmp / "vocab.txt"),
          "source_file": path, "target_file": path, "bucket_width": WIDTH,
          "balanced_workers": True}


def text_layer(corpus, num_workers=1, worker_id=0, batch_size=4, mode="train", seed=0,
               **params):
  return ParallelTextDataLayer(dict(corpus, **params), mode=mode, batch_size=batch_size,
                               num_workers=num_workers, worker_id=worker_id, random_seed=seed)


def test_the_text_layer_shares_the_one_process_batches_among_its_workers(corpus):
  one = text_layer(corpus, batch_size=8)
  workers = [text_layer(corpus, 2, k) for k in range(2)]
  # steps per epoch of a repeated stream: the same for one process and its workers
  assert workers[0].batches_per_epoch() == one.batches_per_epoch() == global_batches.count_steps(
      one._lengths, one._batching(one._longest), 1)  # pylint: disable=protected-access
  batches = [list(layer.build_dataset().take(30)) for layer in [one] + workers]
  for whole, *shares in zip(*batches):
    assert sorted(np.concatenate([s["id"].numpy() for s in shares])) == sorted(
        whole["id"].numpy())
    assert all(s["source_tensors"][0].shape[1] == whole["source_tensors"][0].shape[1]
               for s in shares)
  for k in range(2):  # the steps of one pass, as the layer counts them
    one_pass = text_layer(corpus, 2, k, batch_size=5, repeat=False)
    assert sum(1 for _ in one_pass.build_dataset()) == one_pass.batches_per_epoch()
  evaluated = [text_layer(corpus, 2, 0, mode="eval", balanced_workers=b).build_dataset()
               for b in (True, False)]
  assert [b["id"].numpy().tolist() for b in evaluated[0]] == [
      b["id"].numpy().tolist() for b in evaluated[1]]  # eval keeps its id shards


def test_the_text_layer_refuses_what_balanced_workers_cannot_honour(corpus):
  with pytest.raises(ConfigError, match="random_seed"):
    text_layer(corpus, 2, 0, seed=None)
  with pytest.raises(ConfigError, match="shuffle_buffer_size"):
    text_layer(corpus, shuffle_buffer_size=100)
  text_layer(corpus, 2, 0, seed=None, shuffle=False)  # nothing to agree on
  text_layer(corpus, 2, 0, seed=None, mode="eval")  # eval does not use it
