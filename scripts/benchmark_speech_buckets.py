#!/usr/bin/env python
"""Duration-bucketed speech batches against one padded bucket: padding, batches and speed.

    python scripts/benchmark_speech_buckets.py                    # 400 utterances, 1-35 s
    python scripts/benchmark_speech_buckets.py --train            # + train steps, tiny model
    python scripts/benchmark_speech_buckets.py --utterances 100 --num_buckets 1,10

A LibriSpeech-like corpus is generated in a temporary folder: ``--utterances`` WAVs of quiet
noise at 16 kHz whose durations are log-normal (median 10 s, sigma 0.6) clipped to 1-35 s, a
long tail as in LibriSpeech. Each row of the table is one training epoch of
Speech2TextDataLayer (64 log-mel features, shuffled, seeded) with ``batching: "examples"``
(``--batch_size`` utterances, today's one bucket) or ``batching: "duration"`` with
``batch_duration`` = batch_size x the mean duration (about as much real audio per batch) and
``num_buckets`` buckets. Columns: batches of the epoch, the largest padded batch (what memory
must hold), padding (share of the padded frames that are not audio), the input pipeline's
seconds of audio per second (decoding and features included) and, with ``--train``, seconds
of audio per second of Adam steps of a tiny conv + CTC model on batches drawn from the epoch
(``--train_audio`` seconds of audio: the compute that padding wastes). Rows run round robin,
``--rounds`` times, and speeds are medians, so that the load of a shared machine hits every
row alike. Prints the CPU, since figures move with it.
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
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

VOCAB = os.path.join(ROOT, "open_seq2seq", "test_utils", "toy_speech_data", "vocab.txt")
RATE = 16000
WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "zero"]



def make_corpus(directory: str, count: int, seed: int = 0) -> tuple[str, np.ndarray]:
  """``count`` noise WAVs of log-normal durations in [1, 35] s; (csv path, durations)."""
  import soundfile
  rng = np.random.default_rng(seed)
  durations = np.clip(rng.lognormal(np.log(10.0), 0.6, size=count), 1.0, 35.0)
  os.makedirs(os.path.join(directory, "wav"), exist_ok=True)
  path = os.path.join(directory, "bench.csv")
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(["wav_filename", "wav_filesize", "transcript"])
    for i, seconds in enumerate(durations):
      samples = (rng.standard_normal(int(seconds * RATE)) * 300).astype(np.int16)
      wav = os.path.join(directory, "wav", f"{i:05d}.wav")
      soundfile.write(wav, samples, RATE, subtype="PCM_16")
      # about 2.5 words per second, as read speech
      words = rng.choice(WORDS, size=max(1, int(seconds * 2.5)))
      writer.writerow([wav, os.path.getsize(wav), " ".join(words)])
  return path, durations


def make_layer(csv_path: str, batching: dict, batch_size: int):
  """A training layer over the corpus: one shuffled, seeded pass."""
  from open_seq2seq.data.speech2text.speech2text import Speech2TextDataLayer
  params = Speech2TextDataLayer.validate_params({
      "num_audio_features": 64, "input_type": "logfbank", "vocab_file": VOCAB,
      "dataset_files": [csv_path], "repeat": False, "pad_to": 8, **batching})
  return Speech2TextDataLayer(params, "train", batch_size, random_seed=1)


def one_epoch(layer) -> tuple[list, float]:
  """The epoch's batches (numpy) and the wall-clock seconds the input pipeline took."""
  start = time.perf_counter()
  batches = [(b["source_tensors"][0].numpy(), b["source_tensors"][1].numpy(),
              b["target_tensors"][0].numpy(), b["target_tensors"][1].numpy())
             for b in layer.build_dataset()]
  return batches, time.perf_counter() - start


