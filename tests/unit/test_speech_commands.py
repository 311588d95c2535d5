"""SpeechCommandsDataLayer (lists, labels, noise, fixed shapes, sharding) and
FullyConnectedSCDecoder, on tiny tone folders written by tests/helpers/speech_commands.py."""

import os

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.data.speech2text import speech_commands as sc
from open_seq2seq.data.speech2text.speech_commands import SpeechCommandsDataLayer
from open_seq2seq.decoders import FullyConnectedSCDecoder
from open_seq2seq.errors import ConfigError, DataError
from tests.helpers.speech_commands import write_folder

WORDS = ("down", "go", "up")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
  return write_folder(str(tmp_path_factory.mktemp("sc") / "commands"), WORDS, per_word=4)


def make(root, files=("training_list.txt",), mode="train", batch_size=4, **params):
  base = dict(dataset_files=list(files), dataset_location=root, num_audio_features=16,
              audio_length=48, num_labels=len(WORDS), model_format="jasper")
  base.update(params)
  return SpeechCommandsDataLayer(base, mode, batch_size, random_seed=1)


def batches(layer, count=None):
  dataset = layer.build_dataset()
  return list(dataset.take(count) if count else dataset)


# ------------------------------------------------------------------ lists and labels
def test_folder_layout_splits_and_labels(root):
  train = make(root)
  val = make(root, ["validation_list.txt"], "eval")
  test = make(root, ["testing_list.txt"], "eval")
  assert train.description.class_names == WORDS  # word folders, sorted
  assert (len(train.paths), len(val.paths), len(test.paths)) == (6, 3, 3)
  assert not set(train.paths) & (set(val.paths) | set(test.paths))
  # the class is the folder name
  for layer in (train, val, test):
    for path, label in zip(layer.paths, layer.targets):
      assert os.path.basename(os.path.dirname(path)) == WORDS[label]
  assert test.image_name(0) == "down/0003_nohash_0.wav" and test.label(0) == 0


def test_openseq2seq_csv_lists_with_ids_and_names(root, tmp_path):
  lst = tmp_path / "v1-train.txt"
  lst.write_text("label,wav_filename\n2,go/0000_nohash_0.wav\n0,up/0001_nohash_0.wav\n")
  layer = make(root, [str(lst)], num_labels=5)  # ids are taken as given
  assert layer.targets.tolist() == [2, 0] and layer.description.class_names is None
  named = tmp_path / "named.txt"
  named.write_text("up,go/0000_nohash_0.wav\n")
  layer = make(root, [str(named)], labels=list(WORDS))
  assert layer.targets.tolist() == [2]


def test_unknown_words_and_silence(root):
  layer = make(root, labels=["go", "_unknown_", "_silence_"], num_labels=3)
  names = layer.description.class_names
  counts = {names[i]: int(n) for i, n in zip(*np.unique(layer.targets, return_counts=True))}
  assert counts == {"go": 2, "_unknown_": 4, "_silence_": 3}  # silence: 6 clips / 2 words
  silent = int(np.flatnonzero(layer.targets == 2)[0])
  assert layer.paths[silent] is None and layer.image_name(silent).startswith("_silence_")
  image, label = layer._load(np.int64(silent), np.int64(5))
  assert image.shape == (48, 16) and label == 2


def test_user_mistakes_are_one_line_errors(root, tmp_path):
  cases = [
      (dict(dataset_location=str(tmp_path / "nowhere")), DataError, "does not exist"),
      (dict(dataset_files=["missing.txt"]), DataError, "missing.txt does not exist"),
      (dict(num_labels=4), ConfigError, "num_labels: 4 classes but labels names 3"),
      (dict(labels=["go", "up", "yes"]), DataError, "unknown label 'down'"),
      (dict(model_format="image"), ConfigError, "model_format"),
  ]
  empty = tmp_path / "empty.txt"
  empty.write_text("\n")
  bad_id = tmp_path / "bad_id.txt"
  bad_id.write_text("7,go/0000_nohash_0.wav\n")
  no_wav = tmp_path / "no_wav.txt"
  no_wav.write_text("1,go/9999_nohash_0.wav\n")
  cases += [(dict(dataset_files=[str(empty)]), DataError, "hold no clips"),
            (dict(dataset_files=[str(bad_id)]), DataError, "bad_id.txt:1: class id 7"),
            (dict(dataset_files=[str(no_wav)]), DataError, "no_wav.txt:1: audio file")]
  for params, error, text in cases:
    with pytest.raises(error) as info:
      make(root, **params)
    assert text in str(info.value) and "\n" not in str(info.value), params


