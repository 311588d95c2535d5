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


#: Under pytest-xdist (``-n 2``, whole modules per worker: pytest.ini's ``--dist loadscope``),
#: modules start longest first, so that the longest one does not start last and finish alone:
#: the every-config module (about half the suite), then the learning tests, the other
#: end-to-end tests and the unit tests, which fill the gaps at the end.
_FIRST = ("tests/e2e/test_example_configs.py", "tests/learning/", "tests/e2e/", "tests/unit/")


def _start_rank(nodeid: str) -> int:
  return next((rank for rank, prefix in enumerate(_FIRST) if nodeid.startswith(prefix)),
              len(_FIRST))


def pytest_collection_modifyitems(session, config, items):  # pylint: disable=unused-argument
  """Longest modules first when the run is spread over workers (a stable sort: the order
  within a module, and of modules within a rank, stays as collected)."""
  if os.environ.get("PYTEST_XDIST_WORKER"):
    items.sort(key=lambda item: _start_rank(item.nodeid))
