"""The recipes that make example configs' data offline, and a work directory holding their data.

Read by tests/e2e/test_recipe_configs.py, which runs each config whose data a recipe makes
on that data. ``RECIPES`` maps each directory a recipe writes (as the configs name it,
relative to where run.py runs) to how the data gets there: installed into the repository's
data/ by scripts/install_test_deps.sh, or made by the test set-up from the Debian packages
that script installs. :class:`RecipeData` lays out a work directory like a checkout and
puts each recipe's data into its ``data/`` on first use.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import time
from typing import Any, Callable

import pytest

from open_seq2seq.config import load_config_module
from tests.helpers.speech import load_script

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG_ROOT = os.path.join(ROOT, "example_configs")
INSTALL = "bash scripts/install_test_deps.sh"


@dataclasses.dataclass(frozen=True)
class Installed:
  """Data scripts/install_test_deps.sh writes into the repository's data/."""
  command: str
  marker: str  # a file the recipe writes, relative to its directory


@dataclasses.dataclass(frozen=True)
class Generated:
  """Data the set-up makes into the work directory (from Debian packages, or from another
  recipe's installed data)."""
  command: str  # the documented command
  needs: tuple[str, ...]  # files or programs of the Debian packages install_test_deps.sh adds
  make: Callable[[str], Any]  # writes the corpus into the given directory


def _asterisk(directory: str) -> None:
  load_script("import_asterisk_sounds").main([f"--output_dir={directory}"])


def _commands(directory: str) -> None:
  # every word of the recipe (the config's num_labels is 10), 6 clips each instead of 60
  load_script("make_speech_commands").main([f"--output_dir={directory}", "--per_word=6"])


def _speech(directory: str) -> None:
  load_script("make_synthetic_speech").main([f"--output_dir={directory}",
                                             "--splits=train=32,dev=8,test=8"])


def _tts(*extra: str) -> Callable[[str], None]:
  def make(directory: str) -> None:
    load_script("make_synthetic_speech").main(
        ["--tts", f"--output_dir={directory}", "--splits=train=32,val=4,test=4", *extra])
  return make


def _tweets_lm(directory: str) -> None:
  # what scripts/transfer_curve.py writes first: the tweets' texts without their labels
  # pylint: disable-next=import-outside-toplevel
  from open_seq2seq.data.lm.unlabelled import write_unlabelled_corpus
  write_unlabelled_corpus(os.path.join(ROOT, "data", "tweets"), directory)


_ESPEAK = ("espeak-ng",)
#: Directory (as the configs name it) -> its recipe. The generated corpora keep the recipe's
#: words, voices, rates and layout, with a few dozen clips instead of hundreds (a size option
#: of each script); the Asterisk prompts are imported whole.
RECIPES: dict[str, Installed | Generated] = {
    "data/bible_en_es": Installed("bash scripts/get_bible_en_es.sh", "spm.es.vocab"),
    "data/austen": Installed("bash scripts/get_lm_data.sh", "wiki.train.tokens"),
    "data/tweets": Installed("bash scripts/get_lm_data.sh", "train.csv"),
    "data/fashion_mnist": Installed("bash scripts/get_fashion_mnist.sh", "cifar/test_batch.bin"),
    "data/asterisk": Generated(
        "python scripts/import_asterisk_sounds.py --output_dir=data/asterisk",
        ("/usr/share/asterisk/sounds/en_US_f_Allison",
         "/usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz"), _asterisk),
    "data/speech_commands_synthetic": Generated(
        "python scripts/make_speech_commands.py --output_dir=data/speech_commands_synthetic",
        _ESPEAK, _commands),
    "data/synthetic_speech": Generated(
        "python scripts/make_synthetic_speech.py --output_dir=data/synthetic_speech",
        ("espeak-ng", "flite"), _speech),
    "data/synth_tts": Generated(
        "python scripts/make_synthetic_speech.py --tts --output_dir=data/synth_tts",
        _ESPEAK, _tts()),
    "data/synth_gst": Generated(
        "python scripts/make_synthetic_speech.py --tts --speeds=110,220 "
        "--output_dir=data/synth_gst", _ESPEAK, _tts("--speeds=110,220")),
    "data/tweets-lm": Generated(
        "python scripts/transfer_curve.py --prepare_only",
        (os.path.join(ROOT, "data", "tweets", "train.csv"),), _tweets_lm),
}
#: Recipe directories outside data/ (scripts/create_toy_data.py's default output).
OTHER_RECIPE_DIRECTORIES = ("toy_text_data",)
#: What a work directory links from the checkout: the shipped configs name files in it by
#: paths relative to the checkout (OpenSeq2Seq's convention: the speech configs'
#: ``open_seq2seq/test_utils/toy_speech_data/vocab.txt``), as run.py is run from there.
CHECKOUT = ("open_seq2seq", "example_configs", "scripts", "run.py")


