#!/usr/bin/env python
"""Transcribes a recording through an export's streaming signatures, chunk by chunk, as a
live client would, and measures the speed (TensorFlow alone: open_seq2seq is not imported).

    python scripts/stream_transcribe.py EXPORT_DIR AUDIO_FILE [--chunk_ms 160] [--quiet]

EXPORT_DIR is a ``run.py --mode=export`` of a streaming Conformer (its ``stream_step`` and
``stream_initial_state`` signatures: docs/speech-recognition.md, "Streaming"). The audio
(any libsndfile format, mixed to mono) must be at the export's sample rate. Calls of
``--chunk_ms`` of audio each are made one after the other, as fast as the model answers (no
waiting for real time), and the text printed as it grows; the last call ends the stream.
stderr then gets one line: the audio's duration, the time the calls took, the real-time
factor (time / duration: below 1 keeps up with live audio), the first call (TensorFlow
prepares the graph then) and the slowest other call.
An error is one ``error:`` line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

METADATA_FILE = os.path.join("assets.extra", "open_seq2seq.json")


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
  parser.add_argument("export_dir")
  parser.add_argument("audio_file")
  parser.add_argument("--chunk_ms", type=float, default=160.0,
                      help="audio per call, in milliseconds (default 160)")
  parser.add_argument("--quiet", action="store_true", help="print the final text only")
  args = parser.parse_args(argv)
  try:
    metadata_path = os.path.join(args.export_dir, METADATA_FILE)
    with open(metadata_path, encoding="utf-8") as f:
      signatures = json.load(f).get("signatures", {})
  except OSError as e:
    raise SystemExit(f"error: {args.export_dir}: not an export of run.py --mode=export "
                     f"({e.strerror}: {metadata_path})") from None
  if "stream_step" not in signatures:
    raise SystemExit(f"error: {args.export_dir} has no streaming signatures; export a "
                     "ConformerEncoder with att_context_size and conv_causal: True")
  rate = signatures["stream_step"]["sample_rate"]
  if args.chunk_ms <= 0:
    raise SystemExit("error: --chunk_ms must be positive")
  import soundfile  # pylint: disable=import-outside-toplevel
  try:
    audio, file_rate = soundfile.read(args.audio_file, dtype="float32", always_2d=True)
  except (OSError, RuntimeError) as e:
    raise SystemExit(f"error: {args.audio_file}: cannot be read ({e})") from None
  if file_rate != rate:
    raise SystemExit(f"error: {args.audio_file} is at {file_rate} Hz; the model takes {rate} "
                     f"Hz (resample it, e.g. sox in.wav -r {rate} out.wav)")
  audio = audio.mean(axis=1)
  # run_export.py's quiet start (TensorFlow alone, its start-up lines filtered), the
  # signature's ops libraries with it
  from run_export import import_tensorflow_quietly  # pylint: disable=import-outside-toplevel
  tf = import_tensorflow_quietly(signatures["stream_step"])
  loaded = tf.saved_model.load(args.export_dir)
  step = loaded.signatures["stream_step"]
  state = loaded.signatures["stream_initial_state"](batch_size=tf.constant(1))
  size = max(1, int(round(args.chunk_ms / 1000 * rate)))
  starts = list(range(0, len(audio), size)) or [0]
  text, times = "", []
  for i, start in enumerate(starts):
    final = i == len(starts) - 1
    chunk = tf.constant(audio[None, start:start + size])
    began = time.perf_counter()
    out = step(audio=chunk, final=tf.constant(final), **state)
    piece = out["text"].numpy()[0].decode("utf-8")
    times.append(time.perf_counter() - began)
    state = {name: out[name] for name in state}
    text += piece
    if piece and not args.quiet:
      print(piece, end="", flush=True)
  print(text.strip() if args.quiet else "", flush=True)
  duration, spent = len(audio) / rate, sum(times)
  slowest = max(times[1:], default=0.0)
  print(f"audio {duration:.1f} s in {len(starts)} calls of {args.chunk_ms:g} ms: "
        f"{spent:.2f} s, real-time factor {spent / max(duration, 1e-9):.4f}; first call "
        f"{1000 * times[0]:.0f} ms (loads the graph), slowest other {1000 * slowest:.1f} ms",
        file=sys.stderr)
  return 0


if __name__ == "__main__":
  sys.exit(main())
