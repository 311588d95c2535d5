"""Attention ASR learns: the toy joint CTC-attention config (pyramidal BiLSTM listener,
location-aware speller) transcribes held-out synthetic digit utterances through run.py.

Threshold: WER < 0.4 on the 40 dev utterances after 300 steps (measured 0.17). A model that
learned nothing cannot get there: an empty transcript scores 1.0 and guessing words (each
utterance is 2-4 random digits out of ten) at best ~0.9.
"""

import os
import re

import pytest

from tests.helpers import toy
from tests.helpers.speech import CONFIG_DIR, VOCAB
from tests.learning.test_speech import workdir  # noqa: F401  (the synthetic corpus)

pytestmark = pytest.mark.slow

CONFIG = os.path.join(CONFIG_DIR, "jca_toy_synthetic.py")
STEPS = 300
THRESHOLD = 0.4


def run(workdir, mode, *extra):  # noqa: F811
  return toy.run_cli([f"--config_file={CONFIG}", f"--mode={mode}",
                      f"--logdir={workdir}/logdir", f"--data_layer_params/vocab_file={VOCAB}",
                      *extra], cwd=workdir)


def test_joint_ctc_attention_learns_to_transcribe_held_out_speech(workdir):  # noqa: F811
  result = run(workdir, "train_eval", f"--max_steps={STEPS}", f"--eval_steps={STEPS}",
               "--print_samples_steps=100")
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Sample prediction:" in result.stdout
  found = re.search(rf"eval at step {STEPS}: .*WER ([\d.]+)", result.stdout)
  assert found, result.stdout[-3000:]
  wer = float(found.group(1))
  print(f"\njca_toy_synthetic: dev WER {wer:.3f} after {STEPS} steps (greedy)")
  assert wer < THRESHOLD, f"dev WER {wer:.3f} after {STEPS} steps"

  # infer: the attention decoder's beam search writes one transcript per test utterance
  output = os.path.join(workdir, "predictions.csv")
  inferred = run(workdir, "infer", f"--infer_output_file={output}")
  assert inferred.returncode == 0, inferred.stderr[-3000:]
  with open(output, encoding="utf-8") as f:
    lines = f.read().splitlines()
  assert lines[0] == "wav_filename,predicted_transcript" and len(lines) == 41
  scored = re.search(r"WER ([\d.]+)", inferred.stdout)  # the test CSV has transcripts
  assert scored, inferred.stdout[-3000:]
  print(f"jca_toy_synthetic: test WER {float(scored.group(1)):.3f} (beam 4)")

  # export: waveform in, the attention decoder's beam search in the graph, text out; served
  # without open_seq2seq it gives infer's transcripts
  from tests.e2e.test_export import run_export_script
  exported = run(workdir, "export", f"--export_dir={workdir}/exported")
  assert exported.returncode == 0, exported.stderr[-3000:]
  rows = [line.split(",", 1) for line in lines[1:]]
  data = os.path.join(workdir, "data", "synthetic_speech")
  inputs = os.path.join(workdir, "wavs.txt")
  with open(inputs, "w", encoding="utf-8") as f:
    f.write("".join(os.path.join(data, name) + "\n" for name, _ in rows))
  served = os.path.join(workdir, "served.txt")
  run_export_script(f"{workdir}/exported", inputs, served)
  with open(served, encoding="utf-8") as f:
    assert f.read().splitlines() == [text for _, text in rows]
