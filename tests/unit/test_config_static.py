"""``run.py --help_params`` and config errors answered without TensorFlow
(open_seq2seq/config_static.py) are exactly what the normal path answers, or nothing."""

import functools
import glob
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

from open_seq2seq import config_static
from open_seq2seq.cli_args import parse_args
from open_seq2seq.config_static_eval import read_config
from open_seq2seq.errors import ConfigError
from open_seq2seq.params_index import INDEX_PATH, Index, Unsure, load_index

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = sorted(glob.glob(os.path.join(ROOT, "example_configs", "**", "*.py"), recursive=True))
TRANSFORMER = os.path.join(ROOT, "example_configs", "text2text", "en-es",
                           "transformer-2x2-bible.py")
JASPER = os.path.join(ROOT, "example_configs", "speech2text", "jasper_commands.py")
RNN = os.path.join(ROOT, "example_configs", "text2text", "toy-reversal", "nmt-reversal-RR.py")


def static(argv: list[str]) -> str | None:
  """What the static path answers: help text, "error: ..." or None."""
  args, overrides = parse_args(argv)
  try:
    return config_static.static_answer(args, overrides)
  except ConfigError as e:
    return f"error: {e}"


def slow(argv: list[str]) -> str | None:
  """What the normal path answers, as cli.run computes it: help text, "error: ..." or None
  (it goes on to build the model)."""
  from open_seq2seq.run_settings import load_with_the_runs_settings
  from open_seq2seq.slots import help_params
  args, overrides = parse_args(argv)
  mode = "interactive_infer" if args.mode == "export" else args.mode
  try:
    base_model, configs, *_ = load_with_the_runs_settings(
        args.config_file, mode, overrides, args.overrides_file, args.continue_learning)
  except ConfigError as e:
    return f"error: {e}"
  return help_params(base_model, next(iter(configs.values()))) if args.help_params else None


@functools.lru_cache(maxsize=None)
def index() -> Index:
  return load_index()


