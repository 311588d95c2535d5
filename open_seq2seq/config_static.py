"""``run.py --help_params`` and config mistakes without TensorFlow.

A config file imports its model and components (``from open_seq2seq.models import
Text2Text``), which import TensorFlow: seconds before a typo in a key can be reported. This
module answers first, from the parameter index (``params_index.json``, written by
``scripts/gen_params_index.py``): it reads the config file without running it
(:mod:`open_seq2seq.config_static_eval`), then merges the mode's dict and the overrides and
validates the result with the very functions ``config.load_config`` runs (of
:mod:`open_seq2seq.config`, :mod:`open_seq2seq.overrides` and :mod:`open_seq2seq.slots`), on
declarations read back from the index (:mod:`open_seq2seq.config_static_slots`). Then, as
the normal path would:

* a mistake it is sure of (an unknown key with the closest valid one, a wrong type, a missing
  required key, an override of a key that does not exist ...) is raised as the same
  :class:`~open_seq2seq.errors.ConfigError`, word for word;
* ``--help_params`` gets the same text.

It answers None -- and the normal path runs -- whenever it is not sure: a config that does
something the reading does not follow (calls into TensorFlow, defines a class, ``try``), a
part the index does not describe (a class of the config's own, a user function as a
learning-rate policy), a run directory whose saved overrides apply, or an error found after
a check only the real code can run (a component's rules across its keys, a custom value
predicate): those checks are taken to pass, so such an error might not be the first one.
``--help_params`` still answers past them (:data:`HELP_PAST_ASSUMED_CHECKS`): the tables it
prints do not depend on them. An index written with other versions of TensorFlow or Keras
than those installed is not used. ``OPEN_SEQ2SEQ_STATIC_CONFIG=0`` turns this path off.
"""

from __future__ import annotations

import argparse
import importlib.util
import os

from open_seq2seq import slots
from open_seq2seq.config import (CONFIG_MODULE_NAME, check_config_file, check_config_variables,
                                 mode_config, resolve_config, syntax_error)
from open_seq2seq.config_static_eval import read_config
from open_seq2seq.config_static_slots import StaticSchema
from open_seq2seq.errors import ConfigError
from open_seq2seq.overrides import (apply_mode_overrides, by_mode, parse_overrides,
                                    read_overrides_file, replace_duration)
from open_seq2seq.params_index import Index, Unsure, load_index

#: run_settings.OVERRIDES_FILE: a run's saved overrides, applied by commands that use it.
_RUN_OVERRIDES = "overrides.yaml"
#: --help_params answers past checks only the real code runs (taken to pass): the tables it
#: prints do not depend on them. False sends such configs (36 of the 57 example configs) to
#: the normal path, which prints the error instead when one of those checks fails.
HELP_PAST_ASSUMED_CHECKS = True


def static_answer(args: argparse.Namespace, overrides: list[str]) -> str | None:
  """What ``run.py`` would answer before it builds anything, if that is certain.

  Args:
    args, overrides: as :func:`open_seq2seq.cli_args.parse_args` returns them.

  Returns:
    The ``--help_params`` text, or None: not sure, or nothing to report (run normally).

  Raises:
    ConfigError: the error the normal path would report first.
  """
  if os.environ.get("OPEN_SEQ2SEQ_STATIC_CONFIG", "1") == "0":
    return None
  index = load_index()
  if index is None:
    return None
  try:
    return _StaticConfig(index).answer(args, overrides)
  except _Certain as certain:
    raise certain.error from None
  except Exception:  # pylint: disable=broad-except  (Unsure, or a gap in this reading)
    return None


class _Certain(Exception):
  """Carries the ConfigError the normal path would raise first."""

  def __init__(self, error: ConfigError):
    super().__init__(str(error))
    self.error = error


class _StaticConfig:
  """One command's config, loaded and validated by the functions ``config.load_config`` runs,
  on the schema the index describes."""

  def __init__(self, index: Index):
    self.index = index
    self.schema = StaticSchema(index)

  def answer(self, args: argparse.Namespace, overrides: list[str]) -> str | None:
    mode = "interactive_infer" if args.mode == "export" else args.mode
    try:  # run_settings.load_with_the_runs_settings, then config.load_config
      given = (read_overrides_file(args.overrides_file) if args.overrides_file else []) + \
          parse_overrides(overrides)
      namespace = self.load(args.config_file)
      configs = self.configs(namespace, mode, given)
    except ConfigError as e:
      if self.index.assumed:  # an earlier check of the real code might have failed first
        return None
      raise _Certain(e) from None
    uses_a_run = mode not in ("train", "train_eval") or args.continue_learning
    logdir = next(iter(configs.values()))["logdir"]
    if not args.help_params or uses_a_run and \
        os.path.isfile(os.path.join(logdir, _RUN_OVERRIDES)) or \
        self.index.assumed and not HELP_PAST_ASSUMED_CHECKS:
      return None
    return slots.help_params(namespace["base_model"], next(iter(configs.values())), self.schema)

  def load(self, path: str) -> dict:
    """The config module's variables (as config.load_config_module checks them)."""
    check_config_file(path)
    file = importlib.util.spec_from_file_location(CONFIG_MODULE_NAME, path).origin
    try:
      namespace = read_config(path, self.index, file, CONFIG_MODULE_NAME)
    except SyntaxError as e:
      raise syntax_error(path, e) from None
    check_config_variables(path, namespace)
    base_model = namespace["base_model"]
    if not isinstance(base_model, type) or not hasattr(base_model, "declared_params"):
      raise Unsure("a base_model the index does not describe")
    return namespace

  def configs(self, namespace: dict, mode: str, given: list) -> dict[str, dict]:
    """``{mode: validated config}`` as config.load_config builds them."""
    base_model = namespace["base_model"]
    common, per_mode = by_mode(given)
    configs = {}
    for m in ("train", "eval") if mode == "train_eval" else (mode,):
      mode_overrides = common + per_mode.get(m, [])
      merged = replace_duration(mode_config(namespace, m), mode_overrides, None)
      merged = apply_mode_overrides(base_model, merged, mode_overrides, self.schema)
      configs[m] = resolve_config(base_model, merged, mode if m == "train" else m, self.schema)
    return configs


__all__ = ["static_answer"]
