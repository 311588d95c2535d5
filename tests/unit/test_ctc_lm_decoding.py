"""CTC beam search fused with a KenLM n-gram model, against an exact reference."""

import os
import subprocess
import sys
import textwrap

import kenlm
import numpy as np
import pytest

from open_seq2seq.data.speech2text.targets import TargetEncoder
from open_seq2seq.decoders.ctc_beam_search import CTCBeamSearchDecoder
from open_seq2seq.decoders.fc_decoders import FullyConnectedCTCDecoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.ngram_lm import write_arpa
from tests.helpers.ctc_reference import best_texts
from tests.helpers.speech import ROOT, VOCAB

EXACT = {"beam_width": 4096, "beam_prune_logp": -1e9, "token_min_logp": -1e9, "num_workers": 0}


@pytest.fixture(scope="module")
def digit_lm(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("lm") / "digits.arpa")
  write_arpa(["six one two", "two six", "one six six", "nine six one", "six", "one two"],
             path, order=3)
  return path


@pytest.fixture(scope="module")
def ab_lm(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("lm") / "ab.arpa")
  write_arpa(["ab ba", "a b", "ab ab", "ba", "b a ab", "ab"], path, order=3)
  return path


@pytest.fixture(scope="module")
def targets():
  return TargetEncoder(VOCAB)


def spell(frames, targets):
  """Logits: one frame per dict of {symbol ("" for the blank): probability} (the rest get
  1e-4), each followed by a blank frame."""
  rows = []
  for alternatives in frames:
    row = np.full(targets.vocab_size, 1e-4)
    for char, p in alternatives.items():
      row[targets.char2idx[char] if char else -1] = p
    blank = np.full(targets.vocab_size, 1e-4)
    blank[-1] = 1.0
    rows += [row, blank]
  rows = np.array(rows)
  return np.log(rows / rows.sum(-1, keepdims=True)).astype(np.float32)


def decode(targets, logits, **kwargs):
  kwargs.setdefault("num_workers", 0)
  with CTCBeamSearchDecoder(targets.idx2char, **kwargs) as decoder:
    return decoder.decode_batch(logits[None], [len(logits)])[0]


def test_language_model_fixes_an_acoustically_ambiguous_word(digit_lm, targets):
  logits = spell([{"s": 0.9}, {"e": 0.6, "i": 0.4}, {"x": 0.9}], targets)
  greedy = targets.decode([i for i in np.argmax(logits, -1) if i < targets.num_symbols])
  assert greedy == "sex"
  assert decode(targets, logits, beam_width=8) == "sex"  # no LM
  common = {"beam_width": 8, "lm_path": digit_lm, "beta": 0.0, "unk_score_offset": 0.0}
  assert decode(targets, logits, alpha=0.0, **common) == "sex"
  assert decode(targets, logits, alpha=1.0, **common) == "six"  # the LM's probabilities


def test_beta_rewards_words(digit_lm, targets):
  # "onetwo" or "one two": the space is as likely as a blank
  frames = [{c: 0.9} for c in "one"] + [{" ": 0.5, "": 0.5}] + [{c: 0.9} for c in "two"]
  logits = spell(frames, targets)
  common = {"beam_width": 16, "lm_path": digit_lm, "alpha": 0.0, "unk_score_offset": 0.0}
  assert decode(targets, logits, beta=2.0, **common) == "one two"
  assert decode(targets, logits, beta=-2.0, **common) == "onetwo"


def test_unknown_words_cost_unk_score_offset(digit_lm, targets):
  # "sax" (not in the LM) is acoustically better than "six"
  logits = spell([{"s": 0.9}, {"a": 0.7, "i": 0.3}, {"x": 0.9}], targets)
  common = {"beam_width": 8, "lm_path": digit_lm, "alpha": 0.1, "beta": 0.0}
  assert decode(targets, logits, unk_score_offset=0.0, **common) == "sax"
  assert decode(targets, logits, unk_score_offset=-5.0, **common) == "six"


