"""Image2Label: wiring from the description, accuracy, samples, inference rows."""

import numpy as np
import pytest

from open_seq2seq.config import resolve_config
from open_seq2seq.data import CifarDataLayer
from open_seq2seq.decoders import FullyConnectedDecoder
from open_seq2seq.encoders import ResNetEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.losses import CrossEntropyLoss
from open_seq2seq.models import Image2Label
from open_seq2seq.models.image2label import top_k_hits
from open_seq2seq.outputs import CsvRows, ImageSample, TextSample
from tests.helpers import image
from tests.helpers.speech import to_numpy


@pytest.fixture(scope="module")
def cifar_dir(tmp_path_factory):
  return image.write_cifar(str(tmp_path_factory.mktemp("cifar")), test=5, num_classes=4)


def config(data_dir, **top):
  params = {
      "random_seed": 0, "max_steps": 2, "batch_size_per_gpu": 4,
      "encoder": ResNetEncoder, "encoder_params": {"style": "cifar", "resnet_size": 8},
      "decoder": FullyConnectedDecoder, "decoder_params": {},
      "loss": CrossEntropyLoss,
      "data_layer": CifarDataLayer,
      "data_layer_params": {"data_dir": data_dir, "num_classes": 4, "image_size": 16},
  }
  params.update(top)
  return params


def build(data_dir, mode="eval", **top):
  return Image2Label(resolve_config(Image2Label, config(data_dir, **top), mode), mode)


def test_decoder_gets_the_number_of_classes_and_trains(cifar_dir):
  model = build(cifar_dir, "train")
  assert model.decoder.output_dim == 4 and model.best_metric == ("accuracy", True)
  batch = next(iter(model.data_layer.build_dataset()))
  loss_sum, weight, out = model.compute_loss(batch, training=True)
  assert float(weight) == 4.0 and np.isfinite(float(loss_sum))
  assert out["logits"].shape == (4, 4)


def test_output_dim_below_num_classes_is_a_config_error(cifar_dir):
  with pytest.raises(ConfigError, match="decoder_params/output_dim: 3 logits for"):
    build(cifar_dir, decoder_params={"output_dim": 3})
  assert build(cifar_dir, decoder_params={"output_dim": 5}).decoder.output_dim == 5


def test_top_k_hits():
  logits = np.array([[0.1, 0.9, 0.0], [0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [np.nan, 0, 0]])
  labels = np.array([1, 0, 1, 1])
  np.testing.assert_array_equal(top_k_hits(logits, labels, 1), [True, True, False, False])
  np.testing.assert_array_equal(top_k_hits(logits, labels, 2), [True, True, True, False])
  np.testing.assert_array_equal(top_k_hits(logits, labels, 5), [True, True, True, False])


def test_accuracy_over_the_eval_set(cifar_dir):
  model = build(cifar_dir)
  labels = np.array([0, 1, 2, 3], np.int32)
  logits = np.zeros([4, 4], np.float32)
  logits[[0, 1, 2, 3], [0, 1, 3, 0]] = 1.0  # right, right, wrong, wrong
  logits[2, 2] = 0.5                         # ... but second best
  batch = {"target_tensors": (labels,), "id": np.arange(4)}
  results = model.evaluate(batch, {"logits": logits})
  metrics = model.finalize_evaluation(results + [(4, (True, True))])
  assert metrics == {"accuracy": pytest.approx(3 / 5), "top5_accuracy": 1.0}


def test_samples_inference_rows_and_scoring(cifar_dir):
  model = build(cifar_dir, "infer")
  layer = model.data_layer
  batches = [to_numpy(b) for b in layer.build_dataset()]
  results = []
  for batch in batches:
    outputs = to_numpy(model.predict(batch))
    results += model.infer(batch, outputs)
  assert sorted(i for i, _ in results) == list(range(5))
  (rows,) = model.finalize_inference(results)
  assert isinstance(rows, CsvRows) and tuple(rows.columns) == ("file", "label", "probability")
  by_id = dict(rows.records)
  assert by_id[3][0] == "test_batch.bin:3" and by_id[3][1] in image.SHAPES
  assert 0.0 < float(by_id[3][2]) <= 1.0
  predicted = {i: c for i, (c, _) in results}
  expected = np.mean([predicted[i] == i % 4 for i in range(5)])
  assert model.score_inference(results) == {"accuracy": pytest.approx(expected)}

  outputs = to_numpy(model.predict(batches[0]))
  lines = model.format_samples(batches[0], outputs)
  assert lines[0].startswith("Sample prediction: ")
  picture, text = model.sample_summaries(batches[0], outputs)
  assert isinstance(picture, ImageSample) and picture.image.shape == (16, 16, 3)
  assert picture.image.min() == 0.0 and picture.image.max() == 1.0
  assert isinstance(text, TextSample) and text.text.startswith("predicted: ")


def test_eval_samples_show_the_true_class(cifar_dir):
  model = build(cifar_dir)
  batch = to_numpy(next(iter(model.data_layer.build_dataset())))
  outputs = to_numpy(model.predict(batch))
  lines = model.format_samples(batch, outputs, max_samples=2)
  assert lines[0] == "Sample target:     stripes_h" and len(lines) == 4
  assert model.sample_summaries(batch, outputs)[1].text.startswith("true: stripes_h, ")


def test_interactive_lines_name_class_and_probability(cifar_dir, tmp_path):
  model = build(cifar_dir, "interactive_infer")
  path = image.write_image_file(str(tmp_path / "x.png"), 1)
  batch = to_numpy(next(iter(model.data_layer.dataset_from_inputs([path]))))
  (line,) = model.interactive_lines(batch, to_numpy(model.predict(batch)))
  name, probability = line.rsplit(" ", 1)
  assert name in image.SHAPES and 0.0 < float(probability) <= 1.0
  assert model.score_inference([(0, (1, 0.5))]) == {}
