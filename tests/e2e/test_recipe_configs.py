"""Every config whose data a recipe here makes offline runs, as shipped, on that recipe's data.

tests/e2e/test_example_configs.py steps every config on tiny generated data in one shared toy
vocabulary, so it cannot see a config that contradicts its recipe (convs2s-small-bible shared
its source and target embeddings while the Bible recipe writes per-side vocabularies of 4,729
and 5,296 ids). Here each config of ``CASES`` runs ``python run.py --mode=train_eval
--max_steps=2 --eval_batches=2 --graph_optimizations=False`` (warm, tests/helpers/warm_cli.py;
Grappler off, as for every smoke run of the suite) with nothing else changed:
its own model, batch size, logdir and data paths, from a work directory laid out as a checkout
(tests/helpers/recipes.py links ``CHECKOUT``) whose ``data/`` holds what the recipes write:

* the data scripts/install_test_deps.sh installs into the repository's data/ (the Bible,
  the novels and tweets, Fashion-MNIST) is linked file by file (what a run writes, such as
  the language model's ``processed/`` folder, stays in the work directory); the Bible configs
  read the repository's data/ by an absolute path;
* the corpora made from Debian packages (the Asterisk prompts, complete; the espeak-ng and
  flite corpora with the recipe's words, voices and layout, but a few dozen clips instead of
  hundreds: a size option of each script) are made once, when a selected config first needs
  them;
* the transfer config starts from the language model's run (its shipped ``load_model`` is
  the language model's shipped logdir), as docs/language-model.md chains them.

Each run must finish its two steps, evaluate at step 2 (one config trains only: see
``CASES``) and write its checkpoint, and every data path the config names in any mode must
exist afterwards. Its "Training N parameters" line is compared with every parameter count the
docs give for the config (``DOCUMENTED``), at the precision written there. The three Bible
models (22-31 M parameters) cost 24-31 s of CPU each for two steps and their eval: no config
needs ``--benchmark``. The module took 146 s of CPU, 2.3 minutes on the 2 cores of an AMD
EPYC (AVX-512) with nothing else running, data generation included. Missing installed data
fails naming the script that makes it, never skips. A config under example_configs/ that
names a path under data/ (or a recipe's own directory) must be in ``CASES``, or in
``ELSEWHERE`` / ``NO_OFFLINE_RECIPE`` with the reason. ``pytest -s`` prints each run's time.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import shutil
import subprocess
import time

import pytest

from open_seq2seq.config import load_config_module
from tests.helpers import toy, warm_cli
from tests.helpers.recipes import (CONFIG_ROOT, OTHER_RECIPE_DIRECTORIES, RECIPES, ROOT,
                                   RecipeData, data_paths, environment_variables)

pytestmark = pytest.mark.slow

STEPS = 2
EVAL_BATCHES = 2
TIMEOUT = 900
_STARTED = re.compile(r"Training ([\d,]+) parameters for (\d+) steps? .* 1 replica\(s\), "
                      r"backend single, graph optimizations off\)")


@dataclasses.dataclass(frozen=True)
class Case:
  """How one config runs on its recipe's data."""
  reads: tuple[str, ...]  # RECIPES keys
  env: tuple[tuple[str, str], ...] = ()  # variables the recipe's documented command sets
  after: str | None = None  # a config whose run in the same work directory this one reads
  expect: str | None = None  # a pattern the run's output must hold
  mode: str = "train_eval"  # "train" where the eval would cost more than the rest (say why)
  overrides: tuple[str, ...] = ()  # run.py overrides where the recipe's run costs minutes (why)


