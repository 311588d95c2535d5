"""Real images: the shipped small-ResNet config learns Fashion-MNIST (Debian's
dataset-fashion-mnist, converted to the CIFAR-10 binary layout by scripts/get_fashion_mnist.sh)
to >= 85 % accuracy on the 10,000 test images in one epoch through run.py, and infer's CSV
agrees with the test labels. A model that learns nothing scores 10 %.

The data is part of the test set-up (scripts/install_test_deps.sh fetches it): when it is
missing the test fails and says how to get it, rather than skipping.
"""

import os
import re

import numpy as np
import pytest

from tests.helpers import image, toy

pytestmark = pytest.mark.slow

CONFIG = os.path.join(image.CONFIG_DIR, "resnet_fashion_mnist.py")
THRESHOLD = 0.85


@pytest.fixture(scope="module")
def data_dir():
  directory = image.FASHION_CIFAR_DIR
  if not os.path.isfile(os.path.join(directory, "test_batch.bin")):
    pytest.fail(f"Fashion-MNIST is missing from {directory}: run "
                f"`bash scripts/get_fashion_mnist.sh` (Debian package dataset-fashion-mnist)",
                pytrace=False)
  return directory


@pytest.fixture(scope="module")
def trained(tmp_path_factory, data_dir):
  logdir = str(tmp_path_factory.mktemp("fashion") / "logdir")
  args = [f"--config_file={CONFIG}", f"--logdir={logdir}",
          f"--data_layer_params/data_dir={data_dir}"]
  result = toy.run_cli(args + ["--mode=train_eval"], timeout=1200)
  assert result.returncode == 0, result.stderr[-3000:]
  return args, result


def test_reaches_85_percent_on_the_test_set(trained):
  out = trained[1].stdout
  evals = re.findall(r"eval at step (\d+): loss ([\d.]+), accuracy ([\d.]+)", out)
  assert evals, out[-3000:]
  step, loss, accuracy = evals[-1]
  assert int(step) == 938  # one epoch of 60,000 images in batches of 64
  assert float(accuracy) >= THRESHOLD, f"test accuracy {accuracy} after one epoch"


def test_infer_csv_agrees_with_the_test_labels(trained, data_dir, tmp_path):
  args, _ = trained
  output = str(tmp_path / "fashion_predictions.csv")
  result = toy.run_cli(args + ["--mode=infer", f"--infer_output_file={output}"], timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"wrote 10000 predictions to {output}" in result.stdout
  with open(os.path.join(data_dir, "test_batch.bin"), "rb") as f:
    labels = np.frombuffer(f.read(), np.uint8).reshape(-1, 3073)[:, 0]
  with open(os.path.join(data_dir, "batches.meta.txt"), encoding="utf-8") as f:
    names = [line.strip() for line in f if line.strip()]
  with open(output, encoding="utf-8") as f:
    header, *rows = f.read().splitlines()
  assert header == "file,label,probability" and len(rows) == 10000
  predicted = [row.rsplit(",", 2) for row in rows]
  assert [p[0] for p in predicted[:2]] == ["test_batch.bin:0", "test_batch.bin:1"]
  accuracy = np.mean([names.index(p[1].strip('"')) == y for p, y in zip(predicted, labels)])
  assert accuracy >= THRESHOLD
  assert re.search(r"accuracy 0\.\d\d", result.stdout)  # scored by the model as well
