"""A streaming Conformer through run.py on a recording longer than any training utterance:
infer and interactive_infer transcribe it chunk by chunk (the encoder's while loop over
``stream_step``) and agree; the export holds the streaming signatures."""

import csv
import json
import os

import numpy as np
import pytest
import soundfile

from open_seq2seq.serving.export import METADATA_FILE
from tests.helpers.speech import CONFIG_DIR, VOCAB, write_corpus
from tests.helpers.toy import run_cli

pytestmark = pytest.mark.slow

TRANSCRIPTS = ["one two", "three", "four five", "six"]


def test_a_long_recording_streams_through_infer_interactive_infer_and_export(tmp_path):
  data = tmp_path / "data"
  csv_path = write_corpus(str(data), TRANSCRIPTS, durations=[0.8, 0.5, 0.7, 0.6])
  # 12 s: fifteen times the longest training utterance, 19 attention chunks of 160 ms
  waves = [soundfile.read(os.path.join(data, "audio", f"{i:04d}.wav"))[0]
           for i in range(len(TRANSCRIPTS))]
  long_wav = str(tmp_path / "long.wav")
  soundfile.write(long_wav, np.tile(np.concatenate(waves), 5), 16000)
  assert soundfile.info(long_wav).duration > 12
  long_csv = tmp_path / "long.csv"
  long_csv.write_text(f"wav_filename,wav_filesize,transcript\n{long_wav},0,\n", encoding="utf-8")

  common = [f"--config_file={os.path.join(CONFIG_DIR, 'conformer_streaming_synthetic.py')}",
            f"--logdir={tmp_path / 'run'}", f"--data_layer_params/vocab_file={VOCAB}",
            f"--data_layer_params/dataset_files=['{csv_path}']", "--batch_size_per_gpu=2"]
  trained = run_cli(common + ["--mode=train", "--max_steps=2"])
  assert trained.returncode == 0, trained.stderr[-3000:]

  output = tmp_path / "infer.csv"
  inferred = run_cli(common + ["--mode=infer", f"--infer_output_file={output}",
                               f"--infer_params/data_layer_params/dataset_files=['{long_csv}']"])
  assert inferred.returncode == 0, inferred.stderr[-3000:]
  with open(output, encoding="utf-8", newline="") as f:
    (row,) = list(csv.DictReader(f))
  transcript = row["predicted_transcript"]
  assert transcript.strip(), "an untrained transducer says something over 12 s"

  answered = run_cli(common + ["--mode=interactive_infer"], stdin=long_wav + "\n")
  assert answered.returncode == 0, answered.stderr[-3000:]
  assert transcript in answered.stdout.splitlines()

  exported = run_cli(common + ["--mode=export", f"--export_dir={tmp_path / 'exported'}"])
  assert exported.returncode == 0, exported.stderr[-3000:]
  assert "stream_step(audio, final, " in exported.stdout
  metadata = json.loads((tmp_path / "exported" / METADATA_FILE).read_text(encoding="utf-8"))
  assert {"serving_default", "stream_step", "stream_initial_state"} <= set(
      metadata["signatures"])
