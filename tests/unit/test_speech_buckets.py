"""Duration-bucketed speech batches (``batching: "duration"``): coverage, the audio budget,
padding, determinism, resume, sharding and the batch count."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.data import transforms
from open_seq2seq.data.speech2text import buckets
from open_seq2seq.data.speech2text.speech2text import Speech2TextDataLayer
from open_seq2seq.errors import ConfigError
from tests.helpers.speech import VOCAB, to_numpy, write_corpus

RATE = 8000  # tiny files: 16 kB per second of audio
#: A long-tailed mix (log-normal, as LibriSpeech's 1-35 s scaled down 10x) and one utterance
#: longer than the 4 s budget.
DURATIONS = [float(d) for d in np.clip(
    np.random.default_rng(0).lognormal(np.log(0.5), 0.6, size=47), 0.1, 2.5)] + [4.5]
BUDGET = 4.0
HOP = 0.01


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  transcripts = ["one two", "three", "four five", "six"] * 12
  return write_corpus(str(tmp_path_factory.mktemp("buckets")), transcripts, DURATIONS, RATE)


def make_layer(corpus, mode="train", batch_size=6, num_workers=1, worker_id=0, seed=7,
               **params):
  params = {"num_audio_features": 16, "input_type": "spectrogram", "vocab_file": VOCAB,
            "dataset_files": [corpus], "sample_freq": RATE, "repeat": False,
            "batching": "duration", "batch_duration": BUDGET, **params}
  if params["batching"] == "examples":
    params.pop("batch_duration")
  declared = Speech2TextDataLayer.validate_params(params)
  return Speech2TextDataLayer(declared, mode, batch_size, num_workers, worker_id,
                              random_seed=seed)


def epoch(layer):
  return [to_numpy(b) for b in layer.build_dataset()]


def ids_of(batches):
  return [b["id"].tolist() for b in batches]


def padding_fraction(batches):
  real = sum(int(b["source_tensors"][1].sum()) for b in batches)
  padded = sum(b["source_tensors"][0].shape[0] * b["source_tensors"][0].shape[1]
               for b in batches)
  return 1 - real / padded


def test_an_epoch_holds_every_utterance_once_within_the_budget(corpus, capfd):
  layer = make_layer(corpus)
  notice = capfd.readouterr().err
  assert notice.count("\n") == 1 and "1 of 48 train utterances are longer than " \
      "batch_duration=4 s (longest 4.5 s" in notice
  batches = epoch(layer)
  ids = [i for b in ids_of(batches) for i in b]
  assert sorted(ids) == list(range(len(DURATIONS)))
  assert layer.batches_per_epoch() == len(batches)
  for b in batches:
    x, x_len = b["source_tensors"]
    assert x.shape[1] % 8 == 0 and x.shape[1] >= x_len.max()
    if len(x) > 1:
      assert len(x) * x.shape[1] * HOP <= BUDGET + 1e-9
    else:  # only the utterance longer than the budget may stand alone over it
      assert len(x) * x.shape[1] * HOP <= BUDGET or DURATIONS[b["id"][0]] > BUDGET
  # the header frame counts the batches are sized by are those the pipeline computes
  frames = {i: n for b in batches for i, n in zip(b["id"], b["source_tensors"][1])}
  assert [frames[i] for i in range(len(DURATIONS))] == layer._kept()[1].tolist()


def test_buckets_pad_less_than_one_bucket(corpus):
  bucketed = epoch(make_layer(corpus))
  # today's batching: 6 utterances per batch, padded to the longest (about as many batches)
  one_bucket = epoch(make_layer(corpus, batching="examples"))
  assert len(bucketed) <= 1.5 * len(one_bucket)
  assert padding_fraction(bucketed) < 0.5 * padding_fraction(one_bucket)


def test_bucket_boundaries_in_seconds_keep_batches_apart(corpus):
  edges = [0.4, 0.8]
  layer = make_layer(corpus, bucket_boundaries=edges, batch_size_multiple=2)
  batches = epoch(layer)
  assert layer.batches_per_epoch() == len(batches)
  batching = layer._batching()
  sizes = transforms.bucket_batch_sizes(batching.batch_size, True, batching.boundaries, 8,
                                        batching.max_length, 2)
  assert all(n % 2 == 0 for n in sizes if n > 1)  # batch_size_multiple
  partial = []
  for b in batches:
    seconds = (b["source_tensors"][1] - 1) * HOP
    bins = np.searchsorted(edges, seconds, side="right")
    assert len(set(bins.tolist())) == 1  # one bucket per batch
    if len(bins) != sizes[bins[0]]:
      partial.append(bins[0])
  assert len(partial) == len(set(partial))  # the end of an epoch leaves one per bucket
  assert sorted(i for b in ids_of(batches) for i in b) == list(range(len(DURATIONS)))


def test_the_seed_sets_the_batches_and_epochs_differ(corpus):
  first = ids_of(epoch(make_layer(corpus, seed=7)))
  assert ids_of(epoch(make_layer(corpus, seed=7))) == first
  assert ids_of(epoch(make_layer(corpus, seed=8))) != first
  # repeated, as in training: whole epochs of batches_per_epoch batches, reshuffled
  repeated = make_layer(corpus, repeat=True)
  count = repeated.batches_per_epoch()
  two = ids_of(to_numpy(b) for b in repeated.build_dataset().take(2 * count))
  assert two[:count] == first and two[count:] != first
  assert sorted(i for b in two[count:] for i in b) == list(range(len(DURATIONS)))


@pytest.mark.parametrize("taken", [3, 9])
def test_a_restored_iterator_resumes_exactly(corpus, tmp_path, taken):
  layer = make_layer(corpus, repeat=True)
  iterator = iter(layer.build_dataset())
  for _ in range(taken):
    next(iterator)
  path = tf.train.Checkpoint(data=iterator).save(str(tmp_path / "ckpt"))
  # into the next epoch, whose order a restored shuffle buffer could get wrong
  expected = [next(iterator)["id"].numpy().tolist() for _ in range(layer.batches_per_epoch())]
  restored = iter(make_layer(corpus, repeat=True).build_dataset())
  tf.train.Checkpoint(data=restored).restore(path)
  assert [next(restored)["id"].numpy().tolist() for _ in expected] == expected


def test_whole_epochs_resume_exactly_from_any_batch(tmp_path):
  """The transform alone, with the zip and filter that trip a restored reshuffle."""
  def epoch_fn(rows):
    rows = tf.data.Dataset.zip((rows, tf.data.Dataset.range(10 ** 9)))
    rows = rows.map(lambda row, _: row).filter(lambda row: row["id"] % 5 != 1)
    return rows.bucket_by_sequence_length(lambda row: tf.cast(row["id"] % 7, tf.int32),
                                          [2, 4], [3, 5, 4])

  def ids(batches):
    return [b["id"].numpy().tolist() for b in batches]

  def make():
    return transforms.whole_epochs(np.arange(48), epoch_fn, seed=3)

  stream = ids(make().take(60))
  kept = sorted(i for i in range(48) if i % 5 != 1)
  first = [i for b in stream for i in b][:len(kept)]
  assert sorted(first) == kept and first != kept  # whole, shuffled epochs
  for taken in range(1, 30, 4):
    iterator = iter(make())
    for _ in range(taken):
      next(iterator)
    path = tf.train.Checkpoint(data=iterator).save(str(tmp_path / f"ckpt{taken}"))
    restored = iter(make())
    tf.train.Checkpoint(data=restored).restore(path)
    assert ids(next(restored) for _ in range(30)) == stream[taken:taken + 30]


def test_two_workers_cover_every_utterance_once(corpus):
  layer = make_layer(corpus)
  seen = []
  for worker in range(2):
    shard = layer.shard(2, worker)  # a copy sharing the headers read so far
    batches = epoch(shard)
    assert shard.batches_per_epoch() == len(batches)
    shard_ids = [i for b in ids_of(batches) for i in b]
    assert all(i % 2 == worker for i in shard_ids)
    seen += shard_ids
  assert sorted(seen) == list(range(len(DURATIONS)))


@pytest.mark.parametrize("mode,params", [
    ("eval", {}), ("train", {"max_duration": 1.0, "min_duration": 0.2}),
    ("train", {"batching": "examples", "num_buckets": 3})])
def test_batches_per_epoch_counts_the_batches_made(corpus, mode, params):
  layer = make_layer(corpus, mode=mode, **params)
  batches = epoch(layer)
  assert layer.batches_per_epoch() == len(batches)
  if mode == "eval":
    assert sorted(i for b in ids_of(batches) for i in b) == list(range(len(DURATIONS)))
  if "max_duration" in params:
    kept = [i for i, d in enumerate(DURATIONS) if 0.2 <= d <= 1.0]
    assert sorted(i for b in ids_of(batches) for i in b) == kept


def test_edges_and_lengths():
  frames = np.array([10] * 90 + [100] * 10)  # the long tail holds half the audio
  assert buckets.quantile_edges(frames, 2, 8) == [17]
  assert buckets.quantile_edges(frames, 1) == [] and buckets.quantile_edges([], 4) == []
  # 0.5 s at a 10 ms hop: 51 frames are 0.5 s, below an edge at 0.5 s only 50 are
  assert buckets.edges_from_seconds([0.5, 1.0], 0.01) == [51, 101]
  assert buckets.resampled_length(44100, 44100, 16000) == 16000
  assert buckets.resampled_length(1000, 16000, 8000) == 500
  assert buckets.max_speed({"speed_perturbation_ratio": 0.1}) == 1.1
  assert buckets.max_speed({"speed_perturbation_ratio": [0.9, 1.2]}) == 1.2


@pytest.mark.parametrize("params,message", [
    ({"batch_duration": None}, "batch_duration: batching 'duration' needs a positive"),
    ({"batching": "examples", "batch_duration": 3.0}, "batch_duration: only used with"),
    ({"bucket_boundaries": [1.0, 0.5]}, "bucket_boundaries: expected increasing"),
    ({"bucket_boundaries": [1.0], "num_buckets": 3}, "not both"),
    ({"num_buckets": 0}, "num_buckets: must be at least 1"),
])
def test_batching_keys_are_checked(corpus, params, message):
  given = {"num_audio_features": 16, "input_type": "spectrogram", "vocab_file": VOCAB,
           "dataset_files": [corpus], "batching": "duration", "batch_duration": 2.0, **params}
  with pytest.raises(ConfigError, match=message):
    Speech2TextDataLayer(Speech2TextDataLayer.validate_params(given), "train", 4)
