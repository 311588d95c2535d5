#!/usr/bin/env python
"""Image classification throughput: ResNet-50 training in float32 and mixed precision, and
the input pipelines alone, in images per second. Prints a markdown table.

    python scripts/bench_image2label.py                  # all rows
    python scripts/bench_image2label.py --skip_training  # input pipelines only (~20 s)

On a CPU without native bfloat16 (AVX2 only) a mixed_bfloat16 ResNet-50 step is ~15x slower
than a float32 one: the defaults (batch 8, 4 steps) keep the whole run to ~5 minutes there;
``--dtypes float32`` skips it.

Training runs ``run.py --mode=train --benchmark`` on example_configs/image2label/
resnet-50-v2.py (ResNet-50 v2, 224-pixel crops, ``--num_gpus=1``) in its own process per
dtype, over synthetic ImageNet TFRecords written to a temporary folder: ``--images`` JPEGs of
about ImageNet's average size (400x350, textured so that they compress like photographs).
The ImageNet pipeline row decodes, random-crops, flips, resizes and normalizes those
records exactly as training does; the CIFAR row reads Fashion-MNIST in the CIFAR-10 layout
(scripts/get_fashion_mnist.sh) if present, else synthetic CIFAR records. No assertion:
read the table.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CONFIG = os.path.join(ROOT, "example_configs", "image2label", "resnet-50-v2.py")
FASHION = os.path.join(ROOT, "data", "fashion_mnist", "cifar")


def make_imagenet(directory: str, count: int, files: int = 4, seed: int = 0) -> str:
  """``train-*`` TFRecords of textured 400x350 JPEGs with TF-official features."""
  import tensorflow as tf
  from tests.helpers.image import imagenet_example
  if os.path.isfile(os.path.join(directory, f"train-{files - 1:05d}-of-{files:05d}")):
    return directory
  os.makedirs(directory, exist_ok=True)
  rng = np.random.default_rng(seed)
  y, x = np.mgrid[0:350, 0:400].astype(np.float32)
  for f in range(files):
    with tf.io.TFRecordWriter(os.path.join(directory, f"train-{f:05d}-of-{files:05d}")) as w:
      for i in range(f, count, files):
        base = 128 + 80 * np.sin(x / rng.uniform(8, 40) + rng.uniform(0, 6))[..., None] * \
            np.cos(y / rng.uniform(8, 40))[..., None] * rng.uniform(-1, 1, 3)
        pixels = np.clip(base + rng.normal(0, 20, (350, 400, 3)), 0, 255).astype(np.uint8)
        jpeg = tf.io.encode_jpeg(pixels, quality=90).numpy()
        w.write(imagenet_example(jpeg, 1 + i % 1000, (0.1, 0.1, 0.9, 0.9)))
  return directory


def make_cifar(directory: str) -> str:
  from tests.helpers.image import write_cifar
  if not os.path.isfile(os.path.join(directory, "test_batch.bin")):
    write_cifar(directory, train_per_file=2000, train_files=5, test=10, num_classes=10,
                drawn=False)
  return directory


def pipeline_rate(layer, batches: int, warmup: int = 3) -> float:
  """Images per second of a data layer's training dataset (after ``warmup`` batches)."""
  iterator = iter(layer.build_dataset())
  for _ in range(warmup):
    next(iterator)
  start, images = time.perf_counter(), 0
  for _ in range(batches):
    images += int(next(iterator)["id"].shape[0])
  return images / (time.perf_counter() - start)


def train_rate(data_dir: str, dtype: str, args: argparse.Namespace) -> dict:
  cmd = [sys.executable, os.path.join(ROOT, "run.py"), f"--config_file={CONFIG}",
         "--mode=train", "--benchmark", f"--bench_steps={args.bench_steps}",
         f"--bench_start={args.bench_start}", f"--logdir={args.workdir}/unused",
         f"--dtype={dtype}", "--num_gpus=1", f"--batch_size_per_gpu={args.batch_size}",
         "--print_loss_steps=None", "--print_samples_steps=None",
         f"--data_layer_params/data_dir={data_dir}", "--data_layer_params/shuffle_buffer=64"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
  out = subprocess.run(cmd, capture_output=True, text=True, env=env)
  if out.returncode != 0:
    raise RuntimeError(f"{dtype} failed:\n{' '.join(cmd)}\n{out.stderr[-3000:]}")

  def figure(name: str) -> float:
    match = re.search(rf"\|\s*{re.escape(name)}\s*\|\s*([\d,.]+)", out.stdout)
    if not match:
      raise RuntimeError(f"{dtype}: no '{name}' in the output:\n{out.stdout[-2000:]}")
    return float(match.group(1).replace(",", ""))

  step_s = figure("median time/step (s)")  # run.py rounds images/s to integers: use s/step
  return {"images_per_s": args.batch_size / step_s, "step_s": step_s,
          "peak_mb": figure("peak memory (MB)")}


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--images", type=int, default=512, help="Synthetic ImageNet JPEGs.")
  parser.add_argument("--batch_size", type=int, default=8, help="Training batch.")
  parser.add_argument("--bench_steps", type=int, default=4, help="Training steps run.")
  parser.add_argument("--bench_start", type=int, default=1, help="Warm-up steps excluded.")
  parser.add_argument("--dtypes", default="float32,mixed_bfloat16",
                      help="Comma-separated training dtypes.")
  parser.add_argument("--pipeline_batches", type=int, default=12,
                      help="Batches of 64 timed per input pipeline.")
  parser.add_argument("--skip_training", action="store_true")
  parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(),
                                                        "bench_image2label"))
  args = parser.parse_args(argv)
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()
  from open_seq2seq.data import CifarDataLayer, ImagenetDataLayer

  imagenet_dir = make_imagenet(os.path.join(args.workdir, "imagenet"), args.images)
  cifar_dir = FASHION if os.path.isfile(os.path.join(FASHION, "test_batch.bin")) else \
      make_cifar(os.path.join(args.workdir, "cifar"))
  rows = []
  imagenet = ImagenetDataLayer({"data_dir": imagenet_dir, "shuffle_buffer": 64}, mode="train",
                               batch_size=64, random_seed=0)
  rows.append(("input pipeline: ImageNet TFRecords, 224-px random-resized crops", "-",
               pipeline_rate(imagenet, args.pipeline_batches), None, None))
  cifar = CifarDataLayer({"data_dir": cifar_dir}, mode="train", batch_size=64, random_seed=0)
  what = "Fashion-MNIST" if cifar_dir == FASHION else "synthetic records"
  rows.append((f"input pipeline: CIFAR binary ({what}), 28-px crops", "-",
               pipeline_rate(cifar, args.pipeline_batches * 4), None, None))
  if not args.skip_training:
    for dtype in [d for d in args.dtypes.split(",") if d]:
      result = train_rate(imagenet_dir, dtype, args)
      rows.append((f"ResNet-50 v2 training, 224 px, batch {args.batch_size}", dtype,
                   result["images_per_s"], result["step_s"], result["peak_mb"]))

  print(f"\n| what | dtype | images/s | s/step | peak MB |\n|---|---|---:|---:|---:|")
  for what, dtype, rate, step, mb in rows:
    print(f"| {what} | {dtype} | {rate:,.1f} | "
          f"{'' if step is None else f'{step:.2f}'} | {'' if mb is None else f'{mb:,.0f}'} |")
  if not args.skip_training:
    print(f"\nTraining: {args.bench_steps} steps per dtype, first {args.bench_start} excluded, "
          f"medians; one process per dtype.")
  return 0


if __name__ == "__main__":
  sys.exit(main())