def test_the_committed_index_is_what_the_generator_writes():
  # In a fresh process: what earlier tests imported (tensorflow.keras loaded through its lazy
  # alias, say) would otherwise reach the aliases the generator records.
  code = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location("
          "'gen_params_index', sys.argv[1]); generator = importlib.util.module_from_spec(spec); "
          "spec.loader.exec_module(generator); sys.stdout.write(generator.index_text())")
  written = subprocess.run(
      [sys.executable, "-c", code, os.path.join(ROOT, "scripts", "gen_params_index.py")],
      capture_output=True, text=True, check=True, cwd=ROOT,
      env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")).stdout
  with open(INDEX_PATH, encoding="utf-8") as f:
    assert f.read() == written, "run: python scripts/gen_params_index.py"


def test_help_params_of_every_example_config_is_the_normal_paths_or_none(capsys):
  answered, fell_back = 0, []
  for path in CONFIGS:
    argv = ["--config_file", path, "--help_params"]
    fast = static(argv)
    if fast is None:
      fell_back.append(os.path.relpath(path, ROOT))
      continue
    assert fast == slow(argv), path
    answered += 1
  with capsys.disabled():
    print(f"\nstatic --help_params: {answered} of {len(CONFIGS)} example configs; fell back: "
          f"{fell_back or 'none'}")
  assert answered >= 0.9 * len(CONFIGS), fell_back


@pytest.mark.parametrize("extra", [["--mode=eval"], ["--mode=infer"], ["--mode=train_eval"],
                                   ["--mode=export"], ["--optimizer=momentum",
                                                       "--optimizer_params/momentum=0.9"],
                                   ["--loss_scaling=512"], ["--loss_scaling=logmax"]])
def test_help_params_follows_the_mode_and_the_overrides(extra, tmp_path):
  argv = ["--config_file", TRANSFORMER, "--help_params", f"--logdir={tmp_path}"] + extra
  fast = static(argv)
  assert fast is not None
  assert fast == slow(argv)


def _same(fast, real, where: str) -> None:
  """The static reading of a config value stands for the real value."""
  info = Index.info(fast)
  if isinstance(real, dict):
    assert isinstance(fast, dict) and list(fast) == list(real), where
    for key in real:
      _same(fast[key], real[key], f"{where}/{key}")
  elif isinstance(real, (list, tuple)):
    assert type(fast) is type(real) and len(fast) == len(real), where
    for i, (a, b) in enumerate(zip(fast, real)):
      _same(a, b, f"{where}/{i}")
  elif info is not None and info["kind"] == "class":
    assert (fast.__module__, fast.__qualname__) == (real.__module__, real.__qualname__), where
  elif info is not None:
    assert getattr(fast, "__name__", None) == getattr(real, "__name__", None), where
    assert info.get("repr") in (None, repr(real)), where
  elif callable(real):
    assert getattr(fast, "__name__", None) == real.__name__, where
  else:
    assert type(fast) is type(real) and fast == real, where


def test_the_static_reading_of_every_example_config_is_what_running_it_defines():
  from open_seq2seq.config import load_config_module
  for path in CONFIGS:
    file = importlib.util.spec_from_file_location("x", path).origin
    try:
      variables = read_config(path, index(), file, "open_seq2seq_user_config")
    except Unsure:
      continue
    module = load_config_module(path)
    for name in ("base_model", "base_params", "train_params", "eval_params", "infer_params",
                 "interactive_infer_params"):
      assert (name in variables) == hasattr(module, name), (path, name)
      if hasattr(module, name):
        _same(variables[name], getattr(module, name), f"{os.path.basename(path)}:{name}")


CERTAIN = [
    (TRANSFORMER, ["--encoder_params/encoder_layerz=3"]),
    (TRANSFORMER, ["--train_params/batch_size_per_gpux=3"]),
    (TRANSFORMER, ["--mode=eval", "--eval_params/data_layer_params/bucket_widht=3"]),
    (TRANSFORMER, ["--mode=train_eval", "--eval_params/decoder_params/beam_sise=3"]),
    (TRANSFORMER, ["--infer_params/decoder_params/alpah=1.0", "--mode=infer"]),
    (TRANSFORMER, ["--max_stepz=3"]),
    (TRANSFORMER, ["--train_params=3"]),
    (TRANSFORMER, ["--optimizer_params/beta3=0.9"]),
    (TRANSFORMER, ["--optimizer_params/global_clipnorm=1.0"]),
    (TRANSFORMER, ["--optimizer_params/beta1=0.9", "--optimizer_params/beta_1=0.9"]),
    (TRANSFORMER, ["--optimizer=Adamz"]),
    (TRANSFORMER, ["--optimizer=Momentum"]),
    (TRANSFORMER, ["--lr_policy_params/warmup_stepz=3"]),
    (TRANSFORMER, ["--batch_size_per_gpu=abc"]),
    (TRANSFORMER, ["--decoder_params/beam_size=four"]),
    (TRANSFORMER, ["--max_steps=0"]),
    (TRANSFORMER, ["--num_epochs=3", "--max_steps=2"]),
    (TRANSFORMER, ["--load_model_vocab_files={'source': 'vocab.txt'}"]),
    (TRANSFORMER, ["--loss_scaling=Backof"]),
    (TRANSFORMER, ["--loss_scaling=-1"]),
    (TRANSFORMER, ["--loss_scaling_params/step_window=1"]),
    (TRANSFORMER, ["--loss_scaling=512", "--loss_scaling_params/step_window=1"]),
    (TRANSFORMER, ["--loss_scaling=Backoff", "--loss_scaling_params/step_windw=1"]),
    (TRANSFORMER, ["--summaries=['learning_rat']"]),
    (TRANSFORMER, ["--summaries/0=x"]),
    (TRANSFORMER, ["--loss=None"]),
    (TRANSFORMER, ["--encoder_params/encoder_layers/2=3"]),
    (RNN, ["--encoder_params/core_cell_params=3"]),
    (RNN, ["--dtype=float16", "--decoder_params/attention_typ=x"]),
    (JASPER, ["--encoder_params/convnet_layers/0/kernel_sizee=[3]"]),
    (JASPER, ["--encoder_params/convnet_layers/x/kernel_size=[3]"]),
    (JASPER, ["--encoder_params/convnet_layers/99/kernel_size=[3]"]),
    (JASPER, ["--larc_params/larc_etaa=1"]),
    (JASPER, ["--data_layer_params/dataset_filez=[]"]),
    (JASPER, ["--regularizer_params/scalee=1"]),
    (os.path.join(ROOT, "example_configs", "no_such_config.py"), []),
]


@pytest.mark.parametrize("path, extra", CERTAIN,
                         ids=[" ".join(extra) or "missing file" for _, extra in CERTAIN])
def test_a_mistake_gets_the_normal_paths_error_word_for_word(path, extra):
  argv = ["--config_file", path] + extra
  fast = static(argv)
  assert fast is not None and fast.startswith("error: ")
  assert fast == slow(argv)


def test_an_error_after_a_check_only_the_real_code_runs_is_left_to_it():
  # The train config passes through the TDNN encoder's own rules (taken to pass statically):
  # an error of the eval config after them might not be the first one.
  argv = ["--config_file", JASPER, "--mode=train_eval", "--eval_params/shufle=1"]
  assert static(argv) is None
  assert slow(argv).startswith("error: eval_params/shufle: unknown parameter")
  # a value only the encoder's predicate can judge: the static path does not report it
  argv = ["--config_file", JASPER, "--encoder_params/convnet_layers/0/kernel_size=[3,3,3]"]
  assert static(argv) is None
  assert slow(argv).startswith("error: encoder_params/convnet_layers/0/kernel_size: expected")
  # --help_params answers past it (HELP_PAST_ASSUMED_CHECKS): the tables do not depend on the
  # value, though the normal path, which validates first, would print that error instead
  assert static(argv + ["--help_params"]) == slow(["--config_file", JASPER, "--help_params"])


def _write(tmp_path, source: str, name: str = "config.py") -> str:
  path = tmp_path / name
  path.write_text(source, encoding="utf-8")
  return str(path)


@pytest.mark.parametrize("old, new", [
    ('"max_steps": 20000', '"max_stpes": 20000'),
    ('"num_heads": 8', '"num_head": 8'),
    ('shuffle=True, repeat=True', 'shufle=True, repeat=True'),
    ('"beta2": 0.998', '"beta_22": 0.998'),
    ('"label_smoothing": 0.1', '"label_smothing": 0.1'),
    ('"batch_size_per_gpu": 64', '"batch_size_per_gpu": "64"'),
    ('"warmup_steps": 400', '"warmup_step": 400'),
])
def test_a_typo_in_the_config_file_gets_the_normal_paths_error(tmp_path, old, new):
  with open(TRANSFORMER, encoding="utf-8") as f:
    source = f.read()
  assert old in source
  path = _write(tmp_path, source.replace(old, new, 1))
  errors = 0
  for argv in (["--config_file", path], ["--config_file", path, "--help_params"],
               ["--config_file", path, "--mode=eval"]):
    fast = static(argv)
    assert fast == slow(argv)
    errors += fast is not None and fast.startswith("error: ")
  assert errors  # a mode whose config has the typo reports it


@pytest.mark.parametrize("source", [
    "base_model = None\nbase_params = {\n",  # syntax error
    "from open_seq2seq.models import Text2Text\nbase_model = Text2Text\n",
    "base_params = {}\n",
    "import os\nreturn 3\n",  # an error of the compiler proper
])
def test_a_broken_config_file_gets_the_normal_paths_error(tmp_path, source):
  path = _write(tmp_path, source)
  fast = static(["--config_file", path, "--help_params"])
  assert fast is not None and fast == slow(["--config_file", path, "--help_params"])


@pytest.mark.parametrize("line", [
    "print('reading the config')",
    "import numpy as np",
    "class Mine:\n  pass",
    "scale = tf.constant(2.0)",
    "base_params['lr_policy'] = lambda global_step, learning_rate: learning_rate",
    "base_params['encoder_params']['activation'] = tf.nn.no_such_function",
    "try:\n  x = 1\nexcept ValueError:\n  pass",
    "base_params['encoder'] = 1 / 0",
])
def test_what_the_reading_does_not_follow_takes_the_normal_path(tmp_path, line):
  with open(RNN, encoding="utf-8") as f:
    source = f.read()
  path = _write(tmp_path, source + "\nimport tensorflow as tf\n" + line + "\n")
  assert static(["--config_file", path, "--help_params"]) is None
  # a typo'd override is found before the lambda policy is needed: then it is certain
  typo = ["--config_file", path, "--encoder_params/no_such_key=1"]
  assert static(typo) in (None, slow(typo))


def test_a_config_read_through_runpy_and_edited_in_place(tmp_path):
  base = _write(tmp_path, textwrap.dedent(f"""\
      import runpy
      _rnn = runpy.run_path({RNN!r})
      base_model = _rnn["base_model"]
      base_params = dict(_rnn["base_params"], max_steps=7)
      base_params["encoder_params"] = {{**base_params["encoder_params"], "src_emb_size": 32}}
      eval_params = _rnn["eval_params"]
      """))
  for argv in (["--config_file", base, "--help_params"],
               ["--config_file", base, "--encoder_params/src_emb_sise=3"]):
    fast = static(argv)
    assert fast is not None and fast == slow(argv)


def test_without_the_index_or_when_switched_off_nothing_is_answered(monkeypatch, tmp_path):
  argv = ["--config_file", TRANSFORMER, "--help_params"]
  monkeypatch.setenv("OPEN_SEQ2SEQ_STATIC_CONFIG", "0")
  assert static(argv) is None
  monkeypatch.delenv("OPEN_SEQ2SEQ_STATIC_CONFIG")
  assert load_index(str(tmp_path / "missing.json")) is None
  monkeypatch.setattr(config_static, "load_index", lambda: None)
  assert static(argv) is None


def test_an_index_written_with_another_keras_is_not_used(tmp_path):
  with open(INDEX_PATH, encoding="utf-8") as f:
    data = json.load(f)
  assert load_index() is not None
  data["generated_with"]["keras"] = ["0.0.1"]
  path = tmp_path / "index.json"
  path.write_text(json.dumps(data), encoding="utf-8")
  assert load_index(str(path)) is None


def test_help_past_checks_only_the_real_code_runs_can_be_turned_off(monkeypatch):
  assert static(["--config_file", JASPER, "--help_params"]) is not None
  monkeypatch.setattr(config_static, "HELP_PAST_ASSUMED_CHECKS", False)
  assert static(["--config_file", JASPER, "--help_params"]) is None  # the TDNN's own rules
  assert static(["--config_file", TRANSFORMER, "--help_params"]) is not None


def test_help_params_and_a_typo_answer_without_tensorflow(tmp_path):
  # A tensorflow and a keras that cannot be imported come first on the path: run.py answers
  # all the same, with the normal path's text and status.
  for name in ("tensorflow", "keras"):
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text(f"raise ImportError('no {name} here')\n")
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]))

  def run(*argv: str, **extra_env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), *argv],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env=dict(env, **extra_env))

  help_argv = ["--config_file", TRANSFORMER, "--help_params"]
  result = run(*help_argv)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout == slow(help_argv) + "\n"
  typo_argv = ["--config_file", TRANSFORMER, "--encoder_params/encoder_layerz=3"]
  result = run(*typo_argv)
  assert result.returncode == 2
  assert result.stderr == slow(typo_argv) + "\n"
  # the same command on the normal path does need TensorFlow: the fake one is in the way
  result = run(*help_argv, OPEN_SEQ2SEQ_STATIC_CONFIG="0")
  assert result.returncode != 0 and "no tensorflow here" in result.stderr
