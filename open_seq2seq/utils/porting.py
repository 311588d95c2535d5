"""Porting an OpenSeq2Seq (TF 1) config: the renaming table and the source rewriter.

An OpenSeq2Seq config ports by renaming only what TF 1 forced on it: each ``tf.contrib.*``,
``tf.layers.*``, ``tf.nn.rnn_cell.*``, TF 1 initializer or ``tf.train.*Optimizer`` name becomes
its TF 2 / Keras 3 equivalent, while every key and value stays as written. :data:`RENAMES` is
that table (``scripts/port_config.py`` applies it, ``docs/porting.md`` shows it, a test keeps
the two equal); :func:`port_source` applies it to a config's text.

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


class Rename(NamedTuple):
  """How one TF 1 name ports.

  Attributes:
    new: the replacement text, or None when there is no equivalent (the rewriter warns).
    import_line: the import the replacement needs ("" for none).
    note: what changes in meaning or in parameter spellings (shown with the rename).
  """

  new: str | None
  import_line: str
  note: str


_KERAS = "import keras"
_LR = "from open_seq2seq.optimizers.lr_policies import {}"


def _keras(path: str, note: str = "") -> Rename:
  return Rename(f"keras.{path}", _KERAS, note)


def _name(name: str, note: str = "") -> Rename:
  return Rename(f'"{name}"', "", note)


def _none(note: str) -> Rename:
  return Rename(None, "", note)


_CELL_NOTE = ("TF 1 `num_units` is Keras `units`; `forget_bias` (added at every step) becomes "
              "`unit_forget_bias` (bias initialised to 1); the component translates the TF 1 "
              "spellings")
_LAYER_NOTE = "a Keras layer class built with the same keyword arguments"
_OPT_NOTE = "optimizer_params keep their TF 1 spellings (beta1, use_nesterov, ...)"
_LR_NOTE = ("no drop-in policy: use one of open_seq2seq.optimizers.lr_policies ({}) and its "
            "parameter names")

#: TF 1 name (as spelled with ``import tensorflow as tf``) -> how it ports. A key ending in
#: "." renames every name under it.
RENAMES: dict[str, Rename] = {
    # --- regularizers
    "tf.contrib.layers.l2_regularizer": _keras(
        "regularizers.L2", "`{'scale': s}` keeps TF 1's meaning (s * sum(w**2) / 2, i.e. "
        "Keras l2 = s/2); `{'l2': x}` is Keras' x * sum(w**2)"),
    "tf.contrib.layers.l1_regularizer": _keras(
        "regularizers.L1", "`{'scale': s}` keeps TF 1's meaning (s * sum(abs(w)))"),
    "tf.contrib.layers.l1_l2_regularizer": _keras(
        "regularizers.L1L2", "TF 1 `scale_l1`/`scale_l2` are Keras `l1`/`l2` (no factor 1/2)"),
    # --- initializers
    "tf.contrib.layers.xavier_initializer": _keras(
        "initializers.GlorotUniform", "TF 1's `uniform=False` variant is "
        "keras.initializers.GlorotNormal"),
    "tf.contrib.layers.xavier_initializer_conv2d": _keras(
        "initializers.GlorotUniform", "as xavier_initializer"),
    "tf.contrib.layers.variance_scaling_initializer": _keras(
        "initializers.VarianceScaling", "TF 1 contrib spelling: `factor` is `scale`, "
        "mode 'FAN_IN' is 'fan_in', `uniform=True` is distribution='uniform'"),
    "tf.glorot_uniform_initializer": _keras("initializers.GlorotUniform"),
    "tf.glorot_normal_initializer": _keras("initializers.GlorotNormal"),
    "tf.random_uniform_initializer": _keras("initializers.RandomUniform",
                                            "same `minval`, `maxval`, `seed`"),
    "tf.random_normal_initializer": _keras("initializers.RandomNormal",
                                           "same `mean`, `stddev`, `seed`"),
    "tf.truncated_normal_initializer": _keras("initializers.TruncatedNormal",
                                              "same `mean`, `stddev`, `seed`"),
    "tf.variance_scaling_initializer": _keras(
        "initializers.VarianceScaling", "same `scale`, `mode`, `distribution` (TF 1's "
        "'normal' is 'truncated_normal')"),
    "tf.orthogonal_initializer": _keras("initializers.Orthogonal", "same `gain`"),
    "tf.zeros_initializer": _keras("initializers.Zeros"),
    "tf.ones_initializer": _keras("initializers.Ones"),
    "tf.constant_initializer": _keras("initializers.Constant", "same `value`"),
    "tf.uniform_unit_scaling_initializer": _keras(
        "initializers.VarianceScaling", "TF 1 `factor` is `scale`; use "
        "distribution='uniform' for the same draw"),
    # --- layers (CNNEncoder's `cnn_layers` / `fc_layers`)
    "tf.layers.conv1d": _keras("layers.Conv1D", _LAYER_NOTE),
    "tf.layers.conv2d": _keras("layers.Conv2D", _LAYER_NOTE + "; padding 'SAME'/'VALID' "
                               "in either case"),
    "tf.layers.conv3d": _keras("layers.Conv3D", _LAYER_NOTE),
    "tf.layers.conv2d_transpose": _keras("layers.Conv2DTranspose", _LAYER_NOTE),
    "tf.layers.separable_conv1d": _keras("layers.SeparableConv1D", _LAYER_NOTE),
    "tf.layers.separable_conv2d": _keras("layers.SeparableConv2D", _LAYER_NOTE),
    "tf.layers.dense": _keras("layers.Dense", _LAYER_NOTE),
    "tf.layers.dropout": _keras("layers.Dropout", "same `rate` (the drop probability)"),
    "tf.layers.batch_normalization": _keras(
        "layers.BatchNormalization", "same `momentum`, `epsilon`, `center`, `scale`"),
    "tf.layers.max_pooling1d": _keras("layers.MaxPooling1D", _LAYER_NOTE),
    "tf.layers.max_pooling2d": _keras("layers.MaxPooling2D", _LAYER_NOTE),
    "tf.layers.average_pooling1d": _keras("layers.AveragePooling1D", _LAYER_NOTE),
    "tf.layers.average_pooling2d": _keras("layers.AveragePooling2D", _LAYER_NOTE),
    "tf.layers.flatten": _keras("layers.Flatten", _LAYER_NOTE),
    "tf.layers.": _none("no Keras layer of that name is known here; use the keras.layers "
                        "class of the same operation"),
    # --- recurrent cells and layers
    "tf.nn.rnn_cell.LSTMCell": _keras("layers.LSTMCell", _CELL_NOTE),
    "tf.nn.rnn_cell.BasicLSTMCell": _keras("layers.LSTMCell", _CELL_NOTE),
    "tf.nn.rnn_cell.GRUCell": _keras("layers.GRUCell", "TF 1 `num_units` is Keras `units`"),
    "tf.nn.rnn_cell.BasicRNNCell": _keras("layers.SimpleRNNCell",
                                          "TF 1 `num_units` is Keras `units`"),
    "tf.nn.rnn_cell.MultiRNNCell": _keras("layers.StackedRNNCells", "takes the list of cells"),
    "tf.nn.rnn_cell.": _none("a TF 1 cell wrapper: no Keras cell of that name; components "
                             "apply dropout and residual connections themselves"),
    "tf.contrib.rnn.LSTMCell": _keras("layers.LSTMCell", _CELL_NOTE),
    "tf.contrib.rnn.BasicLSTMCell": _keras("layers.LSTMCell", _CELL_NOTE),
    "tf.contrib.rnn.LSTMBlockCell": _keras("layers.LSTMCell", _CELL_NOTE),
    "tf.contrib.rnn.GRUCell": _keras("layers.GRUCell", "TF 1 `num_units` is Keras `units`"),
    "tf.contrib.rnn.GRUBlockCell": _keras("layers.GRUCell", "TF 1 `num_units` is `units`"),
    "tf.contrib.rnn.GRUBlockCellV2": _keras("layers.GRUCell", "TF 1 `num_units` is `units`"),
    "tf.contrib.rnn.BasicRNNCell": _keras("layers.SimpleRNNCell", "`num_units` is `units`"),
    "tf.contrib.rnn.MultiRNNCell": _keras("layers.StackedRNNCells", "takes the list of cells"),
    "tf.contrib.rnn.LayerNormBasicLSTMCell": _none(
        "Keras has no layer-normalised LSTM cell; the language-model family provides "
        "WeightDropLayerNormBasicLSTMCell"),
    "tf.contrib.rnn.": _none("no Keras cell of that name"),
    "tf.contrib.cudnn_rnn.CudnnLSTM": _keras(
        "layers.LSTM", "Keras' LSTM runs the cuDNN kernel on a GPU when its arguments allow"),
    "tf.contrib.cudnn_rnn.CudnnGRU": _keras(
        "layers.GRU", "Keras' GRU runs the cuDNN kernel on a GPU when its arguments allow"),
    "tf.contrib.cudnn_rnn.": _none("no Keras layer of that name"),
    # --- optimizers
    "tf.train.AdamOptimizer": _name("Adam", "TF 1 epsilon default 1e-8 kept; " + _OPT_NOTE),
    "tf.train.MomentumOptimizer": _name("Momentum", _OPT_NOTE),
    "tf.train.GradientDescentOptimizer": _name("SGD"),
    "tf.train.RMSPropOptimizer": _name("RMSProp", "TF 1 `decay` is accepted (Keras `rho`); "
                                       "the mean square starts at 0 (TF 1: 1)"),
    "tf.train.AdagradOptimizer": _name("Adagrad"),
    "tf.train.FtrlOptimizer": _name("Ftrl"),
    "tf.train.AdadeltaOptimizer": _keras("optimizers.Adadelta",
                                         "Keras epsilon default 1e-7 (TF 1: 1e-8)"),
    "tf.contrib.opt.LazyAdamOptimizer": _name(
        "LazyAdam", "runs as Adam (Keras has no lazy sparse update; equal on dense "
        "gradients); " + _OPT_NOTE),
    "tf.contrib.opt.AdamWOptimizer": _name(
        "AdamW", "Keras decays by lr * weight_decay * w; tf.contrib's AdamW did not "
        "multiply by lr: divide such a weight_decay by the learning rate"),
    "tf.contrib.opt.NadamOptimizer": _keras("optimizers.Nadam",
                                            "Keras spellings: beta_1, beta_2"),
    "tf.train.": _none("not an optimizer or policy this project knows"),
    "tf.contrib.opt.": _none("no Keras optimizer of that name"),
    # --- learning-rate policies
    "tf.train.cosine_decay": Rename(
        "cosine_decay", _LR.format("cosine_decay"), "decay_steps is filled in from the "
        "run's length when not given; TF's `alpha` (end fraction) is min_lr = "
        "alpha * learning_rate"),
    "tf.train.exponential_decay": _none(_LR_NOTE.format("exp_decay")),
    "tf.train.polynomial_decay": _none(_LR_NOTE.format("poly_decay")),
    "tf.train.piecewise_constant": _none(_LR_NOTE.format("piecewise_constant")),
    "tf.train.inverse_time_decay": _none(_LR_NOTE.format("inv_poly_decay")),
    # --- everything else under tf.contrib, and TF 1 switches
    "tf.keras.": Rename("keras.", _KERAS, "Keras 3 is the standalone keras package"),
    "tf.contrib.": _none("tf.contrib does not exist in TF 2"),
    "tf.disable_v2_behavior": _none("a TF 1 compatibility switch: delete the call"),
    "tf.disable_eager_execution": _none("a TF 1 compatibility switch: delete the call"),
}

#: Names that stay as written: TF 2 has them with the same meaning (the table in the docs).
#: Other ``tf.`` names stay too when TF 2 has them.
KEPT = ("tf.float16", "tf.float32", "tf.bfloat16", "tf.int32", "tf.nn.relu", "tf.nn.tanh",
        "tf.nn.sigmoid", "tf.nn.elu", "tf.nn.selu", "tf.nn.leaky_relu", "tf.nn.gelu",
        "tf.minimum", "tf.maximum")


def lookup(canonical: str) -> tuple[str, Rename] | None:
  """The table entry for ``canonical`` (``tf.x.y``, possibly followed by attributes).

  A name key matches the name or its attributes (``tf.a.b`` matches ``tf.a.b.c``); a prefix
  key (ending in ".") matches everything under it. The longest match wins, a name key over
  a prefix key of the same length.
  """
  best, best_rank = None, None
  for key, rename in RENAMES.items():
    if key.endswith("."):
      hit = canonical.startswith(key)
    else:
      hit = canonical == key or canonical.startswith(key + ".")
    rank = (len(key.rstrip(".")), not key.endswith("."))
    if hit and (best_rank is None or rank > best_rank):
      best, best_rank = (key, rename), rank
  return best


def tf2_has(canonical: str) -> bool:
  """Whether the installed TensorFlow 2 has ``canonical`` (``tf.nn.relu``) under that name."""
  module = importlib.import_module("tensorflow")
  obj = module
  for part in canonical.split(".")[1:]:
    if not hasattr(obj, part):
      return False
    obj = getattr(obj, part)
  return True


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


def markdown_table() -> str:
  """The renaming table of ``docs/porting.md`` (generated from :data:`RENAMES` and KEPT)."""
  rows = ["| TF 1 name | TF 2 / Keras 3 name | notes |", "|---|---|---|"]
  for key, rename in RENAMES.items():
    old = f"`{key}*`" if key.endswith(".") else f"`{key}`"
    new = f"`{rename.new}*`" if rename.new and key.endswith(".") else \
        (f"`{rename.new}`" if rename.new else "— (warning)")
    rows.append(f"| {old} | {new} | {rename.note.replace('|', '/')} |")
  for key in KEPT:
    rows.append(f"| `{key}` | `{key}` (stays) | exists in TF 2 |")
  return "\n".join(rows)


__all__ = ["Rename", "RENAMES", "KEPT", "PortResult", "port_source", "lookup", "tf2_has",
           "resolve_import", "SEARCH_MODULES", "markdown_table"]