#: Every config (relative to example_configs/) that runs here on its recipe's data.
CASES: dict[str, Case] = {
    "image2label/resnet_fashion_mnist.py": Case(("data/fashion_mnist",)),
    "lm/lstm-austen.py": Case(("data/austen",)),
    "speech2text/conformer_ctc_synthetic.py": Case(("data/synthetic_speech",)),
    "speech2text/conformer_transducer_synthetic.py": Case(("data/synthetic_speech",)),
    "speech2text/conformer_streaming_synthetic.py": Case(("data/synthetic_speech",)),
    "speech2text/jasper_commands_synthetic.py": Case(("data/speech_commands_synthetic",)),
    "speech2text/jca_toy_synthetic.py": Case(("data/synthetic_speech",)),
    "speech2text/quartznet_synthetic.py": Case(("data/synthetic_speech",)),
    "speech2text/w2l_toy_synthetic.py": Case(("data/synthetic_speech",)),
    "text2speech/centaur-synthetic-small.py": Case(("data/synth_tts",)),
    # The first run computes the frame pitch of every training prompt, then caches it: with
    # the config's pYIN that is ~0.1 s per second of audio, 2-3 minutes for the 24-minute
    # corpus on 2 cores; YIN (same cache, statistics and batches) takes seconds. train_eval:
    # the config early-stops on its val loss, which --mode=train refuses (the val set leaves
    # out its 73-s prompt, whose forward-sum has a unit test of its own).
    "text2speech/fastpitch-asterisk-small.py": Case(
        ("data/asterisk",), overrides=("--data_layer_params/pitch_method=yin",)),
    "text2speech/hifigan-asterisk-small.py": Case(("data/asterisk",)),
    "text2speech/fastpitch-synthetic-small.py": Case(("data/synth_tts",)),
    "text2speech/hifigan-synthetic-small.py": Case(("data/synth_tts",)),
    # Train only: its eval free-runs the untrained Tacotron to its length limit (8 frames per
    # symbol) on the 20 validation prompts, 25-30 s of CPU against 6-8 s for the rest of the
    # run. The eval of these components on recipe data runs for tacotron-synthetic-small, and
    # val.csv / test.csv are checked to exist.
    "text2speech/tacotron-asterisk-small.py": Case(("data/asterisk",), mode="train"),
    "text2speech/tacotron-synthetic-small.py": Case(("data/synth_tts",)),
    # its documented command: TTS_DATA=data/synth_gst (a corpus spoken at two rates)
    "text2speech/tacotron_gst-synthetic-small.py": Case(("data/synth_gst",),
                                                        env=(("TTS_DATA", "data/synth_gst"),)),
    "text2text/en-es/convs2s-small-bible.py": Case(("data/bible_en_es",)),
    "text2text/en-es/gnmt-small-bible.py": Case(("data/bible_en_es",)),
    "text2text/en-es/transformer-2x2-bible.py": Case(("data/bible_en_es",)),
    "text2text/en-es/transformer-3x3-bible-d256.py": Case(("data/bible_en_es",)),
    "transfer/tweets-lm.py": Case(("data/tweets-lm",)),
    "transfer/tweets-from-tweets-lm.py": Case(
        ("data/tweets", "data/tweets-lm"), after="transfer/tweets-lm.py",
        expect=r"load_model: initialised \d+ variables from experiments/tweets-lm"),
    "transfer/tweets-from-austen.py": Case(
        ("data/tweets", "data/austen"), after="lm/lstm-austen.py",
        expect=r"load_model: initialised \d+ variables from experiments/lstm-austen"),
}
#: Configs naming a recipe's directory that run on its data in another test.
ELSEWHERE = {
    f"text2text/toy-reversal/nmt-reversal-{kind}.py":
        "tests/e2e/test_example_configs.py runs it (train_eval and infer) on data written by "
        "its recipe's generator, scripts/create_toy_data.py (tests/helpers/toy.py)"
    for kind in ("CC", "CR", "RC", "RR", "TT")}
