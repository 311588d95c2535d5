"""Porting an OpenSeq2Seq (TF 1) config: the renaming table and the source rewriter.

An OpenSeq2Seq config ports by renaming only what TF 1 forced on it: each ``tf.contrib.*``,
``tf.layers.*``, ``tf.nn.rnn_cell.*``, TF 1 initializer or ``tf.train.*Optimizer`` name becomes
its TF 2 / Keras 3 equivalent, while every key and value stays as written. :data:`RENAMES` is
that table (in :mod:`open_seq2seq.utils.tf1_renames`, re-exported here;
``scripts/port_config.py`` applies it, ``docs/porting.md`` shows it, a test keeps the two
equal); :func:`port_source` applies it to a config's text.

The rewriter works on tokens (:mod:`tokenize`), so names inside strings and comments never
change, and it touches nothing but the dotted names it renames and the import lines the new
names need. A ``tf.`` name that is not in the table stays when TensorFlow 2 still has it
(``tf.float32``, ``tf.nn.relu``, ``tf.minimum``), and is reported otherwise.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import io
import tokenize
from typing import Callable, NamedTuple

# The table lives in its own module; it is re-exported here, where the rewriter uses it.
from open_seq2seq.utils.tf1_renames import (KEPT, RENAMES, Rename, lookup, markdown_table,
                                            tf2_has)


# ----------------------------------------------------------------------------- imports
#: Modules whose ``__all__`` is searched for a name a config imports from a path this project
#: does not have.
SEARCH_MODULES = ("open_seq2seq.models", "open_seq2seq.encoders", "open_seq2seq.decoders",
                  "open_seq2seq.losses", "open_seq2seq.data", "open_seq2seq.optimizers",
                  "open_seq2seq.optimizers.lr_policies", "open_seq2seq.data.text2text",
                  "open_seq2seq.data.text2text.tokenizer")


def resolve_import(module: str, name: str) -> str | None:
  """Where this project provides ``name`` that a config imports from ``module``.

  Returns:
    ``module`` if it has ``name``, else the first of :data:`SEARCH_MODULES` exporting it,
    else None (the name does not exist here).
  """
  for candidate in (module,) + SEARCH_MODULES:
    try:
      mod = importlib.import_module(candidate)
    except ImportError:
      continue
    if candidate != module and name not in getattr(mod, "__all__", ()):
      continue
    if hasattr(mod, name):
      return candidate
    if candidate == module:
      try:
        importlib.import_module(f"{module}.{name}")
        return module
      except ImportError:
        pass
  return None


# ----------------------------------------------------------------------------- the rewriter
@dataclasses.dataclass
class PortResult:
  """The ported text and what happened to it.

  Attributes:
    text: the ported source.
    notes: one line per rename (``lines N, M: old -> new (note)``).
    warnings: one line per name that could not be translated, with its line number.
    missing: ``(module, name)`` of each project import that does not exist here.
  """

  text: str
  notes: list[str] = dataclasses.field(default_factory=list)
  warnings: list[str] = dataclasses.field(default_factory=list)
  missing: list[tuple[str, str]] = dataclasses.field(default_factory=list)


class _Edit(NamedTuple):
  start: int
  end: int
  text: str


def _line_offsets(text: str) -> list[int]:
  """Offset of the start of each line (split as tokenize and ast split them)."""
  offsets, total = [0], 0
  for line in io.StringIO(text, newline=""):
    total += len(line)
    offsets.append(total)
  return offsets


def _tf_aliases(tree: ast.Module) -> set[str]:
  """The names bound to TensorFlow.

  ``import tensorflow as tf`` and ``import tensorflow.compat.v1 as tf`` (whose names are TF 1
  names) bind "tf"; a plain ``import tensorflow[.x]`` binds "tensorflow".
  """
  aliases = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name in ("tensorflow", "tensorflow.compat.v1") and alias.asname:
          aliases.add(alias.asname)
        elif alias.name.split(".")[0] == "tensorflow" and not alias.asname:
          aliases.add("tensorflow")
  return aliases


def _canonical(parts: list[str]) -> tuple[str, int]:
  """``("tf.x.y", number of leading parts dropped)`` for a chain under a TF alias."""
  rest = parts[1:]
  dropped = 0
  if rest[:2] in (["compat", "v1"], ["compat", "v2"]):
    rest, dropped = rest[2:], 2
  return ".".join(["tf"] + rest), dropped


def _chains(text: str, aliases: set[str]):
  """Yields ``(parts, name tokens, next token)`` of each dotted name under a TF alias."""
  tokens = [t for t in tokenize.generate_tokens(io.StringIO(text, newline="").readline)
            if t.type not in (tokenize.NL, tokenize.COMMENT)]
  i = 0
  while i < len(tokens):
    tok = tokens[i]
    after_dot = i > 0 and tokens[i - 1].type == tokenize.OP and tokens[i - 1].string == "."
    if tok.type == tokenize.NAME and tok.string in aliases and not after_dot:
      chain = [tok]
      j = i + 1
      while (j + 1 < len(tokens) and tokens[j].type == tokenize.OP and tokens[j].string == "."
             and tokens[j + 1].type == tokenize.NAME):
        chain.append(tokens[j + 1])
        j += 2
      if len(chain) > 1:
        yield [t.string for t in chain], chain, tokens[j] if j < len(tokens) else None
      i = j
    else:
      i += 1


def _import_statements(tree: ast.Module) -> list[ast.stmt]:
  return [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]


def _bound_names(tree: ast.Module) -> dict[str, str]:
  """Top-level names bound by imports -> the module they come from."""
  bound = {}
  for node in _import_statements(tree):
    for alias in node.names:
      if isinstance(node, ast.Import):
        bound[alias.asname or alias.name.split(".")[0]] = alias.name
      else:
        bound[alias.asname or alias.name] = node.module or ""
  return bound


def _insertion_offset(tree: ast.Module, offsets: list[int]) -> int:
  """Where new import lines go: after the TensorFlow import, else after the last import."""
  imports = _import_statements(tree)
  for node in imports:
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
    if any(n and n.startswith("tensorflow") for n in names):
      return offsets[node.end_lineno]
  if imports:
    return offsets[imports[-1].end_lineno]
  first = tree.body[0] if tree.body else None
  if (first is not None and isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
      and isinstance(first.value.value, str)):
    return offsets[first.end_lineno]  # after the module docstring
  return 0


def _newline(text: str) -> str:
  for line in text.splitlines(keepends=True):
    stripped = line.rstrip("\r\n")
    if stripped != line:
      return line[len(stripped):]
  return "\n"


def _format_lines(lines: list[int]) -> str:
  unique = sorted(set(lines))
  return f"line{'s' if len(unique) > 1 else ''} {', '.join(map(str, unique))}"


@dataclasses.dataclass
class _Work:
  """What one pass over a config collects: edits, renames and warnings by line."""

  edits: list[_Edit] = dataclasses.field(default_factory=list)
  renamed: dict[tuple[str, str, str], list[int]] = dataclasses.field(default_factory=dict)
  unknown: dict[tuple[str, str], list[int]] = dataclasses.field(default_factory=dict)
  needed: list[str] = dataclasses.field(default_factory=list)

  def warn(self, name: str, message: str, line: int) -> None:
    self.unknown.setdefault((name, message), []).append(line)


def port_source(text: str, has_tf2_name: Callable[[str], bool] = tf2_has,
                resolve: Callable[[str, str], str | None] | None = resolve_import
                ) -> PortResult:
  """Renames the TF 1 names of a config's source and fixes its project imports.

  Args:
    text: the config's source.
    has_tf2_name: tells whether TF 2 still has a ``tf.`` name that is not in the table (the
      name then stays).
    resolve: ``resolve(module, name)`` -> where this project provides an ``open_seq2seq``
      import (see :func:`resolve_import`); None skips the import check.

  Raises:
    SyntaxError: the source is not valid Python.
  """
  tree = ast.parse(text)
  offsets = _line_offsets(text)
  source_lines = io.StringIO(text, newline="").readlines()

  def at_node(row: int, col: int) -> int:
    """Offset in ``text`` of an ast position (column in UTF-8 bytes)."""
    return offsets[row - 1] + len(source_lines[row - 1].encode("utf-8")[:col].decode("utf-8"))

  work = _Work()
  _tensorflow_imports(tree, text, at_node, has_tf2_name, work)
  _rename_chains(tree, text, offsets, has_tf2_name, work)
  result = PortResult(text)
  for (old, new, note), lines in work.renamed.items():
    result.notes.append((min(lines), f"{_format_lines(lines)}: {old} -> {new}"
                         + (f" ({note})" if note else "")))
  for (name, message), lines in work.unknown.items():
    result.warnings.append((min(lines), f"{_format_lines(lines)}: {name}: {message}"))
  edits = list(work.edits)
  if resolve is not None:
    edits += _fix_project_imports(tree, text, at_node, resolve, result)
  edits += _missing_imports(tree, text, offsets, work.needed, result)
  result.notes = [note for _, note in sorted(result.notes, key=lambda n: n[0])]
  result.warnings = [warning for _, warning in sorted(result.warnings, key=lambda w: w[0])]
  out = text
  for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
    out = out[:edit.start] + edit.text + out[edit.end:]
  result.text = out
  return result


def _tensorflow_imports(tree: ast.Module, text: str, at_node: Callable[[int, int], int],
                        has_tf2_name: Callable[[str], bool], work: _Work) -> None:
  """``import tensorflow.compat.v1 as tf`` -> ``import tensorflow as tf``; TF 1-only
  ``from tensorflow... import x`` are reported."""
  for node in _import_statements(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name == "tensorflow.compat.v1" and alias.asname:
          # Its names are TF 1 names, renamed like those of "tensorflow".
          start = at_node(node.lineno, node.col_offset)
          pos = start + ast.get_source_segment(text, node).index(alias.name)
          work.edits.append(_Edit(pos, pos + len(alias.name), "tensorflow"))
          work.renamed.setdefault((alias.name, "tensorflow", ""), []).append(node.lineno)
    elif node.module and node.module.split(".")[0] == "tensorflow":
      for alias in node.names:
        canonical = _canonical(["tf"] + node.module.split(".")[1:] + [alias.name])[0]
        entry = lookup(canonical)
        if entry is not None or not has_tf2_name(canonical):
          hint = f"; {entry[1].new} is the equivalent" if entry and entry[1].new else ""
          work.warn(f"from {node.module} import {alias.name}",
                    _untranslatable(f"import the TF 2 name instead{hint}"), node.lineno)


def _rename_chains(tree: ast.Module, text: str, offsets: list[int],
                   has_tf2_name: Callable[[str], bool], work: _Work) -> None:
  """Renames (or reports) each dotted name under a TensorFlow alias."""
  for parts, chain, following in _chains(text, _tf_aliases(tree)):
    canonical, dropped = _canonical(parts)
    entry = lookup(canonical)
    line, name = chain[0].start[0], ".".join(parts)
    if entry is None:
      if not has_tf2_name(canonical):
        work.warn(name, _untranslatable("TF 2 has no such name and the porting table knows "
                                        "none"), line)
      continue
    key, rename = entry
    if rename.new is None:
      work.warn(name, _untranslatable(rename.note), line)
      continue
    count = len(key.rstrip(".").split(".")) + dropped  # tokens the key covers
    called = (count == len(chain) and following is not None
              and following.type == tokenize.OP and following.string == "(")
    if called and rename.new.startswith('"'):
      work.warn(name, f"called here, so not renamed: give the name {rename.new} and move "
                f"the arguments into the params dict", line)
      continue
    if called:
      work.warn(name, f"renamed to {rename.new}, but called here with TF 1 arguments, which "
                f"it takes as written: check them ({rename.note or 'same names'})", line)
    new = rename.new.rstrip(".")
    (row, col), (end_row, end_col) = chain[0].start, chain[count - 1].end
    work.edits.append(_Edit(offsets[row - 1] + col, offsets[end_row - 1] + end_col, new))
    work.renamed.setdefault((".".join(parts[:count]), new, rename.note), []).append(line)
    if rename.import_line:
      work.needed.append(rename.import_line)


def _untranslatable(why: str) -> str:
  return f"no TF 2 / Keras 3 equivalent ({why})"


def _missing_imports(tree: ast.Module, text: str, offsets: list[int], needed: list[str],
                     result: PortResult) -> list[_Edit]:
  """An edit adding the import lines the new names need and the config lacks."""
  bound = _bound_names(tree)
  lines = []
  for line in dict.fromkeys(needed):
    if line.startswith("import "):
      name = module = line.split()[1]
    else:
      module, name = line[len("from "):].split(" import ")
    if bound.get(name) != module:
      lines.append(line)
      result.notes.append((float("inf"), f"added: {line}"))
  if not lines:
    return []
  newline = _newline(text)
  offset = _insertion_offset(tree, offsets)
  prefix = "" if offset == 0 or text[offset - 1] in "\r\n" else newline
  return [_Edit(offset, offset, prefix + "".join(line + newline for line in lines))]


def _fix_project_imports(tree: ast.Module, text: str, at_node: Callable[[int, int], int],
                         resolve: Callable[[str, str], str | None], result: PortResult
                         ) -> list[_Edit]:
  """Edits for ``from open_seq2seq.X import Name`` whose path differs here; records misses."""
  edits = []
  newline = _newline(text)
  for node in _import_statements(tree):
    if not (isinstance(node, ast.ImportFrom) and node.module
            and node.module.split(".")[0] == "open_seq2seq" and node.level == 0):
      continue
    moved: dict[str, list[str]] = {}
    kept = []
    for alias in node.names:
      where = resolve(node.module, alias.name)
      spelled = alias.name + (f" as {alias.asname}" if alias.asname else "")
      if where is None:
        result.missing.append((node.module, alias.name))
        result.warnings.append((node.lineno, f"line {node.lineno}: {node.module}.{alias.name}: "
                                             f"not in this project (yet)"))
        kept.append(spelled)
      elif where != node.module:
        moved.setdefault(where, []).append(spelled)
        result.notes.append((node.lineno, f"line {node.lineno}: from {node.module} import "
                                          f"{alias.name} -> from {where} import {alias.name}"))
      else:
        kept.append(spelled)
    if not moved:
      continue
    lines = [f"from {node.module} import {', '.join(kept)}"] if kept else []
    lines += [f"from {module} import {', '.join(names)}" for module, names in moved.items()]
    start = at_node(node.lineno, node.col_offset)
    end = at_node(node.end_lineno, node.end_col_offset)
    edits.append(_Edit(start, end, newline.join(lines)))
  return edits


__all__ = ["Rename", "RENAMES", "KEPT", "PortResult", "port_source", "lookup", "tf2_has",
           "resolve_import", "SEARCH_MODULES", "markdown_table"]
