"""Vocabulary files of text data layers.

A vocabulary file has one token per line, optionally followed by whitespace (tab or space)
and a count, which is ignored::

    the     41923
    house   812
    ▁Haus

Ids 0..3 belong to the special tokens of :class:`SpecialTextTokens`; the file's tokens get
ids from 4 in file order. Files that already list the four special tokens first (in id
order) are read with ``special_tokens_in_file=True``.
"""

from __future__ import annotations

from enum import Enum

from open_seq2seq.errors import DataError


class SpecialTextTokens(Enum):
  """Ids reserved in every text vocabulary (the token-id contract of text models)."""

  PAD_ID = 0  # padding: fills batches and predictions after EOS
  UNK_ID = 1  # every out-of-vocabulary token maps here
  S_ID = 2  # start of sentence: the decoder's GO symbol
  EOS_ID = 3  # end of sentence: appended to source and target ids
  OUT_OF_BUCKET = 1234567890
  END_OF_CHOICE = -100

  @staticmethod
  def to_string(s_token: int) -> str:
    """Printable form of a special id (0-3)."""
    try:
      return _SPECIAL_STRINGS[s_token]
    except (KeyError, TypeError):
      raise ValueError(f"{s_token!r} is not the id of a special text token (0-3)") from None


_SPECIAL_STRINGS = {
    SpecialTextTokens.PAD_ID.value: "<PAD>",
    SpecialTextTokens.UNK_ID.value: "<UNK>",
    SpecialTextTokens.S_ID.value: "<S>",
    SpecialTextTokens.EOS_ID.value: "</S>",
}
#: Number of ids reserved for special tokens; file tokens start here.
NUM_SPECIAL_TOKENS = len(_SPECIAL_STRINGS)


def special_vocab() -> dict[str, int]:
  """Token -> id map of the special tokens alone."""
  return {text: idx for idx, text in _SPECIAL_STRINGS.items()}


def read_vocab_tokens(path: str) -> list[tuple[int, str]]:
  """``(line_number, token)`` for every non-empty line of a vocabulary file.

  Raises:
    DataError: if the file is missing, unreadable or not UTF-8.
  """
  try:
    with open(path, encoding="utf-8", newline="") as f:
      text = f.read()
  except FileNotFoundError:
    raise DataError(f"vocabulary file {path} does not exist; check src_vocab_file / "
                    "tgt_vocab_file in data_layer_params") from None
  except UnicodeDecodeError as e:
    raise DataError(f"vocabulary file {path}: not UTF-8 (bad byte at offset {e.start}); "
                    "re-encode it as UTF-8") from None
  except OSError as e:
    raise DataError(f"vocabulary file {path}: cannot be read ({e.strerror}); check the "
                    "path and its permissions") from None
  tokens = []
  for number, line in enumerate(text.split("\n"), start=1):
    line = line.rstrip("\r")
    if not line.strip():
      continue  # blank lines carry no token
    # The token ends at the first tab; without a tab, at the first space (a count follows).
    token = line.split("\t", 1)[0] if "\t" in line else line.split(" ", 1)[0]
    if not token:
      raise DataError(f"{path}:{number}: line starts with whitespace, so it has no token; "
                      "write the token first, then optionally whitespace and a count")
    tokens.append((number, token))
  return tokens


def load_vocab(path: str, special_tokens_in_file: bool = False) -> dict[str, int]:
  """Reads a vocabulary file into a token -> id map that includes the special tokens.

  Args:
    path: the vocabulary file.
    special_tokens_in_file: the file's first four tokens are ``<PAD> <UNK> <S> </S>`` (in
      this order) and file tokens take ids from 0; otherwise they take ids from 4.

  Raises:
    DataError: for a missing, unreadable or empty file, a duplicate token, a special token
      in the wrong place.
  """
  entries = read_vocab_tokens(path)
  specials = special_vocab()
  seq2idx: dict[str, int] = {}
  lines: dict[str, int] = {}
  if special_tokens_in_file:
    head = [token for _, token in entries[:NUM_SPECIAL_TOKENS]]
    expected = [_SPECIAL_STRINGS[i] for i in range(NUM_SPECIAL_TOKENS)]
    if head != expected:
      raise DataError(
          f"vocabulary file {path}: special_tokens_already_in_vocab is True, so its first "
          f"tokens must be {' '.join(expected)}, found {' '.join(head) or 'nothing'}; fix the "
          "file or set special_tokens_already_in_vocab to False")
    entries = entries[NUM_SPECIAL_TOKENS:]
  seq2idx.update(specials)
  for number, token in entries:
    if token in specials:
      raise DataError(
          f"{path}:{number}: special token {token} inside the vocabulary; remove the line, "
          "or list all four special tokens first and set special_tokens_already_in_vocab")
    if token in seq2idx:
      raise DataError(f"{path}:{number}: token {token!r} already appears on line "
                      f"{lines[token]}; remove the duplicate")
    seq2idx[token] = len(seq2idx)
    lines[token] = number
  if len(seq2idx) == NUM_SPECIAL_TOKENS:
    raise DataError(f"vocabulary file {path} holds no tokens; write one token per line")
  return seq2idx


def pad_vocab_to_eight(seq2idx: dict[str, int]) -> dict[str, int]:
  """Adds filler tokens so the vocabulary size is a multiple of 8 (half-precision matmuls).

  Returns a new map; the fillers ``<unused0>``, ``<unused1>``... never occur in data.
  """
  padded = dict(seq2idx)
  filler = 0
  while len(padded) % 8:
    name = f"<unused{filler}>"
    filler += 1
    if name not in padded:
      padded[name] = len(padded)
  return padded


def invert_vocab(seq2idx: dict[str, int]) -> dict[int, str]:
  """id -> token map."""
  return {idx: token for token, idx in seq2idx.items()}
