"""The published speech configs are shipped.

Loading every mode and stepping every example config (speech included) through run.py (the
published-size ones built and trained one step, the small ones trained, evaluated and
inferred), and the published parameter counts, are checked in
tests/e2e/test_example_configs.py.
"""

import glob
import os

from tests.helpers.speech import CONFIG_DIR

CONFIGS = sorted(glob.glob(os.path.join(CONFIG_DIR, "*.py")))
PUBLISHED = ["ds2_small_1gpu.py", "ds2_large_8gpus_mp.py", "w2lplus_large_8gpus_mp.py",
             "jasper10x5_LibriSpeech_nvgrad.py", "quartznet15x5_LibriSpeech.py"]


def test_published_configs_exist():
  names = {os.path.basename(c) for c in CONFIGS}
  assert set(PUBLISHED) <= names
