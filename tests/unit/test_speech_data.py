"""Speech2TextDataLayer: CSV reading, path resolution, batches, sharding, cache, errors."""

import os

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import resolve_config
from open_seq2seq.data.speech2text.speech2text import Speech2TextDataLayer
from open_seq2seq.errors import ConfigError, DataError
from tests.helpers.speech import VOCAB, tone, to_numpy, write_corpus

TRANSCRIPTS = ["one two", "three", "four five six", "seven", "eight nine", "zero", "ten"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  return write_corpus(str(tmp_path_factory.mktemp("corpus")), TRANSCRIPTS)


def make_layer(csv_files, mode="train", batch_size=3, num_workers=1, worker_id=0, **params):
  declared = Speech2TextDataLayer.validate_params(
      {"num_audio_features": 24, "input_type": "logfbank", "vocab_file": VOCAB,
       "dataset_files": csv_files, **params})
  return Speech2TextDataLayer(declared, mode, batch_size, num_workers, worker_id)


def collect(layer, limit=100):
  return [to_numpy(b) for b in layer.build_dataset().take(limit)]


def test_eval_batches_cover_every_row_in_order(corpus):
  layer = make_layer([corpus], mode="eval", pad_to=8)
  assert layer.description.tgt_vocab_size == 29
  batches = collect(layer)
  ids = np.concatenate([b["id"] for b in batches]).tolist()
  assert ids == list(range(len(TRANSCRIPTS)))
  for b in batches:
    x, x_len = b["source_tensors"]
    y, y_len = b["target_tensors"]
    assert x.dtype == np.float32 and x.shape[2] == 24 and x.shape[1] % 8 == 0
    assert x.shape[1] >= x_len.max() and np.all(x[0, x_len[0]:] == 0)
    for row, n, i in zip(y, y_len, b["id"]):
      assert layer.targets.decode(row[:n]) == TRANSCRIPTS[i]
  # 0.3 s at a 10 ms stride -> 31 frames
  assert batches[0]["source_tensors"][1][0] == 31


def test_infer_has_no_targets_and_names_files(corpus):
  layer = make_layer([corpus], mode="infer")
  batch = collect(layer)[0]
  assert "target_tensors" not in batch
  assert layer.wav_filename(1) == os.path.join("audio", "0001.wav")


def test_train_shards_are_disjoint_and_repeat(corpus):
  seen = []
  for worker in range(2):
    layer = make_layer([corpus], num_workers=2, worker_id=worker, batch_size=1)
    ids = [int(b["id"][0]) for b in collect(layer, limit=layer.get_size_in_samples() * 2)]
    assert sorted(ids[:len(ids) // 2]) == sorted(ids[len(ids) // 2:])  # one epoch, twice
    seen.append(set(ids))
  assert not seen[0] & seen[1] and seen[0] | seen[1] == set(range(len(TRANSCRIPTS)))


def test_train_duration_filter_only_in_train(corpus):
  # durations are 0.3, 0.4, 0.5, 0.6, 0.7, 0.3, 0.4 s
  layer = make_layer([corpus], repeat=False, max_duration=0.45, min_duration=0.35)
  ids = sorted(np.concatenate([b["id"] for b in collect(layer)]).tolist())
  assert ids == [1, 6]
  eval_layer = make_layer([corpus], mode="eval", max_duration=0.45)
  assert len(np.concatenate([b["id"] for b in collect(eval_layer)])) == len(TRANSCRIPTS)


def test_augmentation_only_in_train(corpus):
  aug = {"n_time_mask": 2, "width_time_mask": 5, "speed_perturbation_ratio": 0.1}
  train = make_layer([corpus], augmentation=aug)
  evaluation = make_layer([corpus], mode="eval", augmentation=aug)
  rng = np.random.default_rng(0)
  a = train.featurize(train.paths[0], rng, augment=True)[0]
  b = evaluation.featurize(evaluation.paths[0])[0]
  c = evaluation.featurize(evaluation.paths[0])[0]
  assert a.shape != b.shape or not np.allclose(a, b)
  np.testing.assert_array_equal(b, c)


def test_relative_paths_from_cwd_then_csv_folder(tmp_path, monkeypatch):
  csv_path = write_corpus(str(tmp_path / "data"), ["one"])
  monkeypatch.chdir(tmp_path)
  assert make_layer([csv_path]).paths[0] == os.path.join(str(tmp_path / "data"), "audio",
                                                         "0000.wav")
  os.makedirs(tmp_path / "audio")
  os.link(tmp_path / "data" / "audio" / "0000.wav", tmp_path / "audio" / "0000.wav")
  assert make_layer([csv_path]).paths[0] == os.path.join("audio", "0000.wav")


def test_flac_and_resampling(tmp_path):
  csv_path = write_corpus(str(tmp_path), ["one", "two"], sample_freq=8000, fmt="flac")
  layer = make_layer([csv_path], mode="eval")
  x_len = collect(layer)[0]["source_tensors"][1]
  assert x_len.tolist() == [31, 41]  # frames at 16 kHz
  # found when the layer is built, from the header, naming the CSV line
  with pytest.raises(DataError, match=r"data.csv:2: .*0000.flac: sampled at 8000 Hz but "
                     "sample_freq is 16000; resample the corpus or set"):
    make_layer([csv_path], mode="eval", resample=False)


@pytest.mark.parametrize("content,message", [
    (b"RIFF\x24\x00\x00\x00WAVEjunk", "cannot read audio"),
    (b"not audio at all", "cannot read audio"),
    (None, "holds no audio samples"),
])
def test_a_broken_audio_file_is_found_when_the_layer_is_built(tmp_path, content, message):
  import soundfile  # pylint: disable=import-outside-toplevel
  csv_path = write_corpus(str(tmp_path), ["one", "two"])
  broken = tmp_path / "audio" / "0001.wav"
  if content is None:
    soundfile.write(str(broken), np.zeros(0, np.float32), 16000, subtype="PCM_16")
  else:
    broken.write_bytes(content)
  for mode in ("train", "infer"):
    with pytest.raises(DataError, match=f"data.csv:3: .*0001.wav: {message}"):
      make_layer([csv_path], mode=mode)
  # of two workers, the one whose shard holds the file reads its header
  make_layer([csv_path], num_workers=2, worker_id=0)
  with pytest.raises(DataError, match=f"data.csv:3: .*0001.wav: {message}"):
    make_layer([csv_path], num_workers=2, worker_id=1)


def test_a_corrupt_file_is_called_corrupt_without_the_decoders_chatter(tmp_path, capfd):
  # MPEG-looking bytes: libsndfile offers them to mpg123, which prints notes on stderr, and
  # then says the file "does not exist"
  csv_path = write_corpus(str(tmp_path), ["one", "two"])
  noise = np.random.default_rng(0).integers(0, 256, 3000, dtype=np.uint8).tobytes()
  (tmp_path / "audio" / "0001.wav").write_bytes(b"\xff\xfb\x90\x00" + noise)
  capfd.readouterr()
  with pytest.raises(DataError) as error:
    make_layer([csv_path], mode="infer")
  message = str(error.value)
  assert "0001.wav: cannot read audio: not audio or corrupt" in message, message
  assert "does not exist" not in message
  assert capfd.readouterr().err == ""


def test_a_project_error_inside_the_pipeline_is_recovered_whole(tmp_path):
  from open_seq2seq.errors import embedded_error  # pylint: disable=import-outside-toplevel
  csv_path = write_corpus(str(tmp_path), ["one", "two"])
  layer = make_layer([csv_path], mode="eval")
  os.remove(layer.paths[1])  # gone after the layer was built: read in the pipeline
  with pytest.raises(Exception) as raised:
    collect(layer)
  error = embedded_error(raised.value)
  assert isinstance(error, DataError), raised.value
  assert f"{layer.paths[1]}: cannot read audio" in str(error) and "\n" not in str(error)
  assert embedded_error(RuntimeError("unrelated")) is None


def test_user_errors_are_one_line(tmp_path, corpus):
  missing = tmp_path / "missing.csv"
  missing.write_text("wav_filename,wav_filesize,transcript\nnowhere.wav,1,one\n")
  with pytest.raises(DataError, match=r"missing.csv:2: audio file nowhere.wav not found"):
    make_layer([str(missing)])
  bad_header = tmp_path / "header.csv"
  bad_header.write_text("file,text\na.wav,one\n")
  with pytest.raises(DataError, match="header must be"):
    make_layer([str(bad_header)])
  bad_char = write_corpus(str(tmp_path / "chars"), ["caf\u00e9"])
  with pytest.raises(DataError, match="data.csv:2: character '\u00e9' is not in the vocab"):
    make_layer([bad_char])
  with pytest.raises(DataError, match="does not exist"):
    make_layer([str(tmp_path / "none.csv")])
  with pytest.raises(ConfigError, match="vocab_file"):
    make_layer([corpus], vocab_file=str(tmp_path / "none.txt"))
  with pytest.raises(ConfigError, match="augmentation/warp: unknown parameter"):
    make_layer([corpus], augmentation={"warp": 1})
  with pytest.raises(ConfigError, match="dataset_files: needed"):
    make_layer(None, mode="eval").build_dataset()


def test_uppercase_transcripts_are_lowercased(tmp_path):
  csv_path = write_corpus(str(tmp_path), ["Hello  World"])
  layer = make_layer([csv_path], mode="eval")
  assert layer.transcripts == ["hello world"]


def test_feature_cache_round_trip(tmp_path, corpus):
  cache_dir = str(tmp_path / "cache")
  layer = make_layer([corpus], mode="eval", cache_features=True, cache_dir=cache_dir)
  first = collect(layer)
  files = [os.path.join(d, f) for d, _, fs in os.walk(cache_dir) for f in fs]
  assert len(files) == len(TRANSCRIPTS) and all(f.endswith(".npy") for f in files)
  # a cached entry is what the layer reads back
  entry = layer.cache.entry(layer.paths[0])
  np.save(entry, np.full((5, 24), 7.0, np.float32))
  assert np.all(layer.featurize(layer.paths[0])[0] == 7.0)
  regen = make_layer([corpus], mode="eval", cache_features=True, cache_dir=cache_dir,
                     cache_regenerate=True)
  again = collect(regen)
  np.testing.assert_allclose(again[0]["source_tensors"][0], first[0]["source_tensors"][0])


def test_dataset_from_inputs(tmp_path, corpus):
  layer = make_layer([corpus], mode="infer", batch_size=4)
  batch = to_numpy(next(iter(layer.dataset_from_inputs([layer.paths[0], tone(0.5, 300)]))))
  assert batch["source_tensors"][1].tolist() == [31, 51]
  assert layer.wav_filename(0) == layer.paths[0]
  with pytest.raises(DataError, match="not found"):
    layer.dataset_from_inputs([str(tmp_path / "nothing.wav")])


def test_sentencepiece_targets(tmp_path, corpus):
  spm = pytest.importorskip("sentencepiece")
  text = tmp_path / "text.txt"
  text.write_text("\n".join(TRANSCRIPTS * 20) + "\n")
  spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / "sp"),
                                 vocab_size=30, model_type="bpe", minloglevel=2)
  layer = make_layer([corpus], mode="eval", vocab_file=str(tmp_path / "sp.model"))
  assert layer.description.tgt_vocab_size == 31
  batch = collect(layer)[0]
  y, y_len = batch["target_tensors"]
  assert layer.targets.decode(y[0, :y_len[0]]) == TRANSCRIPTS[0]


def test_params_are_validated_by_the_config_loader(corpus):
  from open_seq2seq.models.speech2text import Speech2Text
  from tests.helpers.speech import speech_config
  config = speech_config([corpus], data_params={"window": "blackman"})
  with pytest.raises(ConfigError, match="data_layer_params/window"):
    resolve_config(Speech2Text, config, "train")


def test_shard_reuses_the_csvs_and_random_seed_orders_training(tmp_path):
  csv_path = write_corpus(str(tmp_path), TRANSCRIPTS)
  params = make_layer([csv_path]).params
  seeded = {seed: Speech2TextDataLayer(params, "train", 1, random_seed=seed) for seed in (3, 4)}
  os.unlink(csv_path)  # a shard must not read it again
  layer = seeded[3]
  shard = layer.shard(2, 1)
  assert shard.targets is layer.targets and layer.shard(1, 0) is layer
  assert shard.get_size_in_samples() == 3 and layer.get_size_in_samples() == 7

  def epoch(seed, shards=(1, 0)):
    sharded = seeded[seed].shard(*shards)
    return [int(b["id"][0]) for b in collect(sharded, limit=sharded.get_size_in_samples())]

  assert epoch(3) == epoch(3) and sorted(epoch(3)) == list(range(7))
  assert epoch(3) != epoch(4)
  assert sorted(epoch(3, (2, 1))) == [1, 3, 5]


def test_interactive_infer_reads_no_csv(tmp_path):
  given = {"num_audio_features": 24, "input_type": "logfbank", "vocab_file": VOCAB,
           "dataset_files": [str(tmp_path / "absent.csv")]}
  layer = Speech2TextDataLayer(dict(given), mode="interactive_infer", batch_size=2)
  assert layer.get_size_in_samples() == 0 and layer.inference
  batches = [to_numpy(b) for b in layer.dataset_from_inputs(
      [tone(0.3, 200), tone(0.5, 300), tone(0.2, 400)])]
  assert [b["source_tensors"][0].shape for b in batches] == [(2, 56, 24), (1, 24, 24)]
  assert [b["source_tensors"][1].tolist() for b in batches] == [[31, 51], [21]]
  assert [b["id"].tolist() for b in batches] == [[0, 1], [2]]
  # the layer filled its defaults without writing anything else into its params
  assert set(layer.params) == set(Speech2TextDataLayer.declared_params())


@pytest.mark.parametrize("mode,batch_size,shards", [
    ("eval", 3, (1, 0)), ("eval", 2, (2, 1)), ("infer", 4, (3, 0)), ("train", 2, (2, 0))])
def test_batches_per_epoch_and_frames(corpus, mode, batch_size, shards):
  layer = make_layer([corpus], mode=mode, batch_size=batch_size, repeat=False).shard(*shards)
  batches = collect(layer)
  assert layer.batches_per_epoch() == len(batches)
  assert layer.throughput_unit == "s of audio" and layer.unit_scale == 0.01
  full = make_layer([corpus], mode="eval")
  for b in batches:
    frames = sum(len(full.featurize(full.paths[i])[0]) for i in b["id"])
    assert int(layer.count_units(b)) == frames


def test_count_units_runs_in_graph(corpus):
  layer = make_layer([corpus], mode="eval", batch_size=7, pad_to=16)
  batch = next(iter(layer.build_dataset()))
  count = tf.function(layer.count_units)(batch)
  assert count.dtype == tf.int64
  assert int(count) == int(batch["source_tensors"][1].numpy().sum())
  assert int(count) < batch["source_tensors"][0].shape[0] * batch["source_tensors"][0].shape[1]
