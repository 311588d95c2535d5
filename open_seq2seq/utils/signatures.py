"""Declarations read off a signature and its docstring, for parts whose keys are keyword
arguments (optimizers, learning-rate policies, regularizers, initializers)."""

from __future__ import annotations

import inspect
import re
from typing import Callable, Iterable

from open_seq2seq.utils.params import REQUIRED, AnyType, Param


def signature_params(func: Callable, skip: Iterable[str] = ()) -> dict[str, Param]:
  """Declarations derived from a function or class signature (lr policies, optimizers).

  Parameters without a default are required; a parameter's type is its annotation if it is a
  plain type, else the type of its default, else anything. Descriptions come from the
  ``Args:`` section of the docstring (of the class, for a class).
  """
  target = func.__init__ if isinstance(func, type) else func
  docs = docstring_args(func)
  declared = {}
  skip = set(skip)
  for name, p in inspect.signature(target).parameters.items():
    if name in skip or name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
      continue
    default = REQUIRED if p.default is inspect.Parameter.empty else p.default
    annotation = p.annotation
    if isinstance(annotation, type) and annotation is not inspect.Parameter.empty:
      types = (annotation, None) if default is None else annotation
    elif default is REQUIRED or default is None:
      types = AnyType
    elif isinstance(default, bool):
      types = bool
    elif isinstance(default, (int, float)):
      types = (int, float) if isinstance(default, int) else float
    else:
      types = AnyType
    declared[name] = Param(types, default, docs.get(name, ""))
  return declared


_ARG_LINE = re.compile(r"^(\s+)\**(\w+)(?:\s*\([^)]*\))?:\s*(.*)$")


def docstring_args(func: Callable) -> dict[str, str]:
  """Each argument's description in a Google-style ``Args:`` section, as one line.

  Continuation lines are joined, reST double backticks become Markdown ones and the first
  letter is capitalised, to match ``PARAMS`` docs.
  """
  docs: dict[str, str] = {}
  in_args, indent, current = False, None, None
  for line in (inspect.getdoc(func) or "").splitlines():
    if line.strip() in ("Args:", "Arguments:"):
      in_args = True
      continue
    if not in_args:
      continue
    if line and not line[0].isspace():
      break  # the next section (Returns:, Raises: ...)
    match = _ARG_LINE.match(line)
    if match and (indent is None or len(match.group(1)) == indent):
      indent, current = len(match.group(1)), match.group(2)
      docs[current] = match.group(3).strip()
    elif current is not None and line.strip():
      docs[current] = f"{docs[current]} {line.strip()}".strip()
  docs = {name: text.replace("``", "`") for name, text in docs.items()}
  return {name: text[:1].upper() + text[1:] for name, text in docs.items()}
