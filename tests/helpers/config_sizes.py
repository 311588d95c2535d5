"""Which example configs are only built and stepped, and how heavy each is.

Read by tests/e2e/test_example_configs.py (what each config's test runs) and by
tests/conftest.py (how the configs are spread over pytest-xdist workers). Imports nothing
heavy: the xdist controller, which never imports TensorFlow, reads it too.
"""

from __future__ import annotations

import os
import re

#: Configs at published size (every config over 15 M parameters on the test data): run.py
#: builds them and trains one step (``--benchmark --bench_steps=1``: no eval, no checkpoint)
#: instead of the train_eval + infer cycle of the small ones, which costs them 1.3-2.5x as
#: much (an eval, a second step, checkpoints of up to 8 GB). Name -> millions of trainable
#: parameters as the test builds them (measured; used to order and group the runs, not
#: checked: PUBLISHED_SIZES in the test checks the published ones).
STEPPED = {
    "jasper10x5_LibriSpeech_nvgrad.py": 333, "jasper_commands.py": 207,
    "jasper_commands_8gpu.py": 207, "en-de-gnmt-like-4GPUs.py": 174,
    "en-de-convs2s-8-gpu.py": 119, "w2lplus_large_8gpus_mp.py": 106,
    "gnmt-v2-4x1024.py": 99, "ds2_large_8gpus_mp.py": 59, "jca_large_8gpus.py": 43,
    "tacotron_gst.py": 30, "tacotron_float.py": 27, "tacotron_mixed.py": 27,
    "resnet-50-v1.py": 26, "resnet-50-v1-mp.py": 26, "resnet-50-v2.py": 26,
    "resnet-50-v2-mp.py": 26, "resnet_commands.py": 24, "resnet_commands_8gpu.py": 24,
    "convs2s-small-bible.py": 23, "centaur_float.py": 23, "quartznet15x5_LibriSpeech.py": 19,
    "las_large_8gpus.py": 18, "en-de-nmt-small.py": 18, "lstm-wkt103-mixed.py": 16,
    "conformer_ctc_medium_8gpus_mp.py": 30, "conformer_transducer_medium_8gpus_mp.py": 31,
    "hifigan_v1.py": 85,
}
#: Configs over this many millions of parameters take 5-9 GB of memory for their step
#: (jasper10x5: 9 GB): they run one after another on one worker, never two at once.
HEAVY = 100

#: The every-config test, whose nodeids end in ``[example_configs/<family>/<name>.py]``.
TEST = "tests/e2e/test_example_configs.py::test_config_trains_evaluates_and_infers_through_run_py"
_CONFIG = re.compile(r"\[(example_configs/.+\.py)\]$")


def config_of(nodeid: str) -> str | None:
  """The config file name a nodeid of the every-config test runs (None for other tests)."""
  if not nodeid.startswith(TEST + "["):
    return None
  match = _CONFIG.search(nodeid)
  return os.path.basename(match.group(1)) if match else None


def is_heavy(name: str) -> bool:
  return STEPPED.get(name, 0) > HEAVY
