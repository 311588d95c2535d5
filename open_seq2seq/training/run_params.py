"""The run's settings: the top-level config keys that say how a model is trained, not what it is.

A config file stays flat, as OpenSeq2Seq's: ``max_steps``, ``optimizer`` and ``num_gpus`` sit
beside ``encoder`` and ``dtype``. Their declarations are split by owner (as fairseq's config
groups and Sockeye's ``TrainerConfig`` beside its ``ModelConfig``): the model class declares
what shapes the model (its components, their parameters, dtype, batch size, seed), and this
module declares what the training loop, the checkpoints, the logs, the evaluation schedule
and the distribution backends read, in :data:`GROUPS`. ``config.py`` validates both together
and names the same key paths; ``training/``, ``distributed/`` and ``cli.py`` read the run's
mapping (:func:`run_settings`), never ``model.params``.
"""

from __future__ import annotations

from typing import Any, Mapping

from open_seq2seq.errors import ConfigError
from open_seq2seq.optimizer_groups import GROUP_KEYS
from open_seq2seq.optimizers.larc import LARC_PARAMS_TYPE
from open_seq2seq.training.early_stopping import EARLY_STOPPING_TYPE
# The rules between the keys need no TensorFlow (config.py and config_static.py run them).
from open_seq2seq.training.run_rules import PERIOD_KEYS, check_run_settings
from open_seq2seq.training.summary_names import SUMMARY_NAMES, SUMMARY_NAMES_TYPE
from open_seq2seq.utils.params import Param, callable_or_class

_STEPS = (int, None)

#: ``all_reduce`` values: what TensorFlow sums the replicas' gradients with
#: (open_seq2seq/distributed/strategies.py ``all_reduce_for_towers`` / ``..._for_workers``).
ALL_REDUCE_CHOICES = ("auto", "nccl", "ring", "hierarchical_copy", "one_device")

