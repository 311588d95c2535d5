"""A transducer's LM decoding through run.py: train_eval and infer of the shipped
Conformer-Transducer config with decoder_params/use_language_model (the time synchronous
beam search fused with a word LM, on the host), on a tiny tone corpus."""

import csv
import os

from open_seq2seq.utils.ngram_lm import write_arpa
from tests.helpers.speech import CONFIG_DIR, VOCAB, write_corpus
from tests.helpers.toy import run_cli

TRANSCRIPTS = ["one two", "three", "four five", "six"]


def test_train_eval_and_infer_with_an_lm(tmp_path):
  csv_path = write_corpus(str(tmp_path / "data"), TRANSCRIPTS, durations=[0.7, 0.45, 0.6, 0.4])
  lm = str(tmp_path / "lm.arpa")
  write_arpa(TRANSCRIPTS, lm, order=2)
  logdir, output = tmp_path / "run", tmp_path / "infer.csv"
  common = [f"--config_file={os.path.join(CONFIG_DIR, 'conformer_transducer_synthetic.py')}",
            f"--logdir={logdir}", f"--data_layer_params/vocab_file={VOCAB}",
            f"--data_layer_params/dataset_files=['{csv_path}']", "--batch_size_per_gpu=2",
            "--decoder_params/use_language_model=True", f"--decoder_params/lm_path={lm}",
            "--decoder_params/alpha=0.5", "--decoder_params/beam_width=3"]
  trained = run_cli(common + ["--mode=train_eval", "--max_steps=2", "--eval_steps=2",
                              "--print_samples_steps=2", "--summaries=[]"], timeout=900)
  assert trained.returncode == 0, trained.stderr[-3000:]
  assert "eval at step 2" in trained.stdout and "WER" in trained.stdout
  assert "Sample prediction" in trained.stdout + trained.stderr
  inferred = run_cli(common + ["--mode=infer", f"--infer_output_file={output}"], timeout=900)
  assert inferred.returncode == 0, inferred.stderr[-3000:]
  with open(output, encoding="utf-8", newline="") as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == len(TRANSCRIPTS)
  assert all(r["predicted_transcript"] == " ".join(r["predicted_transcript"].split())
             for r in rows)
  missing = run_cli(common[:-3] + [f"--decoder_params/lm_path={tmp_path / 'none.arpa'}",
                                   "--mode=infer", f"--infer_output_file={output}.2"])
  assert missing.returncode == 2 and "does not exist" in missing.stderr
