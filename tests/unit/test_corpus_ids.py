"""A side of a parallel corpus as flat ids (data/text2text/corpus_ids.py)."""

import numpy as np

from open_seq2seq.data.text2text.corpus_ids import assemble, line_ids, split_tokens
from open_seq2seq.data.text2text.vocab import SpecialTextTokens

EOS, UNK, S = (SpecialTextTokens.EOS_ID.value, SpecialTextTokens.UNK_ID.value,
               SpecialTextTokens.S_ID.value)


def test_split_tokens_by_delimiter_kind():
  assert split_tokens(" a  b\tc \n", " ") == ["a", "b", "c"]
  assert split_tokens("ab c\n", "") == ["a", "b", " ", "c"]
  assert split_tokens("|a||b|\n", "|") == ["a", "b"]


def test_line_ids_looks_tokens_up_and_unknown_ones_read_as_unk():
  vocab = {"the": 10, "cat": 11}
  ids, counts = line_ids(["the cat", "the dog sat"], None, " ", vocab)
  assert ids.dtype == np.int32 and counts.tolist() == [2, 3]
  assert ids.tolist() == [10, 11, 10, UNK, UNK]


def _one_line_at_a_time(lines, start):
  return [([S] if start else []) + line + [EOS] for line in lines]


def test_assemble_adds_eos_and_start_token_to_every_line():
  lines = [[7, 8], [9], [10, 11, 12]]
  flat = np.array([t for line in lines for t in line], np.int32)
  counts = np.array([len(line) for line in lines])
  for start in (False, True):
    side = assemble(flat, counts, start)
    expected = _one_line_at_a_time(lines, start)
    assert side.lengths.tolist() == [len(line) for line in expected]
    assert side.ragged().to_list() == expected
