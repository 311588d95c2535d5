"""Image2Label through run.py on tiny drawn images: train_eval, eval, infer (CSV) and
interactive_infer, for the CIFAR binary and the ImageNet TFRecord formats."""

import csv
import json
import os
import re

import pytest

from tests.e2e.test_export import run_export_script
from tests.helpers import image, toy

pytestmark = pytest.mark.slow

FASHION = os.path.join(image.CONFIG_DIR, "resnet_fashion_mnist.py")
RESNET50 = os.path.join(image.CONFIG_DIR, "resnet-50-v2.py")
#: The fashion config's small ResNet, narrowed; 4 drawn classes, 16-pixel crops.
TINY = ["--encoder_params/first_num_filters=8", "--data_layer_params/num_classes=4",
        "--decoder_params/output_dim=4", "--data_layer_params/image_size=16",
        "--num_epochs=None", "--max_steps=30", "--batch_size_per_gpu=16",
        "--eval_batch_size_per_gpu=8", "--print_loss_steps=10", "--print_samples_steps=10",
        "--eval_steps=15", "--save_checkpoint_steps=15", "--save_summaries_steps=10"]
#: resnet-50-v2's data layer and model family with a two-stage CIFAR-style network.
TINY_IMAGENET = ["--num_gpus=1", "--encoder_params/style=cifar", "--encoder_params/resnet_size=8",
                 "--encoder_params/first_num_filters=4", "--encoder_params/data_format=channels_last",
                 "--data_layer_params/num_classes=4", "--decoder_params/output_dim=4",
                 "--data_layer_params/image_size=24", "--num_epochs=None", "--max_steps=4",
                 "--batch_size_per_gpu=4"]


def run(config, logdir, mode, *extra, stdin=None):
  args = [f"--config_file={config}", f"--mode={mode}", f"--logdir={logdir}", *extra]
  return toy.run_cli(args, stdin=stdin)


def read_rows(path):
  with open(path, encoding="utf-8", newline="") as f:
    return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def cifar_run(tmp_path_factory):
  root = tmp_path_factory.mktemp("image_cli")
  data = image.write_cifar(str(root / "data"), train_per_file=48, train_files=2, test=12)
  common = TINY + [f"--data_layer_params/data_dir={data}"]
  logdir = str(root / "logdir")
  result = run(FASHION, logdir, "train_eval", *common)
  assert result.returncode == 0, result.stderr[-3000:]
  return root, logdir, common, result


def test_train_eval_prints_accuracy_samples_and_keeps_the_best(cifar_run):
  _, logdir, _, result = cifar_run
  out = result.stdout
  assert "Training 19,660 parameters" in out and "images/s" in out
  assert "eval at step 15:" in out and "top5_accuracy" in out
  final = re.search(r"eval at step 30: loss [\d.]+, accuracy ([\d.]+)", out)
  assert final and float(final.group(1)) > 0.5, out  # 4 drawn classes: chance is 0.25
  assert "Sample target:     " in out and "Sample prediction: " in out
  assert os.path.isfile(os.path.join(logdir, "best_models", "best.json"))
  assert any(name.startswith("events.out.tfevents") for name in os.listdir(logdir))


def test_eval_and_infer_write_file_label_probability_rows(cifar_run):
  root, logdir, common, _ = cifar_run
  evaluated = run(FASHION, logdir, "eval", *common)
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  assert "eval at step 30: loss" in evaluated.stdout and "accuracy" in evaluated.stdout

  output = str(root / "predictions.csv")
  inferred = run(FASHION, logdir, "infer", *common, f"--infer_output_file={output}")
  assert inferred.returncode == 0, inferred.stderr[-3000:]
  assert f"wrote 12 predictions to {output}" in inferred.stdout
  assert "accuracy" in inferred.stdout  # CIFAR files carry their labels: scored
  rows = read_rows(output)
  assert [r["file"] for r in rows] == [f"test_batch.bin:{i}" for i in range(12)]
  assert all(r["label"] in image.SHAPES[:4] for r in rows)
  assert all(0.0 < float(r["probability"]) <= 1.0 for r in rows)


def test_interactive_infer_classifies_image_paths(cifar_run, tmp_path):
  _, logdir, common, _ = cifar_run
  png = image.write_image_file(str(tmp_path / "disc.png"), 2, size=32)
  jpeg = image.write_image_file(str(tmp_path / "stripes.jpg"), 0, size=64)
  missing = str(tmp_path / "missing.png")
  result = run(FASHION, logdir, "interactive_infer", *common, stdin=f"{png}\n{missing}\n{jpeg}\n")
  assert result.returncode == 0, result.stderr[-3000:]
  answers = [line for line in result.stdout.splitlines()
             if line.split(" ")[0] in image.SHAPES]
  assert len(answers) == 2, result.stdout
  assert all(0.0 < float(line.rsplit(" ", 1)[1]) <= 1.0 for line in answers)
  assert f"error: {missing}: image file not found" in result.stderr


def test_imagenet_tfrecords_train_and_infer(tmp_path):
  data = str(tmp_path / "imagenet")
  image.write_imagenet(data, "train", num_files=2, per_file=6)
  image.write_imagenet(data, "validation", num_files=2, per_file=3, seed=1)
  common = TINY_IMAGENET + [f"--data_layer_params/data_dir={data}"]
  logdir = str(tmp_path / "logdir")
  trained = run(RESNET50, logdir, "train_eval", *common)
  assert trained.returncode == 0, trained.stderr[-3000:]
  assert "eval at step 4:" in trained.stdout and "top5_accuracy 1" in trained.stdout
  output = str(tmp_path / "predictions.csv")
  inferred = run(RESNET50, logdir, "infer", *common, f"--infer_output_file={output}")
  assert inferred.returncode == 0, inferred.stderr[-3000:]
  rows = read_rows(output)
  assert [r["file"] for r in rows] == [f"validation-0000{f}-of-00002:{i}"
                                       for f in range(2) for i in range(3)]
  assert all(r["label"] in "0123" for r in rows)


def test_export_classifies_image_files_as_interactive_infer_does(cifar_run, tmp_path):
  _, logdir, common, _ = cifar_run
  export_dir = str(tmp_path / "exported")
  done = run(FASHION, logdir, "export", *common, f"--export_dir={export_dir}")
  assert done.returncode == 0, done.stderr[-3000:]
  assert "serving_default(image) -> label, class_id, probability, probabilities" in done.stdout
  files = [image.write_image_file(str(tmp_path / "disc.png"), 2, size=32),
           image.write_image_file(str(tmp_path / "stripes.png"), 0, size=64),
           image.write_image_file(str(tmp_path / "small.jpg"), 1, size=20)]
  inputs = tmp_path / "inputs.txt"
  inputs.write_text("".join(f + "\n" for f in files))
  served = tmp_path / "served.jsonl"
  run_export_script(export_dir, str(inputs), str(served), "--json")
  rows = [json.loads(line) for line in served.read_text().splitlines()]

  interactive = run(FASHION, logdir, "interactive_infer", *common, stdin=inputs.read_text())
  assert interactive.returncode == 0, interactive.stderr[-3000:]
  answers = [line.rsplit(" ", 1) for line in interactive.stdout.splitlines()
             if line.split(" ")[0] in image.SHAPES]
  assert [r["label"] for r in rows] == [label for label, _ in answers]
  assert [r["probability"] for r in rows] == pytest.approx([float(p) for _, p in answers],
                                                           abs=1e-4)
  assert all(sum(r["probabilities"]) == pytest.approx(1.0, abs=1e-5) for r in rows)
