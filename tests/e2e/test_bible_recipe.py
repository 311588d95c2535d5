"""The Bible recipe (scripts/get_bible_en_es.sh, run by scripts/install_test_deps.sh) made an
aligned, split, SentencePiece-encoded corpus, and the shipped Bible config trains on its raw
text and translates a raw English sentence into raw Spanish through run.py (a small model,
a few steps: the path is checked, not the translation quality).

The data is part of the test set-up: when it is missing the test fails and says how to get
it, rather than skipping.
"""

import os

import pytest

from tests.helpers import toy

pytestmark = pytest.mark.slow

BIBLE = os.path.join(toy.ROOT, "data", "bible_en_es")
CONFIG = os.path.join(toy.ROOT, "example_configs", "text2text", "en-es", "transformer-2x2-bible.py")
SMALL = ["--encoder_params/encoder_layers=1", "--encoder_params/hidden_size=32",
         "--encoder_params/num_heads=2", "--encoder_params/filter_size=64",
         "--decoder_params/num_hidden_layers=1", "--decoder_params/hidden_size=32",
         "--decoder_params/num_heads=2", "--decoder_params/filter_size=64",
         "--decoder_params/beam_size=2", "--decoder_params/extra_decode_length=5",
         "--lr_policy_params/d_model=32", "--batch_size_per_gpu=512"]


def _lines(name: str) -> list[str]:
  path = os.path.join(BIBLE, name)
  if not os.path.isfile(path):
    pytest.fail(f"{path} is missing: run `bash scripts/get_bible_en_es.sh`", pytrace=False)
  with open(path, encoding="utf-8") as f:
    return f.read().splitlines()


def test_the_recipe_wrote_aligned_deduplicated_splits():
  sizes = {}
  seen_keys = set()
  for split in ("train", "dev", "test"):
    en, es, keys = _lines(f"{split}.en"), _lines(f"{split}.es"), _lines(f"{split}.keys")
    assert len(en) == len(es) == len(keys) == len(_lines(f"{split}.sp.en"))
    assert all(line.strip() for line in en + es)
    assert not seen_keys & set(keys), f"{split} shares verses with another split"
    seen_keys |= set(keys)
    sizes[split] = len(en)
  assert sizes["dev"] == sizes["test"] == 1000 and sizes["train"] > 25000, sizes
  train = list(zip(_lines("train.en"), _lines("train.es")))
  assert len(set(train)) == len(train), "repeated verse pairs were kept"
  first = _lines("train.keys").index("Genesis 1:1") if "Genesis 1:1" in seen_keys and \
      "Genesis 1:1" in _lines("train.keys") else None
  if first is not None:  # the verse every Bible starts with, in both languages
    assert "God" in train[first][0] and "Dios" in train[first][1]


def test_the_bible_config_translates_raw_text(tmp_path):
  _lines("train.en")
  logdir = str(tmp_path / "logdir")
  common = [f"--config_file={CONFIG}", f"--logdir={logdir}", *SMALL]
  trained = toy.run_cli(common + ["--mode=train", "--max_steps=3", "--print_loss_steps=1",
                                  "--print_samples_steps=None", "--save_summaries_steps=None",
                                  "--save_checkpoint_steps=3"], timeout=600)
  assert trained.returncode == 0, trained.stderr[-3000:]
  sentence = "In the beginning, God created the heavens and the earth."
  answered = toy.run_cli(common + ["--mode=interactive_infer"], timeout=600,
                         stdin=f"{sentence}\n")
  assert answered.returncode == 0, answered.stderr[-3000:]
  answers = [line for line in answered.stdout.splitlines() if not line.startswith("[")]
  assert len(answers) == 1, answered.stdout[-2000:]
  # detokenized: no SentencePiece word markers, no pieces joined by spaces of their own
  assert "\u2581" not in answers[0]
