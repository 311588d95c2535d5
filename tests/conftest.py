"""Shared pytest set-up: quiet TensorFlow, a fixed seed, and the repository root on sys.path;
under pytest-xdist, the order and grouping of the work given to the workers."""

import os
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from tests.helpers import config_sizes  # noqa: E402  pylint: disable=wrong-import-position


def pytest_sessionfinish(session, exitstatus):  # pylint: disable=unused-argument
  """Stops the warm run.py servers the end-to-end tests started (tests/helpers/warm_cli.py)."""
  from tests.helpers import warm_cli  # pylint: disable=import-outside-toplevel
  warm_cli.stop_servers()


# Under pytest-xdist (``-n 2``, pytest.ini's ``--dist loadscope``) a worker takes one scope at
# a time from a queue in collection order: a module (its module fixtures run once), except
# for the every-config test, where each example config is a scope of its own (so that both
# workers share the configs, which were half the suite on one worker) and the configs over
# config_sizes.HEAVY million parameters form one scope (one after another: 5-9 GB each).
# The queue goes longest first, so that what is left at the end is short and both workers
# finish together: the heavy configs, the learning modules, the other published-size
# configs, the other end-to-end modules, the small configs (10-60 s each), the unit tests.


def _start_rank(nodeid: str) -> int:
  name = config_sizes.config_of(nodeid)
  if name is not None:
    if config_sizes.is_heavy(name):
      return 0
    return 2 if name in config_sizes.STEPPED else 4
  for rank, prefix in ((1, "tests/learning/"), (3, "tests/e2e/"), (5, "tests/unit/")):
    if nodeid.startswith(prefix):
      return rank
  return 6


def pytest_collection_modifyitems(session, config, items):  # pylint: disable=unused-argument
  """Longest work first when the run is spread over workers (a stable sort: modules keep
  their order within a rank, and tests theirs within a module)."""
  if os.environ.get("PYTEST_XDIST_WORKER"):
    items.sort(key=lambda item: (_start_rank(item.nodeid),
                                 -config_sizes.STEPPED.get(config_sizes.config_of(item.nodeid), 0)))


def _scope(nodeid: str) -> str | None:
  """The xdist scope of an every-config test (None: the usual one, its module or class)."""
  name = config_sizes.config_of(nodeid)
  if name is None:
    return None
  return f"{config_sizes.TEST}[heavy]" if config_sizes.is_heavy(name) else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
  """``--dist loadscope`` with the every-config test split into its configs (``_scope``)."""
  if config.getvalue("dist") != "loadscope":
    return None
  from xdist.scheduler import LoadScopeScheduling  # pylint: disable=import-outside-toplevel

  class ConfigScopeScheduling(LoadScopeScheduling):

    def _split_scope(self, nodeid: str) -> str:
      return _scope(nodeid) or super()._split_scope(nodeid)

  return ConfigScopeScheduling(config, log)