def test_silence_needs_background_noise(tmp_path):
  root = write_folder(str(tmp_path / "quiet"), WORDS, per_word=3, noise=False)
  with pytest.raises(DataError, match="_silence_ needs noise clips"):
    make(root, labels=["go", "_unknown_", "_silence_"])


# ------------------------------------------------------------------ features and batches
def test_fix_length_crops_and_pads_symmetrically():
  x = np.arange(10, dtype=np.float32)[:, None]
  padded = sc.fix_length(x, 15, None)
  assert padded.shape == (15, 1) and padded[:2].sum() == 0 and padded[2, 0] == 0
  assert padded[12:].sum() == 0 and padded[-4, 0] == 9  # 2 zeros left, 3 right
  assert sc.fix_length(x, 4, None)[:, 0].tolist() == [3, 4, 5, 6]  # the centre
  crops = {tuple(sc.fix_length(x, 4, np.random.default_rng(s))[:, 0]) for s in range(20)}
  assert len(crops) > 1 and all(c == tuple(range(int(c[0]), int(c[0]) + 4)) for c in crops)


def test_noise_mixing_uses_background_files():
  rng = np.random.default_rng(0)
  signal = np.zeros(4000, np.float32)
  noise = [np.full(1000, 0.5, np.float32)]  # tiled to the clip, peak-normalised
  mixed = [sc.mix_noise(signal, noise, rng) for _ in range(50)]
  levels = [float(np.abs(m).max()) for m in mixed]
  assert sum(level == 0 for level in levels) > 0  # 20 % of clips stay clean
  assert max(levels) <= sc.MAX_NOISE_VOLUME and sum(level > 0 for level in levels) > 25
  white = sc.mix_noise(signal, [], rng)  # no background files: faint white noise
  assert 0 < np.abs(white).max() < 0.02


def test_fixed_shapes_in_both_formats_and_one_label_per_clip(root):
  for fmt, shape, sources in (("jasper", (4, 48, 16), 2), ("resnet", (4, 48, 16, 1), 1)):
    layer = make(root, model_format=fmt, augment_data=True, cache_data=True)
    batch = batches(layer, 1)[0]
    assert len(batch["source_tensors"]) == sources
    assert tuple(batch["source_tensors"][0].shape) == shape
    assert batch["target_tensors"][0].shape == (4,) and batch["target_tensors"][0].dtype == tf.int32
    if fmt == "jasper":
      assert batch["source_tensors"][1].numpy().tolist() == [48] * 4
    assert layer.description.image_size == 48 and layer.description.num_channels == 1


def test_eval_is_deterministic_and_training_augments(root):
  def first_images(layer):
    return [b["source_tensors"][0].numpy() for b in batches(layer)]
  val = make(root, ["validation_list.txt"], "eval", augment_data=True)
  np.testing.assert_array_equal(np.concatenate(first_images(val)),
                                np.concatenate(first_images(val)))
  plain = make(root, ["validation_list.txt"], "eval")
  np.testing.assert_allclose(np.concatenate(first_images(val)),
                             np.concatenate(first_images(plain)))  # eval never augments
  train = make(root, augment_data=True)
  a, _ = train._load(np.int64(0), np.int64(1))
  b, _ = train._load(np.int64(0), np.int64(2))
  assert not np.allclose(a, b)


def test_shards_are_disjoint_and_complete_and_repeat_samples(root):
  layer = make(root, ["testing_list.txt", "validation_list.txt"], "eval", batch_size=2)
  ids = []
  for index in range(2):
    shard = layer.shard(2, index)
    got = [i for b in batches(shard) for i in b["id"].numpy().tolist()]
    assert len(got) == shard.get_size_in_samples()
    ids += got
  assert sorted(ids) == list(range(6))
  assert make(root, repeat_samples=2).get_size_in_samples() == 18
  assert layer.batches_per_epoch() == 3


