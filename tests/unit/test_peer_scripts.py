"""The peer-baseline scripts (scripts/peer_*.sh) parse, and without a data folder they stop
with their usage line before installing or running anything. Their runs need the peers'
virtual environments and take minutes: docs/benchmarks.md records them."""

import glob
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = sorted(glob.glob(os.path.join(ROOT, "scripts", "peer_*.sh")))


def test_there_are_peer_scripts():
  names = {os.path.basename(path) for path in SCRIPTS}
  assert {"peer_opennmt_tf_rnn.sh", "peer_opennmt_tf_beam.sh"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=os.path.basename)
def test_parses_and_asks_for_its_data_folder(script, tmp_path):
  assert subprocess.run(["bash", "-n", script], capture_output=True).returncode == 0
  done = subprocess.run(["bash", script], capture_output=True, text=True, timeout=30,
                        env=dict(os.environ, VENV_DIR=str(tmp_path / "no-venv")))
  assert done.returncode != 0 and "usage:" in done.stderr, done.stderr
  assert not (tmp_path / "no-venv").exists()
