"""The rules of ``optimizer`` names and ``optimizer_params`` on given declarations.

Pure Python, no Keras: :mod:`open_seq2seq.optimizers.optimizers` computes what an optimizer
declares (from Keras' signatures) and runs these checks on it; the config checks that answer
before TensorFlow is imported (:mod:`open_seq2seq.config_static_slots`) run the same checks on
what the parameter index recorded, so both paths report the same words. (Not inside
``optimizers/``: importing that package imports Keras.)
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.params import Param, join_path, unknown_key_error


def canonical_name(name: str, known: Iterable[str]) -> str:
  """The name in ``known`` that ``name`` spells in any case.

  Raises:
    ConfigError: for an unknown optimizer name.
  """
  known = list(known)
  for candidate in known:
    if candidate.lower() == name.lower():
      return candidate
  raise ConfigError(f"optimizer: unknown optimizer {name!r}; valid names are "
                    f"{', '.join(known)} (or an optimizer class)")


def check_optimizer_params(optimizer: Any, optimizer_params: Mapping | None,
                           declared: Mapping[str, Param], aliases: Mapping[str, str],
                           redirects: Mapping[str, str], prefix: str = "optimizer_params"
                           ) -> dict:
  """Checks each given key and value; returns a copy (no defaults added).

  Args:
    optimizer: the config's ``optimizer`` (a name or a class), to name it in errors.
    optimizer_params: the keys given.
    declared: the keys ``optimizer`` accepts, in Keras and TF 1 spelling.
    aliases: TF 1 spelling -> Keras spelling.
    redirects: keys the trainer owns -> the top-level key that sets them.
    prefix: the key path of ``optimizer_params``.

  Raises:
    ConfigError: unknown key (with the closest valid one), a key the trainer owns, a value of
      the wrong type, both spellings of one key, or a required key missing.
  """
  owner = optimizer if isinstance(optimizer, str) else getattr(optimizer, "__name__", "optimizer")
  params = dict(optimizer_params or {})
  for key, value in params.items():
    if key in redirects:
      raise ConfigError(f"{join_path(prefix, key)}: the trainer handles this; set the "
                        f"top-level '{redirects[key]}' instead")
    if key not in declared:
      raise unknown_key_error(key, declared, prefix, owner)
    params[key] = declared[key].check(value, join_path(prefix, key))
    if key in aliases and aliases[key] in params:
      raise ConfigError(f"{join_path(prefix, key)}: given together with {aliases[key]!r}, "
                        f"its Keras spelling; keep one")
  spelled = set(params) | {aliases[k] for k in params if k in aliases}
  for key, param in declared.items():
    # learning_rate comes from the lr policy when not given here.
    if param.required and key != "learning_rate" and key not in spelled:
      raise ConfigError(f"{join_path(prefix, key)}: required by {owner} but missing")
  return params


__all__ = ["canonical_name", "check_optimizer_params"]