def test_interactive_inputs_are_featurized_like_eval(root, tmp_path):
  layer = make(root, ["validation_list.txt"], "eval")
  wav = layer.paths[0]
  interactive = make(root, mode="interactive_infer")
  batch = next(iter(interactive.dataset_from_inputs([wav])))
  expected = next(iter(layer.build_dataset()))["source_tensors"][0][0]
  np.testing.assert_allclose(batch["source_tensors"][0][0], expected, atol=1e-5)
  assert interactive.image_name(0) == wav
  with pytest.raises(DataError, match="not found"):
    interactive.dataset_from_inputs([str(tmp_path / "none.wav")])


def test_other_sample_rates_are_resampled(tmp_path, root):
  import soundfile
  path = os.path.join(root, "go", "0000_nohash_0.wav")
  signal, _ = soundfile.read(path, dtype="float32")
  other = tmp_path / "8k.wav"
  soundfile.write(str(other), signal[::2], 8000, subtype="PCM_16")
  layer = make(root, mode="interactive_infer")
  image = layer.featurize(sc.read_audio(str(other), 16000))
  assert image.shape == (48, 16)


# ------------------------------------------------------------------ decoder
def test_sc_decoder_flattens_the_sequence_to_logits():
  decoder = FullyConnectedSCDecoder({"output_dim": 5})
  outputs = decoder({"encoder_output": {"outputs": tf.random.normal([3, 12, 8]),
                                        "src_lengths": tf.fill([3], 12)}})
  assert outputs["logits"].shape == (3, 5) and outputs["logits"].dtype == tf.float32
  assert decoder.fc.kernel.shape == (12 * 8, 5)  # every frame has its own weights
  np.testing.assert_array_equal(outputs["outputs"], np.argmax(outputs["logits"], -1))
  # the number of classes comes from the data when output_dim is not set
  assert FullyConnectedSCDecoder({}, num_classes=7).output_dim == 7


@pytest.mark.filterwarnings("ignore::UserWarning")  # Keras: the failed trace leaves it unbuilt
def test_sc_decoder_rejects_variable_length_outputs():
  decoder = FullyConnectedSCDecoder({"output_dim": 2})
  fn = tf.function(lambda x: decoder({"encoder_output": {"outputs": x}})["logits"],
                   input_signature=[tf.TensorSpec([None, None, 4])])
  with pytest.raises(ConfigError, match="fixed size"):
    fn.get_concrete_function()


def test_generator_writes_the_folder_layout(tmp_path):
  """scripts/make_speech_commands.py: layout, lists and determinism (espeak-ng needed)."""
  import shutil
  if shutil.which("espeak-ng") is None:
    pytest.skip("espeak-ng not installed (Debian package espeak-ng)")
  from tests.helpers.speech import load_script
  make_commands = load_script("make_speech_commands").make_commands
  out = str(tmp_path / "a")
  splits = make_commands(out, ["yes", "no"], per_word=6, validation=0.2, testing=0.2, seed=3)
  again = make_commands(str(tmp_path / "b"), ["yes", "no"], per_word=6, validation=0.2,
                        testing=0.2, seed=3)
  assert splits == again and sum(map(len, splits.values())) == 12
  assert sorted(os.listdir(out)) == ["_background_noise_", "no", "testing_list.txt",
                                     "training_list.txt", "validation_list.txt", "yes"]
  import soundfile
  info = soundfile.info(os.path.join(out, splits["training"][0]))
  assert (info.samplerate, info.frames) == (16000, 16000)
  assert len(os.listdir(os.path.join(out, "_background_noise_"))) == 4
  a = soundfile.read(os.path.join(out, splits["training"][0]))[0]
  b = soundfile.read(os.path.join(tmp_path / "b", splits["training"][0]))[0]
  np.testing.assert_array_equal(a, b)
  layer = SpeechCommandsDataLayer(
      dict(dataset_files=["training_list.txt"], dataset_location=out, num_audio_features=16,
           audio_length=48, num_labels=2, model_format="resnet"), "train", 2)
  assert layer.description.class_names == ("no", "yes")