_DOWNLOAD = "a data set no recipe here makes offline: "
#: Configs naming a path under data/ that no recipe here writes.
NO_OFFLINE_RECIPE = {
    "image2label/cifar-nv.py": _DOWNLOAD + "CIFAR-10",
    "image2label/resnet-50-v1.py": _DOWNLOAD + "ImageNet",
    "image2label/resnet-50-v2.py": _DOWNLOAD + "ImageNet",
    "image2label/resnet_commands.py": _DOWNLOAD + "Google Speech Commands v0.01/v0.02 with "
                                      "OpenSeq2Seq's v1-12 lists",
    "speech2text/jasper_commands.py": _DOWNLOAD + "Google Speech Commands v0.01/v0.02 with "
                                      "OpenSeq2Seq's v1-12 lists",
    "speech2text/conformer_ctc_medium_8gpus_mp.py": _DOWNLOAD + "LibriSpeech",
    "speech2text/conformer_transducer_medium_8gpus_mp.py": _DOWNLOAD + "LibriSpeech",
    "speech2text/ds2_large_8gpus_mp.py": _DOWNLOAD + "LibriSpeech",
    "speech2text/ds2_small_1gpu.py": _DOWNLOAD + "LibriSpeech",
    "speech2text/jasper10x5_LibriSpeech_nvgrad.py": _DOWNLOAD + "LibriSpeech",
    "speech2text/jca_large_8gpus.py": _DOWNLOAD + "LibriSpeech",
    "speech2text/las_large_8gpus.py": _DOWNLOAD + "LibriSpeech",
    "speech2text/quartznet15x5_LibriSpeech.py": _DOWNLOAD + "LibriSpeech",
    "speech2text/w2lplus_large_8gpus_mp.py": _DOWNLOAD + "LibriSpeech",
    "text2speech/hifigan_v1.py": _DOWNLOAD + "LJSpeech",
    "text2speech/wavenet_float.py": _DOWNLOAD + "LJSpeech",
    "text2speech/wavenet_mixed.py": _DOWNLOAD + "LJSpeech",
}

#: Parameter counts the docs give for the configs of CASES: (config, file, pattern whose
#: group is the count as written: "22.6M", "0.67 M", "308 k"). A run's "Training N
#: parameters" must round to it at the precision written.
_BIBLE = "example_configs/text2text/en-es/"
DOCUMENTED: list[tuple[str, str, str]] = [
    *[(f"text2text/en-es/{name}", "docs/translation.md",
       rf"\| `{re.escape(name)}` \|[^|\n]*\| ([\d.]+M) \|")
      for name in ("transformer-2x2-bible.py", "gnmt-small-bible.py", "convs2s-small-bible.py",
                   "transformer-3x3-bible-d256.py")],
    ("text2text/en-es/gnmt-small-bible.py", _BIBLE + "gnmt-small-bible.py",
     r"\(([\d.]+M) vs [\d.]+M\)"),
    ("text2text/en-es/transformer-2x2-bible.py", _BIBLE + "gnmt-small-bible.py",
     r"\([\d.]+M vs ([\d.]+M)\)"),
    ("text2text/en-es/convs2s-small-bible.py", _BIBLE + "convs2s-small-bible.py",
     r"more parameters \(([\d.]+M) against"),
    ("text2text/en-es/transformer-2x2-bible.py", _BIBLE + "convs2s-small-bible.py",
     r"against the\s+Transformer's ([\d.]+M)\)"),
    ("image2label/resnet_fashion_mnist.py", "docs/image-classification.md",
     r"\| `resnet_fashion_mnist.py` \| 3-stage ResNet, ([\d.]+ k) parameters"),
    ("image2label/resnet_fashion_mnist.py", "example_configs/image2label/resnet_fashion_mnist.py",
     r"ResNet \(([\d.]+ k) parameters"),
    ("speech2text/w2l_toy_synthetic.py", "docs/speech-recognition.md",
     r"\| `w2l_toy_synthetic.py` \|[^|\n]*\| ([\d.]+ M) parameters"),
    ("speech2text/quartznet_synthetic.py", "docs/speech-recognition.md",
     r"\| `quartznet_synthetic.py` \|[^|\n]*\| ([\d.]+ M) parameters"),
    ("speech2text/jca_toy_synthetic.py", "docs/speech-recognition.md",
     r"\| `jca_toy_synthetic.py` \|[^|\n]*, ([\d.]+ M) parameters"),
    ("speech2text/jasper_commands_synthetic.py", "docs/speech-recognition.md",
     r"the ([\d.]+k)-parameter\s+Jasper-style\s+model"),
    ("text2speech/tacotron-asterisk-small.py", "docs/speech-synthesis.md",
     r"`tacotron-asterisk-small.py`\s+\(([\d.]+M) parameters"),
    ("text2speech/tacotron-synthetic-small.py", "docs/speech-synthesis.md",
     r"`tacotron-synthetic-small.py` \(([\d.]+k) parameters"),
]


