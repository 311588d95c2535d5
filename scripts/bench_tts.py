#!/usr/bin/env python
"""Speech-synthesis speed: Tacotron 2 training frames/s and the real-time factor of inference
(free-running decoder + Griffin-Lim), float32 vs mixed bfloat16, beside the real-time factor
of the vocoders (HiFi-GAN, WaveNet) and of FastPitch + HiFi-GAN (text to waveform). Prints
markdown tables.

    python scripts/bench_tts.py                      # every row (~11 minutes on 2 cores)
    python scripts/bench_tts.py --rows train_fp32,rtf_fp32 --logdir runs/tacotron-synthetic-small
    python scripts/bench_tts.py --rows hifigan_fp32,hifigan_v1_fp32,wavenet_fp32
    python scripts/bench_tts.py --rows rtf_fp32,voice_fp32,voice_asterisk_fp32,voice_lj_fp32

The model is example_configs/text2speech/tacotron-synthetic-small.py (482k parameters, 40
mels, 3 frames per decoder step, 16 kHz, hop 256) on the synthetic espeak-ng corpus
(data/synth_tts, made when absent).

* ``train_*``: ``run.py --mode=train --benchmark`` in its own process; frames/s are the
  target frames of a batch over the median step time.
* ``rtf_*``: in its own process, the infer-mode model synthesizes the test sentences (one
  batch): the free-running decoder (a ``tf.function``), then Griffin-Lim (60 iterations, as
  infer writes WAVs). The real-time factor is seconds of compute per second of audio (< 1:
  faster than real time). Without ``--logdir`` the weights are random and the stop token is
  switched off (``stop_threshold`` 2): the decoder runs to its length limit, which costs per
  frame what a trained one costs (the figure is per second of audio), but the audio is noise.
  With ``--logdir`` of a trained run its newest checkpoint is restored.
* vocoder rows (random weights: the cost of a forward pass does not depend on them), each in
  its own process, the infer-mode model turning the mel frames of the test recordings into a
  waveform (its ``predict``, a ``tf.function``):

  - ``hifigan_*``: the generator of hifigan-synthetic-small.py (V3's layout at a quarter of
    its channels, 16 kHz, hop 256: the audio keys of the Tacotron above), one batch of 16;
  - ``hifigan_v1_*``: the generator of hifigan_v1.py (V1 at the paper's size, 13.9 M
    parameters, 22.05 kHz, 80 mels) on the same recordings, one batch of 16;
  - ``wavenet_*``: wavenet_float.py (OpenSeq2Seq's published size, 22.05 kHz), autoregressive
    sampling of the first ``--wavenet_seconds`` (0.25 s) of one recording: one sample per
    step, so its RTF does not depend on the clip's length.
* ``voice*`` rows: FastPitch + HiFi-GAN, text to waveform, in its own process (random
  weights): the infer-mode FastPitch speaks the test sentences (one batch of up to 16, its
  ``predict``), then the HiFi-GAN generator turns its mel frames into waveforms (one batch).
  The duration predictor's output layer is set to give every symbol the test recordings'
  mean frames per symbol (so the audio is as long as trained speech would be; the cost per
  frame does not depend on the weights). The two configs' mel settings are checked to match
  (as ``vocoder: {"export_dir": ...}`` checks them):

  - ``voice_*``: fastpitch-synthetic-small.py + hifigan-synthetic-small.py (16 kHz, 40 mels);
  - ``voice_asterisk_*``: fastpitch-asterisk-small.py + hifigan-asterisk-small.py (the
    Asterisk prompts' 8 kHz, 40 mels; the sentences are the synthetic corpus's);
  - ``voice_lj_*``: fastpitch_ljspeech.py + hifigan_v1.py (the published LJSpeech sizes:
    22.05 kHz, 80 mels, 45.7 M + 13.9 M parameters).

No assertion: read the tables, and compare rows of one run only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
CONFIG_DIR = os.path.join(ROOT, "example_configs", "text2speech")
CONFIG = os.path.join(CONFIG_DIR, "tacotron-synthetic-small.py")
DTYPES = {"fp32": "float32", "bf16": "mixed_bfloat16"}
#: vocoder row prefix: (config file, what the row measures)
VOCODERS = {"hifigan": ("hifigan-synthetic-small.py", "HiFi-GAN V3/4 generator"),
            "hifigan_v1": ("hifigan_v1.py", "HiFi-GAN V1 generator"),
            "wavenet": ("wavenet_float.py", "WaveNet sampling")}
#: voice row prefix: (acoustic config, vocoder config, label)
VOICES = {"voice": ("fastpitch-synthetic-small.py", "hifigan-synthetic-small.py",
                    "FastPitch + HiFi-GAN, synthetic small"),
          "voice_asterisk": ("fastpitch-asterisk-small.py", "hifigan-asterisk-small.py",
                             "FastPitch + HiFi-GAN, Asterisk small"),
          "voice_lj": ("fastpitch_ljspeech.py", "hifigan_v1.py",
                       "FastPitch + HiFi-GAN V1, LJSpeech sizes")}
ROWS = [f"{kind}_{d}" for kind in ("train", "rtf", *VOCODERS, *VOICES) for d in DTYPES]
GL_ITERS = 60
REPEATS = 3
VOCODER_BATCH = 16


def corpus(directory: str) -> str:
  if os.path.isfile(os.path.join(directory, "train.csv")):
    return directory
  from tests.helpers.tts import make_synthetic_corpus
  make_synthetic_corpus(directory, {"train": 300, "val": 20, "test": 8}, seed=0)
  return directory


def train_row(dtype: str, data: str, args: argparse.Namespace) -> dict:
  cmd = [sys.executable, os.path.join(ROOT, "run.py"), f"--config_file={CONFIG}",
         "--mode=train", "--benchmark", f"--bench_steps={args.bench_steps}",
         f"--bench_start={args.bench_start}", f"--logdir={args.workdir}/unused",
         f"--dtype={dtype}", "--max_steps=1000", "--print_loss_steps=None",
         "--print_samples_steps=None"]
  out = subprocess.run(cmd, capture_output=True, text=True, env=_env(data))
  if out.returncode != 0:
    raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")

  def figure(label: str) -> float:
    match = re.search(rf"\|\s*{re.escape(label)}\s*\|\s*([\d,.]+)", out.stdout)
    if not match:
      raise RuntimeError(f"no '{label}' in the output:\n{out.stdout[-2000:]}")
    return float(match.group(1).replace(",", ""))

  audio_per_s = figure("median s of audio/s")
  return {"frames_per_s": audio_per_s * 16000 / 256, "audio_per_s": audio_per_s,
          "step_s": figure("median time/step (s)"), "peak_mb": figure("peak memory (MB)")}


def rtf_row(dtype: str, data: str, args: argparse.Namespace) -> dict:
  cmd = [sys.executable, os.path.abspath(__file__), "--measure_rtf", dtype,
         f"--workdir={args.workdir}"] + ([f"--logdir={args.logdir}"] if args.logdir else [])
  out = subprocess.run(cmd, capture_output=True, text=True, env=_env(data))
  if out.returncode != 0:
    raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
  return json.loads(out.stdout.strip().splitlines()[-1])


def vocoder_row(kind: str, dtype: str, data: str, args: argparse.Namespace) -> dict:
  cmd = [sys.executable, os.path.abspath(__file__), "--measure_vocoder", f"{kind}:{dtype}",
         f"--data={data}", f"--wavenet_seconds={args.wavenet_seconds}"]
  out = subprocess.run(cmd, capture_output=True, text=True, env=_env(data))
  if out.returncode != 0:
    raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
  return json.loads(out.stdout.strip().splitlines()[-1])


def voice_row(kind: str, dtype: str, data: str) -> dict:
  cmd = [sys.executable, os.path.abspath(__file__), "--measure_voice", f"{kind}:{dtype}",
         f"--data={data}"]
  out = subprocess.run(cmd, capture_output=True, text=True, env=_env(data))
  if out.returncode != 0:
    raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
  return json.loads(out.stdout.strip().splitlines()[-1])


def _env(data: str) -> dict:
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, TTS_DATA=data)


def measure_rtf(dtype: str, logdir: str | None) -> dict:
  """In this process: decoder and Griffin-Lim seconds per second of audio (medians)."""
  import numpy as np
  import tensorflow as tf
  from open_seq2seq.config import load_config
  from open_seq2seq.distributed.backend import Backend
  from open_seq2seq.training.evaluator import Evaluator
  overrides = [f"--dtype={dtype}"] + ([f"--logdir={logdir}"] if logdir else
                                      ["--decoder_params/stop_threshold=2.0"])
  base_model, configs = load_config(CONFIG, "infer", overrides)
  model = base_model(configs["infer"], "infer")
  evaluator = Evaluator(model, Backend())
  batch = next(iter(model.data_layer.build_dataset()))
  evaluator.ensure_variables(batch)
  if logdir:
    evaluator.restore(tf.train.latest_checkpoint(logdir))
  features = model.features
  decode, vocode = [], []
  for _ in range(REPEATS + 1):  # the first run traces
    start = time.perf_counter()
    out = evaluator.predict(batch)
    decode.append(time.perf_counter() - start)
    start = time.perf_counter()
    features.to_audio(tf.constant(out["spectrogram"]), None, num_iters=GL_ITERS).numpy()
    vocode.append(time.perf_counter() - start)
  frames = int(np.sum(out["final_sequence_lengths"]))
  audio = frames * features.hop_length / features.sample_rate
  decode_s, vocode_s = float(np.median(decode[1:])), float(np.median(vocode[1:]))
  return {"sentences": int(len(out["final_sequence_lengths"])), "audio_s": audio,
          "decode_rtf": decode_s / audio, "gl_rtf": vocode_s / audio,
          "rtf": (decode_s + vocode_s) / audio}


def measure_vocoder(kind: str, dtype: str, data: str, wavenet_seconds: float) -> dict:
  """In this process: a vocoder's seconds of compute per second of audio (median), random
  weights, on the mel frames of ``data``'s test recordings."""
  import numpy as np
  import tensorflow as tf
  from open_seq2seq.config import load_config
  from open_seq2seq.distributed.backend import Backend
  from open_seq2seq.training.evaluator import Evaluator
  overrides = [f"--dtype={dtype}", f"--data_layer_params/dataset_location={data}",
               f"--data_layer_params/dataset_files=['{os.path.join(data, 'test.csv')}']",
               f"--eval_batch_size_per_gpu={1 if kind == 'wavenet' else VOCODER_BATCH}"]
  base_model, configs = load_config(os.path.join(CONFIG_DIR, VOCODERS[kind][0]), "infer",
                                    overrides)
  model = base_model(configs["infer"], "infer")
  evaluator = Evaluator(model, Backend())
  batch = next(iter(model.data_layer.build_dataset()))
  if kind == "wavenet":  # sampling is one step per sample: a short clip says it all
    mel, lengths = batch["source_tensors"]
    frames = max(1, round(wavenet_seconds * model.description.sample_rate /
                          model.description.hop_length))
    batch = dict(batch, source_tensors=(mel[:, :frames], tf.minimum(lengths, frames)))
  evaluator.ensure_variables(batch)
  repeats = 2 if kind == "wavenet" else REPEATS
  times = []
  for _ in range(repeats + 1):  # the first run traces
    start = time.perf_counter()
    out = evaluator.predict(batch)
    times.append(time.perf_counter() - start)
  audio = int(np.sum(out["audio_lengths"])) / model.output_sample_rate
  parameters = sum(int(np.prod(v.shape)) for v in model.encoder.trainable_variables)
  return {"clips": int(len(out["audio_lengths"])), "audio_s": audio, "parameters": parameters,
          "sample_rate": model.output_sample_rate, "repeats": repeats,
          "rtf": float(np.median(times[1:])) / audio}


