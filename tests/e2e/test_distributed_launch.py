"""The local launcher: MPI-like environment per rank, prefixed output, failure and timeout,
a private network namespace for the ranks."""

import os
import subprocess
import sys
import time

import pytest

from open_seq2seq import launch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _launch(tmp_path, body: str, *options: str, timeout: float = 60):
  script = tmp_path / "job.py"
  script.write_text(body)
  env = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_")}
  env["PYTHONPATH"] = ROOT
  return subprocess.run([sys.executable, "-m", "open_seq2seq.launch", *options, str(script)],
                        capture_output=True, text=True, timeout=timeout, env=env)


def test_each_rank_gets_the_environment_of_an_mpi_launcher(tmp_path):
  result = _launch(tmp_path, (
      "import os\n"
      "from open_seq2seq.distributed import cluster\n"
      "info = cluster.detect()\n"
      "print(info.rank, info.size, info.local_rank, info.source, cluster.tf_config_for(info))\n"
  ), "-np", "2")
  assert result.returncode == 0, result.stderr
  lines = sorted(result.stdout.splitlines())
  assert lines[0].startswith("[0] 0 2 0 launcher {'cluster': {'worker': ['127.0.0.1:")
  assert lines[1].startswith("[1] 1 2 1 launcher")
  specs = [line.split("{", 1)[1].split("'task'")[0] for line in lines]
  assert specs[0] == specs[1]  # the same cluster spec on both ranks


def test_a_failing_rank_stops_the_others_and_sets_the_status(tmp_path):
  start = time.time()
  result = _launch(tmp_path, (
      "import os, sys, time\n"
      "rank = int(os.environ['OMPI_COMM_WORLD_RANK'])\n"
      "if rank == 1:\n"
      "  print('failing', flush=True)\n"
      "  sys.exit(7)\n"
      "time.sleep(120)\n"
  ), "-np", "3")
  assert result.returncode == 7
  assert time.time() - start < 60  # the sleeping ranks were stopped, not waited for
  assert "[1] failing" in result.stdout
  assert "[launch] rank 1 exited with status 7; stopping the other ranks" in result.stderr


def test_timeout_bounds_the_job(tmp_path):
  result = _launch(tmp_path, "import time\ntime.sleep(120)\n", "-np", "2", "--timeout", "2")
  assert result.returncode == launch.EXIT_TIMEOUT
  assert "--timeout=2s" in result.stderr


def test_core_shares_split_the_machine():
  assert launch.core_shares(2, [0, 1]) == [[0], [1]]
  assert launch.core_shares(2, [0, 1, 2, 3]) == [[0, 1], [2, 3]]
  assert launch.core_shares(3, [0, 1]) == [[0], [1], [0]]
  env = launch.rank_environment(1, 2, 30000, [1])
  assert env["TF_NUM_INTRAOP_THREADS"] == "1" and env["OMPI_COMM_WORLD_RANK"] == "1"


def test_free_base_port_gives_consecutive_free_ports():
  base = launch.free_base_port(3)
  assert all(launch._port_free(base + i) for i in range(3))


def test_ranks_share_a_private_network_namespace_unless_told_otherwise(tmp_path):
  body = ("import os, socket\n"
          "with open('/proc/self/net/dev') as f:\n"
          "  interfaces = [l.split(':')[0].strip() for l in list(f)[2:]]\n"
          "with socket.create_server(('127.0.0.1', 0)) as server:\n"  # loopback is up
          "  socket.create_connection(server.getsockname()).close()\n"
          "print(os.readlink('/proc/self/ns/net'), ','.join(interfaces))\n")
  mine = os.readlink("/proc/self/ns/net")
  private = _launch(tmp_path, body, "-np", "2")
  assert private.returncode == 0, private.stderr
  if "a private network namespace is not allowed here" in private.stderr:
    pytest.skip("this system allows no private network namespace")
  namespaces = {line.split()[1] for line in private.stdout.splitlines()}
  assert len(namespaces) == 1 and mine not in namespaces  # one for the job, not this one
  assert all(line.endswith(" lo") for line in private.stdout.splitlines())
  host = _launch(tmp_path, body, "-np", "2", "--network", "host")
  assert host.returncode == 0, host.stderr
  assert {line.split()[1] for line in host.stdout.splitlines()} == {mine}
