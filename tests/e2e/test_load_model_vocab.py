"""run.py fine-tunes the toy Transformer from a trained run with a changed vocabulary (tokens
added, removed and reordered): ``load_model`` maps the embedding rows by token from the
vocabularies the source run recorded (not from its vocabulary file, edited since), reports
the remapping, and the model translates inputs of kept tokens right after it as before."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers import toy

pytestmark = pytest.mark.slow

#: The toy task's symbols (scripts/create_toy_data.py): Greek alpha to kappa.
SYMBOLS = tuple(chr(code) for code in range(0x03B1, 0x03BB))
#: Steps that teach the tiny toy Transformer to reverse 5 to 8 symbols well enough.
TRAIN_STEPS = 600
REMOVED = SYMBOLS[-2:]
ADDED = ("λ", "μ", "ν")
SPECIALS = ["<PAD>", "<UNK>", "<S>", "</S>"]


def _args(data_dir, logdir, vocab, mode="train", source=None, target=None, tgt_vocab=None):
  split = toy.split_overrides(data_dir, "train")
  if source is not None:
    split = [f"--data_layer_params/source_file={source}",
             f"--data_layer_params/target_file={target}"]
  return ([f"--config_file={toy.TOY_CONFIG}", f"--mode={mode}", f"--logdir={logdir}"] +
          toy.TINY_MODEL + toy.data_overrides(data_dir) + split +
          [f"--data_layer_params/src_vocab_file={vocab}",
           f"--data_layer_params/tgt_vocab_file={tgt_vocab or vocab}", "--batch_size_per_gpu=32",
           "--print_loss_steps=100"])


def _write(path, lines):
  path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
  return str(path)


def _tables(logdir, path=None):
  """Checkpoint key -> value of the encoder's and decoder's embedding tables."""
  reader = tf.train.load_checkpoint(path or tf.train.latest_checkpoint(logdir))
  return {side: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
          for side in ("encoder", "decoder")
          if key.startswith("model/") and f"{side}..embedding_softmax_layer" in key}


def _infer(data_dir, logdir, vocab, inputs, references, output, tgt_vocab=None):
  result = toy.run_cli(_args(data_dir, logdir, vocab, "infer", inputs, references, tgt_vocab) +
                       [f"--infer_output_file={output}"])
  assert result.returncode == 0, result.stderr[-3000:]
  return output.read_text(encoding="utf-8").splitlines()


def test_fine_tuning_with_a_changed_vocabulary_keeps_the_kept_tokens(tmp_path):
  data_dir = toy.make_toy_data(str(tmp_path / "toy"), train=2000, dev=8, test=200,
                               extra=("--max_length", "8"))
  old_vocab = _write(tmp_path / "old_vocab.txt", SYMBOLS)
  source_run = str(tmp_path / "source_run")
  trained = toy.run_cli(_args(data_dir, source_run, old_vocab) +
                        [f"--max_steps={TRAIN_STEPS}", f"--save_checkpoint_steps={TRAIN_STEPS}"])
  assert trained.returncode == 0, trained.stderr[-3000:]
  record = json.loads(open(os.path.join(source_run, "vocabularies.json"),
                           encoding="utf-8").read())
  assert record == {"source": SPECIALS + list(SYMBOLS), "target": SPECIALS + list(SYMBOLS)}

  # Inputs of kept symbols only, translated by the source run.
  with open(os.path.join(data_dir, "test", "source.txt"), encoding="utf-8") as f:
    kept_lines = [line.split() for line in f.read().splitlines()
                  if not set(line.split()) & set(REMOVED)]
  assert len(kept_lines) >= 40
  inputs = _write(tmp_path / "inputs.txt", [" ".join(tokens) for tokens in kept_lines])
  references = _write(tmp_path / "references.txt",
                      [" ".join(reversed(tokens)) for tokens in kept_lines])
  before = _infer(data_dir, source_run, old_vocab, inputs, references, tmp_path / "before.txt")
  correct = np.mean([hyp.split() == tokens[::-1] for hyp, tokens in zip(before, kept_lines)])
  assert correct >= 0.5, correct  # the source run learned the task

  # The source run's vocabulary file is edited after the run (reordered): the run's record,
  # not the file, says what its rows are.
  _write(tmp_path / "old_vocab.txt", reversed(SYMBOLS))
  # Both sides reordered, each its own way (the toy task is symmetric in its symbols: with
  # one order on both sides, rows loaded by index would still reverse most inputs), two
  # symbols removed and three added.
  new_source = [*reversed(SYMBOLS[:-2]), *ADDED]
  new_target = [ADDED[1], *SYMBOLS[3:-2], ADDED[0], *SYMBOLS[:3], ADDED[2]]
  src_vocab = _write(tmp_path / "new_source.txt", new_source)
  tgt_vocab = _write(tmp_path / "new_target.txt", new_target)
  fine_tuned = str(tmp_path / "fine_tuned")
  # One step at learning rate 0: its checkpoint holds the weights as load_model left them.
  # The source run's seed: a table of another size then draws the same leading rows (Keras),
  # so a new token that kept its fresh row would start as the old token of its id did and
  # compete with that token's trained row (agreement 0.40 below when it did).
  result = toy.run_cli(_args(data_dir, fine_tuned, src_vocab, tgt_vocab=tgt_vocab) + [
      "--max_steps=1", f"--load_model={source_run}", "--lr_policy_params/learning_rate=0.0"])
  assert result.returncode == 0, result.stderr[-3000:]
  for side in ("source", "target"):
    assert f"load_model: {side} vocabulary remapped: 12 kept, 3 new (initialised), 2 removed" \
        in result.stdout, result.stdout[-3000:]
  assert "load_model: initialised" in result.stdout and ", skipped 0" in result.stdout
  with open(os.path.join(fine_tuned, "vocabularies.json"), encoding="utf-8") as f:
    assert json.load(f) == {"source": SPECIALS + new_source, "target": SPECIALS + new_target}

  old_ids = {token: i for i, token in enumerate(SPECIALS + list(SYMBOLS))}
  was, now = _tables(source_run), _tables(fine_tuned)
  for side, symbols in (("encoder", new_source), ("decoder", new_target)):
    new_tokens = SPECIALS + symbols
    assert now[side].shape[0] == len(new_tokens)
    for i, token in enumerate(new_tokens):
      if token in old_ids:
        np.testing.assert_array_equal(now[side][i], was[side][old_ids[token]],
                                      err_msg=f"{side} {token}")
      else:  # a new token: fresh values, no row of the source run
        assert not np.any(np.all(np.isclose(was[side], now[side][i]), axis=1)), token

  after = _infer(data_dir, fine_tuned, src_vocab, inputs, references, tmp_path / "after.txt",
                 tgt_vocab)
  same = np.mean([a == b for a, b in zip(before, after)])
  assert len(after) == len(before) and same >= 0.95, (same, before[:5], after[:5])
