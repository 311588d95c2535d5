#!/usr/bin/env python
"""Copy synthesis: a trained HiFi-GAN against Griffin-Lim on the same ground-truth mel frames.

    python scripts/compare_vocoders.py \\
        --config_file=example_configs/text2speech/hifigan-asterisk-small.py \\
        --logdir=runs/hifigan-asterisk-small [--csv=data/asterisk/test.csv] [--json]

Every clip of the config's eval set (``--csv``: another CSV of the same layout) is turned into
the vocoder's input frames by its data layer (the features a Tacotron with the same audio
keys predicts), and those frames back into a waveform by

* Griffin-Lim: ``SpectrogramFeatures.to_audio`` (exp, mel to linear through the filterbank's
  pseudo-inverse, ``--griffin_lim_iters`` iterations), as the Tacotron models vocode;
* HiFi-GAN: the generator of the run in ``--logdir`` (its newest checkpoint, ``--best``: the
  best one; the moving averages of its weights when the config sets
  ``moving_average_decay``, as eval and infer use them), built as the run was trained: its
  overrides (``<logdir>/overrides.yaml``) apply again, as for ``run.py --mode=eval``.

Each system's audio is compared with the recording, frame by frame (the same frames, no time
warping): the mel-cepstral distortion in dB (``open_seq2seq/parts/audio/mel_cepstrum.py``:
SPTK-style mel-cepstra c1 .. c24 with the all-pass constant of the sample rate, on the data
layer's STFT frames) and the mean absolute log-mel difference of the HiFi-GAN loss's
spectrogram (``mel L1``), both averaged over every frame of every clip; all three waveforms
are cut to the Griffin-Lim output's length, ``(frames - 1) * hop`` samples. Printed as a
markdown table (``--json``: one JSON object).

A missing logdir, checkpoint, config or corpus is one ``error:`` line and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def parse_args(argv: list[str]) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--config_file", required=True, help="the HiFi-GAN run's config")
  parser.add_argument("--logdir", required=True, help="the trained run's directory")
  parser.add_argument("--csv", help="clips to vocode, a name|raw|normalized CSV whose audio "
                      "is <its folder>/wavs/<name>.wav (default: the config's eval set)")
  parser.add_argument("--best", action="store_true", help="restore the best checkpoint")
  parser.add_argument("--griffin_lim_iters", type=int, default=50,
                      help="Griffin-Lim iterations (default 50, as the Tacotron models)")
  parser.add_argument("--max_clips", type=int, help="vocode at most this many clips")
  parser.add_argument("--json", action="store_true", help="print one JSON object instead")
  args = parser.parse_args(argv)
  if args.griffin_lim_iters < 1:
    parser.error(f"--griffin_lim_iters must be at least 1, got {args.griffin_lim_iters}")
  if args.max_clips is not None and args.max_clips < 1:
    parser.error(f"--max_clips must be at least 1, got {args.max_clips}")
  return args


class Tally:
  """Sums of one system's distances over clips."""

  def __init__(self):
    self.clips = self.frames = self.mel_frames = 0
    self.mcd_sum = self.mel_l1_sum = 0.0

  def add(self, mcd_frames, mel_l1_sum: float, mel_frames: int) -> None:
    self.clips += 1
    self.frames += len(mcd_frames)
    self.mcd_sum += float(sum(mcd_frames))
    self.mel_l1_sum += mel_l1_sum
    self.mel_frames += mel_frames

  def result(self, num_mels: int) -> dict:
    return {"clips": self.clips, "frames": self.frames,
            "mcd_db": self.mcd_sum / max(self.frames, 1),
            "mel_l1": self.mel_l1_sum / max(self.mel_frames * num_mels, 1)}


