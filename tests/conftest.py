"""Shared pytest set-up: quiet TensorFlow, a fixed seed, and the repository root on sys.path."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)


def pytest_sessionfinish(session, exitstatus):  # pylint: disable=unused-argument
  """Stops the warm run.py servers the end-to-end tests started (tests/helpers/warm_cli.py)."""
  from tests.helpers import warm_cli  # pylint: disable=import-outside-toplevel
  warm_cli.stop_servers()