def seconds_per_symbol(csv_path: str) -> float:
  """Seconds of recorded speech per input symbol (characters of the normalized text plus the
  start and end symbols) over the clips of ``csv_path``."""
  import soundfile
  seconds = symbols = 0
  with open(csv_path, encoding="utf-8") as f:
    for line in f:
      if line.strip():
        fields = line.rstrip("\n").split("|")
        name, text = fields[0], fields[-1]
        info = soundfile.info(os.path.join(os.path.dirname(csv_path), "wavs", f"{name}.wav"))
        seconds += info.frames / info.samplerate
        symbols += len(text) + 2
  return seconds / max(symbols, 1)


def measure_voice(kind: str, dtype: str, data: str) -> dict:
  """In this process: FastPitch's and HiFi-GAN's seconds of compute per second of audio
  (medians), random weights, every symbol of the test sentences as long as recorded speech."""
  import numpy as np
  import tensorflow as tf
  from open_seq2seq.config import load_config
  from open_seq2seq.distributed.backend import Backend
  from open_seq2seq.models.vocoder_link import check_mel_settings
  from open_seq2seq.training.evaluator import Evaluator
  acoustic_config, vocoder_config, _ = VOICES[kind]
  test_csv = os.path.join(data, "test.csv")
  base_model, configs = load_config(os.path.join(CONFIG_DIR, acoustic_config), "infer", [
      f"--dtype={dtype}", f"--data_layer_params/dataset_location={data}",
      f"--data_layer_params/dataset_files=['{test_csv}']",
      "--data_layer_params/pitch_mean=200.0", "--data_layer_params/pitch_std=40.0",
      f"--eval_batch_size_per_gpu={VOCODER_BATCH}"])
  model = base_model(configs["infer"], "infer")
  acoustic = Evaluator(model, Backend())
  batch = next(iter(model.data_layer.build_dataset()))
  acoustic.ensure_variables(batch)
  features = model.features
  per_symbol = seconds_per_symbol(test_csv)
  frames_per_symbol = per_symbol * features.sample_rate / features.hop_length
  projection = model.decoder.duration_predictor.projection  # log(1 + frames) per symbol
  projection.kernel.assign(tf.zeros_like(projection.kernel))
  projection.bias.assign(tf.fill(projection.bias.shape, float(np.log1p(frames_per_symbol))))
  base_vocoder, vocoder_configs = load_config(os.path.join(CONFIG_DIR, vocoder_config),
                                              "interactive_infer", [f"--dtype={dtype}"])
  vocoder_model = base_vocoder(vocoder_configs["interactive_infer"], "interactive_infer")
  check_mel_settings(features, vocoder_model.features, vocoder_config)
  vocoder = Evaluator(vocoder_model, Backend())
  decode, vocode = [], []
  for _ in range(REPEATS + 1):  # the first run traces
    start = time.perf_counter()
    out = acoustic.predict(batch)
    decode.append(time.perf_counter() - start)
    mel = {"source_tensors": (tf.constant(out["spectrogram"], tf.float32),
                              tf.constant(out["final_sequence_lengths"], tf.int32))}
    vocoder.ensure_variables(mel)
    start = time.perf_counter()
    audio = vocoder.predict(mel)
    vocode.append(time.perf_counter() - start)
  seconds = int(np.sum(audio["audio_lengths"])) / features.sample_rate
  decode_s, vocode_s = float(np.median(decode[1:])), float(np.median(vocode[1:]))
  count = lambda layers: sum(int(np.prod(v.shape)) for layer in layers  # noqa: E731
                             for v in layer.trainable_variables)
  return {"sentences": int(len(out["final_sequence_lengths"])), "audio_s": seconds,
          "seconds_per_symbol": per_symbol, "sample_rate": features.sample_rate,
          "acoustic_parameters": count([model.encoder, model.decoder]),
          "vocoder_parameters": count([vocoder_model.encoder]),
          "acoustic_rtf": decode_s / seconds, "vocoder_rtf": vocode_s / seconds,
          "rtf": (decode_s + vocode_s) / seconds}


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--rows", default=",".join(ROWS), help="Comma-separated rows: " +
                      ", ".join(ROWS))
  parser.add_argument("--bench_steps", type=int, default=30, help="Training steps per row.")
  parser.add_argument("--bench_start", type=int, default=10, help="Warm-up steps excluded.")
  parser.add_argument("--logdir", help="A trained run to restore for the rtf rows.")
  parser.add_argument("--data", default=os.path.join(ROOT, "data", "synth_tts"))
  parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "bench_tts"))
  parser.add_argument("--wavenet_seconds", type=float, default=0.25,
                      help="Audio the wavenet rows sample (from the start of one recording).")
  parser.add_argument("--measure_rtf", choices=sorted(DTYPES.values()), help=argparse.SUPPRESS)
  parser.add_argument("--measure_vocoder", help=argparse.SUPPRESS)
  parser.add_argument("--measure_voice", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.wavenet_seconds <= 0:
    parser.error(f"--wavenet_seconds must be positive, got {args.wavenet_seconds}")
  # the synthetic corpus and the rtf rows import TensorFlow
  from open_seq2seq.utils.quiet_start import start_script_quietly
  start_script_quietly()
  if args.measure_rtf:
    print(json.dumps(measure_rtf(args.measure_rtf, args.logdir)))
    return 0
  if args.measure_vocoder:
    kind, dtype = args.measure_vocoder.split(":")
    print(json.dumps(measure_vocoder(kind, dtype, args.data, args.wavenet_seconds)))
    return 0
  if args.measure_voice:
    kind, dtype = args.measure_voice.split(":")
    print(json.dumps(measure_voice(kind, dtype, args.data)))
    return 0
  names = [n for n in args.rows.split(",") if n]
  unknown = [n for n in names if n not in ROWS]
  if unknown:
    parser.error(f"unknown rows {unknown}; choose from {', '.join(ROWS)}")
  os.makedirs(args.workdir, exist_ok=True)
  data = corpus(args.data)
  train = {n: train_row(DTYPES[n.split("_")[1]], data, args) for n in names
           if n.startswith("train_")}
  rtf = {n: rtf_row(DTYPES[n.split("_")[1]], data, args) for n in names
         if n.startswith("rtf_")}
  vocoders = {n: vocoder_row(n.rsplit("_", 1)[0], DTYPES[n.rsplit("_", 1)[1]], data, args)
              for n in names if n.rsplit("_", 1)[0] in VOCODERS}
  voices = {n: voice_row(n.rsplit("_", 1)[0], DTYPES[n.rsplit("_", 1)[1]], data)
            for n in names if n.rsplit("_", 1)[0] in VOICES}
  if train:
    base = train.get("train_fp32")
    print("\n| training | frames/s | s of audio/s | s/step | vs fp32 | peak MB |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in train.items():
      ratio = f"{r['frames_per_s'] / base['frames_per_s']:.2f}" if base else ""
      print(f"| {DTYPES[name.split('_')[1]]} | {r['frames_per_s']:,.0f} | "
            f"{r['audio_per_s']:.1f} | {r['step_s']:.3f} | {ratio} | {r['peak_mb']:,.0f} |")
    print(f"\nBatches of 16 sentences; {args.bench_steps} steps per row, first "
          f"{args.bench_start} excluded, medians.")
  if rtf:
    print("\n| inference | audio s | decoder RTF | Griffin-Lim RTF | total RTF |")
    print("|---|---:|---:|---:|---:|")
    for name, r in rtf.items():
      print(f"| {DTYPES[name.split('_')[1]]} | {r['audio_s']:.1f} | {r['decode_rtf']:.3f} | "
            f"{r['gl_rtf']:.3f} | {r['rtf']:.3f} |")
    weights = f"restored from {args.logdir}" if args.logdir else "random weights"
    print(f"\nOne batch of {next(iter(rtf.values()))['sentences']} test sentences, {weights}; "
          f"Griffin-Lim {GL_ITERS} iterations; medians of {REPEATS} after a warm-up.")
  if vocoders:
    print("\n| vocoder (mel -> waveform) | parameters | dtype | clips | audio s | RTF | "
          "x real time |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for name, r in vocoders.items():
      kind, dtype = name.rsplit("_", 1)
      label = f"{VOCODERS[kind][1]} ({VOCODERS[kind][0]}, {r['sample_rate'] / 1000:g} kHz)"
      print(f"| {label} | {r['parameters']:,} | {DTYPES[dtype]} | {r['clips']} | "
            f"{r['audio_s']:.2f} | {r['rtf']:.4g} | {1 / r['rtf']:.2f} |")
    print(f"\nRandom weights; the test recordings' mel frames, HiFi-GAN one batch of up to "
          f"{VOCODER_BATCH} (median of {REPEATS} after a warm-up), WaveNet the first "
          f"{args.wavenet_seconds:g} s of one (median of 2 after a warm-up). RTF: seconds of "
          f"compute per second of audio.")
  if voices:
    print("\n| text -> waveform | parameters | dtype | sentences | audio s | FastPitch RTF | "
          "HiFi-GAN RTF | total RTF | x real time |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for name, r in voices.items():
      kind, dtype = name.rsplit("_", 1)
      label = f"{VOICES[kind][2]} ({r['sample_rate'] / 1000:g} kHz)"
      print(f"| {label} | {r['acoustic_parameters']:,} + {r['vocoder_parameters']:,} | "
            f"{DTYPES[dtype]} | {r['sentences']} | {r['audio_s']:.2f} | "
            f"{r['acoustic_rtf']:.4g} | {r['vocoder_rtf']:.4g} | {r['rtf']:.4g} | "
            f"{1 / r['rtf']:.2f} |")
    per_symbol = next(iter(voices.values()))["seconds_per_symbol"]
    print(f"\nRandom weights, every symbol {per_symbol * 1000:.0f} ms long (the test "
          f"recordings' mean duration per symbol); one batch of up to {VOCODER_BATCH} test "
          f"sentences through each model, medians of {REPEATS} after a warm-up. RTF: seconds "
          f"of compute per second of audio.")
  return 0


if __name__ == "__main__":
  sys.exit(main())
