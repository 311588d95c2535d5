"""LM decoding through run.py (eval and infer, decoding workers forked inside the run), then
the infer run's logits (an .npz) tuned offline with scripts/decode.py."""

import csv
import os

from open_seq2seq.outputs import read_npz_arrays
from open_seq2seq.utils.ngram_lm import write_arpa
from tests.helpers.speech import CONFIG_DIR, load_script, write_corpus
from tests.helpers.toy import run_cli

TRANSCRIPTS = ["one two", "three", "four five", "six", "two six", "nine one"]


def test_eval_and_infer_with_lm_then_decode_script(tmp_path, capsys):
  csv_path = write_corpus(str(tmp_path / "data"), TRANSCRIPTS)
  lm = str(tmp_path / "lm.arpa")
  write_arpa(TRANSCRIPTS, lm, order=3)
  logdir, output = tmp_path / "run", tmp_path / "infer.csv"
  common = [f"--config_file={os.path.join(CONFIG_DIR, 'w2l_toy_synthetic.py')}",
            f"--logdir={logdir}", f"--data_layer_params/dataset_files=['{csv_path}']",
            "--batch_size_per_gpu=3", "--decoder_params/use_language_model=True",
            f"--decoder_params/lm_path={lm}", "--decoder_params/beam_width=8",
            "--decoder_params/num_decoding_workers=2"]
  trained = run_cli(common + ["--mode=train_eval", "--max_steps=2", "--eval_steps=2"],
                    timeout=900)
  assert trained.returncode == 0, trained.stderr[-3000:]
  assert "WER" in trained.stdout + trained.stderr
  inferred = run_cli(common + ["--mode=infer", f"--infer_output_file={output}",
                               "--decoder_params/infer_logits_to_pickle=True"], timeout=900)
  assert inferred.returncode == 0, inferred.stderr[-3000:]
  with open(output, encoding="utf-8", newline="") as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == len(TRANSCRIPTS)
  logits = read_npz_arrays(str(logdir / "infer_logits.npz"))
  assert sorted(logits) == sorted(r["wav_filename"] for r in rows)
  assert all(l.ndim == 2 and l.shape[1] == 29 for l in logits.values())
  decode = load_script("decode")
  assert decode.main(["--logits", str(logdir / "infer_logits.npz"), "--labels", csv_path,
                      "--lm", lm, "--alpha", "0,1", "--beta", "1", "--beam_width", "8"]) == 0
  out = capsys.readouterr().out
  assert f"{len(TRANSCRIPTS)} utterances; greedy (no LM): WER" in out
  assert "best: alpha=" in out