def test_hotwords_are_favoured(targets):
  logits = spell([{"s": 0.9}, {"e": 0.6, "i": 0.4}, {"x": 0.9}], targets)
  assert decode(targets, logits, beam_width=8, hotwords=["six"]) == "six"
  assert decode(targets, logits, beam_width=8, hotwords=["six"], hotword_weight=0.0) == "sex"


@pytest.mark.parametrize("alpha,beta", [(0.0, 0.0), (0.8, 0.0), (0.8, 1.5), (1.5, -1.0)])
def test_equals_exact_decoding_on_small_cases(ab_lm, alpha, beta):
  """Wide beam, no pruning: the best text and every returned beam's score are exact."""
  labels = ["a", "b", " "]
  lm = kenlm.Model(ab_lm)
  rng = np.random.default_rng(int(alpha * 10 + beta))
  with CTCBeamSearchDecoder(dict(enumerate(labels)), lm_path=ab_lm, alpha=alpha, beta=beta,
                            unk_score_offset=0.0, **EXACT) as decoder:
    for _ in range(4):
      logits = rng.normal(size=(7, 4)) * 2.5
      reference = dict(best_texts(logits, labels, lm, alpha, beta))
      beams = decoder.decode_beams_batch([logits], [7], top_n=3)[0]
      assert beams[0][0] == max(reference, key=reference.get)
      for text, _, total in beams:
        assert total == pytest.approx(reference[text], abs=1e-3)


def test_unknown_word_offset_matches_reference(ab_lm):
  labels = ["a", "b", " "]
  lm = kenlm.Model(ab_lm)
  logits = np.random.default_rng(7).normal(size=(6, 4)) * 2.5
  with CTCBeamSearchDecoder(dict(enumerate(labels)), lm_path=ab_lm, alpha=0.5, beta=0.5,
                            unk_score_offset=-3.0, **EXACT) as decoder:
    beams = decoder.decode_beams_batch([logits], [6], top_n=5)[0]
  reference = dict(best_texts(logits, labels, lm, 0.5, 0.5, unk_score_offset=-3.0))
  for text, _, total in beams:  # complete texts: partial-word checks play no part
    assert total == pytest.approx(reference[text], abs=1e-3)


def test_batch_decodes_the_same_in_parallel(ab_lm):
  labels = {0: "a", 1: "b", 2: " "}
  logits = np.random.default_rng(0).normal(size=(5, 30, 4)).astype(np.float32) * 2
  lengths = [30, 20, 0, 25, 1]
  with CTCBeamSearchDecoder(labels, 16, ab_lm, 0.8, 1.0, num_workers=0) as sequential:
    expected = sequential.decode_beams_batch(logits, lengths, top_n=3)
  with CTCBeamSearchDecoder(labels, 16, ab_lm, 0.8, 1.0, num_workers=2) as parallel:
    assert parallel.decode_beams_batch(logits, lengths, top_n=3) == expected
    pool = parallel._pool  # pylint: disable=protected-access
    assert pool is not None
    parallel.decode_beams_batch(logits, lengths)
    assert parallel._pool is pool  # pylint: disable=protected-access  # made once
    parallel.set_weights(0.0, 0.0)  # workers hold the old weights: restarted
    assert parallel._pool is None  # pylint: disable=protected-access
    assert parallel.decode_batch(logits, lengths) == [
        b[0][0] for b in CTCBeamSearchDecoder(labels, 16, ab_lm, 0.0, 0.0, num_workers=0)
        .decode_beams_batch(logits, lengths)]
  assert expected[2] == [("", 0.0, 0.0)]  # no frames