# ------------------------------------------------------------------------- helpers


def _set_environment(config: str, monkeypatch: pytest.MonkeyPatch) -> None:
  """The environment the config's recipe runs it in, for loading the config here."""
  for name in environment_variables(config):
    monkeypatch.delenv(name, raising=False)
  for name, value in CASES[config].env if config in CASES else ():
    monkeypatch.setenv(name, value)


def _count(written: str) -> tuple[float, float, int]:
  """``"22.6M"`` -> (22.6, 1e6, 1 decimal)."""
  match = re.fullmatch(r"([\d.]+)\s*([kM])", written.strip())
  assert match, f"not a parameter count: {written!r}"
  number = match.group(1)
  decimals = len(number.split(".")[1]) if "." in number else 0
  return float(number), {"k": 1e3, "M": 1e6}[match.group(2)], decimals


def _documented(entry: tuple[str, str, str]) -> str:
  _, doc, pattern = entry
  with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
    matches = re.findall(pattern, f.read())
  assert len(matches) == 1, f"{doc}: {pattern!r} matches {len(matches)} times (once expected)"
  return matches[0]


def _explain(result: subprocess.CompletedProcess) -> str:
  return f"exit {result.returncode}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n" \
         f"{result.stderr[-3000:]}"


class Runs:
  """The module's runs, in one work directory (the transfer config reads the language
  model's run)."""

  def __init__(self, data: RecipeData):
    self.data = data
    self.done: dict[str, tuple[subprocess.CompletedProcess, int, float]] = {}

  def run(self, config: str) -> tuple[subprocess.CompletedProcess, int, float]:
    """``run.py --mode=train_eval`` (the case's mode) of the config as shipped, two steps,
    from the work directory; (result, trained parameters, seconds). Checks that it trained,
    evaluated and saved."""
    if config in self.done:
      return self.done[config]
    case = CASES[config]
    if case.after:
      self.run(case.after)
    for directory in case.reads:
      self.data.prepare(directory)
    path = os.path.join(CONFIG_ROOT, config)
    logdir = load_config_module(path).base_params.get("logdir")
    assert logdir and not os.path.isabs(logdir), f"{config}: logdir {logdir!r} (relative expected)"
    env = toy.single_process_env(drop=environment_variables(config))
    env.update(dict(case.env), PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    # a smoke run of two steps: Grappler off (training/graph_optimizations.py), as the
    # every-config test runs them
    args = [f"--config_file={path}", f"--mode={case.mode}", f"--max_steps={STEPS}",
            "--graph_optimizations=False", *case.overrides]
    if case.mode == "train_eval":
      args.append(f"--eval_batches={EVAL_BATCHES}")
    start = time.monotonic()
    result = warm_cli.run(args, env, cwd=self.data.root, timeout=TIMEOUT)
    seconds = time.monotonic() - start
    assert result.returncode == 0, _explain(result)
    started = _STARTED.search(result.stdout)
    assert started and int(started.group(2)) == STEPS, _explain(result)
    if case.mode == "train_eval":  # the whole eval set, or its first EVAL_BATCHES batches
      assert re.search(rf"eval at step {STEPS}( \(first {EVAL_BATCHES} batches: eval_batches\))?:",
                       result.stdout), _explain(result)
    assert f"Finished training at step {STEPS}" in result.stdout, _explain(result)
    assert os.path.exists(os.path.join(self.data.root, logdir, f"ckpt-{STEPS}.index")), \
        _explain(result)
    assert not case.expect or re.search(case.expect, result.stdout), _explain(result)
    self.done[config] = (result, int(started.group(1).replace(",", "")), seconds)
    return self.done[config]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
  return Runs(RecipeData(str(tmp_path_factory.mktemp("recipes"))))


# ------------------------------------------------------------------------- tests


@pytest.mark.parametrize("config", sorted(CASES))
def test_config_trains_and_evaluates_on_its_recipe_data(config, runs, monkeypatch):
  prepared = sum(runs.data.prepare(d) for d in CASES[config].reads)
  result, trained, seconds = runs.run(config)
  # what the run did not read (infer's split, ...) is there too, or the run wrote it
  _set_environment(config, monkeypatch)
  missing = [path for path in data_paths(config)
             if not os.path.exists(os.path.join(runs.data.root, path))]
  assert not missing, f"{config} names {missing}, which its recipe does not write"
  notices = [line for line in result.stderr.splitlines() if line.startswith("notice:")]
  print(f"\n{config}: {trained:,} parameters; data {prepared:.0f} s, run {seconds:.0f} s" +
        "".join(f"\n  {line}" for line in notices))
  for entry in DOCUMENTED:
    if entry[0] == config:
      number, unit, decimals = _count(_documented(entry))
      assert round(trained / unit, decimals) == number, \
          f"{entry[1]} gives {config} {_documented(entry)} parameters; the run trained " \
          f"{trained:,}: write {round(trained / unit, decimals)}"
  # the logdirs of the larger models hold hundreds of MB of checkpoints
  if not any(case.after == config for case in CASES.values()):
    logdir = load_config_module(os.path.join(CONFIG_ROOT, config)).base_params["logdir"]
    shutil.rmtree(os.path.join(runs.data.root, logdir), ignore_errors=True)


def test_every_config_naming_recipe_data_runs_here_or_says_why_not(monkeypatch):
  """A config that names a path under data/ (or a recipe's own directory) is in CASES, reading
  the recipes it names (with its recipe's environment), or in ELSEWHERE / NO_OFFLINE_RECIPE;
  those of NO_OFFLINE_RECIPE name nothing a recipe here makes."""
  configs = sorted(os.path.relpath(p, CONFIG_ROOT)
                   for p in glob.glob(os.path.join(CONFIG_ROOT, "**", "*.py"), recursive=True))
  listed = {**CASES, **ELSEWHERE, **NO_OFFLINE_RECIPE}
  assert set(listed) <= set(configs), f"not in example_configs/: {set(listed) - set(configs)}"
  assert not set(CASES) & (set(ELSEWHERE) | set(NO_OFFLINE_RECIPE))
  recipe_directories = set(RECIPES) | set(OTHER_RECIPE_DIRECTORIES)
  for config in configs:
    _set_environment(config, monkeypatch)
    named = set(data_paths(config).values())
    if config in CASES:
      assert named <= set(CASES[config].reads), \
          f"{config} names {sorted(named - set(CASES[config].reads))}: add it to its Case"
      assert set(CASES[config].reads) <= set(RECIPES)
    elif config in ELSEWHERE:
      assert named, f"{config} names no recipe data: take it off ELSEWHERE"
    elif config in NO_OFFLINE_RECIPE:
      assert not named & recipe_directories, \
          f"{config} names {sorted(named & recipe_directories)}, which a recipe here makes: " \
          f"move it to CASES"
    else:
      assert not named, f"{config} names {sorted(named)}: add it to CASES (with the recipe " \
                        f"that makes it) or to NO_OFFLINE_RECIPE with the reason"


def test_every_documented_count_is_found_once():
  """A rewording that loses a count fails here, rather than leaving it unchecked."""
  assert {config for config, _, _ in DOCUMENTED} <= set(CASES)
  for entry in DOCUMENTED:
    _count(_documented(entry))
