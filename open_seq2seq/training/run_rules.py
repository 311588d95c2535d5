"""The rules between the run's keys (:mod:`open_seq2seq.training.run_params` declares them).

Pure Python, no TensorFlow: ``config.resolve_config`` runs them on both paths, the normal one
and the one that answers config mistakes before TensorFlow is imported
(:mod:`open_seq2seq.config_static`), so the two report the same words.
"""

from __future__ import annotations

from typing import Any, Mapping

from open_seq2seq.errors import ConfigError

#: Keys that make something happen every N steps (None: never).
PERIOD_KEYS = ("save_summaries_steps", "print_loss_steps", "print_samples_steps",
               "save_checkpoint_steps", "eval_steps")


def check_run_settings(params: Mapping[str, Any], mode: str) -> None:
  """The rules between the run's keys (after every key was checked on its own)."""
  if params["max_steps"] is not None and params["num_epochs"] is not None:
    raise ConfigError(f"max_steps={params['max_steps']} and num_epochs={params['num_epochs']}: "
                      f"give one of them, not both (from the command line, --max_steps=N "
                      f"alone replaces a config's num_epochs, and --num_epochs=N its max_steps)")
  if params.get("load_model_vocab_files") and not params["load_model"]:
    raise ConfigError("load_model_vocab_files: given without load_model; set load_model to "
                      "the run (or checkpoint) these vocabularies belong to")
  if mode in ("train", "train_eval") and params["max_steps"] is None and \
      params["num_epochs"] is None:
    raise ConfigError("max_steps: training needs max_steps or num_epochs in the config")
  for key in ("iter_size", "num_gpus", "num_checkpoints", "max_steps", "num_epochs",
              "eval_batches", *PERIOD_KEYS):
    if params[key] is not None and params[key] < 1:
      hint = " (None turns it off)" if key in PERIOD_KEYS else ""
      raise ConfigError(f"{key}: must be at least 1{hint}, got {params[key]}")
  decay = params["moving_average_decay"]
  if decay is not None and not 0.0 < decay < 1.0:
    raise ConfigError(f"moving_average_decay: must be between 0 and 1 (exclusive), usually "
                      f"close to 1 such as 0.9999; got {decay} (None turns it off)")
  steps = params["profile_steps"]
  if steps is not None:
    whole = all(isinstance(v, int) and not isinstance(v, bool) for v in steps)
    if len(steps) != 2 or not whole or not 1 <= steps[0] <= steps[1]:
      raise ConfigError(f"profile_steps: must be [first, last] global steps with "
                        f"1 <= first <= last, got {steps!r}")
  if params["bench_start"] < 0:
    raise ConfigError(f"bench_start: must be at least 0, got {params['bench_start']}")


__all__ = ["PERIOD_KEYS", "check_run_settings"]