def tiny_model_speed(batches: list, vocab_size: int, audio_seconds: float) -> float:
  """Seconds of audio per second of Adam steps of a tiny conv + CTC model on batches drawn
  at random from the epoch until they hold ``audio_seconds`` of audio. They are stepped
  through twice and the second pass is timed: oneDNN builds its kernels for each new batch
  shape once, which would otherwise weigh on the rows with the most distinct shapes."""
  import keras
  import tensorflow as tf
  from open_seq2seq.losses.ctc_loss import ctc_loss_per_utterance  # the CTCLoss kernel
  model = keras.Sequential([
      keras.layers.Conv1D(128, 11, strides=2, padding="same", activation="relu"),
      keras.layers.Conv1D(128, 11, padding="same", activation="relu"),
      keras.layers.Conv1D(128, 11, padding="same", activation="relu"),
      keras.layers.Dense(vocab_size)])
  model.build((None, None, 64))
  optimizer = keras.optimizers.Adam(1e-4)
  spec = [tf.TensorSpec([None, None, 64], tf.float32), tf.TensorSpec([None], tf.int32),
          tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)]

  @tf.function(input_signature=spec)
  def step(x, x_len, y, y_len):
    with tf.GradientTape() as tape:
      logits = model(x, training=True)
      loss = tf.reduce_mean(ctc_loss_per_utterance(y, y_len, logits, (x_len + 1) // 2))
    variables = model.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

  chosen, frames = [], 0
  for i in np.random.default_rng(0).permutation(len(batches)):
    chosen.append(batches[i])
    frames += int(batches[i][1].sum())
    if frames * 0.01 >= audio_seconds:
      break
  for batch in chosen:
    step(*batch).numpy()
  start = time.perf_counter()
  for batch in chosen:
    step(*batch).numpy()
  return frames * 0.01 / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--utterances", type=int, default=400)
  parser.add_argument("--batch_size", type=int, default=16,
                      help="utterances per batch of 'examples' batching")
  parser.add_argument("--num_buckets", default="1,10,30",
                      help="bucket counts of 'duration' batching, comma-separated")
  parser.add_argument("--train", action="store_true", help="also time a tiny model's steps")
  parser.add_argument("--train_audio", type=float, default=300,
                      help="seconds of audio of the steps timed per row (--train)")
  parser.add_argument("--rounds", type=int, default=3,
                      help="passes over all rows, round robin; speeds are their medians")
  args = parser.parse_args(argv)
  from open_seq2seq.utils import quiet_start  # pylint: disable=import-outside-toplevel
  quiet_start.start_script_quietly()
  with tempfile.TemporaryDirectory() as tmp:
    csv_path, durations = make_corpus(tmp, args.utterances)
    budget = round(args.batch_size * float(durations.mean()))
    from open_seq2seq.run_record import cpu_name  # pylint: disable=import-outside-toplevel
    print(f"CPU: {cpu_name()} ({os.cpu_count()} cores)")
    print(f"corpus: {len(durations)} utterances, {durations.sum():.0f} s of audio, "
          f"{durations.min():.1f}-{durations.max():.1f} s (median {np.median(durations):.1f})\n")
    variants = [(f"examples, batch_size {args.batch_size}", {"batching": "examples"})]
    variants += [(f"duration {budget} s, {n} bucket{'s' * (n > 1)}",
                  {"batching": "duration", "batch_duration": float(budget), "num_buckets": n})
                 for n in map(int, args.num_buckets.split(","))]
    header = ("| batching | batches | largest batch (padded s) | padding | "
              "input pipeline (s of audio/s) |" + (" train steps (s of audio/s) |" * args.train))
    for _ in make_layer(csv_path, {"batching": "examples"}, 2).build_dataset().take(2):
      pass  # the first rows' timing should not include tracing the features
    figures: dict[str, dict] = {name: {"pipeline": [], "train": []} for name, _ in variants}
    for _ in range(args.rounds):
      for name, batching in variants:
        layer = make_layer(csv_path, batching, args.batch_size)
        batches, seconds = one_epoch(layer)
        assert len(batches) == layer.batches_per_epoch()
        row = figures[name]
        row["real"] = sum(int(b[1].sum()) for b in batches)
        row["padded"] = [b[0].shape[0] * b[0].shape[1] for b in batches]
        row["pipeline"].append(row["real"] * 0.01 / seconds)
        if args.train:
          row["train"].append(tiny_model_speed(batches, layer.targets.vocab_size,
                                               args.train_audio))
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for name, _ in variants:
      row = figures[name]
      line = (f"| {name} | {len(row['padded'])} | {max(row['padded']) * 0.01:.0f} | "
              f"{1 - row['real'] / sum(row['padded']):.1%} | "
              f"{np.median(row['pipeline']):,.0f} |")
      if args.train:
        line += f" {np.median(row['train']):,.0f} |"
      print(line)
    print(f"\nspeeds: medians of {args.rounds} round(s)")
  return 0


if __name__ == "__main__":
  sys.exit(main())