#: Declarations of the run's keys by group: the reference documents each group once.
GROUPS: dict[str, dict[str, Param]] = {
    "Devices and distribution": {
        "use_horovod": Param(bool, False, "Use Horovod for data parallelism across processes."),
        "num_gpus": Param(int, 1, "Number of local devices (towers) to train on (ignored with "
                          "use_horovod: one device per process, as in OpenSeq2Seq)."),
        "gpu_ids": Param((list, None), None, "Explicit local device ids (instead of num_gpus)."),
        "allreduce_dtype": Param(str, "float32", "Dtype the gradients are summed across "
                                 "replicas in: bfloat16 halves the all-reduce's bytes (not "
                                 "with use_horovod, whose all-reduce has no bfloat16).",
                                 choices=("float32", "bfloat16")),
        "all_reduce": Param(str, "auto", "How replicas sum gradients: auto (NCCL between GPUs; "
                            "ring across CPU workers, one device for CPU towers), nccl, ring "
                            "(multi-worker), hierarchical_copy or one_device (towers).",
                            choices=ALL_REDUCE_CHOICES),
        "gpu_memory_growth": Param(bool, True, "Take GPU memory as needed, not all of it at "
                                   "start (OpenSeq2Seq's allow_growth; several processes may "
                                   "share a GPU)."),
    },
    "Duration": {
        "max_steps": Param(_STEPS, None, "Number of updates to train for (or num_epochs)."),
        "num_epochs": Param(_STEPS, None,
                            "Number of passes over the training data (or max_steps)."),
        "bench_start": Param(int, 10, "With --benchmark, steps excluded as warm-up."),
        "profile_steps": Param((list, None), None,
                               "[first, last]: trace these global steps with TensorFlow's "
                               "profiler (every worker; training/profiling.py)."),
    },
    "Logging": {
        "logdir": Param(str, "experiment", "Directory for checkpoints, summaries and logs."),
        "save_summaries_steps": Param(_STEPS, None, "TensorBoard summaries every N steps."),
        "print_loss_steps": Param(_STEPS, None, "Console loss line every N steps."),
        "print_samples_steps": Param(_STEPS, None, "Console samples every N steps."),
        "summaries": Param(SUMMARY_NAMES_TYPE, ["learning_rate", "global_gradient_norm",
                                                "loss_scale"],
                           "TensorBoard summaries to write besides the loss: "
                           + ", ".join(SUMMARY_NAMES) + "."),
    },
    "Checkpoints": {
        "save_checkpoint_steps": Param(_STEPS, None, "Checkpoint every N steps (and at the end)."),
        "num_checkpoints": Param(int, 5, "Number of latest checkpoints kept."),
        "restore_best_checkpoint": Param(bool, False,
                                         "Eval/infer from the best checkpoint by eval metric."),
        "load_model": Param((str, None), None,
                            "Initialise from another run's checkpoint (match by name and "
                            "shape; rows of a changed vocabulary by token)."),
        "load_model_vocab_files": Param((dict, None), None,
                                        "With load_model: the vocabulary files its checkpoint "
                                        "was trained with, {name: file} (Text2Text: source, "
                                        "target; LSTMLM: word), when its run directory does "
                                        "not record them (training/vocab_remap.py)."),
        "allow_model_changes": Param(bool, False,
                                     "Eval/infer/export/resume a run whose checkpoint does not "
                                     "fit the model built now (other sizes, vocabularies or "
                                     "variable dtype): load what fits (--allow_model_changes)."),
    },
    "Evaluation": {
        "eval_steps": Param(_STEPS, None,
                            "In train_eval, evaluate every N steps (and at the end)."),
        "eval_batches": Param(_STEPS, None,
                              "Evaluate on the first N batches only, for quick runs (None: "
                              "the whole eval set); a truncated eval never saves a new best."),
        "early_stopping": Param((EARLY_STOPPING_TYPE, None), None,
                                "Stop train_eval when an eval metric stops improving: {metric, "
                                "patience, min_delta, higher_is_better} "
                                "(training/early_stopping.py)."),
    },
    "Optimization": {
        "optimizer": Param((str, callable_or_class), "Adam",
                           "Optimizer name (Adam, AdamW, SGD, Momentum, RMSProp, Adagrad) or "
                           "class."),
        "optimizer_params": Param(dict, {}, "Keyword arguments of the optimizer."),
        "lr_policy": Param((callable_or_class, None), None,
                           "Learning-rate policy function from optimizers.lr_policies."),
        "lr_policy_params": Param(dict, {}, "Keyword arguments of the learning-rate policy."),
        "iter_size": Param(int, 1, "Accumulate gradients over this many batches per update."),
        "max_grad_norm": Param((float, None), None, "Clip gradients to this global norm."),
        "larc_params": Param((LARC_PARAMS_TYPE, None), None,
                             "LARC: rescale each variable's gradient by its trust ratio "
                             "(optimizers/larc.py)."),
        "regularizer": Param((callable_or_class, None), None,
                             "Weight regularizer class, e.g. keras.regularizers.L2."),
        "regularizer_params": Param(dict, {}, "Keyword arguments of the regularizer."),
        "freeze_variables_regex": Param((str, None), None,
                                        "Trainable variables whose name matches are frozen."),
        "use_xla_jit": Param(bool, False, "Compile each replica's forward and backward pass "
                             "with XLA (--use_xla_jit)."),
        "graph_optimizations": Param(bool, True, "Let TensorFlow's graph optimizer (Grappler) "
                                     "rewrite the compiled functions. False: a run starts "
                                     "sooner and steps slower, for smoke runs of a few steps "
                                     "(training/graph_optimizations.py)."),
        "loss_scaling": Param((float, str, None), None,
                              "Static loss scale, 'Backoff' or 'LogMax' (half precision only)."),
        "loss_scaling_params": Param(dict, {}, "Parameters of the automatic loss scaler."),
        "moving_average_decay": Param((float, None), None,
                                      "Keep an exponential moving average of the trained "
                                      "weights with this decay (e.g. 0.9999; OpenNMT-tf's key), "
                                      "saved in the checkpoints; eval, infer and export use "
                                      "the averages (training/moving_average.py)."),
        "optimizers": Param((dict, None), None,
                            "Models trained by several optimizers (adversarial ones): "
                            "{group: {key: value}} overriding, for that update group, the "
                            "top-level " + ", ".join(GROUP_KEYS) + "."),
    },
}

#: Every run key, as one flat table.
RUN_PARAMS: dict[str, Param] = {key: param for group in GROUPS.values()
                                for key, param in group.items()}


def run_settings(config: Mapping[str, Any]) -> dict[str, Any]:
  """The run's keys of a resolved config (every top-level key of a mode, validated).

  Raises:
    ConfigError: when ``config`` lacks a run key (it was not resolved by ``config.py``).
  """
  missing = [key for key in RUN_PARAMS if key not in config]
  if missing:
    raise ConfigError(f"{missing[0]}: missing from the run's settings; resolve the config "
                      f"with open_seq2seq.config.resolve_config first")
  return {key: config[key] for key in RUN_PARAMS}


__all__ = ["GROUPS", "RUN_PARAMS", "PERIOD_KEYS", "run_settings", "check_run_settings"]