def compare(args: argparse.Namespace) -> dict:
  """``{"step", "clips", "systems": {name: {"mcd_db", "mel_l1", "clips", "frames"}}}``."""
  # pylint: disable=import-outside-toplevel
  import numpy as np
  import tensorflow as tf
  from open_seq2seq.distributed.backend import Backend
  from open_seq2seq.errors import ConfigError
  from open_seq2seq.losses.hifigan_loss import utterance_distances
  from open_seq2seq.run_settings import load_with_the_runs_settings
  from open_seq2seq.training.checkpoints import checkpoint_for_eval
  from open_seq2seq.training.evaluator import Evaluator, to_numpy

  if not os.path.isdir(args.logdir):
    raise ConfigError(f"--logdir {args.logdir}: no such directory; train the vocoder first "
                      f"(run.py --mode=train_eval) or point --logdir at its run")
  overrides = [f"--logdir={args.logdir}"]
  if args.csv:
    if not os.path.isfile(args.csv):
      raise ConfigError(f"--csv {args.csv}: no such file")
    # a corpus in the LJSpeech layout: the audio is <folder of the CSV>/wavs/<name>.wav
    overrides += [f"--data_layer_params/dataset_files=['{args.csv}']",
                  f"--data_layer_params/dataset_location="
                  f"{os.path.dirname(os.path.abspath(args.csv))}"]
  # the run's own overrides (overrides.yaml) apply again, as for run.py --mode=eval: the
  # generator is built as it was trained
  base_model, configs, notices, _, _ = load_with_the_runs_settings(
      args.config_file, "eval", overrides, None, False)
  for line in notices:
    print(line, file=sys.stderr)
  if not hasattr(base_model, "mcd_frames"):
    raise ConfigError(f"{args.config_file}: base_model is {base_model.__name__}, not a "
                      f"HiFi-GAN vocoder")
  checkpoint = checkpoint_for_eval(args.logdir, args.best)
  model = base_model(configs["eval"], "eval")
  # eval builds the generator alone: the checkpoint's discriminators are left unread; a run
  # trained with moving_average_decay is judged on its averages, as its evals and infer are
  evaluator = Evaluator(model, Backend(), count_unused=False,
                        moving_average_decay=configs["eval"]["moving_average_decay"])
  evaluator.restore_for(model.data_layer, checkpoint)
  features = model.features
  hop = features.hop_length
  systems = {"Griffin-Lim": Tally(), "HiFi-GAN": Tally()}

  def add(name, target, audio, length):
    d = utterance_distances(tf.constant(target[None], tf.float32),
                            tf.constant(audio[None, :length], tf.float32),
                            tf.constant([length]), model.mel_options)
    systems[name].add(model.mcd_frames(target, audio[:length]),
                      float(d["mel_l1_sum"][0]), int(d["frames"][0]))

  for batch in model.data_layer.build_dataset():
    batch = to_numpy(batch)
    generated = evaluator.predict(batch)["audio"]
    mels, frame_counts = batch["source_tensors"]
    for b, frames in enumerate(frame_counts):
      if args.max_clips is not None and systems["HiFi-GAN"].clips >= args.max_clips:
        break
      length = (int(frames) - 1) * hop
      if length <= 0:
        continue  # a one-frame clip leaves Griffin-Lim nothing to compare
      target = batch["target_tensors"][0][b, :length]
      griffin_lim = features.to_audio(tf.constant(mels[b, :int(frames)]),
                                      num_iters=args.griffin_lim_iters).numpy()
      add("Griffin-Lim", target, griffin_lim, length)
      add("HiFi-GAN", target, np.asarray(generated[b]), length)
  if not systems["HiFi-GAN"].clips:
    raise ConfigError("the eval set holds no clip of two frames or more; give --csv")
  step = int(os.path.basename(checkpoint).rsplit("-", 1)[-1]) if "-" in checkpoint else None
  return {"step": step, "clips": systems["HiFi-GAN"].clips, "sample_rate": features.sample_rate,
          "griffin_lim_iters": args.griffin_lim_iters,
          "systems": {name: t.result(features.num_mel) for name, t in systems.items()}}


def table(result: dict) -> str:
  lines = ["| system | clips | frames | MCD (dB) | mel L1 |", "|---|---:|---:|---:|---:|"]
  for name, r in result["systems"].items():
    label = (f"Griffin-Lim ({result['griffin_lim_iters']} iterations)"
             if name == "Griffin-Lim" else f"HiFi-GAN (step {result['step']})")
    lines.append(f"| {label} | {r['clips']} | {r['frames']} | {r['mcd_db']:.2f} | "
                 f"{r['mel_l1']:.3f} |")
  return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
  args = parse_args(sys.argv[1:] if argv is None else argv)
  from open_seq2seq.utils.quiet_start import start_script_quietly  # pylint: disable=import-outside-toplevel
  start_script_quietly()
  from open_seq2seq.errors import OpenSeq2SeqError  # pylint: disable=import-outside-toplevel
  try:
    result = compare(args)
  except OpenSeq2SeqError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(json.dumps(result) if args.json else table(result))
  return 0


if __name__ == "__main__":
  sys.exit(main())
