"""Whether TensorFlow's graph optimizer rewrites this process's compiled functions.

Grappler (TensorFlow's meta-optimizer: constant folding, op fusion, layout and arithmetic
rewrites, pruning) runs on every ``tf.function`` graph when it is first called. Over a long
run it pays for itself; over a smoke run of a few steps (``--max_steps=2`` to check a config,
``--benchmark --bench_steps=1`` to build one at full size) it is a large share of the run:
on one Intel Xeon 2.5 GHz core (the other one busy) it took 5 of the 23 s after import of a
two-step ``train_eval`` of the toy Transformer, and 58 of the 205 s of building and stepping
the 30 M-parameter Conformer once (docs/testing.md). ``graph_optimizations: False`` (or
``--graph_optimizations=False``) turns it off for the process: the same computation, not
rewritten, so it starts sooner and steps slower.

The setting is the process's, not the run's: a later eval or infer of the run decides its own
(run_settings.NOT_REMEMBERED).
"""

from __future__ import annotations

import tensorflow as tf

_OPTION = "disable_meta_optimizer"


def apply(enabled: bool) -> None:
  """Turns Grappler on (TensorFlow's default) or off for every function this process calls
  from now on; call it before the model's functions are first called."""
  tf.config.optimizer.set_experimental_options({_OPTION: not enabled})


def enabled() -> bool:
  """Whether Grappler rewrites this process's functions."""
  return not tf.config.optimizer.get_experimental_options().get(_OPTION, False)