def test_workers_end_with_their_process(ab_lm):
  """A process that exits without cleanup (os._exit, as the forked test runner does) leaves
  no decoding worker behind."""
  script = textwrap.dedent(f"""
      import importlib.util, os, sys, numpy as np
      spec = importlib.util.spec_from_file_location(  # without TensorFlow: starts in 1 s
          "ctc_beam_search", "open_seq2seq/decoders/ctc_beam_search.py")
      module = sys.modules["ctc_beam_search"] = importlib.util.module_from_spec(spec)
      spec.loader.exec_module(module)
      CTCBeamSearchDecoder = module.CTCBeamSearchDecoder
      decoder = CTCBeamSearchDecoder({{0: "a", 1: "b", 2: " "}}, 8, {ab_lm!r}, num_workers=2)
      decoder.decode_batch(np.zeros((4, 5, 4), np.float32), [5] * 4)
      print(" ".join(str(p.pid) for p in decoder._pool._pool), flush=True)
      os._exit(0)
  """)
  result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), timeout=120,
                          check=True)
  pids = [int(p) for p in result.stdout.split()]
  assert len(pids) == 2
  for _ in range(100):
    if not any(os.path.exists(f"/proc/{pid}") for pid in pids):
      break
    subprocess.run(["sleep", "0.1"], check=True)
  assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)


def test_missing_or_unreadable_lm_is_one_line_config_error(tmp_path, targets):
  with pytest.raises(ConfigError, match="lm_path: .*missing.arpa does not exist") as e:
    FullyConnectedCTCDecoder({"use_language_model": True,
                              "lm_path": str(tmp_path / "missing.arpa")}, vocab_size=29)
  assert "\n" not in str(e.value)
  with pytest.raises(ConfigError, match="lm_path: .*missing.arpa does not exist"):
    CTCBeamSearchDecoder(targets.idx2char, lm_path=str(tmp_path / "missing.arpa"))
  garbage = tmp_path / "garbage.arpa"
  garbage.write_text("not a language model\n")
  with pytest.raises(ConfigError, match="KenLM cannot read") as e:
    CTCBeamSearchDecoder(targets.idx2char, lm_path=str(garbage))
  assert "\n" not in str(e.value)


def test_decoder_layer_decodes_with_the_lm(digit_lm, targets):
  decoder = FullyConnectedCTCDecoder(
      {"use_language_model": True, "lm_path": digit_lm, "alpha": 1.0, "beta": 0.0,
       "unk_score_offset": 0.0,  # else the 2-frame "s" (no word) would score below ""
       "beam_width": 8, "num_decoding_workers": 2}, vocab_size=targets.vocab_size,
      idx2char=targets.idx2char, mode="eval")
  sex = spell([{"s": 0.9}, {"e": 0.6, "i": 0.4}, {"x": 0.9}], targets)
  two = spell([{"t": 0.9}, {"w": 0.9}, {"o": 0.9}], targets)
  logits = np.stack([sex, two, sex])
  assert decoder.decode_with_lm(logits, np.array([6, 6, 2])) == ["six", "two", "s"]
  decoder._beam_decoder.close()  # pylint: disable=protected-access


def test_sentencepiece_pieces_start_words(tmp_path):
  """Pieces starting with "▁" begin a word (BPE targets); <unk>-style pieces never show."""
  lm = str(tmp_path / "six.arpa")
  write_arpa(["six one", "one six", "six six one"], lm, order=3)
  idx2char = {0: "<unk>", 1: "\u2581s", 2: "ix", 3: "ex", 4: "\u2581one"}
  rows = np.array([[[0, 5, 0, 0, 0, 0], [0, 0, 0, 0, 0, 5], [0, 0, 3, 3.4, 0, 0],
                    [0, 0, 0, 0, 0, 5], [3, 0, 0, 0, 5, 0]]], np.float32)
  with CTCBeamSearchDecoder(idx2char, 8, num_workers=0) as plain:
    assert plain.decode_batch(rows, [5]) == ["sex one"]
  with CTCBeamSearchDecoder(idx2char, 8, lm, alpha=1.0, beta=0.0, unk_score_offset=0.0,
                            num_workers=0) as fused:
    assert fused.decode_batch(rows, [5]) == ["six one"]
