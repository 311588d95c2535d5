#!/usr/bin/env python
"""Speech benchmarks: input-pipeline speed (seconds of audio per second) and training
utterances per second of speech configs, printed as tables.

    python scripts/benchmark_speech_input.py                      # input pipeline only
    python scripts/benchmark_speech_input.py --train              # + training speed
    python scripts/benchmark_speech_input.py --train --dtypes float32,mixed_bfloat16

The corpus is generated in a temporary folder: ``--utterances`` tones of 2-8 s (or espeak-ng
speech with ``--espeak``), 16 kHz 16-bit WAV.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

VOCAB = os.path.join(ROOT, "open_seq2seq", "test_utils", "toy_speech_data", "vocab.txt")


def make_tone_corpus(directory: str, count: int, seed: int = 0) -> tuple[str, float]:
  """``count`` noisy chirps of 2-8 s; returns (csv path, total seconds)."""
  import soundfile
  rng = np.random.default_rng(seed)
  os.makedirs(os.path.join(directory, "wav"), exist_ok=True)
  path = os.path.join(directory, "bench.csv")
  total = 0.0
  with open(path, "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["wav_filename", "wav_filesize", "transcript"])
    for i in range(count):
      seconds = float(rng.uniform(2, 8))
      t = np.arange(int(seconds * 16000)) / 16000
      signal = 0.3 * np.sin(2 * np.pi * (150 + 300 * rng.random()) * t * (1 + t / 4))
      signal += 0.02 * rng.standard_normal(len(t))
      wav = os.path.join(directory, "wav", f"{i:05d}.wav")
      soundfile.write(wav, signal.astype(np.float32), 16000, subtype="PCM_16")
      writer.writerow([wav, os.path.getsize(wav), "one two three four five six seven"])
      total += seconds
  return path, total


def make_espeak_corpus(directory: str, count: int) -> tuple[str, float]:
  sys.path.insert(0, os.path.join(ROOT, "scripts"))
  from make_synthetic_speech import make_corpus
  import soundfile
  csv_path = make_corpus(directory, {"bench": count}, min_words=6, max_words=14)["bench"]
  with open(csv_path) as f:
    rows = list(csv.DictReader(f))
  total = sum(soundfile.info(os.path.join(directory, r["wav_filename"])).duration for r in rows)
  return csv_path, total


def input_pipeline(csv_path: str, seconds: float, input_type: str, augment: bool,
                   batch_size: int) -> float:
  """Seconds of audio featurized per wall-clock second over one pass."""
  from open_seq2seq.data.speech2text.speech2text import Speech2TextDataLayer
  params = {"num_audio_features": 64 if input_type != "spectrogram" else 160,
            "input_type": input_type, "vocab_file": VOCAB, "dataset_files": [csv_path],
            "repeat": False, "shuffle": False}
  if augment:
    params["augmentation"] = {"speed_perturbation_ratio": 0.05, "noise_level_min": -90,
                              "noise_level_max": -60, "n_freq_mask": 2, "width_freq_mask": 6,
                              "n_time_mask": 2, "width_time_mask": 6}
  layer = Speech2TextDataLayer(params, mode="train" if augment else "eval",
                               batch_size=batch_size)
  start = time.perf_counter()
  frames = 0
  for batch in layer.build_dataset():
    frames += int(batch["source_tensors"][1].numpy().sum())
  return seconds / (time.perf_counter() - start)


def features_alone(csv_path: str, input_type: str, repeats: int = 3) -> float:
  """Seconds of audio per second of the feature code alone, one utterance at a time
  (``FeatureExtractor.__call__``: the TF graph of ``features_graph`` as a tf.function)."""
  from open_seq2seq.data.speech2text.audio import read_audio
  from open_seq2seq.data.speech2text.features import FeatureExtractor
  with open(csv_path) as f:
    paths = [r["wav_filename"] for r in csv.DictReader(f)][:20]
  base = os.path.dirname(csv_path)
  signals = [read_audio(p if os.path.isabs(p) else os.path.join(base, p), 16000) for p in paths]
  extractor = FeatureExtractor(input_type, 64 if input_type != "spectrogram" else 160)
  for s in signals[:2]:  # trace once before timing
    extractor(s)
  start = time.perf_counter()
  for _ in range(repeats):
    for s in signals:
      extractor(s)
  return repeats * sum(len(s) for s in signals) / 16000 / (time.perf_counter() - start)


def train_speed(config: str, csv_path: str, dtype: str, batch_size: int, steps: int,
                warmup: int = 3) -> tuple[float, float]:
  """(median seconds per step, utterances per second) of Adam steps on ``config``."""
  import keras
  import tensorflow as tf
  from open_seq2seq.config import load_config
  overrides = [f"--data_layer_params/dataset_files=['{csv_path}']",
               f"--data_layer_params/vocab_file={VOCAB}", f"--batch_size_per_gpu={batch_size}",
               f"--dtype={dtype}", "--data_layer_params/augmentation=None"]
  base_model, configs = load_config(config, "train", overrides)
  model = base_model(configs["train"], "train")
  optimizer = keras.optimizers.Adam(1e-4)

  @tf.function(reduce_retracing=True)
  def step(batch):
    with tf.GradientTape() as tape:
      loss, weight, _ = model.compute_loss(batch, training=True)
      loss = loss / weight
    variables = model.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

  times = []
  for batch in model.data_layer.build_dataset().take(steps + warmup):
    start = time.perf_counter()
    step(batch).numpy()
    times.append(time.perf_counter() - start)
  median = float(np.median(times[warmup:]))
  return median, batch_size / median


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--utterances", type=int, default=150)
  parser.add_argument("--espeak", action="store_true", help="speech from espeak-ng, not tones")
  parser.add_argument("--batch_size", type=int, default=16)
  parser.add_argument("--train", action="store_true", help="also measure training speed")
  parser.add_argument("--configs", default="w2l_toy_synthetic.py,ds2_small_1gpu.py")
  parser.add_argument("--dtypes", default="float32,mixed_bfloat16")
  parser.add_argument("--train_batch_size", type=int, default=8)
  parser.add_argument("--steps", type=int, default=8)
  args = parser.parse_args(argv)
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()
  with tempfile.TemporaryDirectory() as tmp:
    make = make_espeak_corpus if args.espeak else make_tone_corpus
    csv_path, seconds = make(tmp, args.utterances)
    print(f"corpus: {args.utterances} utterances, {seconds:.0f} s of audio; "
          f"{os.cpu_count()} cores\n")
    print("| features | augmentation | tf.data pipeline (x real time) | features alone, one utterance at a time (x real time) |")
    print("|---|---|---|---|")
    for input_type in ("spectrogram", "logfbank", "mfcc"):
      single = features_alone(csv_path, input_type)
      for augment in (False, True):
        speed = input_pipeline(csv_path, seconds, input_type, augment, args.batch_size)
        print(f"| {input_type} | {'speed+noise+SpecAugment' if augment else 'none'} | "
              f"{speed:,.0f} | {single:,.0f} |", flush=True)
    if args.train:
      print("\n| config | dtype | batch | s/step | utterances/s |")
      print("|---|---|---|---|---|")
      for name in args.configs.split(","):
        for dtype in args.dtypes.split(","):
          step_time, speed = train_speed(os.path.join(ROOT, "example_configs", "speech2text", name),
                                         csv_path, dtype, args.train_batch_size, args.steps)
          print(f"| {name} | {dtype} | {args.train_batch_size} | {step_time:.3f} | "
                f"{speed:.1f} |", flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