def data_paths(config: str) -> dict[str, str]:
  """The paths into a recipe directory (``data/<name>`` or OTHER_RECIPE_DIRECTORIES) that a
  config (relative to example_configs/) names in any mode's params, as named -> that
  directory. Absolute paths count when they are in the repository. The config is loaded
  with the current environment (see :func:`environment_variables`)."""
  module = load_config_module(os.path.join(CONFIG_ROOT, config))
  found: dict[str, str] = {}

  def visit(value: Any) -> None:
    if isinstance(value, dict):
      for item in value.values():
        visit(item)
    elif isinstance(value, (list, tuple)):
      for item in value:
        visit(item)
    elif isinstance(value, str):
      path = os.path.relpath(value, ROOT) if os.path.isabs(value) else value
      parts = os.path.normpath(path).split(os.sep)
      if parts[0] == "data" and len(parts) > 1:
        found[value] = f"data/{parts[1]}"
      elif parts[0] in OTHER_RECIPE_DIRECTORIES:
        found[value] = parts[0]

  for name in dir(module):
    if name.endswith("_params") and isinstance(getattr(module, name), dict):
      visit(getattr(module, name))
  return found


def environment_variables(config: str) -> set[str]:
  """Variables a config reads (``os.environ.get("BIBLE_DATA", ...)``): its shipped defaults
  apply only without them."""
  with open(os.path.join(CONFIG_ROOT, config), encoding="utf-8") as f:
    return set(re.findall(r"os\.environ(?:\.get\(|\[)\s*[\"'](\w+)[\"']", f.read()))


class RecipeData:
  """A work directory laid out as a checkout (``CHECKOUT`` linked) whose ``data/`` gets each
  recipe's data on first use (:meth:`prepare`)."""

  def __init__(self, root: str):
    self.root = root
    for name in CHECKOUT:
      os.symlink(os.path.join(ROOT, name), os.path.join(root, name))
    self.ready: set[str] = set()

  def prepare(self, directory: str) -> float:
    """Links or makes a recipe's data (a RECIPES key) into the work directory; returns the
    seconds spent. Fails, naming what to run, when the data or its Debian packages are
    missing."""
    if directory in self.ready:
      return 0.0
    start = time.monotonic()
    recipe = RECIPES[directory]
    target = os.path.join(self.root, directory)
    if isinstance(recipe, Installed):
      source = os.path.join(ROOT, directory)
      if not os.path.isfile(os.path.join(source, recipe.marker)):
        pytest.fail(f"{directory} is missing or incomplete (no {recipe.marker}): run "
                    f"`{recipe.command}` ({INSTALL} runs it)", pytrace=False)
      # file by file, so that what a run writes next to the data (the language model's
      # processed/ folder) stays in the work directory
      for folder, _, files in os.walk(source):
        into = os.path.join(target, os.path.relpath(folder, source))
        os.makedirs(into, exist_ok=True)
        for name in files:
          os.symlink(os.path.join(folder, name), os.path.join(into, name))
    else:
      missing = [need for need in recipe.needs
                 if not (os.path.exists(need) if os.sep in need else shutil.which(need))]
      if missing:
        pytest.fail(f"{directory} is made by `{recipe.command}`, which needs {missing} from "
                    f"Debian packages: run `{INSTALL}`", pytrace=False)
      recipe.make(target)
    self.ready.add(directory)
    return time.monotonic() - start
