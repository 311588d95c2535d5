"""Two "hosts" on one machine: each rank of a 2-process job runs in its own network namespace
(tests/helpers/netns.py: two namespaces joined by a veth pair, 10.231.0.1 and 10.231.0.2),
so the ranks find and reach each other by host name or address over a network link, as on
two machines, never over a shared loopback.

* TF_CONFIG written by hand per rank (as a cluster manager or a Kubeflow TFJob does): the
  weights equal one process with the same global batch; each rank listens in its namespace
  only; killing the second host's process ends the first within a bounded time with the
  resume hint, and ``--continue_learning`` resumes on both.
* ``mpiexec --host h0,h1`` with Open MPI starting the remote rank through an agent that runs
  ``ip netns exec`` (in place of ssh), the host names resolving inside the namespaces only:
  TF multi-worker (the ranks all-gather their host names through libmpi) and Horovod (MPI
  over TCP across the link) both give the weights of one process.

The toy Transformer (1+1 layers, width 32, no dropout), 3 steps. Every subprocess has a
timeout; the namespaces are deleted when each test ends, passed or failed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import distributed as h
from tests.helpers import netns, toy
from tests.helpers.netns import two_hosts  # noqa: F401  pylint: disable=unused-import

pytestmark = pytest.mark.slow

WEIGHT_TOLERANCE = 1e-4  # as tests/e2e/test_distributed_training.py
TF_PORT = 2222  # the same port on both hosts: possible only on two network stacks


def _horovod_missing() -> str | None:
  try:
    import horovod.tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  except ImportError as e:
    return f"Horovod is not installed ({e}): run scripts/install_horovod.sh"
  return None


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  return toy.make_toy_data(str(tmp_path_factory.mktemp("two_hosts") / "data"), train=200,
                           dev=8, test=8, seed=3)


def _args(data_dir, logdir, batch, *extra):
  no_dropout = [f"--{side}_params/{key}=0.0" for side in ("encoder", "decoder")
                for key in ("attention_dropout", "relu_dropout", "layer_postprocess_dropout")]
  return ([f"--config_file={toy.TOY_CONFIG}", "--mode=train", f"--logdir={logdir}"] +
          toy.TINY_MODEL + toy.data_overrides(data_dir) +
          toy.split_overrides(data_dir, "train") + no_dropout +
          ["--data_layer_params/shuffle=False", "--data_layer_params/max_length=None",
           "--max_steps=3", f"--batch_size_per_gpu={batch}", *extra])


def _check(result):
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  return result


@pytest.fixture(scope="module")
def reference(data, tmp_path_factory):
  """One process, global batch 16, 3 steps: the weights every 2-host job must end with."""
  logdir = str(tmp_path_factory.mktemp("two_hosts") / "single")
  _check(h.run("single", _args(data, logdir, 16), timeout=300))
  return h.weights(logdir)


# ---------------------------------------------------------------------- TF_CONFIG by hand
def _tf_config(hosts, rank):
  return json.dumps({"cluster": {"worker": [f"{a}:{TF_PORT}" for a in hosts.addresses]},
                     "task": {"type": "worker", "index": rank}})


def _start_ranks(hosts, args):
  """Rank r runs in namespace r with its TF_CONFIG: [rank 0, rank 1] (Popen)."""
  return [subprocess.Popen(hosts.exec_prefix(rank) + [sys.executable, *h.run_py(), *args],
                           env=h.environment(TF_CONFIG=_tf_config(hosts, rank)), cwd=h.ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
          for rank in (0, 1)]


def _finish(ranks, timeout):
  """Waits for every rank (killing those still running after ``timeout`` s in all):
  [(returncode, stdout, stderr)]."""
  deadline, out = time.time() + timeout, []
  for proc in ranks:
    try:
      stdout, stderr = proc.communicate(timeout=max(1.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
      proc.kill()
      stdout, stderr = proc.communicate()
    out.append((proc.returncode, stdout, stderr))
  return out


def test_tf_config_per_host_trains_as_one_process(two_hosts, data, reference, tmp_path):
  logdir = str(tmp_path / "run")
  results = _finish(_start_ranks(two_hosts, _args(data, logdir, 8)), timeout=300)
  for code, stdout, stderr in results:
    assert code == 0, stdout[-2000:] + stderr[-3000:]
  assert "2 replica(s)" in results[0][1]
  assert h.max_difference(h.weights(logdir), reference) < WEIGHT_TOLERANCE


def _listening(hosts, host):
  """(address, port, pid) of every listening TCP socket in namespace ``host``."""
  table = subprocess.run(hosts.exec_prefix(host) + ["ss", "-Hltnp"], capture_output=True,
                         text=True, timeout=30, check=True).stdout
  out = []
  for line in table.splitlines():
    local = line.split()[3]
    address, port = local.rsplit(":", 1)
    for pid in re.findall(r"pid=(\d+)", line):
      out.append((address, int(port), int(pid)))
  return out


def _addresses(hosts, host):
  table = subprocess.run(["ip", "-n", hosts.names[host], "-4", "-o", "addr", "show"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
  return sorted(line.split()[3].split("/")[0] for line in table.splitlines())


def test_each_host_listens_in_its_namespace_and_a_dead_host_stops_the_job_then_both_resume(
    two_hosts, data, tmp_path):
  logdir = str(tmp_path / "run")
  args = _args(data, logdir, 8, "--max_steps=1000000", "--save_checkpoint_steps=5",
               "--print_loss_steps=100")
  ranks = _start_ranks(two_hosts, args)
  try:
    h.wait_for(lambda: h.has_checkpoint(logdir) or any(p.poll() is not None for p in ranks),
               240, "the first checkpoint")
    dead = [p for p in ranks if p.poll() is not None]
    assert not dead, [p.communicate()[1][-3000:] for p in dead]
    # TensorFlow's gRPC server listens on the wildcard address, which inside a namespace
    # means its interfaces alone: its loopback and its end of the link
    for rank, proc in enumerate(ranks):
      assert _addresses(two_hosts, rank) == sorted(["127.0.0.1", two_hosts.addresses[rank]])
      mine = [(a, p) for a, p, pid in _listening(two_hosts, rank) if pid == proc.pid]
      assert mine and {p for _, p in mine} == {TF_PORT}, mine
      assert {a for a, _ in mine} <= {"*", "0.0.0.0", "[::]", two_hosts.addresses[rank]}, mine
    # nothing of the job listens in this machine's own network
    here = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, timeout=30).stdout
    assert not any(f"pid={p.pid}," in here for p in ranks)

    ranks[1].send_signal(signal.SIGKILL)  # the second host disappears
    killed = time.time()
    (code, _, stderr), _ = _finish(ranks, timeout=120)
    waited = time.time() - killed
  finally:
    for proc in ranks:
      if proc.poll() is None:
        proc.kill()
        proc.communicate()
  assert code not in (0, None) and waited < 120
  errors = [line for line in stderr.splitlines() if line.startswith("error:")]
  assert errors and "another worker" in errors[-1] and "--continue_learning" in errors[-1], \
      stderr[-3000:]

  latest = int(h.tf.train.latest_checkpoint(logdir).rsplit("-", 1)[1])
  resumed = _finish(_start_ranks(two_hosts, _args(data, logdir, 8, "--continue_learning",
                                                  f"--max_steps={latest + 2}")), timeout=300)
  for code, stdout, stderr in resumed:
    assert code == 0, stdout[-2000:] + stderr[-3000:]
  assert f"at step {latest}" in resumed[0][1]
  assert h.tf.train.latest_checkpoint(logdir).endswith(f"ckpt-{latest + 2}")


# ---------------------------------------------------------------------- mpiexec across hosts
def _agent(hosts, directory) -> str:
  """Open MPI's remote-shell agent for the two hosts: ``agent HOST COMMAND...`` runs the
  command in HOST's namespace, with HOST as its host name (a UTS namespace of its own), as
  ssh would run it on that machine."""
  cases = "".join(f'  {name}) exec ip netns exec {ns} unshare --uts '
                  f'sh -c "hostname {name}; $*" ;;\n'
                  for ns, name in zip(hosts.names, hosts.hostnames))
  path = os.path.join(directory, "netns-agent.sh")
  with open(path, "w", encoding="ascii") as f:
    f.write(f'#!/bin/sh\nhost=$1; shift\ncase $host in\n{cases}esac\n'
            'echo "netns-agent: unknown host $host" >&2; exit 1\n')
  os.chmod(path, 0o755)
  return path


def _mpiexec(hosts, directory, args, timeout=300):
  """``mpiexec --host h0,h1 -np 2 python run.py ARGS`` started on host 0; Open MPI's own
  traffic and MPI's TCP transport are kept on the link between the hosts."""
  subnet = hosts.addresses[0].rsplit(".", 1)[0] + ".0/24"
  command = (hosts.exec_prefix(0) + [
      "unshare", "--uts", "sh", "-c", f'hostname {hosts.hostnames[0]}; exec "$@"', "sh",
      "mpiexec", "--host", ",".join(hosts.hostnames), "-np", "2",
      "--mca", "plm_rsh_agent", _agent(hosts, directory),
      "--mca", "oob_tcp_if_include", subnet, "--mca", "btl_tcp_if_include", subnet,
      sys.executable, *h.run_py(), *args])
  job = subprocess.Popen(command, env=h.environment(), cwd=h.ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
  try:
    stdout, stderr = job.communicate(timeout=timeout)
  finally:
    if job.poll() is None:
      h.kill_group(job)
  return subprocess.CompletedProcess(command, job.returncode, stdout, stderr)


@pytest.mark.parametrize("backend", [
    "multi_worker",
    pytest.param("horovod", marks=pytest.mark.skipif(_horovod_missing() is not None,
                                                     reason=str(_horovod_missing()))),
])
def test_mpiexec_with_a_host_list_trains_as_one_process(two_hosts, data, reference, tmp_path,
                                                        backend):
  if not h.have_mpiexec():
    pytest.skip("mpiexec not found: run scripts/install_horovod.sh")
  logdir = str(tmp_path / "run")
  extra = ["--use_horovod=True"] if backend == "horovod" else []
  result = _check(_mpiexec(two_hosts, str(tmp_path), _args(data, logdir, 8, *extra)))
  assert "2 replica(s)" in result.stdout
  assert h.max_difference(h.weights(logdir), reference) < WEIGHT_TOLERANCE


# ---------------------------------------------------------------------- the fixture itself
FAILING_TEST = '''
import json
from tests.helpers.netns import two_hosts  # noqa: F401

def test_fails(two_hosts):
  with open({record!r}, "w") as f:
    json.dump(list(two_hosts.names), f)
  assert False, "a failing test"
'''


def test_the_namespaces_are_deleted_when_a_test_fails_and_leftovers_at_start(tmp_path):
  if netns.unavailable():
    pytest.skip(netns.unavailable())
  record = tmp_path / "names.json"
  (tmp_path / "test_failing.py").write_text(FAILING_TEST.format(record=str(record)))
  result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-n", "0", str(tmp_path / "test_failing.py")],
                          capture_output=True, text=True, timeout=120, cwd=h.ROOT,
                          env=h.environment())
  assert result.returncode == 1 and "a failing test" in result.stdout, result.stdout[-2000:]
  names = json.loads(record.read_text())
  listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                          timeout=30).stdout
  assert len(names) == 2 and not any(name in listed for name in names)
  assert not any(os.path.exists(os.path.join("/etc/netns", name)) for name in names)

  # a namespace left by a run that died (its creator pid is gone) is removed at the next
  # start; one whose creator still runs (this process) is not
  dead_pid = subprocess.Popen(["true"])  # a pid that has ended
  dead_pid.wait()
  left = f"{netns.PREFIX}{dead_pid.pid}-000000-h0"
  mine = f"{netns.PREFIX}{os.getpid()}-000000-h0"
  for name in (left, mine):
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=30)
  try:
    removed = netns.clean_leftovers()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                            timeout=30).stdout
    assert left in removed and left not in listed and mine in listed
  finally:
    for name in (left, mine):
      netns.delete(name)


def test_a_subnet_this_machine_uses_is_skipped(monkeypatch):
  used = "2: eth0    inet 10.231.0.7/24 brd 10.231.0.255 scope global eth0\n"
  monkeypatch.setattr(netns, "_ip", lambda *args, check=True: subprocess.CompletedProcess(
      args, 0, used if "addr" in args else "", ""))
  assert netns._free_subnet() == "10.232.0"  # pylint: disable=protected-access
